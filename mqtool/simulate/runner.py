"""`simulate()`: replay a store's schedule, timer and transaction-check services on a virtual clock.

The store is opened read-only; the virtual clock starts at `start_ms` (default: the store's own
"now", its newest store timestamp) and the engine runs every service as a process until `until_ms`
(exclusive). The result holds the ordered event log, a summary, and the final state that `--out`
writes as a new store.

A run from the CLI streams: events go to the `sink` file as they happen and are not held, the
summary and the invariant checks count them as they pass (`tally.py`, `invariants.py`), and the
re-put records nobody reads back are not kept unless `keep_records` (`--out` writes them).
"""

from __future__ import annotations

import gc
import random
from dataclasses import dataclass, field
from typing import Any, TextIO

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.simulate.context import SimContext
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.engine import Engine
from mqtool.simulate.events import EventLog
from mqtool.simulate.faults import schedule_faults
from mqtool.simulate.invariants import InvariantCheck
from mqtool.simulate.model import StoreModel
from mqtool.simulate.scenario import Scenario
from mqtool.simulate.schedule import ScheduleService
from mqtool.simulate.service import start_services
from mqtool.simulate.spool import RecordSpool
from mqtool.simulate.tally import DeliveryTally
from mqtool.simulate.timer import TimerService, recovered_state
from mqtool.simulate.transaction import TransactionService

VERSIONS = ("5.3", "4.9")


@dataclass
class SimulationResult:
    events: EventLog
    summary: dict[str, Any]
    seed: int
    start_ms: int
    until_ms: int
    broker_version: str
    violations: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


def default_start(store) -> int:
    """The store's own "now" (`Store.last_activity_ms`): where a restarted broker's clock picks up."""
    return store.last_activity_ms()


def simulate(
    store,
    config: BrokerConfig,
    start_ms: int | None,
    until_ms: int,
    scenario: Scenario | None = None,
    seed: int = 0,
    broker_version: str = "5.3",
    *,
    base=None,
    keep_events: bool = True,
    timer_state: dict | None = None,
    sink: TextIO | None = None,
    hold_events: bool | None = None,
    keep_records: bool | None = None,
) -> SimulationResult:
    """Run the services from `start_ms` to `until_ms` (virtual epoch ms) and return what happened.

    `store` is a `mqtool.store.Store` (or None with `base`, a `MemoryBase`, and `timer_state`
    giving `timercheck`/`units`/`end` for tests and the benchmark). `sink` receives the event log
    as JSON Lines while the run goes on; `hold_events` (default: without a sink) also keeps the
    events in `result.events`. `keep_records` (default: when events are held) keeps every re-put
    record in the model, as `--out` needs; scenario consumers always get the records they read.
    `keep_events=False` only counts events (benchmarks).
    """
    if broker_version not in VERSIONS:
        raise ValueError(f"--broker-version must be one of {', '.join(VERSIONS)}, got {broker_version!r}")
    scenario = scenario or Scenario()
    config = config.with_overrides(scenario.broker, source="scenario [broker]")
    if base is None:
        base = MappedBase(store)
    if start_ms is None:
        start_ms = store.last_activity_ms() if store is not None else 0
    if until_ms <= start_ms:
        raise ValueError(f"--until ({until_ms}) must be after --start ({start_ms})")
    v4 = broker_version.startswith("4")
    engine = Engine(start_ms)
    log = EventLog(keep=keep_events, sink=sink, hold=hold_events)
    keep_records = keep_events and ((log.hold if keep_records is None else keep_records) or bool(scenario.consumers))
    model = StoreModel(base, capacity=16 if v4 else 128, keep_messages=keep_records, trailing_separator=not v4)
    # nothing reads a re-put again once its reader has passed it, unless a crash replays, an answer ends a
    # checked copy later or consumers read the system topics: then every kept record stays
    answers = scenario.answers or scenario.default_answer != "none"
    model.releasing = not keep_records and not (scenario.faults or scenario.consumers or answers)
    if model.releasing:
        model.spool = RecordSpool()
    deliveries = DeliveryTally(start_ms, until_ms)
    log.watch_columns("deliver", deliveries.columns)
    checks = InvariantCheck(scenario.faults).watch(log, deliveries) if keep_events else None
    ctx = SimContext(engine, model, log, config, scenario, random.Random(seed), broker_version)

    delay_offsets = store.config_files.delay_offsets if store is not None else None
    schedule = ScheduleService(ctx, dict(delay_offsets.offset_table) if delay_offsets else None)
    ctx.services.append(schedule)
    timer = None
    if not v4 and config.timer_wheel_enable:
        ts = timer_state if timer_state is not None else recovered_state(store)
        if ts is not None:
            timer = TimerService(ctx, **ts)
            ctx.services.append(timer)
    tx = TransactionService(ctx, store.config_files.consumer_offsets if store is not None else None)
    ctx.services.append(tx)
    consumers = None
    if scenario.consumers:  # consumer groups (simulate/consumer.py): only when the scenario has some
        from mqtool.simulate.consumer import ConsumerService

        files = store.config_files if store else None
        consumers = ConsumerService(
            ctx, scenario.consumers, files and files.consumer_offsets, files and files.subscription_groups
        )
        ctx.services.append(consumers)
    schedule_faults(ctx, until_ms)

    # The run allocates millions of long-lived, acyclic objects (records, units, events); the cyclic
    # collector would rescan them again and again and find nothing, so it is paused for the run and
    # for the passes over the event history that follow it.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start_services(ctx)
        engine.run(until=until_ms)
        halves = dict(tx.resolved)
        pending = tx.pending_halves() if ctx.running else []
        for p in pending:
            halves.setdefault(p["uniq_key"] or str(p["physical_offset"]), "pending")
        log.flush()
        violations = checks.finish(halves) if checks is not None else []
        summary = {
            "version": 1,
            "seed": seed,
            "broker_version": broker_version,
            "start": start_ms,
            "until": until_ms,
            "events": len(log),
            "events_by_kind": dict(sorted(log.by_kind.items())),
            "deliveries_per_topic": dict(sorted(deliveries.per_topic.items())),
            "delay_backlog_per_level": {str(k): v for k, v in sorted(schedule.backlog().items())},
            "delay_offsets": {str(k): v for k, v in sorted(schedule.offsets.items())},
            "pending_timers": timer.pending() if timer is not None else 0,
            "timer_topic_unread": (model.cq_max(TIMER_TOPIC, 0) - timer.st.curr_queue_offset) if timer else 0,
            "pending_half_messages": len(pending),
            "pending_halves": pending,
            "check_rounds": tx.rounds,
            "duplicates": deliveries.duplicates(),
            "timeline": deliveries.timeline_list(),
            "invariant_violations": violations,
        }
        if consumers is not None:
            summary["consumers"] = consumers.summary()
    finally:
        deliveries.keys.close()
        if model.spool is not None:
            model.spool.close()
        if isinstance(base, MappedBase):
            base.close()
        if gc_was_enabled:
            gc.enable()
        log.close()  # the event writer thread: gone before the sink is closed (a failed write raises)
    state = {
        "schedule_offsets": dict(schedule.offsets),
        "consumer_offsets": dict(tx.offsets),
        "timer": timer,
        "model": model,
        "transaction": tx,
        "config": config,
        "consumers": consumers,
    }
    return SimulationResult(log, summary, seed, start_ms, until_ms, broker_version, violations, state)
