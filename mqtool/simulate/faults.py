"""Scenario faults as engine processes: a crash and restart, a jump of the broker's clock, put failures.

Each timed fault is a process at `BROKER` priority, so at its time it acts before any service.
A put failure acts on single puts instead: it is the store model's put filter, refusing a put
while one of the scenario's `put_failure` windows is open (`Scenario.put_failure`).
"""

from __future__ import annotations

from collections.abc import Generator

from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import BROKER
from mqtool.simulate.service import ClockListener, start_services, stop_services


def crash(ctx: SimContext, restart_at: int) -> Generator[int, None, None]:
    """A hard crash now (services stop unclean, unpersisted state is lost); restart at `restart_at`."""
    if not ctx.running:
        return  # already down
    ctx.log.batch(ctx.engine.now, "broker", "crash", restart_at=restart_at)
    stop_services(ctx, clean=False)
    yield max(restart_at, ctx.engine.now) - ctx.engine.now
    ctx.log.batch(ctx.engine.now, "broker", "restart")
    start_services(ctx)


def clock_jump(ctx: SimContext, delta: int) -> Generator[int, None, None]:
    """`System.currentTimeMillis()` moves by `delta` ms; services that sleep until a broker time re-time."""
    ctx.clock_offset += delta
    ctx.log.batch(ctx.engine.now, "broker", "clock_jump", delta_ms=delta, clock=ctx.clock())
    for s in ctx.services:
        if isinstance(s, ClockListener):
            s.on_clock_jump()
    yield from ()


def schedule_faults(ctx: SimContext, until_ms: int) -> None:
    """Install the put filter of the scenario's put failures (the status of a refused put, decided at the engine's
    time, with the run's random source) and start a process for each timed fault (a crash, a clock jump) in
    [now, until_ms)."""
    scenario, engine, rng = ctx.scenario, ctx.engine, ctx.rng
    if any(f.kind == "put_failure" for f in scenario.faults):
        ctx.model.put_filter = lambda _now, m, service: scenario.put_failure(engine.now, service, m.topic, rng)
    now = engine.now
    for f in scenario.faults:
        if now <= f.start < until_ms and f.kind != "put_failure":
            gen = crash(ctx, f.end) if f.kind == "crash" else clock_jump(ctx, f.delta)
            engine.process(gen, BROKER, f.start - now, f"fault-{f.kind}")
