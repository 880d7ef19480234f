"""RocksDB consume queues and config (spec §14): keys as the Java code lays them out, read back read-only.

No real RocksDB-mode store exists here: the databases are written by `builder/rocksdb.py` through the
`formats/` definitions, whose bytes are checked against the Java layouts by hand below.
"""

import hashlib
import os
from pathlib import Path

import pytest

from mqtool.builder.rocksdb import write_kv_config, write_rocksdb_consume_queues
from mqtool.formats.offsets_json import ConsumerOffsets, DataVersion
from mqtool.formats.rocksdb_config import dump_offset_value, parse_offset_value
from mqtool.formats.rocksdb_cq import (
    build_checkpoint_key,
    build_cq_key,
    build_offset_key,
    cq_key,
    cq_value,
    offset_key,
    queue_prefix,
)
from mqtool.store.findings import Findings
from mqtool.store.rocksdb import (
    QueueOffsets,
    RocksCqUnit,
    RocksDBConsumeQueues,
    detect_rocksdb,
    is_rocksdb_dir,
    pick_config,
    read_kv_consumer_offsets,
    read_kv_subscription_groups,
    read_kv_table,
    read_kv_topics,
)

QUEUES = {("TopicA", 0): (0, [(0, 200, 5, 1000), (200, 210, 5, 1001), (620, 190, 7, 1003)]),
          ("TopicA", 1): (3, [(410, 210, 0, 1002)]),
          ("%RETRY%g_TopicA", 0): (0, [(810, 300, 0, 1004)])}


def test_keys_and_values_are_the_java_layouts():
    # RocksDBConsumeQueueTable.buildCQKeyByteBuffer0: putInt(len) CTRL_1 topic CTRL_1 putInt(qid) CTRL_1 putLong(off)
    assert build_cq_key("T", 1, 5).hex() == "00000001" "01" "54" "01" "00000001" "01" "0000000000000005"
    assert queue_prefix("T", 1) == build_cq_key("T", 1, 5)[:-8]
    # RocksDBConsumeQueueOffsetTable.buildOffsetKeyByteBuffer0: putInt(len) CTRL_1 topic CTRL_1 "max" CTRL_1 putInt(qid)
    assert build_offset_key("T", 2, "min") == b"\x00\x00\x00\x01\x01T\x01min\x01\x00\x00\x00\x02"
    assert build_checkpoint_key() == b"\x00\x00\x00\x10\x01CHECKPOINT_TOPIC\x01max\x01\x00\x00\x00\x00"
    # value: putLong(phyOffset) putInt(msgSize) putLong(tagsCode) putLong(storeTimestamp): 28 bytes
    v = cq_value.build({"phy_offset": 1, "size": 2, "tags_code": -3, "store_time": 4})
    assert v.hex() == "0000000000000001" "00000002" "fffffffffffffffd" "0000000000000004"
    k = cq_key.parse(build_cq_key("Topic\u00e9", -1, 2**40))
    assert (k.topic_length, k.topic, k.queue_id, k.cq_offset) == (7, "Topic\u00e9", -1, 2**40)
    assert offset_key.parse(build_offset_key("x", 3)).kind == "max"
    # RocksDB's bytewise order = queue offset order inside a queue (non-negative offsets)
    assert sorted(build_cq_key("T", 0, o) for o in (256, 1, 255)) == [build_cq_key("T", 0, o) for o in (1, 255, 256)]


def _snapshot(path: Path) -> dict:
    out = {}
    for d, _dirs, files in os.walk(path):
        out[d] = os.stat(d).st_mtime_ns
        for f in files:
            p = os.path.join(d, f)
            out[p] = (os.stat(p).st_mtime_ns, os.stat(p).st_size, hashlib.sha256(open(p, "rb").read()).hexdigest())
    return out


@pytest.fixture
def cq_store(tmp_path) -> Path:
    write_rocksdb_consume_queues(tmp_path / "store", QUEUES, max_phy_offset=1110)
    return tmp_path / "store"


def test_round_trip_and_the_store_is_unchanged(cq_store):
    assert is_rocksdb_dir(cq_store / "consumequeue")
    assert "compression=kLZ4Compression" in "".join(
        p.read_text() for p in (cq_store / "consumequeue").glob("OPTIONS-*"))  # the Java CQ family's compression
    before = _snapshot(cq_store)
    findings = Findings()
    with RocksDBConsumeQueues.open(cq_store) as q:
        assert q.max_phy_offset() == 1110
        table = q.offset_table(findings)
        assert table == {("%RETRY%g_TopicA", 0): QueueOffsets(810, 0, 810, 0),
                         ("TopicA", 0): QueueOffsets(620, 2, 0, 0), ("TopicA", 1): QueueOffsets(410, 3, 410, 3)}
        assert table[("TopicA", 0)].max_offset == 3  # getMaxOffsetInQueue = max cqOffset + 1
        for (topic, qid), (first, rows) in QUEUES.items():
            assert list(q.iter_units(topic, qid, findings)) == [
                RocksCqUnit(first + i, *row) for i, row in enumerate(rows)]
        assert [u.queue_offset for u in q.iter_units("TopicA", 0, findings, start=1)] == [1, 2]
        assert list(q.iter_units("TopicA", 7, findings)) == []
    assert findings == []
    assert _snapshot(cq_store) == before  # not a byte, not an mtime, no new file (no rocksdict-config.json)


def test_a_killed_readers_shadow_directory_is_removed_by_the_next_open(cq_store, tmp_path, monkeypatch):
    """A Spark worker holding a store open is killed, so its shadow directory of links outlives it; the next
    open removes the directories of processes that are gone, and only those."""
    import subprocess
    import sys
    import tempfile

    from mqtool.store import rocksdb

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = tmp / f"{rocksdb.SHADOW_PREFIX}{int(gone.stdout)}-x1"
    live = tmp / f"{rocksdb.SHADOW_PREFIX}{os.getpid()}-x2"
    other = tmp / f"{rocksdb.SHADOW_PREFIX}old"  # not this naming: left alone
    for d in (dead, live, other):
        d.mkdir()
        os.symlink(cq_store / "consumequeue" / "CURRENT", d / "CURRENT")
    before = _snapshot(cq_store)
    with RocksDBConsumeQueues.open(cq_store) as q:
        assert q.max_phy_offset() == 1110
        own = {p.name for p in tmp.iterdir()} - {live.name, other.name}
        assert len(own) == 1 and own.pop().startswith(f"{rocksdb.SHADOW_PREFIX}{os.getpid()}-")  # dead's is gone
    assert sorted(p.name for p in tmp.iterdir()) == sorted([live.name, other.name])
    assert _snapshot(cq_store) == before  # the links' target untouched


def test_the_reader_takes_no_lock(cq_store):
    """A writer (the broker) can open the database while mqtool reads it: RocksDB would refuse a second
    open of a database whose LOCK this process holds."""
    from rocksdict import Options, Rdict

    with RocksDBConsumeQueues.open(cq_store) as q:
        writer = Rdict(str(cq_store / "consumequeue"), Options(raw_mode=True),
                       column_families={"offset": Options(raw_mode=True)})
        writer.close()
        assert q.max_phy_offset() == 1110


def test_gap_and_damaged_values_are_findings(tmp_path):
    from rocksdict import Options, Rdict

    root = tmp_path / "store"
    write_rocksdb_consume_queues(root, {("T", 0): (0, [(0, 100, 0, 1), (100, 100, 0, 2), (200, 100, 0, 3)])})
    db = Rdict(str(root / "consumequeue"), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)})
    del db[build_cq_key("T", 0, 1)]  # offset 1 missing: a gap
    db[build_cq_key("T", 0, 3)] = b"\x00" * 27  # a short value
    db.get_column_family("offset")[b"\x00\x00\x00\x09garbage"] = b"x"
    db.close()
    findings = Findings()
    with RocksDBConsumeQueues.open(root) as q:
        assert [u.queue_offset for u in q.iter_units("T", 0, findings)] == [0, 2]
        assert list(q.offset_table(findings)) == [("T", 0)]
    assert sorted((f.severity, f.message.split(":")[0]) for f in findings) == [
        ("error", "CQ value at offset 3 is 27 bytes, not 28"),
        ("error", "queue offsets jump from 0 to 2"),
        ("warning", "offset key 0000000967617262616765 unreadable"),
    ]


def test_a_database_that_will_not_open_is_a_finding(tmp_path):
    d = tmp_path / "config" / "topics"
    d.mkdir(parents=True)
    (d / "CURRENT").write_text("MANIFEST-000001\n")
    (d / "MANIFEST-000001").write_bytes(b"not a manifest")
    findings = Findings()
    assert read_kv_table(d, findings, "config/topics") is None
    assert [(f.file, f.severity) for f in findings] == [("config/topics", "error")]
    assert read_kv_topics(tmp_path, Findings()) is None


def _config_store(root: Path) -> Path:
    cfg = root / "config"
    # RocksDBConsumerOffsetManager.putWriteBatch: key topic@group, value fastjson of RocksDBOffsetSerializeWrapper
    write_kv_config(cfg / "consumerOffsets", {"TopicA@g1": b'{"offsetTable":{0:2,1:4}}',
                                              "%RETRY%g1@g1": dump_offset_value({0: 1})},
                    data_version=b'{"counter":7,"stateVersion":0,"timestamp":1710000000000}')
    # RocksDBTopicConfigManager.putTopicConfig: key topic name, value TopicConfig JSON (BrowserCompatible)
    write_kv_config(cfg / "topics", {"TopicA": b'{"attributes":{"+queue.type":"BatchCQ"},"order":false,"perm":6,'
                                               b'"readQueueNums":2,"topicFilterType":"SINGLE_TAG","topicName":'
                                               b'"TopicA","topicSysFlag":0,"writeQueueNums":2}'},
                    data_version=b'{"counter":2,"stateVersion":0,"timestamp":1710000000001}')
    write_kv_config(cfg / "subscriptionGroups", {"g1": b'{"groupName":"g1","retryMaxTimes":3,"consumeEnable":true}'},
                    forbidden={"g1": b'{"TopicA":1}'})
    return root


def test_config_in_rocksdb(tmp_path):
    root = _config_store(tmp_path / "store")
    before = _snapshot(root)
    findings = Findings()
    offsets = read_kv_consumer_offsets(root, findings)
    assert offsets.offset_table == {"TopicA@g1": {0: 2, 1: 4}, "%RETRY%g1@g1": {0: 1}}
    assert offsets.data_version == DataVersion(7, 0, 1710000000000)
    topics = read_kv_topics(root, findings)
    a = topics.topic_config_table["TopicA"]
    assert (a.read_queue_nums, a.write_queue_nums, a.perm, a.attributes) == (2, 2, 6, {"+queue.type": "BatchCQ"})
    groups = read_kv_subscription_groups(root, findings)
    assert groups.subscription_group_table["g1"].retry_max_times == 3
    assert groups.forbidden_table == {"g1": {"TopicA": 1}}
    assert groups.data_version is None
    assert findings == []
    assert _snapshot(root) == before
    assert detect_rocksdb(root) == {"consumequeue": False, "config/consumerOffsets": True, "config/topics": True,
                                    "config/subscriptionGroups": True, "config/rdb": False}


def test_which_copy_of_the_offsets_is_used(tmp_path):
    kv = ConsumerOffsets({"T@g": {0: 9}}, DataVersion(5, 0, 0))
    older_json = ConsumerOffsets({"T@g": {0: 3}}, DataVersion(4, 0, 0))
    newer_json = ConsumerOffsets({"T@g": {0: 11}}, DataVersion(6, 0, 0))
    assert pick_config(older_json, kv) == (kv, "rocksdb")
    assert pick_config(newer_json, kv) == (newer_json, "json")  # what merge() imports at the broker's start
    assert pick_config(None, kv) == (kv, "rocksdb") and pick_config(older_json, None) == (older_json, "json")
    assert pick_config(None, None) == (None, None)


def test_v2_config_is_detected_not_read(tmp_path):
    write_kv_config(tmp_path / "config" / "rdb", {"x": b"{}"})
    findings = Findings()
    assert detect_rocksdb(tmp_path, findings)["config/rdb"]
    assert [(f.severity, f.message[:30]) for f in findings] == [("info", "RocksDB config v2 (configManag")]


def test_unreadable_values_are_findings(tmp_path):
    write_kv_config(tmp_path / "config" / "consumerOffsets", {"T@g": b"{oops", "U@g": b'{"offsetTable":{0:1}}'})
    findings = Findings()
    assert read_kv_consumer_offsets(tmp_path, findings).offset_table == {"U@g": {0: 1}}
    assert [f.message[:26] for f in findings] == ["offset of 'T@g' unreadable"]
    assert parse_offset_value(b'{"offsetTable":{"0":5}}') == {0: 5}
