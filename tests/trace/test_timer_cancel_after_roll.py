"""Issue #27: a cancel written while its target waits in a roll slot still drops the message.

Roll window 100 s (trace_stores.CONFIG). The victim, due T0 + 150 s, is written at T0: 150 s ahead is a
roll window or more, so its unit is a ROLL unit in slot T0 + 100 s (the rest, 50 s, is over a third of a
window). The cancel, written at T0 + 60 s, is 90 s ahead: a plain DELETE unit in slot T0 + 149 s (the
TIMER_OUT_MS of both: T0 + 150 s less one precision, as the put rounds an exact multiple). At T0 + 100 s
the victim rolls into that slot, where the dequeue reads the cancel first and drops it.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from trace_stores import CONFIG, T0, props  # noqa: E402

from mqtool.builder import broker as b  # noqa: E402
from mqtool.builder.writer import StoreWriter  # noqa: E402
from mqtool.inspect.timer import timer_view  # noqa: E402
from mqtool.simulate.runner import simulate  # noqa: E402
from mqtool.store.store import Store  # noqa: E402
from mqtool.trace import TraceQuery, trace  # noqa: E402

DUE = T0 + 149_000  # TIMER_OUT_MS of the victim and of its cancel


def _build(root: Path, rolled: bool, cancel_at: int = T0 + 60_000) -> Path:
    with StoreWriter(root, CONFIG) as w:
        v = b.put_timer_message(
            w, "TopicB", 1, b"v", props("victim", 6, TIMER_DELIVER_MS=str(T0 + 150_000)), store_timestamp=T0 + 30
        )
        b.put_timer_cancel(w, v, props("cancel", 7), store_timestamp=cancel_at)
        queue_offset, last = 2, cancel_at
        if rolled:
            r1 = b.deliver_timer(w, v, enqueue_ms=T0, store_timestamp=T0 + 100_050, roll=True)
            b.enqueue_timer(w, r1, T0 + 100_050)
            queue_offset, last = 3, T0 + 300_000
        w.write_timercheck(last, last_timer_queue_offset=queue_offset)
        w.write_checkpoint(physic_msg_timestamp=last)
    return root


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("cancel_roll")
    stores = {k: Store.open(_build(base / k, k == "rolled"), CONFIG) for k in ("waiting", "rolled")}
    # the cancel written at T0 + 31 ms is 149 s ahead too: a ROLL + DELETE unit in the victim's roll slot
    stores["both_roll"] = Store.open(_build(base / "both_roll", False, T0 + 31), CONFIG)
    return stores


def test_units_as_worked_out(stores):
    units = list(stores["rolled"].timerlog.iter_units())
    assert [(u.magic, u.delayed_time_ms) for u in units] == [(3, T0 + 100_000), (5, DUE), (1, DUE)]


def test_trace_says_cancelled_after_the_roll(stores):
    t = trace(stores["rolled"], TraceQuery(key="victim"))[0]
    assert [s.stage for s in t.stages] == ["born", "stored", "parked", "cancel_requested", "rolled", "cancelled"]
    cancel = next(r.record for r in t.records if r.record.properties.get("KEYS") == "cancel")
    assert t.verdict.state == "cancelled"
    assert t.verdict.text == f"cancelled by {cancel.physical_offset} (dropped when its slot was read)"


def test_trace_before_the_roll_agrees_with_the_replay(stores):
    t = trace(stores["waiting"], TraceQuery(key="victim"))[0]
    assert t.verdict.state == "cancelled"
    store = stores["waiting"]
    result = simulate(store, store.config, None, T0 + 200_000, hold_events=True)
    uk = t.records[0].record.uniq_key
    timer = [(e.event, e.time) for e in result.events if e.service == "timer" and e.uniq_key == uk]
    # rolled when slot T0 + 100 s is read (a second after), enqueued again, dropped a second after its slot
    assert timer == [("roll", T0 + 101_000), ("enqueue", T0 + 101_000), ("cancel", DUE + 1000)]


@pytest.mark.parametrize("name", ["waiting", "both_roll"])
def test_the_timer_view_trace_and_replay_agree(stores, name):
    """One answer: `inspect timer` counts nothing pending, trace says cancelled, the replay cancels it."""
    store = stores[name]
    doc = timer_view(store, store.last_activity_ms())
    assert doc["pending"]["count"] == 0  # was 1 (the victim) or 2 (the victim and the rolled cancel)
    roll_slot = timer_view(store, store.last_activity_ms(), at_ms=T0 + 100_000)["chain"]
    # the victim rolls on, then meets the cancel in slot T0 + 149 s
    want = [("victim", "cancelled")] + ([("cancel", "cancel request")] if name == "both_roll" else [])
    assert [(u["keys"][0], u["state"]) for u in roll_slot["units"]] == want
    t = trace(store, TraceQuery(key="victim"))[0]
    assert t.verdict.state == "cancelled"
    result = simulate(store, store.config, None, T0 + 200_000, hold_events=True)
    uk = t.records[0].record.uniq_key
    assert [e.event for e in result.events if e.service == "timer" and e.uniq_key == uk] == [
        "roll",
        "enqueue",
        "cancel",
    ]


def test_the_simulators_pending_count_agrees_with_the_timer_view(stores, tmp_path):
    """Half-way (after the roll, before slot T0 + 149 s): the victim still waits in the wheel, but a cancel
    waits in the slot it ends in: neither the summary nor `inspect timer` on the `--out` store counts it."""
    from mqtool.simulate.output import write_store

    store = stores["both_roll"]
    result = simulate(store, store.config, None, T0 + 120_000, hold_events=True)
    assert result.summary["pending_timers"] == 0  # was 1
    write_store(store, result, tmp_path / "out")
    out = Store.open(tmp_path / "out", CONFIG)
    doc = timer_view(out, T0 + 120_000)
    assert [(u["kind"], u["state"]) for u in timer_view(out, T0 + 120_000, at_ms=DUE)["chain"]["units"]] == [
        ("normal", "cancelled"),
        ("delete", "cancel request"),
    ]
    assert doc["pending"]["count"] == 0
