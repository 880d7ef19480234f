"""`mqtool.rules.transaction` against values worked out by hand from TransactionalMessageServiceImpl."""

import pytest

from mqtool.rules.transaction import (
    CHECK,
    DISCARD,
    DONE,
    FRESH,
    NEW_ARRIVED,
    PUT_BACK,
    READ_MORE,
    SKIP,
    CheckPrediction,
    HalfRecord,
    calculate_op_offset,
    check_immunity_time,
    check_prepare_queue_offset,
    check_visit,
    discard_outcomes,
    get_int,
    get_long,
    immunity,
    is_need_check,
    need_discard,
    need_skip,
    next_round_visits,
    odd_check_settings,
    op_body_offsets,
    predict_rounds,
    put_check_times,
)

MAX = 15  # transactionCheckMax
TIMEOUT = 6000  # transactionTimeOut
H72 = 72 * 3600 * 1000  # fileReservedTime 72 h in ms


@pytest.mark.parametrize("text, expected", [
    ("15", 15), ("-3", -3), ("+7", 7), (None, -1), ("", -1), (" 1", -1), ("1_0", -1), ("x", -1),
    ("2147483647", 2147483647), ("2147483648", -1),  # Integer.parseInt overflows
])
def test_get_int(text, expected):
    assert get_int(text) == expected


def test_get_long_takes_what_get_int_refuses():
    assert get_long("2147483648") == 2147483648 and get_long("9223372036854775808") == -1


@pytest.mark.parametrize("times, expected", [
    (None, (False, 1)),  # first check: the property becomes 1
    ("0", (False, 1)),
    ("14", (False, 15)),  # one below the max: incremented to the max, not discarded yet
    ("15", (True, None)),  # at the limit: discarded, property left as is
    ("99", (True, None)),
    ("abc", (False, 0)),  # getInt -1, incremented to 0
    ("99999999999", (False, 0)),  # beyond int: getInt -1 too
])
def test_need_discard(times, expected):
    assert need_discard(times, MAX) == expected


def test_need_skip_strictly_older_than_file_reserved_time():
    assert not need_skip(H72, 0, 72)
    assert need_skip(H72 + 1, 0, 72)


@pytest.mark.parametrize("text, expected", [
    (None, TIMEOUT), ("60", 60_000), ("0", 0), ("-5", -5000), ("soon", TIMEOUT), ("-1", TIMEOUT),
])
def test_check_immunity_time(text, expected):
    # -1 (what getLong returns for garbage) is taken as "unparsable" even when written as "-1"
    assert check_immunity_time(text, TIMEOUT) == expected


def test_immunity():
    assert immunity(59_999, 60_000, True) == PUT_BACK
    assert immunity(60_000, 60_000, True) is None  # no longer immune: go on to isNeedCheck
    assert immunity(-10, 60_000, True) == PUT_BACK  # born in the future, still "< immunity"
    assert immunity(0, 6000, False) == NEW_ARRIVED
    assert immunity(5999, 6000, False) == NEW_ARRIVED
    assert immunity(6000, 6000, False) is None
    assert immunity(-1, 6000, False) is None  # negative age: not "new arrived"; isNeedCheck catches it


def test_is_need_check():
    start = 1_000_000
    # no op records read: strictly older than the immunity
    assert not is_need_check(6000, 6000, None, start, TIMEOUT)
    assert is_need_check(6001, 6000, None, start, TIMEOUT)
    # op records read: only when the newest was born more than transactionTimeOut after the round start
    assert not is_need_check(10**9, 6000, start + 6000, start, TIMEOUT)
    assert is_need_check(0, 6000, start + 6001, start, TIMEOUT)
    # born in the future
    assert is_need_check(-1, 6000, start, start, TIMEOUT)
    assert not is_need_check(0, 6000, start, start, TIMEOUT)


def _one(times=None, born=0, imm=None, now=1000, interval=30000, timeout=TIMEOUT, check_max=MAX, **kw):
    """`predict_rounds` of a queue holding one half (no op record): its prediction."""
    got = predict_rounds({0: HalfRecord("H", times, born, born, imm, None)}, 0, {}, 0, set(), now, interval,
                         timeout, check_max, 72, **kw)
    return got.get("H")


def test_predict_fresh_half():
    # born 0, now 1000, rounds every 30 s from 31000: the first round checks (age 31000 > 6000);
    # checks 1..15 in rounds 1..15, the 15th copy (times 15) is discarded in round 15 (t = 451000)
    assert _one() == CheckPrediction(31000, 451000, 15, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")


def test_predict_at_the_limit_and_one_below():
    assert _one("15") == CheckPrediction(None, 31000, 0, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")
    assert _one("14") == CheckPrediction(31000, 31000, 1, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")


def test_predict_new_arrived_waits_a_round():
    # transactionTimeOut 60000, no immunity property, born at 20000: the rounds at 31000 (age 11000)
    # and 61000 (age 41000) stop at it ("new arrived"), the round at 91000 (age 71000) checks it
    p = _one(born=20000, timeout=60000)
    assert p.next_check_ms == 91000 and p.checks_before_discard == 15
    assert p.discard_ms == 91000 + 14 * 30000


def test_predict_immunity_property_puts_back_without_checks():
    # CHECK_IMMUNITY_TIME_IN_SECONDS=100: immune until born + 100000; put backs count too
    p = _one(imm="100")
    # rounds 31000, 61000, 91000 put back (times 1..3), 121000 is the first check (times 4)
    assert p.next_check_ms == 121000 and p.checks_before_discard == 12
    assert p.discard_ms == 121000 + 11 * 30000


def test_predict_file_reserved_time():
    assert _one("3", now=H72 - 1000) == CheckPrediction(None, H72 + 29000, 0, "older than fileReservedTime")


def test_predict_never_discarded_within_the_rounds():
    assert _one(now=0, check_max=10**6, max_rounds=3) == CheckPrediction(30000, None, 3, None)


START = 1_000_000  # the round's startTime


def _visit(times=None, born=START - 10_000, store=START - 10_000, immunity_s=None, prepared=None, removed=(),
           now=START, newest_op=None, check_max=MAX):
    return check_visit(times, born, store, immunity_s, prepared, removed, now, START, newest_op, TIMEOUT, check_max, 72)


def test_check_visit_one_decision_in_the_order_of_check():
    # born 10 s before the round, no op record read, transactionTimeOut 6 s: needDiscard puts 1, isNeedCheck true
    assert _visit() == (CHECK, 1)
    assert _visit("4") == (CHECK, 5)
    # at the max: discarded before anything else is looked at, even a record stored after the round started
    assert _visit("15", store=START + 5) == (DISCARD, None)
    # one below the max: the copy gets 15, and is checked (the copy is discarded at its own visit)
    assert _visit("14") == (CHECK, 15)
    # older than fileReservedTime (72 h): skipped with the count needDiscard put first
    assert _visit("2", born=START - H72 - 1) == (SKIP, 3)
    # stored at the round's start or later: "Fresh stored", the round stops
    assert _visit(store=START) == (FRESH, 1)
    # born 5999 ms before the check, no immunity property: "New arrived", the round stops
    assert _visit(born=START - 5999) == (NEW_ARRIVED, 1)
    # exactly transactionTimeOut old: neither new arrived (age < 6000) nor due (age > 6000): read more op records
    assert _visit(born=START - 6000) == (READ_MORE, 1)
    # op records were read and the newest is not late: read more, however old the half is
    assert _visit(newest_op=START + 6000) == (READ_MORE, 1)
    assert _visit(newest_op=START + 6001) == (CHECK, 1)


def test_check_visit_immunity_property():
    # CHECK_IMMUNITY_TIME_IN_SECONDS=60, 10 s old: put back without a check (TRAN_PREPARED_QUEUE_OFFSET added)
    assert _visit(immunity_s="60") == (PUT_BACK, 1)
    # an immune copy whose original (queue offset 7) an op record covers: done, nothing written
    assert _visit("3", immunity_s="60", prepared="7", removed={7}) == (DONE, 4)
    assert _visit("3", immunity_s="60", prepared="7", removed={8}) == (PUT_BACK, 4)
    # an unparsable TRAN_PREPARED_QUEUE_OFFSET: checkPrepareQueueOffset returns false, isNeedCheck decides
    # (age 10 s is not > the 60 s immunity, no op record read: read more)
    assert _visit(immunity_s="60", prepared="x") == (READ_MORE, 1)
    assert _visit(immunity_s="60", prepared="x", born=START + 5) == (CHECK, 1)  # born in the future
    # past the immunity: the usual isNeedCheck
    assert _visit(immunity_s="5") == (CHECK, 1)


def test_check_prepare_queue_offset():
    assert check_prepare_queue_offset(None, {0}) == PUT_BACK
    assert check_prepare_queue_offset("0", {0}) == DONE
    assert check_prepare_queue_offset("-1", {-1}) is None  # getLong's -1 is "unparsable"
    assert check_prepare_queue_offset("1", ()) == PUT_BACK


def test_put_check_times_keeps_the_place_of_the_property():
    props = {"UNIQ_KEY": "U", "TRANSACTION_CHECK_TIMES": "1", "TAGS": "t"}
    assert list(put_check_times(props, 2).items()) == [("UNIQ_KEY", "U"), ("TRANSACTION_CHECK_TIMES", "2"),
                                                       ("TAGS", "t")]
    assert props["TRANSACTION_CHECK_TIMES"] == "1"  # a copy: the record read is not changed
    assert list(put_check_times({"A": "1"}, "1")) == ["A", "TRANSACTION_CHECK_TIMES"]


def _half(key, times=None, born=0, imm=None):
    return HalfRecord(key, times, born, born, imm, None)


def test_predict_rounds_reads_the_copies_each_round_writes():
    # transactionCheckMax 2, rounds every 10 s from 110000. Round 1 checks A (offset 0 -> copy 2, count 1) and
    # B (1 -> copy 3), then copy 2 is "fresh stored": the round stops. Round 2 checks copies 2 and 3 (-> 4, 5,
    # count 2) and discards 4 and 5 in that same round
    recs = {0: _half("A"), 1: _half("B")}
    got = predict_rounds(recs, 0, {}, 0, set(), 100_000, 10_000, TIMEOUT, 2, 72)
    assert got == {k: CheckPrediction(110_000, 120_000, 2, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")
                   for k in "AB"}
    # A's producer answers: the op record covering its copy 2 is read in round 2, which passes over 2, then
    # finds B's copy 3 due: it reads more op records, none come, 5.3.1 sleeps 1 s (4.9.8 does not)
    got = predict_rounds(recs, 0, {}, 0, {"A"}, 100_000, 10_000, TIMEOUT, 2, 72)
    assert got["A"] == CheckPrediction(110_000, None, 1, None) and got["B"].discard_ms == 121_000
    got = predict_rounds(recs, 0, {}, 0, {"A"}, 100_000, 10_000, TIMEOUT, 2, 72, sleep_while_no_op=False)
    assert got["B"].discard_ms == 120_000
    # the op record is done once the walk passed its offsets: round 3 does not read it again
    recs3 = {0: _half("A"), 1: _half("B")}
    got = predict_rounds(recs3, 0, {}, 0, {"A"}, 100_000, 10_000, TIMEOUT, 3, 72)
    # B: checks at 110000 (round 1), 121000 (round 2, after the sleep), 131000 (round 3 starts 10 s after
    # round 2 ended at 121000, reads no op record: no sleep), discarded there
    assert got["B"] == CheckPrediction(110_000, 131_000, 3, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")
    # the walk starts at the half offset and passes over what op records cover
    assert predict_rounds(recs, 1, {}, 0, set(), 100_000, 10_000, TIMEOUT, 2, 72).keys() == {"B"}
    assert predict_rounds(recs, 0, {0: [0, 1]}, 0, set(), 100_000, 10_000, TIMEOUT, 2, 72) == {}


def test_predict_rounds_a_fresh_copy_holds_a_later_one_back():
    # A (count 1) and B (no count) with max 3. Round 1 writes A's copy 2 (count 2) and B's copy 3 (count 1),
    # stops at 2 (fresh). Round 2 writes 4 (A, 3) and 5 (B, 2), discards 4 (needDiscard runs before the fresh
    # test), stops at 5 (count 2: fresh). Round 3 writes 6 (B, 3) from 5 and discards 6
    recs = {0: _half("A", "1"), 1: _half("B")}
    got = predict_rounds(recs, 0, {}, 0, set(), 0, 10_000, TIMEOUT, 3, 72)
    assert (got["A"].discard_ms, got["A"].checks_before_discard) == (20_000, 2)
    assert (got["B"].discard_ms, got["B"].checks_before_discard) == (30_000, 3)
    # new arrived (born 5 s before round 1, timeout 6 s, no immunity property): round 1 stops at it, and at
    # everything behind it
    recs = {0: _half("A", born=5000), 1: _half("B")}
    got = predict_rounds(recs, 0, {}, 0, set(), 0, 10_000, TIMEOUT, 3, 72)
    assert got["A"].next_check_ms == 20_000 and got["B"].next_check_ms == 20_000


def test_discard_outcomes():
    reason = "TRANSACTION_CHECK_TIMES reached transactionCheckMax"
    # the copy written in the discard's round: on 4.9.8 that round or the next (the reput dispatch race)
    assert discard_outcomes(50_000, reason, "0", 2, 15_000, True) == [50_000, 65_000]
    assert discard_outcomes(50_000, reason, "0", 2, 15_000, False) == [50_000]
    # the stored count already at the max: discarded at its first visit, no race
    assert discard_outcomes(50_000, reason, "2", 2, 15_000, True) == [50_000]
    assert discard_outcomes(50_000, "older than fileReservedTime", "0", 2, 15_000, True) == [50_000]
    assert discard_outcomes(None, None, "0", 2, 15_000, True) == []


def test_next_round_visits():
    # the walk starts at halfOffset (absent: 0) and passes over the offsets op records cover
    assert next_round_visits([0, 3, 5], 3, {5}) == [3]
    assert next_round_visits([0, 3, 5], None, set()) == [0, 3, 5]
    assert next_round_visits([0, 3], 4, set()) == []


def test_odd_check_settings():
    assert odd_check_settings(15, 6000) == []
    assert odd_check_settings(1, 0) == []  # 1 and 0 ms are what they say
    msgs = odd_check_settings(-5, -1)
    assert len(msgs) == 2 and msgs[0].startswith("transactionCheckMax=-5:") and msgs[1].startswith(
        "transactionTimeOut=-1:")


@pytest.mark.parametrize("body, v5, v4", [
    ("0,1,", [0, 1], []),  # a 5.x batch: 4.9.8's getLong of the whole body is -1, it names nothing
    ("3", [3], [3]),  # a 4.x body
    ("3,,5,", [3, 5], []),  # the empty part in the middle is getLong("") = -1
    (" 1,2_0,x,7", [7], []),  # Long.parseLong refuses spaces and underscores
    ("", [], []),
])
def test_op_body_offsets(body, v5, v4):
    assert op_body_offsets(body, False) == v5 and op_body_offsets(body, True) == v4


def _random_queue(rng):
    now = 1_000_000
    n = rng.randint(1, 8)
    recs = {}
    for i in range(n):
        born = now - rng.choice([0, 1000, 5000, 6000, 7000, 50_000, 10**6])
        recs[i] = HalfRecord(f"k{rng.randint(0, n)}", rng.choice([None, None, "0", "1", "2", "5", "x"]), born,
                             born + rng.randint(0, 100), rng.choice([None, None, "5", "60", "x"]),
                             rng.choice([None, None, None, "0", "1"]))
    ops = {q: rng.sample(range(n + 2), rng.randint(0, 2)) for q in range(rng.randint(0, 3))}
    answered = {f"k{j}" for j in range(n + 1) if rng.random() < 0.3}
    args = (recs, rng.choice([None, 0, 1]), ops, rng.choice([None, 0, 1]), answered, now,
            rng.choice([1000, 10_000, 30_000]), TIMEOUT, rng.choice([1, 2, 3, 5, 15, 40]), rng.choice([1, 72, 10**6]))
    return args, {"sleep_while_no_op": rng.random() < 0.5, "max_rounds": rng.choice([50, 1000])}


def test_predict_rounds_fast_forward_equals_the_round_by_round_walk():
    import random

    rng = random.Random(27)
    for _ in range(600):
        args, kw = _random_queue(rng)
        assert predict_rounds(*args, **kw) == predict_rounds(*args, fast=False, **kw), (args, kw)
    # 20 halves, transactionCheckMax 40, no op record: round k checks each (count k) and stops at the first
    # copy it wrote, so most rounds are counted at once; round 40 writes the count-40 copies and, reading
    # them, discards them: 40 checks each, discarded at 400000
    recs = {i: _half(str(i)) for i in range(20)}
    fast = predict_rounds(recs, 0, {}, 0, set(), 0, 10_000, TIMEOUT, 40, 10**6)
    assert fast == predict_rounds(recs, 0, {}, 0, set(), 0, 10_000, TIMEOUT, 40, 10**6, fast=False)
    assert fast["0"] == CheckPrediction(10_000, 400_000, 40, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")


@pytest.mark.parametrize(
    ("done", "old", "new"),
    [
        ([], 5, 5),  # nothing done: the op offset stays
        ([7, 5, 6], 5, 8),  # sorted first, then each next offset in turn
        ([6, 7], 5, 5),  # op record 5 not done: the offset cannot pass it
        ([5, 6, 8], 5, 7),  # the gap at 7 stops it
        ([5, 5, 6], 5, 6),  # op record 5 done twice: Java's loop meets 5 again where it wants 6, and stops
    ],
)
def test_calculate_op_offset_is_javas_loop(done, old, new):
    """`TransactionalMessageServiceImpl.calculateOpOffset` (5.3.1 and 4.9.8 alike): sort, then step while the
    next done offset equals the new offset."""
    assert calculate_op_offset(done, old) == new
