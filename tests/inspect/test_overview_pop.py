"""`overview`'s `pop` section (spec §15) on a store the simulator wrote: the scenario of
tests/popkit.py (GID_ok pops and acks, GID_bad pops and fails, invisibleTime 60 s, from S),
read 70 s later: GID_bad's 12 checkpoints revived into its pop retry topic, popped again there."""

import json

import jsonschema
from popkit import BY_GROUP_AT_70S, REVIVE, S, pop_store

from mqtool.inspect import load_schema
from mqtool.inspect.overview import overview


def test_pop_per_group(tmp_path_factory):
    store, _r = pop_store(tmp_path_factory, S + 70_000)
    doc = overview(store, S + 70_000)
    jsonschema.Draft202012Validator(load_schema("overview")).validate(json.loads(json.dumps(doc)))
    pop = doc["pop"]
    assert pop["revive_topics"] == [REVIVE]
    # 24 first pops in 10 checkpoints (one per request and queue), 12 pops of the revived messages in 2; every
    # ack pairs with its checkpoint
    assert (pop["checkpoints"], pop["orphan_acks"]) == (12, 0)
    assert pop["groups"] == BY_GROUP_AT_70S
    assert not [f for f in doc["findings"] if "not yet" in f["message"]]
