"""The engine: tie order, resumable run, typed errors (SimPy's exact-log style)."""

import pytest

from mqtool.simulate.engine import NORMAL, SCHEDULE, TIMER_DEQUEUE, EmptySchedule, Engine


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
    assert log == [(1001, "early"), (1005, "timer"), (1005, "schedule"), (1005, "normal-a"),
                   (1005, "normal-b")]


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
    assert engine.peek() == float("inf")
    with pytest.raises(EmptySchedule):
        engine.step()


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
