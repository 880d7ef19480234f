"""More hand-computed cases (issue #4 review): rules the first set did not pin down.

Times are ms after S (a whole second) or after the start; the arithmetic is in each comment.
"""

from eventrows import check_invariants

from mqtool.formats.names import TIMER_TOPIC
from mqtool.simulate.events import SimEvent
from mqtool.simulate.scenario import Fault
from simkit import S, config, events, run

DAY, HOUR = 86_400_000, 3_600_000


def test_correct_deliver_timestamp_caps_a_far_future_tags_code(built):
    """tagsCode S + 1 h on level 1 (1 s): deliver > now + 1 s, so `correctDeliverTimestamp` makes it now."""
    m = built.delay(1, S, HOUR)
    r = run(built, S + 5000, S + 20_000)
    (d,) = events(r, "deliver")
    assert d.uniq_key == m.uniq_key
    assert d.time == S + 6000  # the level's first run: start + FIRST_DELAY_TIME (1 s), due "now"
    assert d.detail["due"] == S + 6000


def test_redelivered_record_keeps_the_stale_delay_properties(built):
    """messageTimeUp builds the properties before clearing DELAY: the re-put still says DELAY=2, REAL_*."""
    m = built.delay(2, S, 5000, topic="Orders", qid=3)
    r = run(built, S, S + 10_000)
    (d,) = events(r, "deliver")
    new = r.state["model"].message(d.new_physical_offset)
    assert (new.topic, new.queue_id) == ("Orders", 3)
    assert new.props["DELAY"] == "2" and new.props["REAL_TOPIC"] == "Orders" and new.props["REAL_QID"] == "3"
    assert new.props["UNIQ_KEY"] == m.uniq_key
    assert d.time == S + 5000  # start + 1000 + 40 polls of 100 ms reaches the due S + 5000 exactly


def test_offsets_are_persisted_every_interval_and_a_crash_loses_the_rest(built):
    """First persist 10 s after the start, then every flushDelayOffsetInterval (20 s here): S + 10 s, S + 30 s.

    a (level 1, due S + 0.5 s) is delivered at the first run S + 1 s and persisted at S + 10 s; b (level 4,
    tagsCode S + 22 s) is delivered at S + 22 s, but the crash at S + 25 s comes before the S + 30 s
    persist: the restart at S + 26 s reloads offset 0 for level 4 and delivers b again at its first
    run, S + 27 s. The restarted persister writes at S + 36 s.
    """
    a = built.delay(1, S - 500, 1000)
    b = built.delay(4, S - 8000, 30_000)
    sc = {"faults": [{"kind": "crash", "from": "+25s", "until": "+26s"}]}
    r = run(built, S, S + 40_000, sc, cfg=config(flushDelayOffsetInterval=20_000))
    assert [(e.time, e.detail["offsets"]) for e in events(r, "persist")] == [
        (S + 10_000, {"1": 1, "4": 0}), (S + 36_000, {"1": 1, "4": 1})]
    assert [(e.uniq_key, e.time) for e in events(r, "deliver")] == [
        (a.uniq_key, S + 1000), (b.uniq_key, S + 22_000), (b.uniq_key, S + 27_000)]
    assert r.summary["duplicates"] == 1 and r.violations == []  # a crash explains the duplicate


def test_rolled_timer_is_reput_with_roll_times_plus_one_and_delivered_at_its_time(built):
    """+2 d 10 h from W: rolls at W + 1 d (+1 s dequeue step), re-put to the timer topic with
    TIMER_ROLL_TIMES=1, enqueued to its own slot W + 58 h, delivered one precision after it."""
    w = S
    due = w + 58 * HOUR
    m = built.timer(due, w - 5000)
    r = run(built, w, due + 5000)
    (roll,) = events(r, "roll")
    rolled = r.state["model"].message(roll.new_physical_offset)
    assert rolled.topic == TIMER_TOPIC and rolled.props["TIMER_ROLL_TIMES"] == "1"
    assert rolled.props["UNIQ_KEY"] == m.uniq_key
    (d,) = events(r, "deliver")
    assert (d.uniq_key, d.time, d.detail["due"]) == (m.uniq_key, due + 1000, due)
    assert d.physical_offset == roll.new_physical_offset  # the rolled copy is the one delivered
    assert r.violations == []


def test_half_older_than_file_reserved_time_is_skipped(built):
    """needSkip: born 73 h before the round (> fileReservedTime 72 h): copied to TRANS_CHECK_MAX_TIME_TOPIC."""
    h = built.half(S - 73 * HOUR)
    r = run(built, S, S + 5000, {"transaction": {"check_at": ["+1s"]}})
    assert events(r, "check") == []
    (s,) = events(r, "skip")
    assert (s.uniq_key, s.time, s.service) == (h.uniq_key, S + 1000, "transaction")
    assert r.state["model"].message(s.new_physical_offset).topic == "TRANS_CHECK_MAX_TIME_TOPIC"
    assert r.summary["pending_half_messages"] == 0


def test_answers_by_uniq_key_and_group_first_match_wins(built):
    """Rules: uniq_key UK0001 -> rollback; group PG_B -> unknown; default commit.

    Round 1 (S + 1 s) checks all three. In round 2 (S + 20 s) the op queue holds only the batch for a and
    c (written at S + 4 s, older than the round): the scan pulls again, finds no new op and sleeps
    SLEEP_WHILE_NO_OP (1 s), then checks b's put-back copy at S + 21 s, as 5.3.1's `check()` does.
    """
    a = built.half(S - 100_000, group="PG_A")  # UK0001: rollback (first rule)
    b = built.half(S - 100_000, group="PG_B")  # UK0002: unknown -> checked again next round
    c = built.half(S - 100_000, group="PG_C")  # UK0003: default commit
    sc = {"transaction": {"check_at": ["+1s", "+20s"], "default_answer": "commit",
                          "answers": [{"uniq_key": "UK0001", "answer": "rollback"},
                                      {"producer_group": "PG_B", "answer": "unknown"}]}}
    r = run(built, S, S + 30_000, sc)
    assert [(e.uniq_key, e.detail["answer"], e.time) for e in events(r, "check")] == [
        (a.uniq_key, "rollback", S + 1000), (b.uniq_key, "unknown", S + 1000), (c.uniq_key, "commit", S + 1000),
        (b.uniq_key, "unknown", S + 21_000)]
    assert [e.uniq_key for e in events(r, "rollback")] == [a.uniq_key]
    assert [e.uniq_key for e in events(r, "commit")] == [c.uniq_key]
    assert [p["uniq_key"] for p in r.summary["pending_halves"]] == [b.uniq_key]
    assert [m.topic for m in r.state["model"].appended if m.topic == "TX"] == ["TX"]  # only c's commit


def test_invariants_flag_early_and_double_deliveries():
    def ev(t, service, kind, key, **d):
        return SimEvent(t, service, kind, "T", 0, key, 1, 2, d)

    history = [ev(100, "schedule", "deliver", "A", due=200),
               ev(300, "timer", "deliver", "B", due=300), ev(400, "timer", "deliver", "B", due=300),
               ev(500, "timer", "roll", "C"), ev(600, "timer", "deliver", "C", due=600),
               ev(700, "timer", "deliver", "C", due=600)]
    problems = check_invariants(history, [], {"H1": "pending", "H2": "lost"})
    assert problems == ["schedule delivered A at 100, before its due time 200",
                        "timer delivered B 2 times without a fault",
                        "half message H2 ended in an unknown state 'lost'"]  # C: twice, but rolled once
    assert check_invariants(history[1:3], [Fault("crash", 0, 1)], {}) == []  # a crash explains duplicates
