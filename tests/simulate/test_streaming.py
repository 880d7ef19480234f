"""A streamed run (events to a file as they happen, nothing held) gives the same bytes, summary and
invariant findings as a held one; the per-key counts behind them are exact in bounded memory."""

import io

import pytest
from eventrows import check_invariants

import mqtool.simulate.tally as tally_mod
from mqtool.simulate.events import SimEvent
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.tally import ROLL, SUMMARY, TIMER, KeyTally
from simkit import S, config


def test_key_tally_repeats_are_exact_even_when_hashes_collide(monkeypatch):
    # every key of the same length gets the same "hash": the spool must tell them apart
    monkeypatch.setattr(tally_mod, "hash", len, raising=False)
    t = KeyTally()
    for k in ["AA", "AB", "AA", "B", "AC", "AA", "AB", "\udc80x"]:
        t.extend([k])
    assert t.repeated_by(SUMMARY) == {"AA": 3, "AB": 2}
    t.close()
    # the rolls of the keys the timer repeats (AA), not of those it does not (AC once, AB never), all colliding
    t = KeyTally()
    t.extend(["AA", "AC", "AB", "AA", "AB", "AC", "AA"], [TIMER, TIMER, ROLL, TIMER, ROLL, ROLL, ROLL])
    assert t.repeated_by(TIMER) == {"AA": 2} and t.repeated_by(ROLL) == {"AA": 1}
    t.close()


def test_key_tally_spools_past_its_buffer():
    t = KeyTally()
    for i in range(20_000):
        t.extend([f"K{i % 15_000}"])
    t.extend(["\udcff", "\udcff"])  # a surrogate-escaped byte survives the spool
    rep = t.repeated_by(SUMMARY)
    assert len(rep) == 5_001 and rep["K0"] == 2 and rep["K4999"] == 2 and rep["\udcff"] == 2
    assert "K5000" not in rep
    t.close()


def test_invariants_by_tally_match_hand_counts(monkeypatch):
    monkeypatch.setattr(tally_mod, "hash", lambda k: 7, raising=False)  # all collide

    def ev(t, service, kind, key, **d):
        return SimEvent(t, service, kind, "T", 0, key, 1, 2, d)

    history = [
        ev(1, "timer", "deliver", "B", due=1),
        ev(2, "timer", "deliver", "C", due=1),
        ev(3, "timer", "roll", "B"),
        ev(4, "timer", "deliver", "B", due=1),
        ev(5, "timer", "deliver", "B", due=1),
        ev(6, "schedule", "deliver", "B", due=1),
        ev(7, "timer", "deliver", "C", due=1),
    ]
    assert check_invariants(history, [], {}) == [
        "timer delivered B 3 times without a fault",
        "timer delivered C 2 times without a fault",
    ]


def _store(built):
    for i in range(12):
        built.delay(1 + i % 3, S + i * 10, [1000, 5000, 10_000][i % 3])
        built.timer(S + 4000 + i * 1000, S)
        built.half(S - 50_000 + i)
    return built


@pytest.mark.parametrize(
    "scenario",
    [
        {
            "transaction": {"answers": [{"answer": "commit", "probability": 0.5}]},
            "faults": [{"kind": "put_failure", "probability": 0.3}],
        },
        {"faults": [{"kind": "crash", "from": "+9s", "until": "+12s"}]},
    ],
)
def test_streamed_run_equals_held_run(built, scenario):
    _store(built)
    sc = parse_scenario(scenario, S)

    def run(**kw):
        return simulate(None, config(), S, S + 60_000, sc, 3, base=built.base, timer_state=built.timer_state, **kw)

    held = run()
    sink = io.StringIO()
    streamed = run(sink=sink)
    assert sink.getvalue() == held.events.jsonl() and sink.getvalue().count("\n") == len(held.events) > 50
    assert streamed.summary == held.summary
    assert streamed.violations == held.violations
    assert streamed.events.events == [] and len(streamed.events) == len(held.events)
    with pytest.raises(ValueError, match="streamed"):
        list(streamed.events)
    # records nobody reads back are not kept by a streamed run (--out asks for them: keep_records)
    assert held.state["model"].appended and not [m for m in streamed.state["model"].appended if m.topic == "T"]
    again = io.StringIO()
    run(sink=again)
    assert again.getvalue() == sink.getvalue()


def test_crash_duplicates_are_counted_when_streamed(built):
    for i in range(3):
        built.delay(1, S + i * 3000, 1000)
    sc = parse_scenario({"faults": [{"kind": "crash", "from": "+9s", "until": "+12s"}]}, S + 2000)
    r = simulate(
        None, config(), S + 2000, S + 30_000, sc, 0, base=built.base, timer_state=built.timer_state, sink=io.StringIO()
    )
    delivered = [line for line in r.events.sink.getvalue().splitlines() if '"event":"deliver"' in line]
    # due at S+1 s, S+4 s, S+7 s: delivered before the crash at S+11 s; the first offset flush would be at
    # start + 10 s = S+12 s, so the restart at S+14 s reads no offsets and delivers all three again
    assert len(delivered) == 6 and r.summary["duplicates"] == 3
    assert r.violations == []  # a crash explains them
