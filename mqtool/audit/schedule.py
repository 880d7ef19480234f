"""`schedule` (spec §4): delay-level queues against config/delayOffset.json (driver side).

Per level: the stored offset must lie within the queue's [min, max] (`correctDelayOffset` clamps
it at start-up; #1869, #4226, #7077); messages from the stored offset on whose deliver time
(tagsCode) is before the store's now are overdue. The tagsCode rule itself is checked per unit in
the ConsumeQueue task (`consumequeue.py`).
"""

from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC
from mqtool.rules.schedule import (
    correct_delay_offset,
    delay_level_2_queue_id,
    is_level_started,
    queue_id_2_delay_level,
)
from mqtool.store.findings import Finding, Findings

CHECK = "schedule"
FILE = "config/delayOffset.json"


def check(delay_offsets: dict[int, int] | None, queues: dict[int, dict], tags: dict[int, list[tuple[int, int]]],
          levels: list[int], now: int, findings: Findings) -> dict:
    """`queues`: queue id → {"min", "max"} of SCHEDULE_TOPIC_XXXX; `tags`: queue id → [(offset, tagsCode)];
    `levels`: the delay levels' delays (`delayLevelTable`). Findings go to `findings`; returns the per-level
    summary. A level missing from the table has no task (`is_level_started`): its messages are never
    delivered, so none of them is overdue, and `correctDelayOffset` leaves its offset alone."""
    summary: dict = {}
    stored = delay_offsets or {}
    for level in sorted(set(stored) | {queue_id_2_delay_level(q) for q in queues}):
        qid = delay_level_2_queue_id(level)
        q = queues.get(qid, {"min": 0, "max": 0})
        off = stored.get(level)
        start = off if off is not None else 0
        if not is_level_started(level, levels):
            waiting = len([o for o, _ in tags.get(qid, []) if o >= start])
            findings.append(Finding(FILE, None, CHECK, "warning",
                                    f"level {level} is not configured (messageDelayLevel has {len(levels)} levels): "
                                    f"ScheduleMessageService starts no task for it; {waiting} message(s) in it are "
                                    "never delivered while it is missing", RMQ_SYS_SCHEDULE_TOPIC, qid))
            summary[str(level)] = {"stored_offset": off, "min": q["min"], "max": q["max"], "pending": waiting,
                                   "overdue": 0}
            continue
        fixed = correct_delay_offset(off, q["min"], q["max"])
        if fixed != off:
            findings.append(Finding(FILE, None, CHECK, "error",
                                    f"level {level}: stored offset {off} is outside the queue's [{q['min']}, "
                                    f"{q['max']}]; the broker's start-up correction sets it to {fixed}",
                                    RMQ_SYS_SCHEDULE_TOPIC, qid))
            start = fixed
        due = [(o, t) for o, t in tags.get(qid, []) if o >= start]
        overdue = [(o, t) for o, t in due if t <= now]
        if overdue:
            o, t = min(overdue, key=lambda x: x[1])
            findings.append(Finding(FILE, None, CHECK, "warning",
                                    f"level {level}: {len(overdue)} message(s) overdue at the store's now {now}; "
                                    f"the oldest (queue offset {o}) was due at {t}, {now - t} ms earlier",
                                    RMQ_SYS_SCHEDULE_TOPIC, qid))
        summary[str(level)] = {"stored_offset": off, "min": q["min"], "max": q["max"], "pending": len(due),
                               "overdue": len(overdue)}
    return summary
