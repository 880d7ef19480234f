"""The summary's `DeliveryTally` and the `InvariantCheck` share one spool of the delivered keys
(`DeliveryTally.keys`): the duplicates, per-topic counts, timeline and violations equal those of the
two counting apart, and those counted event by event."""

import io
import random

import pytest
from eventrows import check_invariants, put_rows

from mqtool.formats.names import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRANS_HALF_TOPIC
from mqtool.simulate.events import EventLog, SimEvent
from mqtool.simulate.invariants import InvariantCheck
from mqtool.simulate.tally import DeliveryTally, KeyTally

RETRY = RETRY_GROUP_TOPIC_PREFIX + "g"


def _deliver(t, service, topic, key, phys, due):
    return SimEvent(t, service, "deliver", topic, 0, key, phys, phys + 1, {} if due is None else {"due": due})


# by hand: A by timer, schedule, timer, transaction (summary: 3 duplicates; timer twice, less one roll: ok;
# schedule once); R by the schedule on a retry topic twice from offset 7, once from 8 (summary: 2
# duplicates, the invariant: R@7 twice, and R@8 twice with the plain key "R@8" of another delivery); H twice
# to a system topic and "" twice by the timer (the invariant counts them, the summary does not)
HISTORY = [
    _deliver(10, "timer", "T", "A", 1, 5),
    _deliver(10, "schedule", "T", "A", 2, 20),
    _deliver(11, "timer", "T", "A", 3, 30),
    _deliver(12, "schedule", RETRY, "R", 7, 1),
    _deliver(13, "schedule", RETRY, "R", 7, 1),
    _deliver(14, "schedule", RETRY, "R", 8, 1),
    _deliver(14, "schedule", "T", "R@8", 9, 1),
    _deliver(15, "transaction", "T", "A", 9, None),
    _deliver(16, "timer", RMQ_SYS_TRANS_HALF_TOPIC, "H", 4, 1),
    _deliver(16, "timer", RMQ_SYS_TRANS_HALF_TOPIC, "H", 4, 1),
    _deliver(17, "timer", "U", None, 5, None),
    _deliver(18, "timer", "U", "", 6, 1),
    SimEvent(19, "timer", "roll", "T", 0, "A", 3, 4, {}),
    _deliver(20, "timer", "U", "", 6, 1),
]


def _feed(history, shared: bool, split: int = 0):
    log = EventLog(sink=io.StringIO(), hold=False)
    tally = DeliveryTally(0, 40)
    log.watch_columns("deliver", tally.columns)
    own = DeliveryTally(0, 1)
    if not shared:  # the check counts from a tally of its own
        log.watch_columns("deliver", own.columns)
    check = InvariantCheck([]).watch(log, tally if shared else own)
    for i, e in enumerate(history):
        if i < split:
            log.batch(
                e.time,
                e.service,
                e.event,
                e.topic,
                e.queue_id,
                e.uniq_key,
                e.physical_offset,
                e.new_physical_offset,
                **e.detail,
            )
        else:
            put_rows(
                log,
                e.time,
                e.service,
                e.event,
                [(e.topic, e.queue_id, e.uniq_key, e.physical_offset, e.new_physical_offset, *e.detail.values())],
                tuple(e.detail),
            )
    log.flush()
    problems = check.finish({})
    return tally, check, problems


@pytest.mark.parametrize("split", [0, 5, len(HISTORY)])
def test_shared_keys_count_what_each_counted_apart_by_hand(split):
    tally, check, problems = _feed(HISTORY, True, split)
    assert check.shared is tally.keys
    apart, _, problems_apart = _feed(HISTORY, False, split)
    assert tally.duplicates() == apart.duplicates() == 5
    assert tally.per_topic == apart.per_topic and tally.timeline_list() == apart.timeline_list()
    assert (
        problems
        == problems_apart
        == check_invariants(HISTORY, [], {})
        == [
            "schedule delivered A at 10, before its due time 20",
            "timer delivered A at 11, before its due time 30",
            "schedule delivered R@7 2 times without a fault",
            "schedule delivered R@8 2 times without a fault",
            "timer delivered  2 times without a fault",
            "timer delivered H 2 times without a fault",
        ]
    )
    tally.keys.close()


def test_shared_keys_in_large_batches_of_both_services():
    """Thousands of events (columns of 4,096): the one-pass tagging path, keys repeated across services."""
    rnd = random.Random(5)
    history = []
    for i in range(10_000):  # blocks of 4,096 and a spool past its 8,192 keys in memory
        service = rnd.choice(["timer", "schedule"])
        key = f"K{rnd.randrange(7_500)}"
        history.append(_deliver(i, service, f"T{i % 3}", key, i, i))
    history.append(_deliver(10_001, "timer", "T0", "Z", 1, 1))
    history.append(_deliver(10_002, "schedule", "T0", "Z", 2, 1))  # Z: a duplicate for the summary only
    tally, check, problems = _feed(history, True)
    apart, _, problems_apart = _feed(history, False)
    assert len(tally.keys) == len(history)  # one key an event: all counted by both
    by_key = {}
    for e in history:
        by_key.setdefault(e.uniq_key, []).append(e.service)
    assert tally.duplicates() == apart.duplicates() == sum(len(v) - 1 for v in by_key.values())
    want = sorted(
        f"{s} delivered {k} {v.count(s)} times without a fault"
        for k, v in by_key.items()
        for s in ("schedule", "timer")
        if v.count(s) > 1
    )
    assert sorted(problems) == sorted(problems_apart) == want and want
    tally.keys.close()


def test_tagged_keys_repeated_by_tag_by_hand():
    t = KeyTally()
    t.extend(["a", "b", "a"], [1 | 2, 1 | 4, 1 | 4])
    t.extend(["b", "c", "c"], [4, 1, 2])
    assert t.repeated_by(1) == {"a": 2}
    assert t.repeated_by(2) == {}
    assert t.repeated_by(4) == {"b": 2}
    assert KeyTally().repeated_by(1) == {}
    t.close()
