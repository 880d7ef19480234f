"""The builder writes the ConfigManager files byte-exactly: every topics.json, timermetrics and
transactionMetrics (and .bak) the real 5.3.1 / 4.9.8 brokers of the oracle pairs wrote comes back
identical from its parsed model; subscriptionGroup.json (no real file exists) is checked against a
file written by hand from the 5.3.1 / 4.9.8 sources' member lists."""

import pytest

from conftest import ORACLE, need_oracle
from mqtool.builder.config import rebuild_config_dir, write_config
from mqtool.builder.writer import StoreWriter
from mqtool.errors import MqtoolError
from mqtool.formats.config_json import GroupConfig, SubscriptionGroups, parse_subscription_groups
from mqtool.formats.metrics_json import Metric, TopicMetrics
from mqtool.formats.offsets_json import DataVersion

CONFIG_DIRS = [f"{pair}/{side}/config" for pair in ("pair_default", "pair-4.9") for side in ("A", "B")]


@pytest.mark.parametrize("rel", CONFIG_DIRS)
def test_oracle_config_dirs_rebuild_byte_exact(rel, tmp_path):
    need_oracle()
    src = ORACLE / rel
    written = rebuild_config_dir(src, tmp_path)
    assert "topics.json" in written and "topics.json.bak" in written
    if rel.startswith("pair_default"):  # 5.x brokers persist the metrics; 4.9.8 has none
        assert "timermetrics" in written and "transactionMetrics" in written
    for name in written:
        assert (tmp_path / name).read_bytes() == (src / name).read_bytes(), name


def test_rebuild_never_writes_into_its_input(tmp_path):
    with pytest.raises(MqtoolError):
        rebuild_config_dir(tmp_path, tmp_path)


SUB_5X = """{
\t"dataVersion":{
\t\t"counter":1,
\t\t"stateVersion":0,
\t\t"timestamp":1795376092000
\t},
\t"forbiddenTable":{},
\t"subscriptionGroupTable":{
\t\t"GID_A":{
\t\t\t"attributes":{},
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":false,
\t\t\t"consumeEnable":true,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"consumeMessageOrderly":false,
\t\t\t"consumeTimeoutMinute":15,
\t\t\t"groupName":"GID_A",
\t\t\t"groupRetryPolicy":{
\t\t\t\t"type":"CUSTOMIZED"
\t\t\t},
\t\t\t"groupSysFlag":0,
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":3,
\t\t\t"retryQueueNums":2,
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t}
\t}
}"""


def test_builder_writes_subscription_group_and_bak(tmp_path):
    groups = SubscriptionGroups({"GID_A": GroupConfig("GID_A", consume_broadcast_enable=False, retry_max_times=3,
                                                      retry_queue_nums=2)}, DataVersion(1, 0, 1795376092000))
    with StoreWriter(tmp_path) as w:
        w.write_config("subscriptionGroup.json", groups)
        assert (tmp_path / "config/subscriptionGroup.json").read_text() == SUB_5X
        later = SubscriptionGroups(groups.subscription_group_table, DataVersion(2, 0, 1795376093000))
        w.write_config("subscriptionGroup.json", later)
    assert (tmp_path / "config/subscriptionGroup.json.bak").read_text() == SUB_5X  # string2File's backup
    assert parse_subscription_groups((tmp_path / "config/subscriptionGroup.json").read_text()) == later


def test_4x_subscription_group_has_the_4x_members_only():
    text = ('{\n\t"dataVersion":{\n\t\t"counter":0,\n\t\t"timestamp":5\n\t},\n\t"subscriptionGroupTable":{\n'
            '\t\t"G":{\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":true,\n\t\t\t"consumeEnable":true,\n'
            '\t\t\t"consumeFromMinEnable":true,\n\t\t\t"groupName":"G",\n'
            '\t\t\t"notifyConsumerIdsChangedEnable":true,\n\t\t\t"retryMaxTimes":16,\n\t\t\t"retryQueueNums":1,\n'
            '\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}\n\t}\n}')
    g = parse_subscription_groups(text)
    assert g.forbidden_table is None and g.data_version == DataVersion(0, None, 5)
    from mqtool.builder.config import dump_config
    assert dump_config("subscriptionGroup.json.bak", g) == text


def test_builder_writes_timer_metrics_compact(tmp_path):
    m = TopicMetrics("timingCount", {"OracleTopicB": Metric(2, 7), "OracleTopicA": Metric(3, 7)},
                     DataVersion(7, 0, 7))
    with StoreWriter(tmp_path) as w:
        write_config(w, "timermetrics", m)
    # the broker's 2048-bin ConcurrentHashMap puts OracleTopicA before OracleTopicB (as the real A file)
    assert (tmp_path / "config/timermetrics").read_text() == (
        '{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":7},"timingCount":{'
        '"OracleTopicA":{"count":3,"timeStamp":7},"OracleTopicB":{"count":2,"timeStamp":7}}}')


def test_unknown_config_name_is_refused():
    from mqtool.builder.config import dump_config
    with pytest.raises(MqtoolError):
        dump_config("broker.conf", None)
