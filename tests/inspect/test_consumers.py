"""The `consumers` view (mqadmin consumerProgress offline) against offsets real brokers wrote.

Expected values were computed by hand from the stores' bytes: each queue's max offset by counting the
non-zero 20-byte units of its ConsumeQueue file, store times by reading STORETIMESTAMP of the record each
unit points to (offset 56, or 68 with an IPv6 born host), committed offsets read off consumerOffset.json.
"""

import json
import shutil
import subprocess
import sys

import jsonschema
import pytest

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.builder.rocksdb import write_kv_config
from mqtool.formats.offsets_json import ConsumerOffsets, DataVersion, dump_consumer_offsets
from mqtool.formats.rocksdb_config import dump_offset_value
from mqtool.inspect import load_schema
from mqtool.inspect.consumers import consumers_view
from mqtool.rules.consumer import (
    compute_total_diff,
    get_consume_stats_queue,
    is_sys_consumer_group,
    query_consumer_offset,
    split_topic_at_group,
    which_topic_by_consumer,
)
from mqtool.store.store import Store

VALIDATOR = jsonschema.Draft202012Validator(load_schema("consumers"))
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_OracleCluster"


def view(store: Store, now: int, **kw) -> dict:
    doc = consumers_view(store, now, **kw)
    VALIDATOR.validate(json.loads(json.dumps(doc)))
    return doc


def cells(doc: dict, *names: str) -> list[tuple]:
    return [tuple(r[n] for n in names) for r in doc["queues"]]


def write_offsets(root, table: dict[str, dict[int, int]]) -> None:
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "consumerOffset.json").write_text(
        dump_consumer_offsets(ConsumerOffsets(table, DataVersion(1, 0, 1795362440000)))
    )


# ----------------------------------------------------------------------------- the rules


def test_rules_mirror_the_broker():
    table = {
        "TopicA@g1": {0: 3, 2: 9},
        "%RETRY%g1@g1": {0: 0},
        "TopicA@g2": {1: 1},
        "bad@key@x": {0: 1},
        "trailing@": {0: 1},
    }
    assert which_topic_by_consumer(table, "g1") == {"TopicA", "%RETRY%g1"}
    assert which_topic_by_consumer(table, "x") == set()  # three parts: whichTopicByConsumer skips the key
    assert split_topic_at_group("trailing@") is None and split_topic_at_group("a@b@") == ("a", "b")
    assert (query_consumer_offset(table, "g1", "TopicA", 2), query_consumer_offset(table, "g1", "TopicA", 1)) == (9, -1)
    queues = [get_consume_stats_queue(10, 3), get_consume_stats_queue(-1, -1), get_consume_stats_queue(4, 6)]
    assert [(q.broker_offset, q.consumer_offset, q.diff) for q in queues] == [(10, 3, 7), (0, 0, 0), (4, 6, -2)]
    assert compute_total_diff(queues) == 5
    assert is_sys_consumer_group("CID_RMQ_SYS_TRANS") and is_sys_consumer_group("CID_RMQ_SYS_REVIVE_GROUP")
    assert not is_sys_consumer_group("GID_r") and not is_sys_consumer_group("CID_RMQ_SYSX")


# ----------------------------------------------------------------------------- real brokers' offsets


def test_pop_revive_group_is_behind_on_two_revive_queues(open_oracle):
    """pop-revive B: GID_p consumed everything; CID_RMQ_SYS_REVIVE_GROUP committed {0: 0, 7: 2} on a revive
    topic of 8 read queues (topics.json) holding 3 units in queue 0 and 4 in queue 7."""
    doc = view(open_oracle("pop-revive-5.3.1/B"), 1795771600000)
    assert [(g["group"], g["system"], g["topics"], g["queues"], g["lag"]) for g in doc["groups"]] == [
        ("GID_p", False, ["%RETRY%GID_p_TopicP", "TopicP"], 2, 0),
        ("CID_RMQ_SYS_REVIVE_GROUP", True, [REVIVE_TOPIC], 8, 5),
    ]
    rows = cells(
        doc,
        "group",
        "topic",
        "queue_id",
        "committed_offset",
        "max_offset",
        "lag",
        "last_consumed_ms",
        "oldest_unconsumed_ms",
        "age_ms",
    )
    assert rows[:2] == [
        ("GID_p", "%RETRY%GID_p_TopicP", 0, 3, 3, 0, 1795771523562, None, None),
        ("GID_p", "TopicP", 0, 4, 4, 0, 1795771332609, None, None),
    ]
    revive = "CID_RMQ_SYS_REVIVE_GROUP"
    assert rows[2] == (revive, REVIVE_TOPIC, 0, 0, 3, 3, None, 1795771512025, 87975)
    assert rows[3:9] == [(revive, REVIVE_TOPIC, q, None, 0, 0, None, None, None) for q in range(1, 7)]
    assert rows[9] == (revive, REVIVE_TOPIC, 7, 2, 4, 2, 1795771521060, 1795771528074, 71926)
    g = doc["groups"][1]
    assert (g["oldest_unconsumed_ms"], g["age_ms"]) == (1795771512025, 87975)
    assert doc["totals"] == {"groups": 1, "system_groups": 1, "queues": 10, "lag": 0, "system_lag": 5, "expired": 0}
    assert doc["offsets_source"] == "json" and doc["findings"] == []
    assert all(r["system"] == (r["group"] == revive) for r in doc["queues"])


def test_retry_dlq_group_has_consumed_its_topic_and_retries(open_oracle):
    """retry-dlq B: GID_r committed TopicR 4 (4 units) and %RETRY%GID_r 6 (6 units); LastTime is the store
    time of the unit at committed - 1; %DLQ%GID_r has no offset entry, so it is no row."""
    doc = view(open_oracle("retry-dlq-5.3.1/B"), 1795771100000)
    assert cells(
        doc,
        "group",
        "topic",
        "queue_id",
        "committed_offset",
        "min_offset",
        "max_offset",
        "lag",
        "last_consumed_ms",
        "oldest_unconsumed_ms",
    ) == [
        ("GID_r", "%RETRY%GID_r", 0, 6, 0, 6, 0, 1795771011240, None),
        ("GID_r", "TopicR", 0, 4, 0, 4, 0, 1795770861617, None),
    ]
    assert doc["totals"]["lag"] == 0 and doc["totals"]["groups"] == 1


@pytest.mark.parametrize(
    "name, half, op, half_last, op_last",
    [("pair_default/B", 14, 1, 1795376132613, 1795376096933), ("pair-4.9/B", 11, 2, 1795379351886, 1795379318682)],
)
def test_transaction_check_group_is_a_system_group(open_oracle, name, half, op, half_last, op_last):
    """The transaction check's CID_RMQ_SYS_TRANS offsets: every half and op message consumed (the half
    queue holds `half` units, the op queue `op`). 4.9.8's topics.json has no RMQ_SYS_TRANS_OP_HALF_TOPIC."""
    doc = view(open_oracle(name), 1795379400000)
    assert [(g["group"], g["system"], g["lag"]) for g in doc["groups"]] == [("CID_RMQ_SYS_TRANS", True, 0)]
    assert cells(doc, "topic", "committed_offset", "max_offset", "lag", "last_consumed_ms", "system") == [
        ("RMQ_SYS_TRANS_HALF_TOPIC", half, half, 0, half_last, True),
        ("RMQ_SYS_TRANS_OP_HALF_TOPIC", op, op, 0, op_last, True),
    ]
    assert doc["totals"] == {"groups": 0, "system_groups": 1, "queues": 2, "lag": 0, "system_lag": 0, "expired": 0}
    missing = [(f["severity"], f["topic"]) for f in doc["findings"]]
    assert missing == ([] if name == "pair_default/B" else [("info", "RMQ_SYS_TRANS_OP_HALF_TOPIC")])


def test_no_offsets_no_groups(open_oracle):
    doc = view(open_oracle("pair_default/A"), 1795376000000)
    assert (doc["groups"], doc["queues"], doc["offsets_source"]) == ([], [], "json")


def test_filters(open_oracle):
    s = open_oracle("pop-revive-5.3.1/B")
    doc = view(s, 1795771600000, topic="TopicP")
    assert [g["group"] for g in doc["groups"]] == ["GID_p"] and cells(doc, "topic", "lag") == [("TopicP", 0)]
    doc = view(s, 1795771600000, group="CID_RMQ_SYS_REVIVE_GROUP")
    assert [g["group"] for g in doc["groups"]] == ["CID_RMQ_SYS_REVIVE_GROUP"] and len(doc["queues"]) == 8
    doc = view(s, 1795771600000, group="nobody")
    assert [(g["group"], g["queues"], g["lag"]) for g in doc["groups"]] == [("nobody", 0, 0)]


# ----------------------------------------------------------------------------- other queue backings


def test_batch_consume_queue_offsets_count_messages(tmp_path):
    """batchcq-5.3.1: BatchTopic/0 ends at offset 48 (12 batches), BatchTopic/1 at 84 (README). Committed 5
    lies in the batch based at 1 (7 messages, record at 616, stored 1795458522671: records.jsonl), which is
    both the last consumed and the oldest unconsumed; queue 1 has no offset: lag 84 from its first batch."""
    need_oracle()
    root = tmp_path / "bcq"
    shutil.copytree(ORACLE / "batchcq-5.3.1" / "store", root)
    write_offsets(root, {"BatchTopic@g": {0: 5}, "PlainTopic@g": {0: 1}})
    doc = view(Store.open(root), 1795458530000)
    assert cells(
        doc, "topic", "queue_id", "committed_offset", "max_offset", "lag", "last_consumed_ms", "oldest_unconsumed_ms"
    ) == [
        ("BatchTopic", 0, 5, 48, 43, 1795458522671, 1795458522671),
        ("BatchTopic", 1, None, 84, 84, None, 1795458522669),
        ("PlainTopic", 0, 1, 6, 5, 1795458522686, 1795458522689),
    ]
    assert doc["groups"][0]["lag"] == 132 and doc["groups"][0]["age_ms"] == 1795458530000 - 1795458522669


def test_rocksdb_queues_and_offsets_give_the_file_queues_answer(rocksdb_stores, tmp_path):
    """basic-5.3.1 with its queues in RocksDB and the offsets in config/consumerOffsets: the same rows as the
    file ConsumeQueues with consumerOffset.json. TopicB/1 holds 72 units (two CQ files), TopicA/3 three."""
    plain, rocks = rocksdb_stores
    table = {"TopicB@g1": {1: 10}, "TopicA@g1": {3: 3}}
    root = tmp_path / "rocks"
    shutil.copytree(rocks, root)
    dv = json.dumps({"counter": 2, "stateVersion": 0, "timestamp": 1795362440000}).encode()
    write_kv_config(root / "config" / "consumerOffsets", {k: dump_offset_value(v) for k, v in table.items()}, dv)
    flat = tmp_path / "plain"
    shutil.copytree(plain, flat)
    write_offsets(flat, table)
    got, want = view(Store.open(root), 1795362444000), view(Store.open(flat), 1795362444000)
    assert (got["offsets_source"], want["offsets_source"]) == ("rocksdb", "json")
    assert got["queues"] == want["queues"] and got["groups"] == want["groups"]
    rows = {(r["topic"], r["queue_id"]): r for r in got["queues"]}
    assert (
        rows["TopicB", 1]["max_offset"],
        rows["TopicB", 1]["lag"],
        rows["TopicB", 1]["oldest_unconsumed_ms"],
        rows["TopicB", 1]["last_consumed_ms"],
    ) == (72, 62, 1795362433834, 1795362433834)  # units 10 and 9
    assert (rows["TopicA", 3]["lag"], rows["TopicA", 3]["last_consumed_ms"]) == (0, 1795362439110)
    # no topics.json: the queues stored, with and without an offset (TopicA/0 uncommitted: lag = its 2 units)
    assert sorted(rows) == [("TopicA", q) for q in range(4)] + [("TopicB", 0), ("TopicB", 1)]
    assert (rows["TopicA", 0]["committed_offset"], rows["TopicA", 0]["lag"], rows["TopicB", 0]["lag"]) == (None, 2, 21)


def test_expired_offsets_and_an_offset_past_the_queue(tmp_path):
    """basic-5.3.1 with TopicB/1's first ConsumeQueue file (units 0..63) deleted, as the broker's cleanup
    does: committed 10 leaves 54 offsets expired, lag 62 (mqadmin counts them), the oldest unconsumed is unit
    64 (stored 1795362433875). TopicA/0 holds 2 units: a committed 5 is past its end, lag -3 and a warning."""
    need_oracle()
    root = copy_with_wheel(ORACLE / "basic-5.3.1" / "store", tmp_path / "basic")
    (root / "consumequeue" / "TopicB" / "1" / "00000000000000000000").unlink()
    write_offsets(root, {"TopicB@g": {1: 10}, "TopicA@g": {0: 5}})
    doc = view(Store.open(root), 1795362444000, group="g")
    rows = {(r["topic"], r["queue_id"]): r for r in doc["queues"]}
    b1 = rows["TopicB", 1]
    assert (b1["min_offset"], b1["max_offset"], b1["committed_offset"], b1["lag"], b1["expired"]) == (
        64,
        72,
        10,
        62,
        54,
    )
    assert (b1["last_consumed_ms"], b1["oldest_unconsumed_ms"]) == (None, 1795362433875)
    a0 = rows["TopicA", 0]
    assert (a0["max_offset"], a0["lag"], a0["expired"], a0["oldest_unconsumed_ms"]) == (2, -3, 0, None)
    assert [(f["severity"], f["topic"], f["queue_id"]) for f in doc["findings"]] == [("warning", "TopicA", 0)]
    assert doc["groups"][0]["lag"] == sum(r["lag"] for r in doc["queues"]) and doc["totals"]["expired"] == 54


# ----------------------------------------------------------------------------- the command


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mqtool", "inspect", *args], capture_output=True, text=True)


def test_cli_text_and_json(demo_dir, demo_conf):
    r = _cli(str(demo_dir), "consumers", "--config", str(demo_conf), "--now", "1790000020000")
    assert r.returncode == 0, r.stderr
    assert "GID_demo: lag 30 on 7 queue(s) of 3 topic(s)" in r.stdout
    assert "CID_RMQ_SYS_TRANS (system): lag 1" in r.stdout
    r = _cli(
        str(demo_dir),
        "consumers",
        "--config",
        str(demo_conf),
        "--now",
        "1790000020000",
        "--json",
        "--group",
        "GID_demo",
        "--topic",
        "DemoTopicB",
    )
    doc = json.loads(r.stdout)
    assert cells(doc, "topic", "queue_id", "committed_offset", "max_offset", "lag") == [
        ("DemoTopicB", 0, 3, 4, 1),
        ("DemoTopicB", 1, 2, 28, 26),
    ]
    r = _cli(str(demo_dir), "consumers", "--offset", "5")
    assert r.returncode == 2 and r.stderr.startswith("Error: --offset applies to the message view")


def test_queue_min_and_max_offsets_as_the_broker_reads_them(basic):
    """`ConsumeQueue.max_offset` and `min_offset` (the first unit whose CommitLog offset is still in the
    CommitLog, `correctMinOffset`) on TopicB/1's two files (64 + 8 units), against the units read with struct."""
    import struct

    d = basic.root / "consumequeue" / "TopicB" / "1"
    data = b"".join(p.read_bytes() for p in sorted(d.iterdir()))
    units = [struct.unpack_from(">qiq", data, i) for i in range(0, len(data), 20)]
    written = [u for u in units if u != (0, 0, 0)]
    assert len(written) == 72
    cq = basic.consume_queue("TopicB", 1)
    assert cq.max_offset == 72
    assert cq.min_offset(0) == 0
    assert cq.min_offset(written[10][0]) == 10 and cq.min_offset(written[10][0] - 1) == 10
    assert cq.min_offset(written[70][0]) == 70  # in the second file
    assert cq.min_offset(written[71][0] + 1) == 72  # nothing left: the max offset
