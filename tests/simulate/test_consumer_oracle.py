"""The consumers against real RocketMQ 5.3.1 runs (../shared/oracle/retry-dlq-5.3.1, pop-revive-5.3.1).

Each pair's A store, broker.conf and scenario.toml are replayed from T_servicesStartedMs to T_stopMs; the values
compared were written by the real broker (B/ and B.manifest.json), read by eye in the pair's README.
"""

import json

import pytest

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.config_json import parse_topics
from mqtool.formats.offsets_json import parse_consumer_offsets
from mqtool.simulate.output import write_store
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import load_scenario
from mqtool.store.store import Store

pytestmark = pytest.mark.oracle


def replay(tmp_path, pair: str):
    need_oracle()
    root = ORACLE / pair
    m = json.loads((root / "B.manifest.json").read_text())
    cfg = load_broker_conf(root / "broker.conf")
    st = Store.open(copy_with_wheel(root / "A", tmp_path / "A"), cfg)
    start, stop = m["T_servicesStartedMs"], m["T_stopMs"]
    r = simulate(st, cfg, start, stop, load_scenario(root / "scenario.toml", start), 0)
    write_store(st, r, tmp_path / "out")
    return m, r, tmp_path / "out"


def test_push_retry_pair_consumes_when_the_real_consumer_did(tmp_path):
    m, r, _ = replay(tmp_path, "retry-dlq-5.3.1")
    sim = [e for e in r.events if e.service == "consumer" and e.event == "consume"]
    assert [(e.physical_offset, e.detail["reconsume_times"], e.detail["outcome"]) for e in sim] == [
        (c["physicalOffset"], c["reconsumeTimes"], c["outcome"]) for c in m["consumes"]
    ]
    # the real consumer polled every 100 ms: the simulated one (same poll_interval) is within 1 s of it
    assert all(abs(e.time - c["timeMs"]) <= 1000 for e, c in zip(sim, m["consumes"], strict=True))
    dlq = [e for e in r.events if e.event == "dlq"]
    # M1 consumed at reconsumeTimes 3 >= maxReconsumeTimes 3: %DLQ%GID_r/0 @5178, the record holds 4
    assert [(e.topic, e.queue_id, e.new_physical_offset, e.detail["reconsume_times"]) for e in dlq] == [
        ("%DLQ%GID_r", 0, 5178, 4)
    ]


def test_push_retry_pair_config_files(tmp_path):
    _, _, out = replay(tmp_path, "retry-dlq-5.3.1")
    topics = parse_topics((out / "config" / "topics.json").read_text())
    real = parse_topics((ORACLE / "retry-dlq-5.3.1" / "B" / "config" / "topics.json").read_text())
    assert topics.topic_config_table == real.topic_config_table  # %RETRY%GID_r and %DLQ%GID_r: 1/1 queues, perm 6
    assert topics.data_version.counter == 3  # 1 in A, one step per created topic
    offsets = parse_consumer_offsets((out / "config" / "consumerOffset.json").read_text())
    assert offsets.offset_table == {"TopicR@GID_r": {0: 4}, "%RETRY%GID_r@GID_r": {0: 6}}
    assert offsets.group_topic_map == {"GID_r": ["TopicR", "%RETRY%GID_r"]}  # getGroupTopicMap, HashSet order
    # byte for byte what the broker persisted at shutdown (dataVersion untouched since A)
    real_bytes = (ORACLE / "retry-dlq-5.3.1" / "B" / "config" / "consumerOffset.json").read_bytes()
    assert (out / "config" / "consumerOffset.json").read_bytes() == real_bytes


def test_pop_pair_pops_acks_and_dead_letters_as_the_proxy_did(tmp_path):
    m, r, _ = replay(tmp_path, "pop-revive-5.3.1")
    pops = [e for e in r.events if e.event == "pop"]
    # P1-P4 in one request at the start; P2, P3 revived into %RETRY%GID_p_TopicP and popped together at +8.1 s;
    # P2 revived again and popped at +16.2 s with reconsumeTimes 2 >= retryMaxTimes 1 + 1: the proxy's TO_DLQ
    assert [(e.topic, e.detail["queue_offset"], e.detail["reconsume_times"]) for e in pops] == [
        (p["brokerTopic"], p["queueOffset"], p["reconsumeTimes"]) for p in m["pops"]
    ]
    assert all(abs(e.time - p["popTime"]) <= 1000 for e, p in zip(pops, m["pops"], strict=True))
    assert len({e.detail["checkpoint"] for e in pops}) == 3  # one checkpoint per request and queue
    acks = [(e.topic, e.detail["queue_offset"]) for e in r.events if e.event == "ack"]
    assert acks == [(a["topic"], a["offset"]) for a in m["acks"]]  # the DLQ'd P2 is acked after the forward
    dlq = [e for e in r.events if e.event == "dlq"]
    assert [(e.topic, e.new_physical_offset, e.detail["reconsume_times"]) for e in dlq] == [("%DLQ%GID_p", 6550, 3)]
    revives = [e for e in r.events if e.event == "revive"]
    # 3.03-3.05 s after reviveTime in the real run: the round moves endTime to now once it is more than 3 s past
    # the acks' deliver time (= reviveTime), on its 100 ms polls
    assert all(3000 < e.time - e.detail["revive_time"] <= 3100 for e in revives)
    real = [x["storeTimestamp"] for x in m["revivedRecords"]]
    assert len(revives) == 3 and all(abs(e.time - t) <= 1000 for e, t in zip(revives, real, strict=True))


def test_pop_pair_checkpoint_and_config_files(tmp_path):
    _, _, out = replay(tmp_path, "pop-revive-5.3.1")
    st = Store.open(out, load_broker_conf(ORACLE / "pop-revive-5.3.1" / "broker.conf"))
    ck = st.commitlog.read(916)  # the first checkpoint: P1-P4 of one request
    assert json.loads(ck.body)["d"] == [0, 1, 2, 3] and json.loads(ck.body)["n"] == 4 and ck.total_size == 428
    topics = parse_topics((out / "config" / "topics.json").read_text())
    real = parse_topics((ORACLE / "pop-revive-5.3.1" / "B" / "config" / "topics.json").read_text())
    assert set(topics.topic_config_table) == set(real.topic_config_table)  # + %RETRY%GID_p_TopicP, %RETRY%GID_p, %DLQ%
    assert topics.data_version.counter == 4
    offsets = parse_consumer_offsets((out / "config" / "consumerOffset.json").read_text())
    assert offsets.offset_table["TopicP@GID_p"] == {0: 4} and offsets.offset_table["%RETRY%GID_p_TopicP@GID_p"] == {
        0: 3
    }
    assert "rmq_sys_REVIVE_LOG_OracleCluster@CID_RMQ_SYS_REVIVE_GROUP" in offsets.offset_table
    assert offsets.group_topic_map == {
        "GID_p": ["%RETRY%GID_p_TopicP", "TopicP"],
        "CID_RMQ_SYS_REVIVE_GROUP": ["rmq_sys_REVIVE_LOG_OracleCluster"],
    }
