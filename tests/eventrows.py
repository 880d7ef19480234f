"""Rows of events handed to `EventLog.batch` as its columns: the tests write their events as rows."""

from collections.abc import Iterable

from mqtool.simulate.eventlines import ROW_NAMES
from mqtool.simulate.events import EventLog, SimEvent
from mqtool.simulate.invariants import InvariantCheck
from mqtool.simulate.tally import DeliveryTally


def put_rows(log: EventLog, time, service: str, event: str, rows: list, keys: tuple[str, ...]) -> None:
    """`rows` of `(topic, queue_id, uniq_key, physical_offset, new_physical_offset, *detail)` at `time`, or,
    with `time` None, of `(time, topic, ...)`: one `batch` call. ValueError for a row of another width."""
    if not rows:
        return
    width = 5 + len(keys) + (time is None)
    if any(len(r) != width for r in rows):
        raise ValueError(f"a row not of {width} values")
    cols = [list(c) for c in zip(*rows, strict=True)]
    if time is not None:
        cols.insert(0, time)
    time, topic, queue_id, uniq_key, phys, new_phys, *detail = cols
    log.batch(time, service, event, topic, queue_id, uniq_key, phys, new_phys, **dict(zip(keys, detail, strict=True)))


def check_invariants(events: Iterable[SimEvent], faults: list, halves: dict[str, str]) -> list[str]:
    """The violations of an event history: its deliveries and rolls recorded into a log an `InvariantCheck`
    watches, as a run's check watches the run's log."""
    log, tally = EventLog(hold=False), DeliveryTally(0, 1)
    log.watch_columns("deliver", tally.columns)
    check = InvariantCheck(faults).watch(log, tally)
    for e in events:
        if e.event in ("deliver", "roll"):
            log.emit(e.time, e.service, e.event, *(getattr(e, k) for k in ROW_NAMES), **e.detail)
    log.flush()
    problems = check.finish(halves)
    tally.keys.close()
    return problems
