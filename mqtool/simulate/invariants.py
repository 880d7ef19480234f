"""Invariant checks over a simulation's event history (issue #4).

- never delivered before its due time (skipped for runs with clock jumps, which legitimately move
  the broker's clock);
- each timer message is delivered at most once per roll, and each delay-level message at most once,
  when no crash or put failure is scheduled;
- every half message ends resolved (commit/rollback), discarded/skipped, or pending with a reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mqtool.formats.names import RETRY_GROUP_TOPIC_PREFIX
from mqtool.simulate.events import SimEvent


def check_invariants(events: Iterable[SimEvent], faults: list, halves: dict[str, str]) -> list[str]:
    """Human-readable violations (empty when all hold)."""
    kinds = {f.kind for f in faults}
    problems: list[str] = []
    delivered: Counter[tuple[str, str | None]] = Counter()
    rolls: Counter[str | None] = Counter()
    for e in events:
        if e.event == "deliver" and e.service in ("schedule", "timer"):
            due = e.detail.get("due")
            if "clock_jump" not in kinds and due is not None and e.time < due:
                problems.append(f"{e.service} delivered {e.uniq_key} at {e.time}, before its due time {due}")
            # a retry is the same message (UNIQ_KEY) parked again: count it by the parked record instead
            retry = e.service == "schedule" and (e.topic or "").startswith(RETRY_GROUP_TOPIC_PREFIX)
            delivered[(e.service, f"{e.uniq_key}@{e.physical_offset}" if retry else e.uniq_key)] += 1
        elif e.event == "roll":
            rolls[e.uniq_key] += 1
    if not kinds & {"crash", "put_failure"}:
        for (service, key), n in sorted(delivered.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            if n > 1 + (rolls[key] if service == "timer" else 0) and key is not None:
                problems.append(f"{service} delivered {key} {n} times without a fault")
    for key, state in sorted(halves.items()):
        if state not in ("commit", "rollback", "discard", "skip", "pending"):
            problems.append(f"half message {key} ended in an unknown state {state!r}")
    return problems
