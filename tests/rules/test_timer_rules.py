"""`mqtool.rules.timer` against values worked out by hand from TimerMessageStore.doEnqueue/dequeue."""

from operator import itemgetter

import pytest

from mqtool.rules.timer import (
    END,
    FIRST,
    LOOP,
    MISSING,
    build_delete_key,
    do_enqueue,
    do_put_retry,
    is_cancel_request,
    is_deleted,
    need_delete,
    need_retry_sleep,
    need_roll,
    slot_num_delta,
    timer_out_ms,
    walk_chain,
)

P = 1000  # timerPrecisionMs
W = 172800  # timerRollWindowSlot default: 2 days of slots
T0 = 1_790_000_000_000  # a write time (on the precision grid)


def test_magic_bits():
    assert [need_roll(m) for m in (1, 3, 5, 7)] == [False, True, False, True]
    assert [need_delete(m) for m in (1, 3, 5, 7)] == [False, False, True, True]
    # a rolled cancel is re-put to the timer topic, not read as a cancel request
    assert [is_cancel_request(m) for m in (1, 3, 5, 7)] == [False, False, True, False]
    # doEnqueue decrements num for any unit of a TIMER_DEL_UNIQKEY record, rolled or not
    assert [slot_num_delta(m) for m in (1, 3, 5, 7)] == [1, 1, -1, -1]


@pytest.mark.parametrize(
    "ahead_ms, slot_ahead_ms, magic",
    [
        (0, 0, 1),
        (W * P - 1000, W * P - 1000, 1),  # one slot short of the window: parked in its own slot
        (W * P, W // 2 * P, 3),  # exactly the window: roll; rest 0 < window/3 -> write + window/2 (1 day)
        (W * P + 57_599_000, W // 2 * P, 3),  # rest 57599 s < 57600 s (window/3): still window/2
        (W * P + 57_600_000, W * P, 3),  # rest = window/3: write + window (2 days)
        (3 * 86_400_000, W * P, 3),  # a 3-day timer: rest 1 day >= window/3 -> 2 days
    ],
)
def test_do_enqueue_roll(ahead_ms, slot_ahead_ms, magic):
    assert do_enqueue(T0 + ahead_ms, T0, W, P) == (T0 + slot_ahead_ms, magic)


def test_do_enqueue_delete_and_small_window():
    assert do_enqueue(T0 + 5000, T0, W, P, delete=True) == (T0 + 5000, 5)
    assert do_enqueue(T0 + 4 * 86_400_000, T0, W, P, delete=True) == (T0 + W * P, 7)
    # window of 10 slots at precision 500: roll at >= 5000 ms; 10 // 3 = 3 slots, 10 // 2 = 5 slots
    assert do_enqueue(T0 + 6000, T0, 10, 500) == (T0 + 2500, 3)  # rest 1000 < 1500
    assert do_enqueue(T0 + 6500, T0, 10, 500) == (T0 + 5000, 3)  # rest 1500, not < 1500


# a slot of four units appended at 0, 52, 104, 156: (prevPos, magic)
UNITS = {0: (-1, 1), 52: (0, 5), 104: (52, 1), 156: (104, 3)}


def test_walk_chain_to_the_end():
    w = walk_chain(156, UNITS.get, itemgetter(0))
    assert [p for p, _ in w.units] == [156, 104, 52, 0]
    assert (w.stop, w.stop_pos, w.broken) == (END, -1, False)


def test_walk_chain_stops_at_first_pos_when_asked():
    w = walk_chain(156, UNITS.get, itemgetter(0), stop_at=52)
    assert [p for p, _ in w.units] == [156, 104, 52] and (w.stop, w.stop_pos, w.broken) == (FIRST, 52, False)


def test_walk_chain_broken_prev_pos():
    units = {**UNITS, 104: (3000, 1)}  # a prevPos pointing where no unit is written
    w = walk_chain(156, units.get, itemgetter(0))
    assert [p for p, _ in w.units] == [156, 104] and (w.stop, w.stop_pos, w.broken) == (MISSING, 3000, True)
    # lastPos itself unreadable: nothing walked
    w = walk_chain(208, UNITS.get, itemgetter(0))
    assert w.units == [] and (w.stop, w.stop_pos) == (MISSING, 208)


def test_walk_chain_loop_ends_at_the_first_repeat():
    units = {**UNITS, 52: (156, 5)}  # 156 -> 104 -> 52 -> 156 again
    w = walk_chain(156, units.get, itemgetter(0))
    assert [p for p, _ in w.units] == [156, 104, 52] and (w.stop, w.stop_pos, w.broken) == (LOOP, 156, True)


def test_empty_slot():
    w = walk_chain(-1, UNITS.get, itemgetter(0))
    assert w.units == [] and w.stop == END


def test_walk_chain_with_magic_sets_cancel_requests_apart():
    w = walk_chain(156, UNITS.get, itemgetter(0), magic=itemgetter(1))
    assert [p for p, _ in w.cancels] == [52]
    assert [p for p, _ in w.units] == [156, 104, 0]  # the rolled unit (magic 3) is a normal one
    units = {0: (52, 1), 52: (0, 5), 104: (52, 1), 156: (104, 1)}  # 0 points back at the cancel request 52
    w = walk_chain(156, units.get, itemgetter(0), magic=itemgetter(1))
    assert ([p for p, _ in w.units], [p for p, _ in w.cancels]) == ([156, 104, 0], [52])
    assert (w.stop, w.stop_pos) == (LOOP, 52)


def test_is_deleted_by_version():
    keys = {"AC11000100002A9F0000000000000001"}
    k = "AC11000100002A9F0000000000000001"
    assert is_deleted(k, "TopicT", keys)  # 5.3.1: bare UNIQ_KEY
    assert not is_deleted(k, "TopicT", keys, topic_key=True)
    topic_keys = {build_delete_key("TopicT", k)}
    assert topic_keys == {"TopicT+" + k}
    assert not is_deleted(k, "TopicT", topic_keys)
    assert is_deleted(k, "TopicT", topic_keys, topic_key=True)
    assert is_deleted(k, "TopicT", topic_keys, topic_key=None) and is_deleted(k, "TopicT", keys, topic_key=None)
    assert not is_deleted(k, "OtherTopic", topic_keys, topic_key=None)
    assert not is_deleted(None, "TopicT", keys) and not is_deleted(k, "TopicT", set())


def test_do_enqueue_many_equals_do_enqueue_unit_by_unit():
    np = pytest.importorskip("numpy")
    from mqtool.rules.timer import do_enqueue_many

    # around every boundary of the rule: now, the window, the window plus a third, three days
    edges = [
        0,
        1,
        999,
        W * P - 1000,
        W * P - 1,
        W * P,
        W * P + 1,
        W * P + W // 3 * P - 1,
        W * P + W // 3 * P,
        W * P + W // 3 * P + 1,
        3 * 86_400_000,
        10**15,
        -5,
    ]
    for window in (W, 7, 2):
        for precision in (P, 100):
            delayed = [T0 + e for e in edges for _ in (0, 1)]
            delete = [i % 2 == 1 for i in range(len(delayed))]
            slots, magics = do_enqueue_many(np.array(delayed, np.int64), T0, window, precision, np.array(delete, bool))
            want = [do_enqueue(d, T0, window, precision, x) for d, x in zip(delayed, delete, strict=True)]
            assert list(zip(slots.tolist(), magics.tolist(), strict=True)) == want
    assert do_enqueue_many(np.array([T0 + 3 * 86_400_000]), T0, W, P, np.array([True]))[1].tolist() == [7]


# ----- put at once, convert (issue #27: the timer's transitions have one home) -----


def test_put_at_once_before_the_write_time_only():
    from mqtool.rules.timer import put_at_once

    assert put_at_once(T0 - 1, T0) is True  # due before currWriteTimeMs: straight to the dequeue's put
    assert put_at_once(T0, T0) is False  # due in the current slot: doEnqueue
    import numpy as np

    assert put_at_once(np.array([T0 - 1000, T0, T0 + 1]), T0).tolist() == [True, False, False]


def test_next_roll_times_counts_up_and_wraps_as_java_int():
    from mqtool.rules.timer import next_roll_times

    assert next_roll_times(None) == 1  # first roll
    assert next_roll_times("1") == 2
    assert next_roll_times(b"41") == 42  # the batch path hands bytes
    assert next_roll_times("2147483647") == -2147483648  # Integer.parseInt + 1 overflows
    assert next_roll_times("x") == 1  # Integer.parseInt throws on the broker: counted as 0 here


def test_convert_properties_sets_the_three_in_order_on_a_copy():
    from mqtool.rules.timer import convert_properties, roll_times, was_dequeued, was_rolled

    src = {"TIMER_OUT_MS": "5", "REAL_TOPIC": "T"}
    roll = convert_properties(src, T0, True, T0 + 7)
    assert src == {"TIMER_OUT_MS": "5", "REAL_TOPIC": "T"}  # the source is left as it was
    assert list(roll.items())[2:] == [
        ("TIMER_ENQUEUE_MS", str(T0)),
        ("TIMER_ROLL_TIMES", "1"),
        ("TIMER_DEQUEUE_MS", str(T0 + 7)),
    ]
    again = convert_properties(roll, T0 + 100, True, T0 + 200)
    assert (again["TIMER_ENQUEUE_MS"], again["TIMER_ROLL_TIMES"], again["TIMER_DEQUEUE_MS"]) == (
        str(T0 + 100),
        "2",
        str(T0 + 200),
    )
    assert roll_times(again) == 2 and was_rolled(again) and was_dequeued(again)
    out = convert_properties(src, -1, False, 9)  # no write time known: no TIMER_ENQUEUE_MS
    assert out == {"TIMER_OUT_MS": "5", "REAL_TOPIC": "T", "TIMER_DEQUEUE_MS": "9"}
    assert not was_rolled(out)


def test_convert_size_change_by_hand():
    from mqtool.rules.timer import convert_size_change

    # all three new: "TIMER_ENQUEUE_MS" 16 + "TIMER_ROLL_TIMES" 16 + "TIMER_DEQUEUE_MS" 16 names, 2 separators
    # each, values of 13 + 1 + 13 digits
    assert convert_size_change((None, None, None), (T0, 1, T0 + 5)) == 3 * (16 + 2) + 13 + 1 + 13
    # a second roll: only the count grows from "9" to "10"
    assert convert_size_change((13, 1, 13), (T0, 10, T0 + 5)) == 1
    # a delivery's two
    assert convert_size_change((None, None), (T0, T0)) == 2 * (16 + 2) + 26


def test_no_module_outside_rules_and_formats_names_a_timer_transition_property():
    """TIMER_ENQUEUE_MS, TIMER_ROLL_TIMES, TIMER_DEQUEUE_MS are set by `convert_properties` and read
    through its helpers; no other module names the constants."""
    import ast
    from pathlib import Path

    import mqtool

    pkg = Path(mqtool.__file__).parent
    banned = {"PROPERTY_TIMER_ENQUEUE_MS", "PROPERTY_TIMER_ROLL_TIMES", "PROPERTY_TIMER_DEQUEUE_MS"}
    found = []
    for path in pkg.rglob("*.py"):
        if path.parent.name in ("rules", "formats"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in banned:
                found.append(f"{path.relative_to(pkg)}:{node.lineno} {name}")
            if isinstance(node, ast.alias) and node.name in banned:
                found.append(f"{path.relative_to(pkg)} imports {node.name}")
    assert found == []


def test_cancels_in_slot_compares_final_slots():
    from mqtool.rules.timer import cancels_in_slot

    assert cancels_in_slot(T0 + 149_000, T0 + 149_000, P)
    assert cancels_in_slot(T0 + 149_000, T0 + 149_999, P)  # one slot of 1 s
    assert not cancels_in_slot(T0 + 149_000, T0 + 150_000, P)
    assert not cancels_in_slot(None, T0, P) and not cancels_in_slot(T0, T0, 0)


def test_revise_from_is_the_file_before_the_flush_position():
    from mqtool.rules.timer import revise_from

    starts = [0, 4096, 8192]
    assert revise_from(starts, 8192 + 520, 4096) == 4096  # flush - fileSize = 4616: in the second file
    assert revise_from(starts, 4096, 4096) == 0
    assert revise_from(starts, 100, 4096) == 0  # clamped to 0
    assert revise_from([4096, 8192], 100, 4096) == 4096  # no file at or before: the first
    assert revise_from([], 100, 4096) is None


def test_revise_slots_by_hand():
    from mqtool.rules.timer import revise_slots

    disk = {T0 + 5000: [0, 52, 2]}  # a slot holding units 0 and 52
    got = revise_slots([(52, T0 + 5000), (104, T0 + 9000), (156, T0 + 5000), (208, T0 + 9000)], disk.get)
    # the held slot gets 156 as its last position (firstPos, num kept); the missing one is rebuilt (num 0)
    assert got == {T0 + 5000: [0, 156, 2], T0 + 9000: [104, 208, 0]}
    assert disk == {T0 + 5000: [0, 52, 2]}  # the wheel given is not changed


def test_revise_slots_without_a_wheel_file_counts_nothing():
    """No `timerwheel` file: TimerWheel maps zeros, so `reviseSlot(force)` finds no slot of that time and the
    3-argument `putSlot` writes (time, pos, pos) over num 0; the next units of that time only move lastPos.
    The units 0 and 104 are plain and 52 a DELETE of the same slot: `doEnqueue` would count 1 + -1 + 1 = 1,
    recovery counts 0 (num is never revised)."""
    from mqtool.rules.timer import revise_slots

    got = revise_slots([(0, T0 + 5000), (52, T0 + 5000), (104, T0 + 5000)], lambda _t: None)
    assert got == {T0 + 5000: [0, 104, 0]}


def test_wheel_slot_finding_grades():
    from mqtool.rules.timer import wheel_slot_finding

    assert wheel_slot_finding(7, T0, True, [], 1, 1) is None
    assert wheel_slot_finding(7, T0, True, ["x"], 1, 1) == (224, "error", f"wheel slot 7 (time {T0}, pending): x")
    assert wheel_slot_finding(7, T0, False, ["x", "y"], 1, 1) == (
        224,
        "warning",
        f"wheel slot 7 (time {T0}, already read): x; y",
    )
    off, sev, _ = wheel_slot_finding(7, T0, True, [], 0, 1)
    assert (off, sev) == (224, "info")  # a clean run writes it (revise_slots): never an error


@pytest.mark.parametrize("precision", [0, -1])
def test_check_timer_precision_refuses(precision):
    from mqtool.formats.broker_conf import ConfigFileError
    from mqtool.rules.timer import check_timer_precision

    with pytest.raises(ConfigFileError, match=f"timerPrecisionMs = {precision}"):
        check_timer_precision(precision)
    check_timer_precision(1)  # the smallest the broker runs with


def test_format_time_ms_floors_to_the_precision():
    from mqtool.rules.timer import format_time_ms

    assert format_time_ms(T0 + 1999, P) == T0 + 1000 and format_time_ms(T0, P) == T0
    assert format_time_ms(1050, 100) == 1000


def test_do_put_retry_by_status_and_attempt():
    # SERVICE_NOT_AVAILABLE (PUT_NEED_RETRY) ends a doPut call: `run` calls again at once, then every
    # 500 * precision / 1000 ms (precision 1000 -> 500, 100 -> 50, 30 -> 15) for ever
    assert do_put_retry("SERVICE_NOT_AVAILABLE", 1, 1000) == 0
    assert [do_put_retry("SERVICE_NOT_AVAILABLE", a, 1000, in_loop=True) for a in (1, 2, 3)] == [500, 500, 500]
    assert do_put_retry("SERVICE_NOT_AVAILABLE", 1, 100, in_loop=True) == need_retry_sleep(100) == 50
    assert do_put_retry("SERVICE_NOT_AVAILABLE", 1, 30, in_loop=True) == 15
    # any other failure: 3 more tries 50 ms apart (doPut's own loop); the put after the third retry is not looked at
    assert [do_put_retry("UNKNOWN_ERROR", a, 1000) for a in (1, 2, 3, 4)] == [50, 50, 50, None]
    assert [do_put_retry("OS_PAGE_CACHE_BUSY", a, 100) for a in (3, 4)] == [50, None]
    assert do_put_retry("SERVICE_NOT_AVAILABLE", 4, 1000) is None
    assert do_put_retry("SERVICE_NOT_AVAILABLE", 4, 1000, in_loop=True) is None
    # PUT_NO_RETRY at once
    assert do_put_retry("MESSAGE_ILLEGAL", 1, 1000) is None
    assert do_put_retry("PROPERTIES_SIZE_EXCEEDED", 1, 1000) is None


@pytest.mark.parametrize(
    ("deliver", "precision", "out"),
    [
        (5_001, 1000, 5_000),  # floored to its slot
        (5_999, 1000, 5_000),
        (5_000, 1000, 4_000),  # an exact multiple goes one slot earlier
        (1_790_000_012_345, 100, 1_790_000_012_300),
        (1_790_000_012_300, 100, 1_790_000_012_200),
    ],
)
def test_timer_out_ms(deliver, precision, out):
    """`HookUtils.transformTimerMessage` at 5.3.1: `deliverMs % precision == 0 ? deliverMs - precision :
    deliverMs / precision * precision`."""
    assert timer_out_ms(deliver, precision) == out
