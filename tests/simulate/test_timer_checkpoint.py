"""The timercheck a crash goes back to is the one flushed in the last second before it (hand-computed).

The run starts at S + 300 ms, so the flusher's seconds (S + 1.3 s, S + 2.3 s, ...) never meet a delivery's.
The message due S + 5 s sits in slot S + 5 s and is delivered at S + 6 s; its slot stays in the wheel.
"""

from simkit import S, events, run


def _deliveries(built, crash_at: int) -> list[int]:
    """The delivery times of the message due S + 5 s, in a run with a crash at `crash_at` restarting at S + 7 s."""
    m = built.timer(S + 5000, S - 1000)
    faults = [{"kind": "crash", "from": crash_at - S - 300, "until": 7000 - 300}]
    r = run(built, S + 300, S + 12_000, {"faults": faults})
    assert [e.event for e in r.events if e.service == "broker"] == ["crash", "restart"]
    return [e.time for e in events(r, "deliver") if e.uniq_key == m.uniq_key]


def test_a_crash_after_the_delivery_and_its_flush_delivers_once(built):
    """Crash at S + 6.5 s: the flush at S + 6.3 s saw slot S + 5 s done (currReadTimeMs S + 6 s)."""
    assert _deliveries(built, S + 6500) == [S + 6000]


def test_a_crash_before_the_flush_after_the_delivery_delivers_again(built):
    """Crash at S + 6.2 s: the last flush, at S + 5.3 s, had currReadTimeMs S + 5 s (the slot not yet dequeued); the
    restart at S + 7 s reads slot S + 5 s again and delivers the message again at once."""
    assert _deliveries(built, S + 6200) == [S + 6000, S + 7000]
