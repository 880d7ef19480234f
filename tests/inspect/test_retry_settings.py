"""The retry view shows each group's SubscriptionGroupConfig: a copy of the demo fixture (GID_demo has
a %RETRY% and a %DLQ% topic, fixtures/README.md) given a subscriptionGroup.json written by the builder."""

import json
import shutil

import jsonschema

from mqtool.builder.config import dump_config
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.config_json import GroupConfig, GroupRetryPolicy, SubscriptionGroups
from mqtool.formats.offsets_json import DataVersion
from mqtool.inspect import load_schema
from mqtool.inspect.retry import retry_view
from mqtool.store.store import Store

CONF = "fixtures/demo.broker.conf"
A = 1_790_000_020_100


def test_group_settings_from_subscription_group_json(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree("fixtures/demo", root)
    groups = SubscriptionGroups({"GID_demo": GroupConfig("GID_demo", retry_queue_nums=2, retry_max_times=3,
                                                         consume_broadcast_enable=False, group_sys_flag=1,
                                                         group_retry_policy=GroupRetryPolicy("EXPONENTIAL"))},
                                DataVersion(1, 0, A))
    (root / "config/subscriptionGroup.json").write_text(dump_config("subscriptionGroup.json", groups))
    doc = retry_view(Store.open(root, load_broker_conf(CONF)), A)
    jsonschema.Draft202012Validator(load_schema("retry")).validate(json.loads(json.dumps(doc)))
    g = {x["group"]: x for x in doc["groups"]}["GID_demo"]
    assert g["settings"] == {"retry_queue_nums": 2, "retry_max_times": 3, "consume_enable": True,
                             "consume_broadcast_enable": False, "consume_message_orderly": False,
                             "consume_from_min_enable": True, "group_sys_flag": 1, "broker_id": 0,
                             "which_broker_when_consume_slowly": 1, "consume_timeout_minute": 15,
                             "group_retry_policy": "EXPONENTIAL"}


def test_group_without_an_entry_has_null_settings():
    doc = retry_view(Store.open("fixtures/demo", load_broker_conf(CONF)), A)
    assert [g["settings"] for g in doc["groups"]] == [None] * len(doc["groups"]) and doc["groups"]
