"""Invariant checks over a simulation's event stream (issue #4).

- never delivered before its due time (skipped for runs with clock jumps, which legitimately move
  the broker's clock);
- each timer message is delivered at most once per roll, and each delay-level message at most once,
  when no crash or put failure is scheduled;
- every half message ends resolved (commit/rollback), discarded/skipped, or pending with a reason.

`InvariantCheck` watches the events as they pass (`EventLog.watch_columns`: in batches of columns),
so a run of millions of events never holds its history: the due-time check needs nothing, the
delivery counts are `KeyTally`s (8 bytes an event in memory, exact counts for the keys that repeat).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress
from operator import lt

from mqtool.formats.names import RETRY_GROUP_TOPIC_PREFIX
from mqtool.simulate.events import Columns, EventLog, SimEvent
from mqtool.simulate.tally import SCHEDULE, TIMER, DeliveryTally, KeyTally, TaggedKeys

WATCHED = ("deliver", "roll")
_SERVICES = ("schedule", "timer")


class InvariantCheck:
    """Fed the deliveries and rolls of an `EventLog` in blocks (`watch`), it gives the violations at the end
    (`finish`)."""

    def __init__(self, faults: list) -> None:
        kinds = {f.kind for f in faults}
        self.check_due = "clock_jump" not in kinds
        self.count_deliveries = not kinds & {"crash", "put_failure"}
        self.problems: list[str] = []
        self.delivered = {s: KeyTally() for s in _SERVICES}
        self.rolls = KeyTally()
        self.shared: TaggedKeys | None = None

    def watch(self, log, tally: DeliveryTally | None = None) -> InvariantCheck:
        """Watch `log`'s deliveries and rolls; with the summary's `tally` (watching the same log), the
        delivered keys are counted from its keys (`DeliveryTally.share`: hashed and spooled once)."""
        if tally is not None and self.count_deliveries:
            self.shared = tally.share()
        log.watch_columns("deliver", self.deliveries)
        log.watch_columns("roll", self.rolled)
        return self

    def deliveries(self, cols: Columns) -> None:
        """A block of `deliver` events (`EventLog.watch_columns`): a few passes over its columns."""
        services, times, dues, keys = cols["service"], cols["time"], cols["due"], cols["uniq_key"]
        if self.check_due and _early(times, dues):
            for service, t, due, key in zip(services, times, dues, keys, strict=True):  # in event order
                if service in _SERVICES and due is not None and t < due:
                    self.problems.append(f"{service} delivered {key} at {t}, before its due time {due}")
        if not self.count_deliveries or self.shared is not None:
            return
        kinds = set(services)
        if "schedule" in kinds:
            # a retry is the same message (UNIQ_KEY) parked again: count it by the parked record instead
            topics = cols["topic"]
            if any((t or "").startswith(RETRY_GROUP_TOPIC_PREFIX) for t in set(topics)):
                keys = [
                    f"{k}@{p}" if s == "schedule" and (t or "").startswith(RETRY_GROUP_TOPIC_PREFIX) else k
                    for s, t, k, p in zip(services, topics, keys, cols["physical_offset"], strict=True)
                ]
        for service in _SERVICES:
            if service in kinds:
                mine = keys if len(kinds) == 1 else list(compress(keys, map(service.__eq__, services)))
                self.delivered[service].extend([k for k in mine if k is not None] if None in mine else mine)

    def rolled(self, cols: Columns) -> None:
        """A block of `roll` events: their keys, for the timer's deliveries a roll explains."""
        if self.count_deliveries:
            keys = cols["uniq_key"]
            self.rolls.extend([k for k in keys if k is not None] if None in keys else keys)

    def finish(self, halves: dict[str, str]) -> list[str]:
        """The violations, in the order `check_invariants` always gave them."""
        problems = list(self.problems)
        if self.count_deliveries:
            shared = self.shared
            repeated = {
                s: shared.repeated_by(SCHEDULE if s == "schedule" else TIMER) if shared is not None else t.repeated()
                for s, t in self.delivered.items()
            }
            rolls = self.rolls.counts(set(repeated["timer"]))
            for service in _SERVICES:
                for key, n in sorted(repeated[service].items()):
                    if n > 1 + (rolls[key] if service == "timer" else 0):
                        problems.append(f"{service} delivered {key} {n} times without a fault")
        for key, state in sorted(halves.items()):
            if state not in ("commit", "rollback", "discard", "skip", "pending"):
                problems.append(f"half message {key} ended in an unknown state {state!r}")
        self.close()
        return problems

    def close(self) -> None:
        for t in (*self.delivered.values(), self.rolls):
            t.close()


def check_invariants(events: Iterable[SimEvent] | InvariantCheck, faults: list, halves: dict[str, str]) -> list[str]:
    """Human-readable violations (empty when all hold): of an `InvariantCheck` that watched the run, or of
    an event history (recorded into a log it watches: the same path)."""
    if isinstance(events, InvariantCheck):
        return events.finish(halves)
    log = EventLog(hold=False)
    check = InvariantCheck(faults).watch(log)
    for e in events:
        if e.event in WATCHED:
            log.record(
                e.time,
                e.service,
                e.event,
                e.topic,
                e.queue_id,
                e.uniq_key,
                e.physical_offset,
                e.new_physical_offset,
                e.detail,
                True,
            )
    log.flush()
    return check.finish(halves)


def _early(times: list[int], dues: list) -> bool:
    """Whether an event may have been delivered before its due time (one without a due time never
    was); true is checked event by event."""
    if None in dues:
        return any(due is not None and t < due for t, due in zip(times, dues, strict=True))
    return any(map(lt, times, dues))
