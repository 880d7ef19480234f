"""The engine: tie order, resumable run, typed errors (SimPy's exact-log style)."""

import pytest

from mqtool.simulate.engine import NORMAL, SCHEDULE, TIMER_DEQUEUE, Engine


@pytest.fixture
def engine():
    return Engine(1000)


@pytest.fixture
def log():
    return []


def test_tie_order_time_priority_sequence(engine, log):
    engine.schedule(lambda: log.append((engine.now, "normal-a")), NORMAL, 5)
    engine.schedule(lambda: log.append((engine.now, "schedule")), SCHEDULE, 5)
    engine.schedule(lambda: log.append((engine.now, "timer")), TIMER_DEQUEUE, 5)
    engine.schedule(lambda: log.append((engine.now, "normal-b")), NORMAL, 5)
    engine.schedule(lambda: log.append((engine.now, "early")), NORMAL, 1)
    engine.run()
    assert log == [(1001, "early"), (1005, "timer"), (1005, "schedule"), (1005, "normal-a"), (1005, "normal-b")]


def test_run_until_is_exclusive_and_resumable(engine, log):
    def tick():
        while True:
            log.append(engine.now)
            yield 10

    engine.process(tick())
    engine.run(until=1025)
    assert log == [1000, 1010, 1020] and engine.now == 1025
    engine.run(until=1040)
    assert log == [1000, 1010, 1020, 1030]
    with pytest.raises(ValueError):
        engine.run(until=1040)


def test_negative_delay_and_empty_queue(engine):
    with pytest.raises(ValueError, match="Negative delay"):
        engine.schedule(lambda: None, NORMAL, -1)
    now = engine.now
    engine.run()  # nothing queued: returns at once, the clock where it was
    assert engine.now == now


def test_now_is_read_only(engine):
    with pytest.raises(AttributeError):
        engine.now = 5


def test_process_wake_and_idle(engine, log):
    def idle():
        while True:
            yield None
            log.append(engine.now)

    p = engine.process(idle())
    engine.run(until=1100)
    p.wake(7)
    engine.run(until=1200)
    assert log == [1107]


def _advance_trace(use_advance: bool, took: list | None = None) -> tuple[list, int]:
    """A process sleeping 7, 3, 10, 5, 5 ms against a SCHEDULE tick every 30 ms, a NORMAL event at 1020
    (after it at equal times: advanced to) and a BROKER one at 1030 (before it: not): who ran when."""
    from mqtool.simulate.engine import BROKER

    engine, log = Engine(1000), []
    proc = None

    def sleeper():
        for d in (7, 3, 10, 5, 5):
            log.append((engine.now, "sleeper"))
            went = use_advance and proc.advance(d)
            if took is not None:
                took.append(went)
            if not went:
                yield d
        log.append((engine.now, "sleeper-end"))

    def tick():
        while True:
            log.append((engine.now, "tick"))
            yield 30

    proc = engine.process(sleeper(), TIMER_DEQUEUE)
    engine.process(tick(), SCHEDULE, 1)
    engine.schedule(lambda: log.append((engine.now, "broker")), BROKER, 30)
    engine.schedule(lambda: log.append((engine.now, "normal")), NORMAL, 20)
    engine.run(until=1050)
    return log, engine.now


def test_advance_is_a_yield_without_the_queue():
    assert _advance_trace(True) == _advance_trace(False)
    took: list[bool] = []
    log, now = _advance_trace(True, took)
    assert took == [False, True, True, False, False]  # 1001's tick, then advanced to 1010 and 1020
    assert log == [
        (1000, "sleeper"),
        (1001, "tick"),
        (1007, "sleeper"),
        (1010, "sleeper"),
        (1020, "sleeper"),
        (1020, "normal"),
        (1025, "sleeper"),
        (1030, "broker"),
        (1030, "sleeper-end"),
        (1031, "tick"),
    ]
    assert now == 1050
