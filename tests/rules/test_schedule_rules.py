"""`mqtool.rules.schedule` against values worked out by hand from ScheduleMessageService / CommitLog."""

import numpy as np
import pytest

from mqtool.rules.schedule import (
    compute_deliver_timestamp,
    correct_delay_offset,
    correct_deliver_timestamp,
    correct_deliver_timestamps,
    delay_level,
    delay_level_2_queue_id,
    first_delivery_after_start,
    is_level_started,
    level_delay_ms,
    offset_after_failed_put,
    queue_id_2_delay_level,
    schedule_tags_code,
    transform_delay_level,
    transform_delay_level_message,
)

# messageDelayLevel default "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
LEVELS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000, 540000,
          600000, 1200000, 1800000, 3600000, 7200000]


@pytest.mark.parametrize("stored, lo, hi, expected", [
    (None, 0, 5, None),  # no stored offset: correctDelayOffset skips the level
    (3, 0, 5, 3),  # inside
    (0, 2, 5, 2),  # below the min (files deleted): the min
    (9, 0, 5, 5),  # beyond the max: the max
    (5, 0, 5, 5),  # at max: unchanged (max is one past the last unit)
    (4, 6, 3, 3),  # min > max: both `if`s test the stored value, the second (max) wins
    (7, 6, 3, 3),
])
def test_correct_delay_offset(stored, lo, hi, expected):
    assert correct_delay_offset(stored, lo, hi) == expected


def test_compute_deliver_timestamp_level_delay_or_one_second():
    assert compute_deliver_timestamp(3, 1_700_000_000_000, LEVELS) == 1_700_000_010_000
    assert compute_deliver_timestamp(18, 100, LEVELS) == 7_200_100
    # a level missing from delayLevelTable: storeTimestamp + 1000
    assert compute_deliver_timestamp(19, 100, LEVELS) == 1100
    assert compute_deliver_timestamp(0, 100, LEVELS) == 1100


@pytest.mark.parametrize("delay, expected", [
    ("3", 3), ("+3", 3), ("25", 18),  # clamped down to the max level
    ("0", 0), ("-2", -2),  # not clamped up
    (None, None), ("", None), (" 3", None), ("3 ", None), ("1_0", None), ("abc", None),
    ("2147483648", None),  # beyond Integer.MAX_VALUE: parseInt throws
])
def test_delay_level_as_integer_parse_int_reads_it(delay, expected):
    assert delay_level(delay, 18) == expected


def test_schedule_tags_code():
    assert schedule_tags_code("2", 1000, LEVELS) == 6000
    assert schedule_tags_code("99", 1000, LEVELS) == 1000 + 7_200_000  # level 18
    assert schedule_tags_code("0", 1000, LEVELS) is None  # no deliver time: the TAGS hash stays
    assert schedule_tags_code(None, 1000, LEVELS) is None


def test_correct_deliver_timestamp():
    # level 2 (5 s): a deliver time up to now + 5000 stands
    assert correct_deliver_timestamp(10_000, 15_000, 5000) == 15_000
    assert correct_deliver_timestamp(10_000, 9_000, 5000) == 9_000  # overdue: unchanged
    # too far in the future (clock moved back an hour): treated as now, delivered at once
    assert correct_deliver_timestamp(10_000, 15_001, 5000) == 10_000
    assert correct_deliver_timestamp(10_000, 3_600_000 + 10_000, 5000) == 10_000


def test_failed_put_skips_in_5_3_and_retries_in_4_9():
    assert offset_after_failed_put(7, v4=False) == 8
    assert offset_after_failed_put(7, v4=True) == 7


def test_level_and_queue_id():
    assert [delay_level_2_queue_id(lv) for lv in (1, 18)] == [0, 17]
    assert [queue_id_2_delay_level(q) for q in (0, 17)] == [1, 18]


def test_a_level_missing_from_the_table_has_no_task():
    three = [1000, 5000, 10000]  # messageDelayLevel=1s 5s 10s
    assert [level_delay_ms(lv, three) for lv in (0, 1, 3, 4, 18)] == [None, 1000, 10000, None, None]
    assert [is_level_started(lv, three) for lv in (0, 1, 3, 4, 18)] == [False, True, True, False, False]
    assert is_level_started(18, LEVELS) and not is_level_started(19, LEVELS)


@pytest.mark.parametrize("level, max_level, expected", [(20, 18, 18), (18, 18, 18), (3, 18, 3), (18, 3, 3),
                                                        (0, 18, 0), (-1, 18, -1)])
def test_transform_delay_level_clamps_down_only(level, max_level, expected):
    assert transform_delay_level(level, max_level) == expected


def test_correct_deliver_timestamps_is_the_rule_per_element():
    tags = [9_000, 15_000, 15_001, 3_610_000]
    got = correct_deliver_timestamps(10_000, np.array(tags, dtype=np.int64), 5000).tolist()
    assert got == [correct_deliver_timestamp(10_000, t, 5000) for t in tags] == [9_000, 15_000, 10_000, 10_000]


@pytest.mark.parametrize("tags, delay, expected", [
    (500, 1000, 2000),  # overdue: the first task, start (1000) + FIRST_DELAY_TIME
    (2000, 1000, 2000),  # due exactly then
    (2001, 1000, 2100),  # not due at the first poll: the next 100 ms poll
    (2100, 1000, 2100),
    (7_201_032, 7_200_000, 7_201_100),  # D18 of fixtures/demo, relative to its stop
    (9_999_999, 1000, 2000),  # beyond the first poll + delay: correctDeliverTimestamp makes it due at once
])
def test_first_delivery_after_start(tags, delay, expected):
    assert first_delivery_after_start(1000, tags, delay) == expected


def test_transform_delay_level_message_parks_the_record():
    """5.x: the timer properties go, a level past the table's 18 is stored as 18, REAL_TOPIC and REAL_QID
    are appended after the keys already there; the caller's map is left alone."""
    asked = {"DELAY": "20", "TIMER_DELAY_SEC": "5", "KEYS": "k1", "UNIQ_KEY": "U"}
    props, level = transform_delay_level_message(asked, "%RETRY%G", 3, 18, v5=True)
    assert level == 18
    assert list(props.items()) == [
        ("DELAY", "18"),
        ("KEYS", "k1"),
        ("UNIQ_KEY", "U"),
        ("REAL_TOPIC", "%RETRY%G"),
        ("REAL_QID", "3"),
    ]
    assert asked["DELAY"] == "20" and "REAL_TOPIC" not in asked


def test_transform_delay_level_message_in_4_9_keeps_the_timer_properties():
    """4.9.8 has no timer: TIMER_DELAY_SEC is just a property; a level inside the table is kept; a REAL_TOPIC
    already there is overwritten in its place."""
    props, level = transform_delay_level_message(
        {"REAL_TOPIC": "old", "DELAY": "3", "TIMER_DELAY_SEC": "5"}, "T", 0, 18, v5=False
    )
    assert level == 3
    assert list(props.items()) == [("REAL_TOPIC", "T"), ("DELAY", "3"), ("TIMER_DELAY_SEC", "5"), ("REAL_QID", "0")]
