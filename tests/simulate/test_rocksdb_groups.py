"""Subscription groups from RocksDB config (`config/subscriptionGroups/`, spec §14) in the store model and
the simulator's consumers.

The databases are written by `builder/rocksdb.py` (no store of a real RocksDB-mode broker is available);
the group values are `SubscriptionGroupConfig` JSON as `RocksDBSubscriptionGroupManager.putSubscriptionGroupConfig`
stores them. Expected DLQ times are the hand computation of `test_consumers.py`: retryMaxTimes 3 means levels
3, 4, 5 (10 + 30 + 60 s) after the consumption at S, then the DLQ at S + 100 s.
"""

import shutil

import pytest

from mqtool.builder.rocksdb import write_kv_config
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect.overview import overview
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store

S = 1_790_000_100_000
CONF = "fixtures/demo.broker.conf"
TOPIC = "DemoTopicA"
GROUPS = {"GID_three": b'{"groupName":"GID_three","retryMaxTimes":3,"retryQueueNums":1}',
          "GID_drop": b'{"groupName":"GID_drop","retryMaxTimes":16,"retryQueueNums":0}'}


def _store(tmp_path, kv_counter: int | None = None, json_groups: str | None = None):
    dst = tmp_path / "store"
    shutil.copytree("fixtures/demo", dst)
    dv = None if kv_counter is None else b'{"counter":%d,"stateVersion":0,"timestamp":1790000000000}' % kv_counter
    write_kv_config(dst / "config" / "subscriptionGroups", GROUPS, dv)
    if json_groups is not None:
        (dst / "config" / "subscriptionGroup.json").write_text(json_groups)
    return dst


def _events(r, event, group):
    return [e for e in r.events if e.service == "consumer" and e.event == event and e.detail["group"] == group]


def test_groups_from_rocksdb_when_the_json_file_is_absent(tmp_path):
    st = Store.open(_store(tmp_path), load_broker_conf(CONF))
    assert st.config_files.subscription_groups_source == "rocksdb"
    g = st.config_files.subscription_groups.subscription_group_table
    assert {k: (v.retry_max_times, v.retry_queue_nums) for k, v in g.items()} == {"GID_three": (3, 1),
                                                                                   "GID_drop": (16, 0)}
    doc = overview(st, S)
    assert doc["config_sources"] == {"consumer_offsets": "json", "topics": None, "topics_file": None,
                                     "subscription_groups": "rocksdb"}
    read = {p["path"]: p["read"] for p in doc["paths"]}
    assert read["config/subscriptionGroups"] is True
    assert [f["message"] for f in doc["findings"] if "not yet read" in f["message"]] == []


@pytest.mark.parametrize(("json_counter", "source", "retry_max_times"), [(9, "json", 5), (2, "rocksdb", 3)],
                         ids=["the_newer_json_copy_wins", "an_older_json_copy_is_not_used"])
def test_the_copy_with_the_higher_counter_wins(tmp_path, json_counter, source, retry_max_times):
    """RocksDB's copy says counter 4; the JSON copy (retryMaxTimes 5) is read only when its counter is higher."""
    json_groups = ('{"dataVersion":{"counter":' + str(json_counter) + ',"stateVersion":0,"timestamp":1790000000000},'
                   '"subscriptionGroupTable":{"GID_three":{"groupName":"GID_three","retryMaxTimes":5}}}')
    st = Store.open(_store(tmp_path, kv_counter=4, json_groups=json_groups))
    assert st.config_files.subscription_groups_source == source
    assert st.config_files.subscription_groups.subscription_group_table["GID_three"].retry_max_times == retry_max_times


def test_simulated_consumers_take_retry_settings_from_rocksdb(tmp_path):
    cfg = load_broker_conf(CONF)
    st = Store.open(_store(tmp_path), cfg)
    sc = parse_scenario({"consumers": [{"group": "GID_three", "topic": TOPIC, "outcome": "fail"},
                                       {"group": "GID_drop", "topic": TOPIC, "outcome": "fail"}]}, S)
    r = simulate(st, cfg, S, S + 200_000, sc, broker_version="5.3")
    # retryMaxTimes 3 comes from RocksDB, but a default 5.3.1 push client's request carries 16, which wins
    assert st.config_files.subscription_groups.subscription_group_table["GID_three"].retry_max_times == 3
    assert _events(r, "dlq", "GID_three") == []
    # retryQueueNums 0: the broker answers SUCCESS and writes nothing (the 11 backlog units, at once)
    assert len([e for e in _events(r, "drop", "GID_drop") if e.time == S]) == 11
    assert _events(r, "send_back", "GID_drop") == []
