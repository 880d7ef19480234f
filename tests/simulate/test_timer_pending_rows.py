"""The timer dequeue keeps its deliver/roll rows from slot to slot while `Process.advance` goes on
without the engine, and writes them (one `EventLog.batch`, a time per row) before it yields or emits
any other event: the event log equals, byte for byte, the per-message walk (`reference_timer`: every
event by a `batch` of one as it happens) with schedule deliveries between the slots, a clock jump and a crash."""

import io
import json

import pytest
from reference_timer import use_reference

import mqtool.simulate.events as events_mod
from mqtool.builder.broker import put_delay_message, put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store

START = 1_800_000_000_000
N = 300


def _build(root):
    """Timer messages 1-3 a second over 2 minutes (consecutive slots: `advance` walks on), some due
    past the wheel's span (rolled), and delay-level messages (the schedule service runs between)."""
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(root, config) as w:
        for i in range(N):
            out = START + 5_000 + i * 400 + (i % 3) * 7 if i % 37 else START + 2 * 86_400_000 + i
            props = [
                ("REAL_TOPIC", "BenchTopic"),
                ("REAL_QID", str(i % 4)),
                ("TIMER_OUT_MS", str(out)),
                ("UNIQ_KEY", f"T{i:05d}"),
            ]
            put_message(
                w, TIMER_TOPIC, 0, b"x" * (i % 5), props, store_timestamp=START - 1000, born_timestamp=START - 1000
            )
        for i in range(60):
            ts = START + i * 1_700
            put_delay_message(
                w,
                "DelayTopic",
                i % 2,
                b"d",
                [("UNIQ_KEY", f"D{i:05d}")],
                level=1 + i % 3,
                store_timestamp=ts,
                born_timestamp=ts,
            )
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, batch, monkeypatch, scenario):
    """(event lines, result, the row times of the timer's `batch` calls with a time per event)."""
    use_reference(monkeypatch, not batch)
    calls = []
    batch_of = events_mod.EventLog.batch

    def spy(self, time, service, event, /, *args, **kwargs):
        if service == "timer" and type(time) in (list, tuple):
            calls.append(list(time))
        return batch_of(self, time, service, event, *args, **kwargs)

    monkeypatch.setattr(events_mod.EventLog, "batch", spy)
    sink = io.StringIO()
    res = simulate(store, config, START, START + 2 * 86_400_000 + 60_000, scenario, seed=1, sink=sink)
    return sink.getvalue(), res, calls


FAULTS = {
    "none": [],
    "clock_jump": [{"kind": "clock_jump", "at": 40_000, "delta": "+30s"}],
    "crash": [{"kind": "crash", "from": 50_000, "until": 70_000}],
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_rows_kept_across_slots_equal_the_per_message_walk(tmp_path, monkeypatch, fault):
    store, config = _build(tmp_path / "s")
    sc = parse_scenario({"faults": FAULTS[fault]}, START) if FAULTS[fault] else None
    per_msg, r1, calls1 = _run(store, config, False, monkeypatch, sc)
    assert calls1 == []
    batched, r2, calls = _run(store, config, True, monkeypatch, sc)
    assert batched == per_msg
    assert r2.summary == r1.summary and r2.violations == r1.violations
    lines = list(map(json.loads, per_msg.splitlines()))
    timer = [e for e in lines if e["service"] == "timer" and e["event"] in ("deliver", "roll")]
    # all but each queue's first re-put (by `TimerDequeue.put`, 4 queues; again after the restart) and, in a run
    # that keeps no spool (a fault), the rolls (put whole)
    rolls = sum(e["event"] == "roll" for e in timer)
    rowed = len(timer) - (rolls if fault != "none" else 0)
    assert len(timer) >= N - 10 and rolls > 0 and rowed - 8 <= sum(map(len, calls)) < rowed
    # each rolled message (i % 37 == 0, due 2 days on: rolled at 1 day) delivered before the run ends
    assert sum(e["event"] == "deliver" and e["due"] >= START + 2 * 86_400_000 for e in timer) == rolls == 9
    # rows of several slots went in one call: consecutive slots, no other event between
    assert max(len(set(c)) for c in calls) >= 2
    # and events of another service (the schedule's offset persists) came between timer slots' events
    kinds = [(e["service"], e["time"]) for e in lines if e["service"] != "timer" or e["event"] in ("deliver", "roll")]
    between = [
        i
        for i in range(1, len(kinds) - 1)
        if kinds[i][0] != "timer"
        and kinds[i - 1][0] == kinds[i + 1][0] == "timer"
        and kinds[i - 1][1] < kinds[i + 1][1]
    ]
    assert len(between) >= 5
    if fault != "none":
        broker = [e for e in lines if e["service"] == "broker"]
        assert broker and broker[0]["event"] == fault
        at = lines.index(broker[0])
        assert all(e["time"] <= broker[0]["time"] for e in lines[:at])
        assert all(e["time"] >= broker[0]["time"] for e in lines[at:])
