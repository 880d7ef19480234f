"""The timer dequeue reads its slots from the store's `timerwheel` and walks `prevPos` chains (demo fixture).

fixtures/demo's TimerLog (one 4096-byte file): T5 @0, T600 @52, TROLL @104, TV @156, TC @208 (TC cancels
TV; its prevPos is 156). `recover` re-reads the units of the file before `lastTimerLogFlushPos` on and
makes each its slot's last position (`recoverAndRevise`), so to see the wheel at work the units are put
out of that range: an empty second TimerLog file and `lastTimerLogFlushPos` = 8192.
"""

import shutil
import struct

import pytest

from conftest import FIXTURES
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.timercheck import timercheck
from mqtool.formats.timerwheel import SLOT_SIZE, slot_index
from mqtool.simulate.runner import default_start, simulate
from mqtool.store.store import Store

DEMO = FIXTURES / "demo"
CONF = load_broker_conf(FIXTURES / "demo.broker.conf")
HOUR = 3_600_000


@pytest.fixture
def demo(tmp_path):
    if not (DEMO / "timerwheel").is_file():
        pytest.fail(f"fixtures/demo is absent ({DEMO}) (a defect: it is committed)")
    return shutil.copytree(DEMO, tmp_path / "demo")


def _run(store, hours=3):
    st = Store.open(store, CONF)
    start = default_start(st)
    r = simulate(st, CONF, start, start + hours * HOUR, None, 0)
    return st, r


def _events(r, kind):
    return [e for e in r.events if e.event == kind]


def _units_out_of_revise_range(store):
    """An empty second TimerLog file and a flush position past it: recovery re-reads no unit."""
    (store / "timerlog/00000000000000004096").write_bytes(bytes(4096))
    p = store / "config/timercheck"
    tc = timercheck.parse(p.read_bytes())
    tc.last_timer_log_flush_pos = 8192
    p.write_bytes(timercheck.build(tc))


def _label(st, e):
    return st.commitlog.read(e.physical_offset).properties["KEYS"]


def test_slots_come_from_the_wheel_and_chains_from_the_timerlog(demo):
    _units_out_of_revise_range(demo)
    st, r = _run(demo)
    assert [_label(st, e) for e in _events(r, "deliver") if e.service == "timer"] == ["T600"]
    assert [_label(st, e) for e in _events(r, "cancel")] == ["TV"]  # TC -> prevPos -> TV, read from the file
    assert r.summary["pending_timers"] == 1  # TROLL's slot (+1 d) is still ahead
    assert _events(r, "skip") == []


def test_an_empty_wheel_slot_is_not_dequeued_even_with_its_unit_in_the_timerlog(demo):
    _units_out_of_revise_range(demo)
    t600 = 1790000600000
    with open(demo / "timerwheel", "r+b") as f:
        f.seek(slot_index(t600, 1000) * SLOT_SIZE)
        f.write(bytes(SLOT_SIZE))
    st, r = _run(demo)
    assert [e for e in _events(r, "deliver") if e.service == "timer"] == []  # as RocketMQ: getSlot is empty
    assert [_label(st, e) for e in _events(r, "cancel")] == ["TV"]


def test_recovery_revises_the_slots_from_the_last_timerlog_file(demo):
    """Units in the revise range rebuild a wiped slot (reviseSlot with force), as `recover` does."""
    with open(demo / "timerwheel", "r+b") as f:
        f.seek(slot_index(1790000600000, 1000) * SLOT_SIZE)
        f.write(bytes(SLOT_SIZE))
    st, r = _run(demo)
    assert [_label(st, e) for e in _events(r, "deliver") if e.service == "timer"] == ["T600"]


def test_broken_chain_is_an_event_not_a_crash(demo):
    """TC's prevPos points at zeros: the walk stops there (TV unread: neither cancelled nor delivered)."""
    _units_out_of_revise_range(demo)
    with open(demo / "timerlog/00000000000000000000", "r+b") as f:
        f.seek(208 + 4)  # TC's prevPos (after the 4-byte size)
        f.write(struct.pack(">q", 3000))
    st, r = _run(demo)
    (skip,) = _events(r, "skip")
    assert skip.service == "timer" and skip.detail["timerlog_pos"] == 3000
    assert skip.detail["reason"].startswith("broken TimerLog chain") and skip.detail["slot"] == 1790007200000
    assert _events(r, "cancel") == []
    assert [_label(st, e) for e in _events(r, "deliver") if e.service == "timer"] == ["T600"]
    assert r.violations == []
