"""The queue view, the overview and single-file dumps."""

import struct

import pytest

from conftest import ORACLE, need_oracle
from mqtool.inspect.dump import dump_file, file_kind
from mqtool.inspect.overview import overview
from mqtool.inspect.queue import iter_queue
from mqtool.store.errors import StoreError
from mqtool.store.store import Store

NOW = 1795362444000


# ----------------------------------------------------------------------------- queue


def test_queue_units_resolve_to_their_records(basic: Store):
    rows = list(iter_queue(basic, "SCHEDULE_TOPIC_XXXX", 17))
    assert [(r["cq_queue_offset"], r["cq_commitlog_offset"], r["cq_size"], r["cq_tags_code"]) for r in rows] == [
        (0, 3726, 287, 1795369633805), (1, 4013, 287, 1795369633805)]
    assert all(r["match"] and r["problems"] == [] for r in rows)
    assert rows[1]["physical_offset"] == 4013 and rows[1]["properties"]["DELAY"] == "18"


def test_queue_from_and_limit_across_files(basic: Store):
    rows = list(iter_queue(basic, "TopicB", 1, start=62, limit=3, body="none"))
    assert [r["cq_queue_offset"] for r in rows] == [62, 63, 64]
    assert [r["physical_offset"] for r in rows] == [66527, 67518, 68509]  # summary.txt
    assert rows[0]["body"] is None


def test_queue_mismatch_and_missing_record(basic_copy):
    cq = basic_copy / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    data = bytearray(cq.read_bytes())
    struct.pack_into(">i", data, 8, 250)  # unit 0: size 251 -> 250
    struct.pack_into(">q", data, 20, 999_999)  # unit 1: points nowhere
    cq.write_bytes(bytes(data))
    rows = list(iter_queue(Store.open(basic_copy), "TopicA", 0))
    assert rows[0]["problems"] == ["record size 251 != unit size 250"]
    assert not rows[1]["match"] and rows[1]["topic"] is None
    assert rows[1]["problems"][0].startswith("no record at CommitLog offset 999999")


def test_unknown_queue_is_a_store_error(basic: Store):
    with pytest.raises(StoreError, match="no ConsumeQueue TopicZ/0"):
        list(iter_queue(basic, "TopicZ", 0))


# ----------------------------------------------------------------------------- overview


def test_overview_of_basic(basic: Store):
    doc = overview(basic, NOW)
    cl = doc["commitlog"]
    assert (cl["min_offset"], cl["max_offset"], cl["records"]) == (0, 96635, 115)  # summary.txt maxPhyOffset
    assert [s["stop_reason"] for s in cl["scans"]] == ["blank filler", "unwritten (zero) tail"]
    assert cl["scans"][0]["valid_bytes"] == 65029
    topics = {t["topic"]: t for t in doc["topics"]}
    assert topics["TopicB"]["records"] == 93
    assert {q["queue_id"]: (q["records"], q["cq_max_offset"]) for q in topics["TopicB"]["queues"]} == {
        0: (21, 21), 1: (72, 72)}
    assert doc["system_topics"] == {"SCHEDULE_TOPIC_XXXX": 4, "rmq_sys_wheel_timer": 6,
                                    "RMQ_SYS_TRANS_HALF_TOPIC": 2, "RMQ_SYS_TRANS_OP_HALF_TOPIC": 0,
                                    "TRANS_CHECK_MAX_TIME_TOPIC": 0}
    assert doc["delay"]["backlog"] == 4
    assert doc["timer"]["units"] == {"normal": 4, "roll": 1, "delete": 1, "total": 6}
    assert doc["transactions"]["counts"]["pending"] == 2
    assert doc["checkpoint"]["physic_msg_timestamp"] == 1795362439110  # summary.txt StoreCheckpoint
    assert doc["findings"] == [] and doc["finding_counts"] == {"error": 0, "warning": 0, "info": 0}


def test_overview_of_the_demo(demo: Store):
    doc = overview(demo, 1790000020000)
    assert doc["commitlog"]["records"] == 66  # the rows of fixtures/README.md
    roles = {t["topic"]: t["role"] for t in doc["topics"]}
    assert roles["%DLQ%GID_demo"] == "dead letter" and roles["%RETRY%GID_demo"] == "retry"
    assert doc["transactions"]["counts"] == {"committed": 1, "rolled_back": 1, "pending": 1, "discarded": 1}
    assert doc["finding_counts"]["error"] == 0


def test_overview_reports_unparsable_config_files_it_does_not_show(demo_dir, demo_conf, tmp_path):
    import shutil

    from mqtool.formats.broker_conf import load_broker_conf

    root = tmp_path / "demo"
    shutil.copytree(demo_dir, root)
    (root / "config" / "consumerOffset.json").write_text("garbage{")
    (root / "config" / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": ')
    doc = overview(Store.open(root, load_broker_conf(demo_conf)), 1790000020000)
    config = [(f["file"], f["severity"]) for f in doc["findings"] if f["check"] == "store.config"]
    assert config == [("config/consumerOffset.json", "warning"), ("config/subscriptionGroup.json", "warning")]
    message = next(f["message"] for f in doc["findings"] if f["file"] == "config/consumerOffset.json")
    assert message.startswith("consumerOffset.json: unparsable at line 1 col 1") and "start from defaults" in message


def test_overview_of_a_truncated_commitlog_is_a_finding(basic_copy):
    last = basic_copy / "commitlog" / "00000000000000065536"
    last.write_bytes(last.read_bytes()[:5000])  # cuts the record at 70491 (5000 - 4955 bytes in)
    doc = overview(Store.open(basic_copy), NOW)
    assert doc["commitlog"]["records"] == 115 - 27
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert {f["check"] for f in errors} >= {"commitlog.integrity", "consumequeue.range"}
    torn = next(f for f in errors if f["check"] == "commitlog.integrity")
    assert torn["offset"] == 65536 + 4955 and "torn tail" in torn["message"]


# ----------------------------------------------------------------------------- dumps


@pytest.mark.parametrize("rel, kind", [
    ("commitlog/00000000000000000000", "commitlog"),
    ("consumequeue/TopicB/1/00000000000000001280", "consumequeue"),
    ("timerlog/00000000000000000000", "timerlog"), ("timerwheel.gz", "timerwheel"),
    ("config/timercheck", "timercheck"), ("checkpoint", "checkpoint"), ("index/20261122154713760", "index")])
def test_file_kinds(open_oracle, rel, kind):
    open_oracle("basic-5.3.1/store")  # skips without the oracle
    assert file_kind(ORACLE / "basic-5.3.1/store" / rel) == kind


def test_dumps_of_basic(basic_store):
    cl = dump_file(basic_store / "commitlog/00000000000000000000", limit=2, body="none")
    assert cl["scan"] == {"start_offset": 0, "records": 83, "valid_bytes": 65029, "stop_reason": "blank filler",
                          "trailing_bytes": 0}
    assert cl["record_count"] == 83 and [r["physical_offset"] for r in cl["records"]] == [0, 251]
    cq = dump_file(basic_store / "consumequeue/TopicB/1/00000000000000001280")
    assert (cq["first_queue_offset"], cq["unit_count"]) == (64, 8) and cq["units"][0]["queue_offset"] == 64
    tl = dump_file(basic_store / "timerlog/00000000000000000000")
    assert tl["units_by_kind"] == {"normal": 4, "roll": 1, "delete": 1} and tl["end_offset"] == 312
    assert [u["magic"] for u in tl["units"]] == [1, 1, 3, 1, 5, 1]
    tc = dump_file(basic_store / "config/timercheck")["timercheck"]
    assert (tc["last_read_time_ms"], tc["last_timer_log_flush_pos"], tc["counter"]) == (1795362444000, 312, 11)
    cp = dump_file(basic_store / "checkpoint")["checkpoint"]
    assert cp["physic_msg_timestamp"] == 1795362439110
    wheel = dump_file(basic_store / "timerwheel")
    assert wheel["written_slots"] == 5 and wheel["slot_count"] == 1209600


def test_dump_of_config_json(open_oracle):
    need_oracle()
    d = dump_file(ORACLE / "pair_default/B/config/delayOffset.json")
    assert d["offset_table"] == {"1": 2, "2": 1, "3": 2, "5": 1, "6": 1, "18": 0}
    c = dump_file(ORACLE / "pair_default/B/config/consumerOffset.json")
    assert c["offset_table"]["RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS"] == {"0": 14}
    t = dump_file(ORACLE / "pair_default/B/config/topics.json")
    assert "OracleTxTopic" in t["content"]["topicConfigTable"]


def test_dump_errors(tmp_path):
    bad = tmp_path / "config" / "delayOffset.json"
    bad.parent.mkdir()
    bad.write_text("{garbage")
    with pytest.raises(StoreError, match="delayOffset.json: unparsable config file"):
        dump_file(bad)
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(StoreError, match="unknown file kind"):
        dump_file(other)


def test_dump_of_a_truncated_commitlog_file(basic_copy):
    last = basic_copy / "commitlog" / "00000000000000065536"
    last.write_bytes(last.read_bytes()[:5000])
    d = dump_file(last, body="none")
    assert d["scan"]["records"] == 5 and d["scan"]["stop_reason"].startswith("invalid record")
    assert d["findings"][0]["severity"] == "error" and d["findings"][0]["offset"] == 65536 + 4955
