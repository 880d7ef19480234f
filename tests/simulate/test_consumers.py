"""Consumer groups in the simulator, on the demo store, with hand-computed times.

Rules behind the numbers (rocketmq-all-5.3.1 `consumerSendMsgBack`, `ScheduleMessageService`):
a failed message is sent back at its consumption time t with level 3 + reconsumeTimes, so its
schedule unit's tagsCode is t + delay(level); each level's task first polls 1000 ms after start and
then on a 100 ms grid, so the %RETRY% record is stored at the first grid point >= the due time, and
consumed `consume_delay` later. The simulation starts at S (a whole second) so every grid point is
S + 1000 + 100k. Levels 3..18 sum to 10+30+60+120+180+240+300+360+420+480+540+600+1200+1800+3600+7200
= 17,140 s.
"""

import shutil

import pytest

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.commitlog import offset_msg_id
from mqtool.simulate.output import write_store
from mqtool.simulate.prepare import unused_settings
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import ScenarioError, parse_scenario
from mqtool.store.store import Store

S = 1_790_000_100_000  # after the demo store's last activity (1790000020100)
CONF = "fixtures/demo.broker.conf"
TOPIC = "DemoTopicA"


def run(consumers, until, store="fixtures/demo", version="5.3", faults=()):
    cfg = load_broker_conf(CONF)
    st = Store.open(store, cfg)
    sc = parse_scenario({"consumers": consumers, "faults": list(faults)}, S)
    return st, simulate(st, cfg, S, until, sc, broker_version=version)


def consumer_events(r, event, group=None):
    return [
        e
        for e in r.events
        if e.service == "consumer" and e.event == event and (group is None or e.detail["group"] == group)
    ]


def first_consume(r, group):
    out = {}
    for e in consumer_events(r, "consume", group):
        out.setdefault(e.physical_offset if e.detail["reconsume_times"] == 0 else None, e.time)
    return out


def test_every_delivery_failing_reaches_the_dlq_after_17140_s():
    _, r = run([{"group": "GID_fail", "topic": TOPIC, "outcome": "fail"}], S + 17_200_000)
    assert r.violations == []
    dlq = consumer_events(r, "dlq")
    # the 11 backlog units of DemoTopicA, consumed at S (consume_delay 0), are dead-lettered at
    # S + 17,140 s: each due time S + 1000 + 100k lies on the level's grid, so no polling delay
    backlog = [e for e in dlq if e.time == S + 17_140_000]
    assert len(backlog) == 11
    # the event carries the DLQ record's reconsumeTimes: the consumed 16 + 1, as the stored record holds
    assert all(e.topic == "%DLQ%GID_fail" and e.detail["reconsume_times"] == 17 for e in dlq)
    levels = [
        e.detail["level"]
        for e in consumer_events(r, "send_back")
        if e.uniq_key == backlog[0].uniq_key and e.physical_offset is not None
    ]
    assert levels[:16] == list(range(3, 19))
    assert r.summary["consumers"]["GID_fail"]["dlq"] == len(dlq)


def test_consume_delay_adds_its_own_time_and_the_grid_rounding_per_hop():
    # t0 = S + 250; each hop: due = t + delay lands 250 ms past the grid (S + 1000 + 100k), so the
    # delivery waits 50 ms more and the consumption 250 ms: 300 ms per hop, 16 hops
    _, r = run([{"group": "GID_slow", "topic": TOPIC, "outcome": "fail", "consume_delay": "250ms"}], S + 17_200_000)
    dlq = sorted(e.time for e in consumer_events(r, "dlq"))
    assert dlq[0] == S + 250 + 17_140_000 + 16 * 300


def test_fail_twice_then_consumed_40_s_after_the_first_try():
    _, r = run([{"group": "GID_two", "topic": TOPIC, "fail_times": 2}], S + 120_000)
    by_key: dict = {}
    for e in consumer_events(r, "consume"):
        by_key.setdefault((e.uniq_key, e.detail["queue_offset"] if e.topic == TOPIC else None), []).append(e)
    first = [e for e in consumer_events(r, "consume") if e.topic == TOPIC and e.time == S]
    assert len(first) == 11
    ok = {e.uniq_key: e.time for e in consumer_events(r, "consume") if e.detail["outcome"] == "ok"}
    for e in first:
        assert ok[e.uniq_key] == S + 10_000 + 30_000  # levels 3 and 4
    assert consumer_events(r, "dlq") == []


def _store_with_groups(tmp_path, groups: str):
    dst = tmp_path / "store"
    shutil.copytree("fixtures/demo", dst)
    (dst / "config" / "subscriptionGroup.json").write_text(groups)
    return dst


def test_subscription_group_retry_max_times_and_zero_retry_queues(tmp_path):
    dst = _store_with_groups(
        tmp_path,
        '{"subscriptionGroupTable":{'
        '"GID_three":{"groupName":"GID_three","retryMaxTimes":3,"retryQueueNums":1},'
        '"GID_drop":{"groupName":"GID_drop","retryMaxTimes":16,"retryQueueNums":0}}}',
    )
    _, r = run(
        [
            {"group": "GID_three", "topic": TOPIC, "outcome": "fail"},
            {"group": "GID_drop", "topic": TOPIC, "outcome": "fail"},
        ],
        S + 200_000,
        store=dst,
    )
    # a default 5.3.1 client sends maxReconsumeTimes 16 (getMaxReconsumeTimes of -1), which overrides the group's
    # retryMaxTimes 3 (request version 475 >= V3_4_9): after levels 3, 4, 5 (10 + 30 + 60 s) comes level 6, no DLQ
    assert consumer_events(r, "dlq", "GID_three") == []
    assert {e.detail["level"] for e in consumer_events(r, "send_back", "GID_three")} == {3, 4, 5, 6}
    # retryQueueNums 0: the broker answers SUCCESS and writes nothing
    drops = [e for e in consumer_events(r, "drop", "GID_drop") if e.time == S]  # the backlog, at once
    assert len(drops) == 11 and consumer_events(r, "send_back", "GID_drop") == []
    # the scenario's max_reconsume_times is the request's: 3 sends to the DLQ after 10 + 30 + 60 s, 1 after 10 s
    _, r2 = run(
        [{"group": "GID_three", "topic": TOPIC, "outcome": "fail", "max_reconsume_times": 3}], S + 200_000, store=dst
    )
    assert sorted({e.time for e in consumer_events(r2, "dlq")})[0] == S + 100_000
    _, r2 = run(
        [{"group": "GID_three", "topic": TOPIC, "outcome": "fail", "max_reconsume_times": 1}], S + 200_000, store=dst
    )
    assert sorted({e.time for e in consumer_events(r2, "dlq")})[0] == S + 10_000


def test_out_records_carry_what_the_broker_writes(tmp_path):
    st, r = run([{"group": "GID_fail", "topic": TOPIC, "outcome": "fail"}], S + 45_000)
    write_store(st, r, tmp_path / "out")
    out = Store.open(tmp_path / "out", load_broker_conf(CONF))
    recs = list(out.commitlog.iter_records())
    orig = next(x for x in recs if x.topic == TOPIC and x.queue_id == 0 and x.queue_offset == 0)
    mine = [
        x
        for x in recs
        if x.physical_offset >= st.commitlog.max_offset()
        and x.properties.get("UNIQ_KEY") == orig.properties["UNIQ_KEY"]
    ]
    parked, retry, parked2, retry2 = mine[:4]
    assert (parked.topic, parked.queue_id, parked.reconsume_times) == ("SCHEDULE_TOPIC_XXXX", 2, 1)
    p = parked.properties
    assert (p["DELAY"], p["REAL_TOPIC"], p["REAL_QID"], p["RETRY_TOPIC"], p["WAIT"]) == (
        "3",
        "%RETRY%GID_fail",
        "0",
        TOPIC,
        "false",
    )
    assert p["ORIGIN_MESSAGE_ID"] == offset_msg_id(orig.store_host, orig.physical_offset)
    assert parked.store_host == "10.0.0.1:10911" and parked.store_timestamp == S
    assert (retry.topic, retry.reconsume_times, retry.store_timestamp) == ("%RETRY%GID_fail", 1, S + 10_000)
    # the second send-back reads the %RETRY% record: ORIGIN_MESSAGE_ID and RETRY_TOPIC are kept
    assert (parked2.queue_id, parked2.reconsume_times, parked2.properties["DELAY"]) == (3, 2, "4")
    assert parked2.properties["ORIGIN_MESSAGE_ID"] == p["ORIGIN_MESSAGE_ID"]
    assert (retry2.topic, retry2.store_timestamp) == ("%RETRY%GID_fail", S + 40_000)
    offsets = out.config_files.consumer_offsets.offset_table
    # queue 3 also got the delay-level message the schedule service delivered during the run
    assert offsets["DemoTopicA@GID_fail"] == {0: 3, 1: 2, 2: 4, 3: 3}
    assert offsets["%RETRY%GID_fail@GID_fail"] == {0: 24}  # 12 level-3 and 12 level-4 deliveries consumed


def test_broker_49_keeps_the_original_store_host():
    _, r5 = run([{"group": "G", "topic": TOPIC, "outcome": "fail"}], S + 20_000)
    _, r4 = run([{"group": "G", "topic": TOPIC, "outcome": "fail"}], S + 20_000, version="4.9")
    m5 = r5.state["model"].appended
    m4 = r4.state["model"].appended
    src4 = r4.state["model"].message(m4[0].source_phys)
    assert m5[0].store_host == "10.0.0.1:10911"
    assert m4[0].store_host == src4.store_host
    assert not r4.state["model"].raw(m4[0]).endswith("\x02")  # 4.9.8 drops the last separator
    # same decisions and times
    assert [(e.time, e.event) for e in consumer_events(r4, "send_back")] == [
        (e.time, e.event) for e in consumer_events(r5, "send_back")
    ]


def test_pop_on_49_is_refused():
    with pytest.raises(ValueError, match="5.x"):
        run([{"group": "G", "topic": TOPIC, "mode": "pop"}], S + 1000, version="4.9")


def test_pop_unacked_is_revived_into_the_pop_retry_topic():
    pop = {"group": "GID_pop", "topic": TOPIC, "mode": "pop", "outcome": "fail", "invisible_time": "60s"}
    _, r = run([{**pop, "pop_random": 50}], S + 90_000)
    pops = [e for e in consumer_events(r, "pop") if e.time == S]
    assert len(pops) == 11 and {e.detail["invisible_until"] for e in pops} == {S + 60_000}
    # one request (randomQ 50: the topic first, queues 2, 3, 0, 1), one checkpoint per queue, all in the request's
    # revive queue: the request counter 0 -> queue 0
    assert [e.queue_id for e in pops] == [2] * 4 + [3] * 2 + [0] * 3 + [1] * 2
    assert len({e.detail["checkpoint"] for e in pops}) == 4 and {e.detail["revive_queue_id"] for e in pops} == {0}
    # long polling: the next request (counter 1) waits and gets the message the schedule service puts at S + 1 s
    late = [e for e in consumer_events(r, "pop") if e.time == S + 1000]
    assert len(late) == 1 and late[0].detail["revive_queue_id"] == 1
    revived = consumer_events(r, "revive")
    assert {e.topic for e in revived} == {"%RETRY%GID_pop_DemoTopicA"}
    assert all(e.detail["reconsume_times"] == 1 for e in revived)
    # PopReviveService (5.3.1): a checkpoint reaches the revive topic (timer, precision 1 s) at revive time - 1 s
    # = S + 59 s; the round, reviveInterval (1 s) later, reads it (endTime = its TIMER_DELIVER_MS), moves endTime
    # to now once now - endTime > 3 s on its 100 ms polls, and revives what is more than ackTimeInterval + 1 s =
    # 2 s overdue: queue 0's four checkpoints at S + 62.1 s (11 messages), queue 1's at S + 63.1 s
    assert [(e.time, e.detail["revive_time"]) for e in revived] == (
        [(S + 62_100, S + 60_000)] * 11 + [(S + 63_100, S + 61_000)]
    )
    assert [e.detail["queue_offset"] for e in revived] == list(range(12))  # %RETRY% queue 0, in revive order
    # the revived messages are popped again from the retry topic at once, reconsumeTimes 1
    again = [e for e in consumer_events(r, "pop") if e.topic == "%RETRY%GID_pop_DemoTopicA"]
    assert [(e.time, e.detail["queue_offset"], e.detail["reconsume_times"]) for e in again] == (
        [(S + 62_100, i, 1) for i in range(11)] + [(S + 63_100, 11, 1)]
    )


def test_pop_proxy_dead_letters_and_remoting_client_drops_past_the_limit():
    # invisibleTime 10 s: revived (reconsumeTimes 1) at S + 12.1 s (S + 13.1 s for the message popped at S + 1 s,
    # see the test above) and popped again at once; limit 0 retries
    pop = {
        "group": "GID_p",
        "topic": TOPIC,
        "mode": "pop",
        "outcome": "fail",
        "invisible_time": "10s",
        "pop_random": 50,
        "max_reconsume_times": 0,
    }
    _, r = run([pop], S + 20_000)
    # the proxy: reconsumeTimes 1 >= retryMaxTimes 0 + 1: forwarded to %DLQ%GID_p (record reconsumeTimes 2), acked
    dlq = consumer_events(r, "dlq")
    assert sorted(e.time for e in dlq) == [S + 12_100] * 11 + [S + 13_100]
    assert {(e.topic, e.detail["reconsume_times"]) for e in dlq} == {("%DLQ%GID_p", 2)}
    acks = consumer_events(r, "ack")
    assert sorted((e.time, e.topic) for e in acks) == sorted((e.time, "%RETRY%GID_p_DemoTopicA") for e in dlq)
    # a remoting client: failing at reconsumeTimes 0 = its maxReconsumeTimes, checkNeedAckOrDelay by age: the
    # backlog was born 100 s before S (>= 60 s: the next level, 120 s), so the message is invisible until S + 120 s
    # (a checkpoint delivered at S + 119 s, read at S + 120 s), revived at S + 122.1 s with reconsumeTimes 1 > 0:
    # the client acks it without consuming it, it never reaches a DLQ
    _, r = run([{**pop, "client": "remoting"}], S + 130_000)
    assert consumer_events(r, "dlq") == []
    assert [e.detail["invisible_until"] for e in consumer_events(r, "change_invisible") if e.time == S] == (
        [S + 120_000] * 11
    )
    drops = sorted(e.time for e in consumer_events(r, "drop"))
    assert drops[:11] == [S + 122_100] * 11 and len(drops) == 12
    assert sorted(e.time for e in consumer_events(r, "ack")) == drops


def test_pop_remoting_client_changes_the_invisible_time_of_a_failed_message():
    # changePopInvisibleTime: popDelayLevel[reconsumeTimes] = 10 s for the first failure (invisible_time 60 s
    # does not matter): a checkpoint of the one message, popTime S, reviveTime S + 10 s, delivered at S + 9 s;
    # the round reads it at S + 10 s and revives at S + 12.1 s, as a 10 s pop would be
    pop = {
        "group": "GID_r",
        "topic": TOPIC,
        "mode": "pop",
        "client": "remoting",
        "fail_times": 1,
        "invisible_time": "60s",
        "pop_random": 50,
        "match": {"uniq_key": "0A0000050D051E7C0DE50000000A0001"},
    }
    _, r = run([pop, {**pop, "match": {}, "fail_times": 0}], S + 20_000)
    changed = consumer_events(r, "change_invisible")
    assert [(e.time, e.detail["invisible_until"]) for e in changed] == [(S, S + 10_000)]
    revived = consumer_events(r, "revive")
    assert [(e.time, e.uniq_key, e.detail["revive_time"]) for e in revived] == [
        (S + 12_100, "0A0000050D051E7C0DE50000000A0001", S + 10_000)
    ]
    # popped again at once with reconsumeTimes 1, consumed and acked
    ok = [e for e in consumer_events(r, "ack") if e.uniq_key == "0A0000050D051E7C0DE50000000A0001"]
    assert [(e.time, e.topic) for e in ok] == [(S + 12_100, "%RETRY%GID_r_DemoTopicA")]


def test_pop_acked_is_not_revived():
    _, r = run([{"group": "GID_pop", "topic": TOPIC, "mode": "pop", "invisible_time": "30s"}], S + 90_000)
    assert len([e for e in consumer_events(r, "ack") if e.time == S]) == 11
    # and the message the schedule service delivers at S + 1 s: every pop acked when it is popped
    assert sorted(e.time for e in consumer_events(r, "ack")) == [S] * 11 + [S + 1000]
    assert consumer_events(r, "revive") == []


def test_crash_replays_what_was_consumed_after_the_last_persist():
    # offsets are persisted 10 s after start, then every 5 s; a crash at S + 7 s loses them all
    _, r = run(
        [{"group": "GID_ok", "topic": TOPIC}],
        S + 30_000,
        faults=[{"kind": "crash", "from": S + 7_000, "until": S + 8_000}],
    )
    times = sorted(e.time for e in consumer_events(r, "consume"))
    # the 11 backlog units, plus one delay-level message the schedule service put into DemoTopicA
    # between S and the crash, are consumed again at the restart
    assert times.count(S) == 11 and times.count(S + 8_000) == 12
    _, r2 = run(
        [{"group": "GID_ok", "topic": TOPIC}],
        S + 30_000,
        faults=[{"kind": "crash", "from": S + 12_000, "until": S + 13_000}],
    )
    assert sorted(e.time for e in consumer_events(r2, "consume")).count(S + 13_000) == 0


def test_committed_offsets_are_where_the_group_starts():
    # GID_demo has committed DemoTopicA 0:2, 1:2, 2:4, 3:1; the queues hold 3, 2, 4, 2 units
    _, r = run([{"group": "GID_demo", "topic": TOPIC}], S + 5_000)
    got = sorted((e.topic, e.queue_id, e.detail["queue_offset"]) for e in consumer_events(r, "consume") if e.time == S)
    # and %RETRY%GID_demo 0:0 over one stored retry record
    assert got == [("%RETRY%GID_demo", 0, 0), (TOPIC, 0, 2), (TOPIC, 3, 1)]


def test_scenario_errors():
    with pytest.raises(ScenarioError, match="group"):
        parse_scenario({"consumers": [{"topic": "T"}]}, S)
    with pytest.raises(ScenarioError, match="mode"):
        parse_scenario({"consumers": [{"group": "G", "topic": "T", "mode": "pull"}]}, S)
    # every array of tables is checked alike: an entry that is not a table is an error, never a traceback
    for doc, where in (
        ({"faults": [1]}, r"faults\[0\] must be a table"),
        ({"transaction": {"answers": ["commit"]}}, r"transaction.answers\[0\] must be a table"),
        ({"consumers": {"group": "G"}}, r"consumers must be an array of tables"),
        ({"faults": [{"kind": "put_failure", "probability": "x"}]}, r"faults\[0\].probability must be a number"),
        ({"transaction": {"answers": [{"answer": "commit", "probability": 2}]}}, r"answers\[0\].probability"),
    ):
        with pytest.raises(ScenarioError, match=where):
            parse_scenario(doc, S)


def test_new_consumer_keys_are_checked():
    for bad, word in (
        ({"poll_interval": "-1s"}, "poll_interval"),
        ({"batch_size": 0}, "batch_size"),
        ({"client": "grpc"}, "client"),
        ({"pop_random": 100}, "pop_random"),
        ({"fail_times": "x"}, "fail_times must be an integer"),  # was a ValueError traceback
        ({"max_reconsume_times": -2}, "max_reconsume_times"),
    ):
        with pytest.raises(ScenarioError, match=word):
            parse_scenario({"consumers": [{"group": "G", "topic": "T", **bad}]}, S)
    spec = parse_scenario({"consumers": [{"group": "G", "topic": "T"}]}, S).consumers[0]
    # a default client: long polling, 32 messages a pop request, remoting for push, the draw from --seed
    assert (spec.poll_interval_ms, spec.batch_size, spec.client_kind, spec.pop_random) == (0, 32, "remoting", None)


def test_poll_interval_takes_a_retry_at_the_consumers_next_pull():
    # pulls at S + 300k; the level-3 retry of the backlog (consumed and failed at S) is stored at S + 10 s, on the
    # schedule's grid, and pulled at the next tick, S + 10.2 s
    _, r = run([{"group": "GID_poll", "topic": TOPIC, "fail_times": 1, "poll_interval": "300ms"}], S + 60_000)
    first = {e.uniq_key for e in consumer_events(r, "consume") if e.time == S}
    ok = {e.time for e in consumer_events(r, "consume") if e.detail["outcome"] == "ok" and e.uniq_key in first}
    assert ok == {S + 10_200}
    assert all((e.time - S) % 300 == 0 for e in consumer_events(r, "consume"))  # every pull on the grid


def test_without_consumers_the_summary_is_unchanged():
    _, r = run([], S + 5_000)
    assert "consumers" not in r.summary


def test_scenario_consumer_settings_are_used() -> None:
    """The consumers read these from the typed BrokerConfig: a scenario setting them gets no "unused" warning."""
    broker = {"reviveQueueNum": 2, "popFromRetryProbability": 50, "listenPort": 20911, "reviveQueueNumber": 2}
    assert unused_settings(broker) == ["reviveQueueNumber"]


def test_crash_revives_again_what_was_revived_after_the_last_persist():
    # PopReviveService (5.3.1): a round starts at max(reviveOffset, the revive group's committed offset) and
    # commits its new offset in ConsumerOffsetManager; reviveOffset is read in the constructor, which runs in
    # BrokerController's constructor before consumerOffsetManager.load(), so a restarted broker starts at -1
    # and reads the revive queue from the offset last persisted to consumerOffset.json.
    # Here: 12 checkpointed messages revived at S + 12.1 s / S + 13.1 s (invisibleTime 10 s, see above), offsets
    # persisted at S + 10 s (nothing of the revive group yet), a crash at S + 14 s: the restart at S + 15 s reads
    # the revive queues from 0 again; its first round, reviveInterval (1 s) later, finds every checkpoint more
    # than 2 s overdue and revives the 12 messages a second time, at S + 16 s, into %RETRY% queue 0's
    # offsets 12..23 (its 12 records from the first revives are in the CommitLog: a crash keeps them)
    pop = {
        "group": "GID_p",
        "topic": TOPIC,
        "mode": "pop",
        "fail_times": 1,
        "invisible_time": "10s",
        "pop_random": 50,
    }
    _, r = run([pop], S + 40_000, faults=[{"kind": "crash", "from": S + 14_000, "until": S + 15_000}])
    revived = [(e.time, e.detail["queue_offset"], e.detail["revive_time"]) for e in consumer_events(r, "revive")]
    first = [(S + 12_100, i, S + 10_000) for i in range(11)] + [(S + 13_100, 11, S + 11_000)]
    again = [(S + 16_000, 12 + i, S + 10_000) for i in range(11)] + [(S + 16_000, 23, S + 11_000)]
    assert revived == first + again


def test_revive_waits_for_should_start_time_after_a_restart():
    # PopReviveService.run (5.3.1) waits in 1 s steps while now < BrokerController.shouldStartTime = the start
    # + disappearTimeAfterStart (MessageStoreConfig, -1 by default: no wait). The crash above with 3.5 s: the
    # restart at S + 15 s waits until S + 19 s (the first 1 s step past S + 18.5 s), then reviveInterval (1 s):
    # the 12 messages are revived a second time at S + 20 s instead of S + 16 s; the first revives, after the
    # start's gate at S + 4 s, are unchanged
    pop = {"group": "GID_p", "topic": TOPIC, "mode": "pop", "fail_times": 1, "invisible_time": "10s", "pop_random": 50}
    cfg = load_broker_conf(CONF).with_overrides({"disappearTimeAfterStart": 3500})
    sc = parse_scenario({"consumers": [pop], "faults": [{"kind": "crash", "from": S + 14_000, "until": S + 15_000}]}, S)
    r = simulate(Store.open("fixtures/demo", cfg), cfg, S, S + 40_000, sc)
    revived = [(e.time, e.detail["queue_offset"]) for e in consumer_events(r, "revive")]
    first = [(S + 12_100, i) for i in range(11)] + [(S + 13_100, 11)]
    assert revived == first + [(S + 20_000, 12 + i) for i in range(12)]
