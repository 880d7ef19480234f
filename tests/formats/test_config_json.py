"""topics.json re-serialised byte for byte (files RocketMQ 5.3.1 and 4.9.8 wrote, main and .bak);
subscriptionGroup.json read leniently."""

import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.config_json import (
    GroupConfig,
    TopicConfig,
    Topics,
    dump_topics,
    parse_subscription_groups,
    parse_topics,
)
from mqtool.formats.offsets_json import ConfigFileError, DataVersion

TOPIC_FILES = [f"{pair}/{side}/config/topics.json{bak}" for pair in ("pair_default", "pair-4.9")
               for side in ("A", "B") for bak in ("", ".bak")]


@pytest.mark.parametrize("rel", TOPIC_FILES)
def test_real_topics_json_rebuilds_byte_exact(rel):
    need_oracle()
    text = (ORACLE / rel).read_bytes().decode("utf-8")
    assert dump_topics(parse_topics(text)) == text


def test_topics_values_as_the_broker_wrote_them():
    need_oracle()
    t = parse_topics((ORACLE / "pair_default/B/config/topics.json").read_text())
    assert t.data_version == DataVersion(4, 0, 1795376132639)
    s = t.topic_config_table["SCHEDULE_TOPIC_XXXX"]
    assert (s.read_queue_nums, s.write_queue_nums, s.perm, s.attributes) == (18, 18, 6, {})
    assert t.topic_config_table["OracleCluster"].perm == 7 and t.topic_config_table["OracleCluster"].writeable
    t4 = parse_topics((ORACLE / "pair-4.9/B/config/topics.json").read_text())
    assert t4.data_version == DataVersion(5, None, 1795379351940)  # 4.x: no stateVersion
    assert all(c.attributes is None for c in t4.topic_config_table.values())  # 4.x: no attributes


def test_attributes_and_lenient_input_hand_computed():
    text = "{topicConfigTable:{'T':{attributes:{'queue.type':'BatchCQ'},perm:'6',readQueueNums:2,order:true,},},}"
    t = parse_topics(text)
    c = t.topic_config_table["T"]
    assert c == TopicConfig("T", 2, 16, 6, "SINGLE_TAG", 0, True, {"queue.type": "BatchCQ"})
    assert dump_topics(Topics({"T": c}, None)) == (
        '{\n\t"topicConfigTable":{\n\t\t"T":{\n'
        '\t\t\t"attributes":{\n\t\t\t\t"queue.type":"BatchCQ"\n\t\t\t},\n'
        '\t\t\t"order":true,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":2,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n'
        '\t\t\t"topicName":"T",\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":16\n\t\t}\n\t}\n}')


def test_bad_topics_json_says_where():
    with pytest.raises(ConfigFileError) as e:
        parse_topics('{"topicConfigTable":{"T":{"perm":"rw"}}}')
    assert "T.perm must be an integer" in str(e.value) and e.value.line == 1


def test_subscription_groups_read_leniently():
    text = """{
\t"dataVersion":{"counter":2,"stateVersion":0,"timestamp":1795376132639},
\t"forbiddenTable":{"G1":{"TopicA":1}},
\t"subscriptionGroupTable":{
\t\t"G1":{"brokerId":0,"consumeBroadcastEnable":false,"groupName":"G1","groupRetryPolicy":{"type":"CUSTOMIZED"},
\t\t\t"retryMaxTimes":3,"retryQueueNums":1,"groupSysFlag":0,"attributes":{}},
\t\t"G2":{}
\t}
}"""
    g = parse_subscription_groups(text)
    assert g.data_version == DataVersion(2, 0, 1795376132639)
    assert g.subscription_group_table["G1"] == GroupConfig("G1", consume_broadcast_enable=False, retry_max_times=3)
    assert g.subscription_group_table["G2"] == GroupConfig("G2")  # every default of SubscriptionGroupConfig
    assert g.forbidden_table == {"G1": {"TopicA": 1}}
