"""Queues `RocksDBConsumeQueueStore.cleanDirty` destroys (rules.rocksdb, spec §14), flagged by the
`rocksdb.integrity` audit and the overview.

The store is fixtures/demo's queues turned into a RocksDB consume queue (`builder/rocksdb.py`); its 16
queues (hand-listed from fixtures/demo/consumequeue): %DLQ%GID_demo/0, %RETRY%GID_demo/0,
%RETRY%GID_demo_long.../0, DemoTopicA/0..3, DemoTopicB/0..1, RMQ_SYS_TRANS_HALF_TOPIC/0,
RMQ_SYS_TRANS_OP_HALF_TOPIC/0, SCHEDULE_TOPIC_XXXX/0,2,17, TRANS_CHECK_MAX_TIME_TOPIC/0,
rmq_sys_wheel_timer/0. With DemoTopicA and %RETRY%GID_demo configured, the dirty ones are the DLQ topic,
the long retry topic and DemoTopicB's two queues; every other is configured or a system topic
(`TopicValidator.isSystemTopic`: the static set or the `rmq_sys_` prefix).
"""

import shutil

import pytest

from mqtool.audit.results import RocksDBState
from mqtool.audit.rocksdb import check_state
from mqtool.audit.runner import run_local
from mqtool.builder.rocksdb import rocksdb_copy_of, write_kv_config
from mqtool.formats.config_json import TopicConfig, Topics, dump_topics
from mqtool.inspect.overview import overview
from mqtool.store.findings import Findings
from mqtool.store.rocksdb import QueueOffsets
from mqtool.store.store import Store

LONG = "%RETRY%GID_demo_long_" + "x" * 114  # 135 chars
DIRTY = [("%DLQ%GID_demo", 0), (LONG, 0), ("DemoTopicB", 0), ("DemoTopicB", 1)]


def _message(where: str) -> str:
    return (f"queue will be destroyed by cleanDirty at the next run; topic not in {where} (cleanDirty runs 10 min "
            "after start, then every cleanRocksDBDirtyCQIntervalMin, 60 min by default)")


@pytest.fixture(scope="module")
def rocks(tmp_path_factory):
    return rocksdb_copy_of("fixtures/demo", tmp_path_factory.mktemp("rocks-dirty") / "store")


def _copy(rocks, tmp_path):
    root = tmp_path / "store"
    shutil.copytree(rocks, root)
    return root


def _dirty(findings) -> list[tuple]:
    return [(f["severity"], f["file"], f["topic"], f["queue_id"], f["message"]) for f in findings
            if f["check"] == "rocksdb.integrity" and "cleanDirty" in f["message"]]


def test_long_retry_topic_name_is_the_fixture_s():
    assert any(t == LONG for t, _ in Store.open("fixtures/demo").queue_ids)


def test_unconfigured_queues_are_flagged_by_audit_and_overview(rocks, tmp_path):
    root = _copy(rocks, tmp_path)
    topics = {t: TopicConfig(t, 4, 4) for t in ("DemoTopicA", "%RETRY%GID_demo")}
    (root / "config" / "topics.json").write_text(dump_topics(Topics(topics)))
    want = [("warning", "consumequeue", t, q, _message("config/topics.json")) for t, q in DIRTY]
    report = run_local(root)
    assert sorted(_dirty(report["findings"])) == sorted(want)
    assert report["summary"]["rocksdb"]["queues"] == 16  # the summary is unchanged
    assert sorted(_dirty(overview(Store.open(root), 0)["findings"])) == sorted(want)


def test_topics_from_the_rocksdb_config(rocks, tmp_path):
    root = _copy(rocks, tmp_path)
    value = b'{"order":false,"perm":6,"readQueueNums":2,"topicName":"DemoTopicB","writeQueueNums":2}'
    write_kv_config(root / "config" / "topics", {"DemoTopicB": value})
    got = _dirty(run_local(root)["findings"])
    assert sorted(got) == sorted(("warning", "consumequeue", t, q, _message("config/topics"))
                                 for t, q in [("%DLQ%GID_demo", 0), ("%RETRY%GID_demo", 0), (LONG, 0),
                                              ("DemoTopicA", 0), ("DemoTopicA", 1), ("DemoTopicA", 2),
                                              ("DemoTopicA", 3)])


def test_no_topic_config_no_check(rocks):
    assert _dirty(run_local(rocks)["findings"]) == []
    assert _dirty(overview(Store.open(rocks), 0)["findings"]) == []


def test_check_state_takes_the_topic_config():
    state = RocksDBState(offsets={("Gone", 1): QueueOffsets(None, None, 0, 0),
                                  ("Kept", 0): QueueOffsets(None, None, 0, 0),
                                  ("OFFSET_MOVED_EVENT", 0): QueueOffsets(None, None, 0, 0)},
                         keys={}, checkpoint=None)
    findings = Findings()
    check_state(state, 0, 0, findings, ({"Kept"}, "config/topics.json"))
    assert [(f.severity, f.topic, f.queue_id, f.message) for f in findings] == [
        ("warning", "Gone", 1, _message("config/topics.json"))]
