"""ConsumeQueue, TimerLog, TimerWheel, timercheck and checkpoint decode to what RocketMQ reported
(basic-5.3.1/summary.txt) and rebuild to the same bytes."""

import re

import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.checkpoint import checkpoint
from mqtool.formats.consumequeue import CQ_UNIT_SIZE, consumequeue_unit
from mqtool.formats.timercheck import timercheck
from mqtool.formats.timerlog import TIMERLOG_UNIT_SIZE, timerlog_unit
from mqtool.formats.timerwheel import SLOT_SIZE, slot_index, timerwheel_slot, wheel_length

STORE = ORACLE / "basic-5.3.1/store"


@pytest.fixture(scope="module")
def summary() -> str:
    need_oracle()
    return (ORACLE / "basic-5.3.1/summary.txt").read_text()


def fields(line: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)}


def test_consumequeue_units_match_summary_and_rebuild(summary):
    current = None
    checked = 0
    for line in summary.splitlines():
        if line.startswith("CQ topic="):
            topic, qid = re.search(r"topic=(\S+) queueId=(\d+)", line).groups()
            current = STORE / "consumequeue" / topic / qid
        elif line.strip().startswith("unit idx=") and current is not None:
            f = fields(line)
            i = f["idx"]
            file_units = 1280 // CQ_UNIT_SIZE
            path = current / f"{(i // file_units) * 1280:020d}"
            raw = path.read_bytes()[(i % file_units) * CQ_UNIT_SIZE:][:CQ_UNIT_SIZE]
            u = consumequeue_unit.parse(raw)
            assert (u.commitlog_offset, u.size, u.tags_code) == (f["pos"], f["size"], f["tagsCode"])
            assert consumequeue_unit.build(u) == raw
            checked += 1
    assert checked == 115  # every unit the summary lists (TopicB/1 spans two CQ files)


def test_timerlog_units_match_summary_and_rebuild(summary):
    data = (STORE / "timerlog/00000000000000000000").read_bytes()
    lines = [ln for ln in summary.splitlines() if ln.strip().startswith("pos=")]
    assert len(lines) == 6
    for line in lines:
        f = fields(line)
        raw = data[f["pos"] : f["pos"] + TIMERLOG_UNIT_SIZE]
        u = timerlog_unit.parse(raw)
        assert (u.size, u.prev_pos, u.magic, u.curr_write_time_ms, u.delayed_time_delta, u.offset_py, u.size_py,
                u.real_topic_hash, u.reserved) == (
            f["size"], f["prevPos"], f["magic"], f["currWriteTimeMs"], f["delayMs"], f["offsetPy"], f["sizePy"],
            f["realTopicHash"], f["reserved"])
        assert timerlog_unit.build(u) == raw


def test_wheel_slots_match_summary_and_rebuild(summary, basic_store):
    wheel = (basic_store / "timerwheel").read_bytes()
    assert len(wheel) == wheel_length() == 38_707_200
    lines = [ln for ln in summary.splitlines() if ln.strip().startswith("slotIndex=")]
    assert len(lines) == 5
    for line in lines:
        f = fields(line)
        assert slot_index(f["timeMs"], 1000) == f["slotIndex"]
        raw = wheel[f["slotIndex"] * SLOT_SIZE :][:SLOT_SIZE]
        s = timerwheel_slot.parse(raw)
        assert (s.time_units * 1000, s.first_pos, s.last_pos, s.num, s.magic) == (
            f["timeMs"], f["firstPos"], f["lastPos"], f["num"], f["magic"])
        assert timerwheel_slot.build(s) == raw


def test_timercheck_and_checkpoint_match_summary_and_rebuild(summary):
    raw = (STORE / "config/timercheck").read_bytes()
    t = timercheck.parse(raw)
    assert (t.last_read_time_ms, t.last_timer_log_flush_pos, t.last_timer_queue_offset,
            t.master_timer_queue_offset, t.state_version, t.timestamp, t.counter) == (
        1795362444000, 312, 6, 6, 0, 1795362444193, 11)
    assert timercheck.build(t) == raw
    raw = (STORE / "checkpoint").read_bytes()
    c = checkpoint.parse(raw)
    assert (c.physic_msg_timestamp, c.logics_msg_timestamp, c.index_msg_timestamp, c.master_flushed_offset,
            c.confirm_phy_offset) == (1795362439110, 1795362439110, 0, 0, 0)
    assert checkpoint.build(c) == raw


def test_real_timercheck_from_rocketmq_tests():
    """The 2024 timercheck from RocketMQ's own test suite (shared/real-stores)."""
    need_oracle()
    raw = (ORACLE.parent / "real-stores/timercheck-5x-2024/config/timercheck").read_bytes()
    t = timercheck.parse(raw)
    assert (t.last_read_time_ms, t.timestamp) == (1732461358500, 1732763313945)
    assert timercheck.build(t) == raw
