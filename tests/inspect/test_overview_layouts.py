"""`overview` on the issue-15 layouts: which it found, every path of the root accounted for, topics.json's
queues next to the queue directories (oracle stores written by RocketMQ 5.3.1, and damaged copies)."""

import json
import shutil

import jsonschema
import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.config_json import TopicConfig, Topics, dump_topics
from mqtool.inspect import load_schema
from mqtool.inspect.overview import overview
from mqtool.store.store import Store

NOW = 1795462444000


def view(root) -> dict:
    doc = overview(Store.open(root), NOW)
    jsonschema.Draft202012Validator(load_schema("overview")).validate(json.loads(json.dumps(doc)))
    return doc


def infos(doc: dict) -> list[tuple[str, str]]:
    return [(f["file"], f["message"]) for f in doc["findings"] if f["severity"] == "info"]


@pytest.fixture
def batch_copy(tmp_path):
    need_oracle()
    root = tmp_path / "store"
    shutil.copytree(ORACLE / "batchcq-5.3.1" / "store", root)
    return root


def test_dledger_store_overview():
    need_oracle()
    meta = json.loads((ORACLE / "dledger-5.3.1" / "store-meta.json").read_text())
    doc = view(ORACLE / "dledger-5.3.1" / "store")
    assert doc["layouts"]["found"] == ["dledger"]
    log = doc["layouts"]["dledger_log"]
    assert (log["data_files"], log["index_files"], log["divided_commitlog_offset"]) == (2, 2, 0)
    assert log["committed_index"] == 41 and log["curr_term"] == 0 and log["vote_leader"] == "n0"
    assert doc["commitlog"]["records"] == 42
    assert doc["finding_counts"] == {"error": 0, "warning": 0, "info": 0}
    # every queue of store-meta, with its units counted as records
    queues = {(t["topic"], q["queue_id"]): q for t in doc["topics"] for q in t["queues"]}
    for q in meta["consumeQueues"]:
        got = queues[(q["topic"], q["queueId"])]
        assert (got["records"], got["cq_max_offset"]) == (len(q["units"]), len(q["units"]))
    kinds = {p["path"]: p["kind"] for p in doc["paths"]}
    assert kinds["dledger-n0/data"] == "DLedger data files" and kinds["dledger-n0/currterm"].startswith("DLedger term")
    assert set(kinds) == {"abort.bak", "checkpoint", "consumequeue", "dledger-n0", "dledger-n0/checkpoint",
                          "dledger-n0/checkpoint.bak", "dledger-n0/currterm", "dledger-n0/data", "dledger-n0/index",
                          "index", "lock"}


def test_batchcq_store_overview():
    need_oracle()
    doc = view(ORACLE / "batchcq-5.3.1" / "store")
    assert doc["layouts"]["found"] == ["batchconsumequeue"]
    batch = {q["queue_id"]: q for t in doc["topics"] if t["topic"] == "BatchTopic" for q in t["queues"]}
    # 12 units per queue; logical ends 48 and 84 (README)
    assert {k: (q["records"], q["cq_min_offset"], q["cq_max_offset"], q["batch"]) for k, q in batch.items()} == {
        0: (12, 0, 48, True), 1: (12, 0, 84, True)}
    assert doc["finding_counts"]["error"] == 0


def test_compaction_kept_records_next_to_the_commitlog():
    need_oracle()
    doc = view(ORACLE / "compaction-5.3.1" / "store")
    assert doc["layouts"]["found"] == ["compaction"]
    assert [f for f, m in infos(doc) if "not yet read" in m] == []
    assert {p["path"]: p["read"] for p in doc["paths"]}["compaction/compactionLog"] is True
    # README: 22 messages on CompactT/0; kept 11, 13, 14, 16 (compacted file) and 17..21 (later files);
    # no position-checkpoint (its writer was a stand-in)
    assert doc["compaction"] == [{"topic": "CompactT", "queue_id": 0, "log_files": 3, "cq_files": 3, "records": 9,
                                  "units": 9, "min_queue_offset": 11, "max_queue_offset": 21, "compacted_to": None,
                                  "transient": [], "in_commitlog": 22}]
    assert "pop" not in doc and "config_sources" not in doc


def test_an_unknown_path_is_an_info_finding_naming_it(batch_copy):
    (batch_copy / "notes.txt").write_text("x")
    (batch_copy / "config").mkdir()
    (batch_copy / "config" / "weird.json").write_text("{}")
    (batch_copy / "config" / "delayOffset.json.bak").write_text("{}")
    doc = view(batch_copy)
    unknown = [f for f, m in infos(doc) if m.startswith("unknown path")]
    assert unknown == ["config/weird.json", "notes.txt"]
    paths = {p["path"]: p for p in doc["paths"]}
    assert paths["notes.txt"]["kind"] is None and paths["config/weird.json"]["kind"] is None
    assert paths["config/delayOffset.json.bak"]["kind"] == "delay offsets (ScheduleMessageService), backup"


def test_configured_queues_next_to_the_queue_directories(batch_copy):
    (batch_copy / "config").mkdir()
    topics = Topics({"BatchTopic": TopicConfig("BatchTopic", 1, 1, attributes={"+queue.type": "BatchCQ"}),
                     "Ghost": TopicConfig("Ghost", 4, 4)})
    (batch_copy / "config" / "topics.json").write_text(dump_topics(topics))
    doc = view(batch_copy)
    rows = {r["topic"]: r for r in doc["topic_config"]["topics"]}
    assert doc["topic_config"]["file"] == "config/topics.json"
    assert rows["BatchTopic"]["queue_type"] == "BatchCQ" and rows["BatchTopic"]["queues_on_disk"] == [0, 1]
    assert rows["BatchTopic"]["problems"] == ["queue directories [1] beyond readQueueNums 1"]
    assert rows["PlainTopic"]["configured"] is False
    assert rows["PlainTopic"]["problems"] == ["queue directories but no entry in topics.json"]
    assert rows["Ghost"]["problems"] == ["configured, no queue directory (nothing dispatched yet)"]
    assert sorted((f["topic"] or "", f["file"], f["message"]) for f in doc["findings"]
                  if f["check"] == "store.config") == [
        ("", "config/topics.json", "1 topic(s) configured, no queue directory (nothing dispatched yet): Ghost"),
        ("BatchTopic", "batchconsumequeue/BatchTopic", "queue directories [1] beyond readQueueNums 1"),
        ("PlainTopic", "consumequeue/PlainTopic", "queue directories but no entry in topics.json")]
