"""`ScheduleMessageService` rules: delay-level offsets and deliver times (spec §4).

Read at `rocketmq-all-5.3.1` (`broker/.../schedule/ScheduleMessageService.java`, `CommitLog.java`)
and `rocketmq-all-4.9.8` (`store/.../schedule/ScheduleMessageService.java`); the rules below are the
same in both. The versions differ only in the delivery task (5.3.1 records a not-yet-due unit as the
level's offset, and skips a unit whose put failed): see `offset_after_failed_put`.
"""

from mqtool.rules.java import parse_int

FALLBACK_DELAY_MS = 1000  # computeDeliverTimestamp: a level missing from delayLevelTable


def correct_delay_offset(stored: int | None, min_offset: int, max_offset: int) -> int | None:
    """`ScheduleMessageService.correctDelayOffset` for one level (spec §4.9): clamp into [min, max].

    A level with no stored offset (None) is left alone. Both tests look at the stored value, so
    when min > max (a damaged queue) the max wins. `DeliverDelayedMessageTimerTask.executeOnTimeUp`
    resets a task's offset it cannot read from the same way (there min would win over a max below
    it, which no readable queue has).
    """
    if stored is None:
        return None
    corrected = stored
    if stored < min_offset:
        corrected = min_offset
    if stored > max_offset:
        corrected = max_offset
    return corrected


def compute_deliver_timestamp(delay_level: int, store_timestamp: int, delay_levels_ms: list[int]) -> int:
    """`ScheduleMessageService.computeDeliverTimestamp` (spec §4.3): store time + the level's delay.

    `delay_levels_ms[i]` is level i + 1 (`parseDelayLevel`); a level not in the table gets 1000 ms.
    """
    if 1 <= delay_level <= len(delay_levels_ms):
        return store_timestamp + delay_levels_ms[delay_level - 1]
    return store_timestamp + FALLBACK_DELAY_MS


def schedule_tags_code(delay: str | None, store_timestamp: int, delay_levels_ms: list[int]) -> int | None:
    """The tagsCode `CommitLog.checkMessageAndReturnSize` writes for a SCHEDULE_TOPIC_XXXX record.

    The level is `Integer.parseInt(DELAY)` clamped down to the max level; a level > 0 gives
    `computeDeliverTimestamp(level, storeTimestamp)`. None: no deliver time (DELAY absent, not an
    int, or <= 0; the broker then keeps the TAGS hash, or refuses the unparsable record).
    """
    level = delay_level(delay, len(delay_levels_ms))
    if level is None or level <= 0:
        return None
    return compute_deliver_timestamp(level, store_timestamp, delay_levels_ms)


def delay_level(delay: str | None, max_delay_level: int) -> int | None:
    """The level of a DELAY property as the CommitLog reads it: parsed, clamped down to the max."""
    level = parse_int(delay)
    return None if level is None else min(level, max_delay_level)


def correct_deliver_timestamp(now: int, deliver_timestamp: int, delay_ms: int) -> int:
    """`DeliverDelayedMessageTimerTask.correctDeliverTimestamp` (spec §4.5).

    A deliver time beyond now + the level's delay (a clock moved back, a level shortened in the
    config) is treated as now, so the unit is due at once.
    """
    if deliver_timestamp > now + delay_ms:
        return now
    return deliver_timestamp


def offset_after_failed_put(unit_offset: int, v4: bool) -> int:
    """Where the next task of a level starts after a sync put of the unit failed (spec §4.4, §4.11).

    5.3.1 (`executeOnTimeUp`) reschedules at `nextOffset` = unit + 1, so the failed message is
    skipped once a later unit moves the offset; 4.9.8 (`executeOnTimeup`) retries the same unit.
    """
    return unit_offset if v4 else unit_offset + 1
