"""POP state read back from stores the simulator wrote (spec §15): checkpoints and acks paired, statuses.

The scenario and its hand-computed times: tests/popkit.py. A checkpoint waits in the timer until
revive time - 1 s (S + 59 s), an ack until popTime + invisibleTime (S + 60 s). GID_bad's are revived
into %RETRY%GID_bad_DemoTopicA at S + 62.1 s (one at S + 63.1 s).
"""

import pytest
from popkit import BY_GROUP_AT_70S, REVIVE, S, pop_store

from mqtool.formats.offsets_json import ConsumerOffsets
from mqtool.store.findings import Findings
from mqtool.store.pop import has_pop, read_store_pop, revive_offsets_from


@pytest.fixture(scope="module")
def at_40s(tmp_path_factory):
    return pop_store(tmp_path_factory, S + 40_000)


@pytest.fixture(scope="module")
def at_70s(tmp_path_factory):
    return pop_store(tmp_path_factory, S + 70_000)


def test_before_delivery_everything_waits_in_the_timer(at_40s):
    store, _r = at_40s
    findings = Findings()
    state = read_store_pop(store, findings, S + 40_000)
    assert findings == [] and state.orphan_acks == []
    assert len(state.checks) == 10  # one checkpoint per request and queue: 4 + 1 per group
    assert {(c.record.stage, c.record.revive_topic, c.record.revive_queue_offset) for c in state.checks} == {
        ("timer", REVIVE, None)}
    # the backlog popped at S, the message the schedule service delivers popped at S + 1 s
    assert sorted(c.checkpoint.revive_time for c in state.checks if c.checkpoint.cid == "GID_ok") == (
        [S + 60_000] * 4 + [S + 61_000])
    # one ack record per message, each naming its checkpoint's start offset
    assert all(len(c.acks) == len(c.offsets) and {a.stage for a in c.acks} == {"timer"}
               for c in state.checks if c.checkpoint.cid == "GID_ok")
    assert state.by_group() == [
        {"group": "GID_bad", "topic": "DemoTopicA", "checkpoints": 5, "popped": 12, "acked": 0, "invisible": 12,
         "due": 0, "revived": 0, "next_revive_time": S + 60_000},
        {"group": "GID_ok", "topic": "DemoTopicA", "checkpoints": 5, "popped": 12, "acked": 12, "invisible": 0,
         "due": 0, "revived": 0, "next_revive_time": None}]
    # the same records read at S + 61 s: GID_bad's are due
    state.classify(S + 61_000)
    assert {c.status for c in state.checks if c.checkpoint.cid == "GID_bad"} == {"due"}


def test_after_revive(at_70s):
    store, r = at_70s
    assert has_pop(store)
    findings = Findings()
    state = read_store_pop(store, findings, S + 70_000)
    assert findings == []
    first = [c for c in state.checks if c.checkpoint.topic == "DemoTopicA"]
    assert {c.record.stage for c in first} == {"revive"}
    # (popkit) the revive queue is the request's: GID_ok's request at S -> 0, its request answered at S + 1 s -> 1,
    # GID_bad's 2 and 3; in a queue the checkpoints of a request in the order its queues were read (2, 3, 0, 1)
    where = {(c.checkpoint.cid, c.checkpoint.queue_id, c.checkpoint.start_offset):
             (c.record.revive_queue_id, c.record.revive_queue_offset) for c in first}
    assert where == {
        ("GID_ok", 2, 0): (0, 0), ("GID_ok", 3, 0): (0, 1), ("GID_ok", 0, 0): (0, 2), ("GID_ok", 1, 0): (0, 3),
        ("GID_ok", 3, 2): (1, 0),
        ("GID_bad", 2, 0): (2, 0), ("GID_bad", 3, 0): (2, 1), ("GID_bad", 0, 0): (2, 2), ("GID_bad", 1, 0): (2, 3),
        ("GID_bad", 3, 2): (3, 0)}
    # PopCheckPoint bodies: every message of the queue in one checkpoint (bitMap 0 when written), reviveTime =
    # popTime + 60 s
    ok = [c.checkpoint for c in first if c.checkpoint.cid == "GID_ok"]
    assert sorted((ck.num, ck.queue_offset_diff) for ck in ok) == [
        (1, [0]), (2, [0, 1]), (2, [0, 1]), (3, [0, 1, 2]), (4, [0, 1, 2, 3])]
    assert {(c.checkpoint.bit_map, c.checkpoint.revive_time - c.checkpoint.pop_time) for c in state.checks} == {
        (0, 60_000)}
    assert sorted((c.checkpoint.cid, c.checkpoint.pop_time) for c in first) == sorted(
        [("GID_ok", S)] * 4 + [("GID_ok", S + 1000)] + [("GID_bad", S)] * 4 + [("GID_bad", S + 1000)])
    # each GID_ok checkpoint acked by one ack per message, read from the revive topic too
    assert all(c.acked == set(c.offsets) and {(a.tag, a.stage) for a in c.acks} == {("ack", "revive")}
               for c in first if c.checkpoint.cid == "GID_ok")
    assert all(not c.acked and not c.acks for c in state.checks if c.checkpoint.cid == "GID_bad")
    # the second pops: 11 at S + 62.1 s, one at S + 63.1 s (popkit), their checkpoints still in the timer
    again = [c for c in state.checks if c.checkpoint.topic != "DemoTopicA"]
    assert sorted(c.checkpoint.revive_time for c in again) == [S + 122_100, S + 123_100]
    assert {c.record.stage for c in again} == {"timer"}
    assert sorted(c.checkpoint.start_offset for c in again) == [0, 11]
    assert sorted(e.time for e in r.events if e.service == "consumer" and e.event == "revive") == (
        [S + 62_100] * 11 + [S + 63_100])
    assert state.by_group() == BY_GROUP_AT_70S


def test_revive_progress_from_consumer_offsets(at_40s):
    store, _r = at_40s
    state = read_store_pop(store, Findings(), S + 40_000)
    offsets = ConsumerOffsets({f"{REVIVE}@CID_RMQ_SYS_REVIVE_GROUP": {0: 1, 1: 0}, "DemoTopicA@GID_ok": {0: 3}})
    assert revive_offsets_from(offsets) == {(REVIVE, 0): 1, (REVIVE, 1): 0}
    for c in state.checks:  # pretend they were delivered: queue 0 offset 0 is behind the revive progress
        object.__setattr__(c.record, "revive_queue_offset", 0 if c.record.revive_queue_id == 0 else 1)
    # the progress is the revive offset of the last checkpoint handled (mergeAndRevive): queue 1's is not yet
    state.classify(S + 70_000, revive_offsets_from(offsets))
    bad = [c for c in state.checks if c.checkpoint.cid == "GID_bad"]
    assert sorted({(c.record.revive_queue_id, c.status) for c in bad}) == [
        (q, "revived" if q == 0 else "due") for q in sorted({c.record.revive_queue_id for c in bad})]


def test_unreadable_body_is_a_finding(at_40s):
    from dataclasses import replace

    from mqtool.store.pop import read_pop

    store, _r = at_40s
    recs = list(store.commitlog.iter_records(verify_crc=False))
    ck = next(x for x in recs if x.properties.get("TAGS") == "ck")
    bad = replace(ck, body=b"{broken")
    findings = Findings()
    state = read_pop([bad if x is ck else x for x in recs], findings)
    assert len(state.checks) == 9  # the 10 checkpoints but the broken one
    assert [(f.offset, f.severity, f.message[:27]) for f in findings] == [
        (ck.physical_offset, "warning", "ck record unreadable: body ")]
