"""POP state read back from stores the simulator wrote (spec §15): checkpoints and acks paired, statuses.

Scenario: on the demo store, GID_ok pops and acks, GID_bad pops and fails, invisibleTime 60 s, from S.
Each group pops the 12 messages of DemoTopicA (11 backlog units and one the schedule service delivers),
one checkpoint per message; a checkpoint waits in the timer until revive time - 1 s (S + 59 s), an ack
until popTime + invisibleTime (S + 60 s). GID_bad's are revived into %RETRY%GID_bad_DemoTopicA after S + 62 s.
"""

import pytest

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.offsets_json import ConsumerOffsets
from mqtool.simulate.output import write_store
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.findings import Findings
from mqtool.store.pop import has_pop, read_store_pop, revive_offsets_from
from mqtool.store.store import Store

S = 1_790_000_100_000
CONF = "fixtures/demo.broker.conf"
REVIVE = "rmq_sys_REVIVE_LOG_DemoCluster"
GROUPS = [{"group": "GID_ok", "topic": "DemoTopicA", "mode": "pop", "invisible_time": "60s"},
          {"group": "GID_bad", "topic": "DemoTopicA", "mode": "pop", "outcome": "fail", "invisible_time": "60s"}]


def _simulated(tmp_path_factory, until: int):
    cfg = load_broker_conf(CONF)
    st = Store.open("fixtures/demo", cfg)
    r = simulate(st, cfg, S, until, parse_scenario({"consumers": GROUPS}, S), broker_version="5.3")
    out = tmp_path_factory.mktemp("pop") / "out"
    write_store(st, r, out)
    return Store.open(out, cfg), r


@pytest.fixture(scope="module")
def at_40s(tmp_path_factory):
    return _simulated(tmp_path_factory, S + 40_000)


@pytest.fixture(scope="module")
def at_70s(tmp_path_factory):
    return _simulated(tmp_path_factory, S + 70_000)


def test_before_delivery_everything_waits_in_the_timer(at_40s):
    store, _r = at_40s
    findings = Findings()
    state = read_store_pop(store, findings, S + 40_000)
    assert findings == [] and state.orphan_acks == []
    assert len(state.checks) == 24
    assert {(c.record.stage, c.record.revive_topic, c.record.revive_queue_offset) for c in state.checks} == {
        ("timer", REVIVE, None)}
    # the backlog popped at S, the message the schedule service delivers popped at S + 1 s
    assert sorted(c.checkpoint.revive_time for c in state.checks if c.checkpoint.cid == "GID_ok") == (
        [S + 60_000] * 11 + [S + 61_000])
    assert all(len(c.acks) == 1 and c.acks[0].stage == "timer" for c in state.checks if c.checkpoint.cid == "GID_ok")
    assert state.by_group() == [
        {"group": "GID_bad", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 0, "invisible": 12,
         "due": 0, "revived": 0, "next_revive_time": S + 60_000},
        {"group": "GID_ok", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 12, "invisible": 0,
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
    # one checkpoint per revive queue in turn (8 queues): queue offsets 0, then 1 for the ninth and later
    by_q = sorted((c.record.revive_queue_id, c.record.revive_queue_offset) for c in first
                  if c.checkpoint.cid == "GID_ok")
    assert by_q[:3] == [(0, 0), (0, 1), (1, 0)]
    second_pop = min(e.time for e in r.events if e.service == "consumer" and e.event == "pop"
                     and e.topic == "%RETRY%GID_bad_DemoTopicA")
    assert state.by_group() == [
        {"group": "GID_bad", "topic": "%RETRY%GID_bad_DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 0,
         "invisible": 12, "due": 0, "revived": 0, "next_revive_time": second_pop + 60_000},
        {"group": "GID_bad", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 0, "invisible": 0,
         "due": 0, "revived": 12, "next_revive_time": None},
        {"group": "GID_ok", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 12, "invisible": 0,
         "due": 0, "revived": 0, "next_revive_time": None}]


def test_revive_progress_from_consumer_offsets(at_40s):
    store, _r = at_40s
    state = read_store_pop(store, Findings(), S + 40_000)
    offsets = ConsumerOffsets({f"{REVIVE}@CID_RMQ_SYS_REVIVE_GROUP": {0: 1, 1: 0}, "DemoTopicA@GID_ok": {0: 3}})
    assert revive_offsets_from(offsets) == {(REVIVE, 0): 1, (REVIVE, 1): 0}
    for c in state.checks:  # pretend they were delivered: queue 0 offset 0 is behind the revive progress
        object.__setattr__(c.record, "revive_queue_offset", 0)
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
    assert len(state.checks) == 23
    assert [(f.offset, f.severity, f.message[:27]) for f in findings] == [
        (ck.physical_offset, "warning", "ck record unreadable: body ")]
