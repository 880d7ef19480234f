"""`ScheduleMessageService` rules: delay-level offsets and deliver times (spec §4).

Read at `rocketmq-all-5.3.1` (`broker/.../schedule/ScheduleMessageService.java`, `CommitLog.java`)
and `rocketmq-all-4.9.8` (`store/.../schedule/ScheduleMessageService.java`); the rules below are the
same in both. The versions differ only in the delivery task (5.3.1 records a not-yet-due unit as the
level's offset, and skips a unit whose put failed): see `offset_after_failed_put`.

A level is a key of `delayLevelTable` (`parseDelayLevel`: entry i of `messageDelayLevel` is level
i + 1); here the table is the list `delay_levels_ms` (`BrokerConfig.delay_levels_ms`), index level - 1.
A level missing from it has no delivery task (`start`): its queue is never delivered while it is missing.
"""

import numpy as np

from mqtool.formats.names import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
)
from mqtool.rules.java import parse_int

FALLBACK_DELAY_MS = 1000  # computeDeliverTimestamp: a level missing from delayLevelTable
FIRST_DELAY_TIME = 1000  # start(): each level's first DeliverDelayedMessageTimerTask, ms after start
DELAY_FOR_A_WHILE = 100  # executeOnTimeUp: the next task after a unit not yet due (or a failed put)


def delay_level_2_queue_id(delay_level: int) -> int:
    """`ScheduleMessageService.delayLevel2QueueId`: level L lives in SCHEDULE_TOPIC_XXXX queue L - 1."""
    return delay_level - 1


def queue_id_2_delay_level(queue_id: int) -> int:
    """`ScheduleMessageService.queueId2DelayLevel`: queue Q of SCHEDULE_TOPIC_XXXX holds level Q + 1."""
    return queue_id + 1


def level_delay_ms(delay_level: int, delay_levels_ms: list[int]) -> int | None:
    """`delayLevelTable.get(level)`: the level's delay, None when `messageDelayLevel` has no such level."""
    if 1 <= delay_level <= len(delay_levels_ms):
        return delay_levels_ms[delay_level - 1]
    return None


def is_level_started(delay_level: int, delay_levels_ms: list[int]) -> bool:
    """`ScheduleMessageService.start`: one `DeliverDelayedMessageTimerTask` per `delayLevelTable` entry.

    False: no task ever reads the level's queue, so its messages are never delivered while the level
    is missing from `messageDelayLevel` (an operator who shortens the list strands them; putting the
    level back delivers them on the next start). `correctDelayOffset` skips such a level too.
    """
    return level_delay_ms(delay_level, delay_levels_ms) is not None


def transform_delay_level(delay_level: int, max_delay_level: int) -> int:
    """The put path's clamp: a DELAY above `maxDelayLevel` becomes the max level (the one clamp policy).

    5.3.1 `HookUtils.transformDelayLevelMessage` and 4.9.8 `CommitLog.asyncPutMessage` rewrite DELAY
    (`setDelayTimeLevel(max)`) before choosing queue `delayLevel2QueueId`; `checkMessageAndReturnSize`
    clamps the same way when it computes the tagsCode. Levels are never clamped up (<= 0 is not a delay).
    """
    return min(delay_level, max_delay_level)


def transform_delay_level_message(
    props: dict[str, str], topic: str, queue_id: int, max_delay_level: int, v5: bool
) -> tuple[dict[str, str], int]:
    """`HookUtils.transformDelayLevelMessage` (4.9.8: inside `CommitLog.asyncPutMessage`): the properties a
    delay-level record is parked with on SCHEDULE_TOPIC_XXXX, and its level (the queue is level - 1).

    5.x first drops the timer properties (`checkIfTimerMessage`: a delay level wins over a timer); a level
    above the table is stored as the max (`transform_delay_level`); REAL_TOPIC / REAL_QID keep where it goes.
    `props` is left as it was: the answer is a copy, in the order the broker writes the keys.
    """
    props = dict(props)
    if v5:
        for name in (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS):
            props.pop(name, None)
    asked = int(props[PROPERTY_DELAY_TIME_LEVEL])
    level = transform_delay_level(asked, max_delay_level)
    if level != asked:
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return props, level


def implied_level_delay_ms(tags_code: int, store_timestamp: int) -> int | None:
    """The level's delay when its unit was stored: `computeDeliverTimestamp` read backwards.

    A SCHEDULE_TOPIC_XXXX unit's tagsCode is storeTimestamp + `delayLevelTable.get(level)` as the broker
    had it then (`checkMessageAndReturnSize`; the put path had clamped the level into the table), so
    the difference is that level's delay. `parseDelayLevel` only makes whole seconds (s, m, h, d
    units), so anything else (a damaged unit, a tagsCode that is no deliver time) implies nothing.
    """
    delay = tags_code - store_timestamp
    return delay if delay > 0 and delay % 1000 == 0 else None


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
    delay = level_delay_ms(delay_level, delay_levels_ms)
    return store_timestamp + (FALLBACK_DELAY_MS if delay is None else delay)


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
    return None if level is None else transform_delay_level(level, max_delay_level)


def correct_deliver_timestamp(now: int, deliver_timestamp: int, delay_ms: int) -> int:
    """`DeliverDelayedMessageTimerTask.correctDeliverTimestamp` (spec §4.5).

    A deliver time beyond now + the level's delay (a clock moved back, a level shortened in the
    config) is treated as now, so the unit is due at once.
    """
    if deliver_timestamp > now + delay_ms:
        return now
    return deliver_timestamp


def correct_deliver_timestamps(now: int, deliver_timestamps: np.ndarray, delay_ms: int) -> np.ndarray:
    """`correctDeliverTimestamp` over an array of tagsCodes (the simulator's batch path)."""
    tags = np.asarray(deliver_timestamps, dtype=np.int64)
    return np.where(tags > now + delay_ms, np.int64(now), tags)


def first_delivery_after_start(start_ms: int, tags_code: int, delay_ms: int) -> int:
    """When a started level's task puts its head unit (tagsCode `tags_code`): `start`, `executeOnTimeUp`.

    The first task runs `FIRST_DELAY_TIME` after the start and corrects the deliver time
    (`correctDeliverTimestamp`, which only the first poll can change); a unit not yet due ends the task
    and the next runs `DELAY_FOR_A_WHILE` later, so the unit goes out at the first poll of that 100 ms
    grid at or after its deliver time. The tasks' own run time, which stretches the grid, is left out.
    """
    first = start_ms + FIRST_DELAY_TIME
    deliver_timestamp = correct_deliver_timestamp(first, tags_code, delay_ms)
    if deliver_timestamp <= first:
        return first
    return first - (first - deliver_timestamp) // DELAY_FOR_A_WHILE * DELAY_FOR_A_WHILE


def offset_after_failed_put(unit_offset: int, v4: bool) -> int:
    """Where the next task of a level starts after a sync put of the unit failed (spec §4.4, §4.11).

    5.3.1 (`executeOnTimeUp`) reschedules at `nextOffset` = unit + 1, so the failed message is
    skipped once a later unit moves the offset; 4.9.8 (`executeOnTimeup`) retries the same unit.
    """
    return unit_offset if v4 else unit_offset + 1
