"""Issue 15 in the store model: layouts detected from the files, a DLedger store read through
`store.commitlog` like a normal one, BatchCQ queues in the `queue` view; checked against the records
and units RocketMQ 5.3.1 / DLedger 0.3.1.2 wrote (../shared/oracle/{dledger,batchcq,compaction}-5.3.1)."""

import base64
import json

import jsonschema
import pytest
from dledgerkit import make_converted_store

from conftest import ORACLE, need_oracle
from mqtool.inspect import load_schema
from mqtool.inspect.messages import MessageQuery, iter_messages, message_at, scan_findings
from mqtool.inspect.queue import iter_queue, queue_summary
from mqtool.inspect.records import record_dict
from mqtool.store.dledger import DLedgerCommitLogView
from mqtool.store.errors import StoreError
from mqtool.store.store import Layouts, Store

FIELDS = {"topic": "topic", "queueId": "queue_id", "queueOffset": "queue_offset", "sysFlag": "sys_flag",
          "flag": "flag", "bornTimestamp": "born_timestamp", "storeTimestamp": "store_timestamp",
          "bodyCRC": "body_crc", "reconsumeTimes": "reconsume_times", "properties": "properties",
          "storeSize": "total_size", "preparedTransactionOffset": "prepared_transaction_offset", "msgId": "msg_id"}


def oracle(name: str) -> tuple[Store, list[dict], dict]:
    need_oracle()
    src = ORACLE / name
    recs = [json.loads(x) for x in (src / "records.jsonl").read_text().splitlines()]
    return (Store.open(src / "store"), [r for r in recs if r.get("kind", "message") == "message"],
            json.loads((src / "store-meta.json").read_text()))


def assert_same_records(got: list[dict], want: list[dict]) -> None:
    assert [g["physical_offset"] for g in got] == [w["physicalOffset"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert {k: g[v] for k, v in FIELDS.items()} == {k: w[k] for k in FIELDS}, w["physicalOffset"]
        assert base64.b64decode(g["body"]) == base64.b64decode(w["bodyBase64"] or "")  # null: an empty body
        if "dledgerIndex" in w:
            assert g["dledger"] == {"index": w["dledgerIndex"], "term": w["dledgerTerm"], "pos": w["dledgerPos"]}
            assert g["physical_offset"] == w["dledgerPos"] + 48
        else:
            assert "dledger" not in g


def test_layouts_are_detected_from_the_files():
    need_oracle()
    found = {n: Store.open(ORACLE / n / "store").layouts for n in ("dledger-5.3.1", "batchcq-5.3.1",
                                                                    "compaction-5.3.1", "basic-5.3.1")}
    assert found["dledger-5.3.1"].names() == ["dledger"]
    assert found["dledger-5.3.1"].dledger == ("dledger-n0",) and not found["dledger-5.3.1"].converted
    assert found["batchcq-5.3.1"].names() == ["batchconsumequeue"]
    assert found["compaction-5.3.1"].names() == ["compaction"]
    assert found["basic-5.3.1"] == Layouts() and found["basic-5.3.1"].names() == []


def test_rocksdb_and_revive_topics_are_detected(tmp_path):
    (tmp_path / "consumequeue").mkdir()
    for name in ("CURRENT", "MANIFEST-000005", "000007.sst"):
        (tmp_path / "consumequeue" / name).write_bytes(b"x")
    (tmp_path / "config" / "topics").mkdir(parents=True)
    (tmp_path / "batchconsumequeue" / "rmq_sys_REVIVE_LOG_DefaultCluster" / "0").mkdir(parents=True)
    got = Store.open(tmp_path).layouts
    assert got.rocksdb_consume_queue == ("consumequeue",) and got.rocksdb_config == ("config/topics",)
    assert got.revive_topics == ("rmq_sys_REVIVE_LOG_DefaultCluster",)
    assert got.names() == ["batchconsumequeue", "rocksdb", "pop"]


def test_a_dledger_store_reads_as_one_commitlog_in_the_messages_view():
    store, recs, _ = oracle("dledger-5.3.1")
    assert isinstance(store.commitlog, DLedgerCommitLogView)
    got = [record_dict(r, "base64") for r in iter_messages(store, MessageQuery())]
    assert len(got) == len(recs) == 42
    assert_same_records(got, recs)
    assert scan_findings(store) == []
    # the record walk gives the same records as the column scan
    walked = [record_dict(r, "base64") for r in store.commitlog.iter_records()]
    assert walked == got
    assert store.commitlog.max_offset() == max(r["physicalOffset"] + r["storeSize"] for r in recs)
    schema = jsonschema.Draft202012Validator(load_schema("messages"))
    for g in got:
        schema.validate(g)


def test_filters_and_single_records_on_a_dledger_store():
    store, recs, _ = oracle("dledger-5.3.1")
    batch = [r for r in recs if r["topic"] == "TopicBatch"]
    got = list(iter_messages(store, MessageQuery(topic="TopicBatch")))
    assert [r.extra["dledger"]["index"] for r in got] == [r["dledgerIndex"] for r in batch]
    big = next(r for r in recs if r["dledgerPos"] == 16384)  # the first entry of the second data file
    doc = message_at(store, big["physicalOffset"], body="none")
    assert doc["record"]["dledger"] == {"index": big["dledgerIndex"], "term": 0, "pos": 16384}
    assert doc["checks"]["crc_ok"] and doc["consume_queue"]["points_back"]


def test_consume_queues_of_a_dledger_store_point_at_entry_bodies():
    store, _, meta = oracle("dledger-5.3.1")
    for q in meta["consumeQueues"]:
        rows = list(iter_queue(store, q["topic"], q["queueId"], body="none"))
        assert [(r["cq_commitlog_offset"], r["cq_size"], r["cq_queue_offset"]) for r in rows] == [
            (u["physicalOffset"], u["size"], u["queueOffset"]) for u in q["units"]]
        assert all(r["match"] for r in rows), [r["problems"] for r in rows if not r["match"]]
        assert all(r["dledger"]["pos"] + 48 == r["physical_offset"] for r in rows)


def test_batch_consume_queue_units_in_the_queue_view():
    store, recs, meta = oracle("batchcq-5.3.1")
    assert_same_records([record_dict(r, "base64") for r in iter_messages(store, MessageQuery())], recs)
    schema = jsonschema.Draft202012Validator(load_schema("queue"))
    batch = [q for q in meta["consumeQueues"] if q["topic"] == "BatchTopic"]
    assert len(batch) == 2
    for q in meta["consumeQueues"]:
        rows = list(iter_queue(store, q["topic"], q["queueId"], body="none"))
        have = [(r["cq_commitlog_offset"], r["cq_size"], r["cq_queue_offset"], r.get("cq_batch_size", 1))
                for r in rows]
        assert have == [(u["physicalOffset"], u["size"], u["queueOffset"], u["batchNum"]) for u in q["units"]]
        assert all(r["match"] for r in rows)
        for r in rows:
            schema.validate(r)
    # queue 0 ends at 48 and queue 1 at 84 (README); --from inside a batch starts at that batch
    assert queue_summary(store, "BatchTopic", 1) == {"min_offset": 0, "max_offset": 84, "files": 1, "batch": True}
    rows = list(iter_queue(store, "BatchTopic", 1, start=5, limit=2, body="none"))
    assert [(r["cq_base_offset"], r["cq_batch_size"]) for r in rows] == [(4, 10), (14, 4)]


def test_a_unit_disagreeing_with_its_record_is_a_problem(tmp_path):
    import shutil
    import struct

    need_oracle()
    root = tmp_path / "store"
    shutil.copytree(ORACLE / "batchcq-5.3.1" / "store", root)
    path = root / "batchconsumequeue" / "BatchTopic" / "1" / f"{0:020d}"
    path.chmod(0o644)
    with open(path, "r+b") as fh:  # unit 1: batchSize 10 -> 9 (byte 28+8 of the unit: msgBaseOffset, then batch)
        fh.seek(46 + 36)
        fh.write(struct.pack(">h", 9))
    rows = list(iter_queue(Store.open(root), "BatchTopic", 1, body="none"))
    assert [r["match"] for r in rows[:3]] == [True, False, True]
    assert rows[1]["problems"] == ["unit base/batch 4/9 != record's INNER_BASE/INNER_NUM 4/10"]


def test_an_unknown_queue_names_the_batch_topics_too():
    store, _, _ = oracle("batchcq-5.3.1")
    with pytest.raises(StoreError, match="BatchTopic, PlainTopic"):
        list(iter_queue(store, "Nope", 0))


def test_a_converted_store_reads_old_commitlog_then_dledger(tmp_path):
    root, old, divided, end, _data = make_converted_store(tmp_path)
    store = Store.open(root)
    assert store.layouts.converted and store.layouts.names() == ["dledger"]
    got = list(iter_messages(store, MessageQuery()))
    assert scan_findings(store) == []
    assert [r.physical_offset for r in got[: len(old)]] == [r["physicalOffset"] for r in old]
    assert all("dledger" not in r.extra for r in got[: len(old)])
    assert [(r.extra["dledger"]["index"], r.physical_offset - 48) for r in got[len(old):]][0] == (0, divided)
    assert len(got) == len(old) + 3
    assert store.commitlog.max_offset() == end
    assert store.commitlog.read(divided + 48).extra["dledger"]["index"] == 0
