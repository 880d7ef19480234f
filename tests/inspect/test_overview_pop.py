"""`overview`'s `pop` section (spec §15) on a store the simulator wrote: the scenario of
tests/store/test_pop.py (GID_ok pops and acks, GID_bad pops and fails, invisibleTime 60 s, from S),
read 70 s later: GID_bad's 12 checkpoints revived into its pop retry topic, popped again there."""

import json

import jsonschema

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect import load_schema
from mqtool.inspect.overview import overview
from mqtool.simulate.output import write_store
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store

S = 1_790_000_100_000
GROUPS = [{"group": "GID_ok", "topic": "DemoTopicA", "mode": "pop", "invisible_time": "60s"},
          {"group": "GID_bad", "topic": "DemoTopicA", "mode": "pop", "outcome": "fail", "invisible_time": "60s"}]


def test_pop_per_group(tmp_path):
    cfg = load_broker_conf("fixtures/demo.broker.conf")
    st = Store.open("fixtures/demo", cfg)
    r = simulate(st, cfg, S, S + 70_000, parse_scenario({"consumers": GROUPS}, S), broker_version="5.3")
    write_store(st, r, tmp_path / "out")
    doc = overview(Store.open(tmp_path / "out", cfg), S + 70_000)
    jsonschema.Draft202012Validator(load_schema("overview")).validate(json.loads(json.dumps(doc)))
    pop = doc["pop"]
    assert pop["revive_topics"] == ["rmq_sys_REVIVE_LOG_DemoCluster"]
    assert (pop["checkpoints"], pop["orphan_acks"]) == (36, 0)
    second_pop = min(e.time for e in r.events if e.service == "consumer" and e.event == "pop"
                     and e.topic == "%RETRY%GID_bad_DemoTopicA")
    assert pop["groups"] == [
        {"group": "GID_bad", "topic": "%RETRY%GID_bad_DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 0,
         "invisible": 12, "due": 0, "revived": 0, "next_revive_time": second_pop + 60_000},
        {"group": "GID_bad", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 0, "invisible": 0,
         "due": 0, "revived": 12, "next_revive_time": None},
        {"group": "GID_ok", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 12, "invisible": 0,
         "due": 0, "revived": 0, "next_revive_time": None}]
    assert not [f for f in doc["findings"] if "not yet" in f["message"]]
