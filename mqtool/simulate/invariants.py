"""Invariant checks over a simulation's event stream (issue #4).

- never delivered before its due time (skipped for runs with clock jumps, which legitimately move
  the broker's clock);
- each timer message is delivered at most once per roll, and each delay-level message at most once,
  when no crash or put failure is scheduled;
- every half message ends resolved (commit/rollback), discarded/skipped, or pending with a reason.

`InvariantCheck` watches the events as they pass (`EventLog.watch_columns`: in batches of columns),
so a run of millions of events never holds its history: the due-time check needs nothing, the
delivered and rolled keys are spooled with the summary's (`DeliveryTally.keys`, a `KeyTally`: 9 bytes an event
in memory, exact counts for the keys that repeat).
"""

from __future__ import annotations

from itertools import repeat
from operator import lt

from mqtool.simulate.events import Columns
from mqtool.simulate.tally import ROLL, SCHEDULE, TIMER, DeliveryTally, KeyTally

_SERVICES = ("schedule", "timer")


class InvariantCheck:
    """Fed the deliveries and rolls of an `EventLog` in blocks (`watch`), it gives the violations at the end
    (`finish`)."""

    def __init__(self, faults: list) -> None:
        kinds = {f.kind for f in faults}
        self.check_due = "clock_jump" not in kinds
        self.count_deliveries = not kinds & {"crash", "put_failure"}
        self.problems: list[str] = []
        self.shared: KeyTally | None = None

    def watch(self, log, tally: DeliveryTally) -> InvariantCheck:
        """Watch `log`'s deliveries and rolls; the delivered keys are counted from `tally`'s (the summary's,
        watching the same log: hashed and spooled once, `DeliveryTally.keys`)."""
        self.shared = tally.keys if self.count_deliveries else None
        log.watch_columns("deliver", self.deliveries)
        log.watch_columns("roll", self.rolled)
        return self

    def deliveries(self, cols: Columns) -> None:
        """A block of `deliver` events (`EventLog.watch_columns`): none before its due time."""
        services, times, dues, keys = cols["service"], cols["time"], cols["due"], cols["uniq_key"]
        if self.check_due and _early(times, dues):
            for service, t, due, key in zip(services, times, dues, keys, strict=True):  # in event order
                if service in _SERVICES and due is not None and t < due:
                    self.problems.append(f"{service} delivered {key} at {t}, before its due time {due}")

    def rolled(self, cols: Columns) -> None:
        """A block of `roll` events: their keys, for the timer's deliveries a roll explains."""
        if self.shared is not None:
            keys = cols["uniq_key"]
            keys = [k for k in keys if k is not None] if None in keys else keys
            self.shared.extend(keys, repeat(ROLL, len(keys)))

    def finish(self, halves: dict[str, str]) -> list[str]:
        """The violations: early deliveries in event order, repeated deliveries by service and key, unknown halves."""
        problems = list(self.problems)
        if self.count_deliveries:
            repeated = {s: self.shared.repeated_by(SCHEDULE if s == "schedule" else TIMER) for s in _SERVICES}
            rolls = self.shared.repeated_by(ROLL)
            for service in _SERVICES:
                for key, n in sorted(repeated[service].items()):
                    if n > 1 + (rolls.get(key, 0) if service == "timer" else 0):
                        problems.append(f"{service} delivered {key} {n} times without a fault")
        for key, state in sorted(halves.items()):
            if state not in ("commit", "rollback", "discard", "skip", "pending"):
                problems.append(f"half message {key} ended in an unknown state {state!r}")
        return problems


def _early(times: list[int], dues: list) -> bool:
    """Whether an event may have been delivered before its due time (one without a due time never
    was); true is checked event by event."""
    if None in dues:
        return any(due is not None and t < due for t, due in zip(times, dues, strict=True))
    return any(map(lt, times, dues))
