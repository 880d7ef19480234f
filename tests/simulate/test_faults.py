"""Fault processes (`simulate/faults.py`) on tiny scenarios, driving services through the Service protocol.

The engine starts at 1000; scenario times are ms after it. Services here only record what the
broker did to them, so every expected call is written out by hand.
"""

import random

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import Engine
from mqtool.simulate.events import EventLog
from mqtool.simulate.faults import schedule_faults
from mqtool.simulate.model import MemoryBase, SimMessage, StoreModel
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.schedule import ScheduleService
from mqtool.simulate.service import ClockListener, Service, start_services
from mqtool.simulate.timer import TimerService
from mqtool.simulate.transaction import TransactionService

T0 = 1000


class Recorder:
    """A service that records (engine time, name, call)."""

    def __init__(self, ctx: SimContext, name: str, calls: list) -> None:
        self.ctx, self.name, self.calls = ctx, name, calls

    def start(self) -> None:
        self.calls.append((self.ctx.engine.now, self.name, "start"))

    def stop(self, clean: bool) -> None:
        self.calls.append((self.ctx.engine.now, self.name, f"stop clean={clean}"))

    def persist(self) -> None:
        self.calls.append((self.ctx.engine.now, self.name, "persist"))


class ClockRecorder(Recorder):
    def on_clock_jump(self) -> None:
        self.calls.append((self.ctx.engine.now, self.name, f"clock jump, broker clock {self.ctx.clock()}"))


def run(faults: list[dict], until: int) -> tuple[SimContext, list]:
    ctx = SimContext(
        Engine(T0),
        StoreModel(MemoryBase()),
        EventLog(),
        BrokerConfig(),
        parse_scenario({"faults": faults}, T0),
        random.Random(0),
    )
    calls: list = []
    ctx.services += [Recorder(ctx, "a", calls), ClockRecorder(ctx, "b", calls)]
    schedule_faults(ctx, T0 + until)
    start_services(ctx)
    ctx.engine.run(until=T0 + until)
    return ctx, calls


def broker_events(ctx):
    return [(e.time, e.event, e.detail) for e in ctx.log if e.service == "broker"]


def test_services_satisfy_the_protocol():
    ctx = SimContext(
        Engine(T0), StoreModel(MemoryBase()), EventLog(), BrokerConfig(), parse_scenario({}, T0), random.Random(0)
    )
    services = [ScheduleService(ctx, None), TimerService(ctx), TransactionService(ctx)]
    assert all(isinstance(s, Service) for s in services) and not isinstance(object(), Service)
    assert [isinstance(s, ClockListener) for s in services] == [True, True, False]


def test_crash_stops_services_unclean_and_restarts_them():
    ctx, calls = run([{"kind": "crash", "from": 5000, "until": 8000}], 20_000)
    assert calls == [
        (1000, "a", "start"),
        (1000, "b", "start"),
        (6000, "a", "stop clean=False"),
        (6000, "b", "stop clean=False"),
        (9000, "a", "start"),
        (9000, "b", "start"),
    ]
    assert broker_events(ctx) == [(6000, "crash", {"restart_at": 9000}), (9000, "restart", {})]
    assert ctx.running


def test_crash_while_down_is_ignored_and_one_outside_the_run_never_happens():
    ctx, calls = run(
        [
            {"kind": "crash", "from": 5000, "until": 8000},
            {"kind": "crash", "from": 6000, "until": 7000},
            {"kind": "crash", "from": 20_000, "until": 21_000},
        ],
        20_000,
    )
    assert broker_events(ctx) == [(6000, "crash", {"restart_at": 9000}), (9000, "restart", {})]
    assert len(calls) == 6


def test_crash_without_restart_before_the_end_leaves_the_broker_down():
    ctx, calls = run([{"kind": "crash", "from": 5000, "until": 50_000}], 20_000)
    assert calls[-1] == (6000, "b", "stop clean=False") and not ctx.running
    assert broker_events(ctx) == [(6000, "crash", {"restart_at": 51_000})]


def test_clock_jump_moves_the_broker_clock_and_wakes_clock_listeners_only():
    ctx, calls = run(
        [{"kind": "clock_jump", "at": 2000, "delta": "+20s"}, {"kind": "clock_jump", "at": 4000, "delta": -5000}],
        10_000,
    )
    assert calls[2:] == [(3000, "b", "clock jump, broker clock 23000"), (5000, "b", "clock jump, broker clock 20000")]
    assert broker_events(ctx) == [
        (3000, "clock_jump", {"delta_ms": 20_000, "clock": 23_000}),
        (5000, "clock_jump", {"delta_ms": -5000, "clock": 20_000}),
    ]
    assert ctx.clock_offset == 15_000


def test_put_failure_refuses_puts_in_its_window_by_engine_time():
    """Window [T0 + 1000, T0 + 2000) for the schedule service; the broker clock (first argument) is ignored."""
    ctx = SimContext(
        Engine(T0),
        StoreModel(MemoryBase()),
        EventLog(),
        BrokerConfig(),
        parse_scenario(
            {
                "faults": [
                    {
                        "kind": "put_failure",
                        "from": 1000,
                        "until": 2000,
                        "service": "schedule",
                        "status": "FLUSH_DISK_TIMEOUT",
                    }
                ]
            },
            T0,
        ),
        random.Random(0),
    )
    schedule_faults(ctx, T0 + 10_000)
    refuse = ctx.model.put_filter
    msg = SimMessage("T", 0, {})
    seen = []
    for t in (1999, 2000, 2999, 3000):
        ctx.engine.schedule(
            lambda: seen.append((ctx.engine.now, refuse(0, msg, "schedule"), refuse(0, msg, "timer"))),
            delay=t - ctx.engine.now,
        )
    ctx.engine.run(until=T0 + 10_000)
    assert seen == [
        (1999, None, None),
        (2000, "FLUSH_DISK_TIMEOUT", None),
        (2999, "FLUSH_DISK_TIMEOUT", None),
        (3000, None, None),
    ]
    res = ctx.model.append(msg, 0, "schedule")
    assert res.ok  # engine time is past the window now


def test_no_put_failure_no_filter():
    ctx = SimContext(
        Engine(T0),
        StoreModel(MemoryBase()),
        EventLog(),
        BrokerConfig(),
        parse_scenario({"faults": [{"kind": "crash", "from": 1}]}, T0),
        random.Random(0),
    )
    schedule_faults(ctx, T0 + 10)
    assert ctx.model.put_filter is None
