"""`inspect STORE retry`: retry backlog, %RETRY% lag and DLQ contents per group, from what is stored.

Two stores: the demo fixture (fixtures/README.md: GID_demo sent N2 back at level 3, delivered at
+10110 and not consumed; N3 with delay level -1 straight to %DLQ%GID_demo; the long group's level-1
retry delivered at +1150), and a store written by `simulate --out` from the demo with two failing
groups. The simulation starts at the demo's last activity A; DemoTopicA's backlog is consumed at A:
- GID_fail (max 16): level 3 due A+10 s, level 4 due A+40 s, level 5 sent back at A+40 s, due
  A+100 s: at A+45 s every message sits in SCHEDULE_TOPIC_XXXX queue 4, reconsumeTimes 3;
- GID_max1 (max_reconsume_times 1): level 3, then at A+10 s reconsumeTimes 1 >= 1: %DLQ%GID_max1,
  stored with reconsumeTimes 2 and ORIGIN_MESSAGE_ID = the original's offsetMsgId.
"""

import json
import subprocess
import sys

import jsonschema
import pytest

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect import load_schema
from mqtool.inspect.retry import retry_view
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace

CONF = "fixtures/demo.broker.conf"
A = 1_790_000_020_100
N1_MSG_ID = "0A00000100002A9F0000000000000000"  # 10.0.0.1:10911, physical offset 0
N3_MSG_ID = "0A00000100002A9F00000000000001C8"  # offset 456 (fixtures/README.md)


def validate(doc):
    jsonschema.Draft202012Validator(load_schema("retry")).validate(json.loads(json.dumps(doc)))


def by_group(doc):
    return {g["group"]: g for g in doc["groups"]}


@pytest.fixture(scope="module")
def demo():
    return Store.open("fixtures/demo", load_broker_conf(CONF))


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    d = tmp_path_factory.mktemp("retry")
    sc = d / "sc.toml"
    sc.write_text('[[consumers]]\ngroup = "GID_fail"\ntopic = "DemoTopicA"\noutcome = "fail"\n\n'
                  '[[consumers]]\ngroup = "GID_max1"\ntopic = "DemoTopicA"\noutcome = "fail"\n'
                  'max_reconsume_times = 1\n')
    out = d / "out"
    r = subprocess.run([sys.executable, "-m", "mqtool", "simulate", "fixtures/demo", "--config", CONF,
                        "--scenario", str(sc), "--until", "+45s", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return Store.open(out, load_broker_conf(CONF))


def test_demo_groups(demo):
    doc = retry_view(demo, A)
    validate(doc)
    g = by_group(doc)
    assert sorted(g) == ["GID_demo", "GID_demo_long_" + "x" * 114]
    gd = g["GID_demo"]
    assert gd["backlog"] == {"count": 0, "next_due_ms": None, "levels": []}  # delivered at +10110
    assert gd["retry_queues"] == [{"queue_id": 0, "min_offset": 0, "max_offset": 1, "consumer_offset": 0, "lag": 1}]
    (m,) = gd["dlq"]["messages"]
    assert gd["dlq"]["count"] == 1
    assert (m["keys"], m["origin_topic"], m["origin_message_id"], m["reconsume_times"], m["store_timestamp"]) == (
        ["N3", "order-1002"], "DemoTopicA", N3_MSG_ID, 1, 1_790_000_000_101)
    assert doc["totals"] == {"groups": 2, "retry_backlog": 0, "retry_lag": 2, "dlq_messages": 1}
    only = retry_view(demo, A, "GID_demo")
    assert [x["group"] for x in only["groups"]] == ["GID_demo"]
    none = retry_view(demo, A, "GID_nobody")  # a group the store never saw: empty, not an error
    assert none["groups"][0]["dlq"]["count"] == 0 and none["groups"][0]["retry_queues"] == []


def test_simulated_backlog_per_level_and_dlq(simulated):
    doc = retry_view(simulated, A + 45_000)
    validate(doc)
    g = by_group(doc)
    fail = g["GID_fail"]["backlog"]
    assert [lv["level"] for lv in fail["levels"]] == [5]
    (lv,) = fail["levels"]
    assert lv["count"] >= 11 and lv["queue_id"] == 4 and lv["delay_ms"] == 60_000
    assert fail["next_due_ms"] == lv["next_due_ms"] == A + 100_000 and lv["overdue_ms"] == 0
    assert (lv["head"]["keys"], lv["head"]["reconsume_times"], lv["head"]["origin_message_id"]) == (
        ["N1", "order-1000"], 3, N1_MSG_ID)
    dlq = g["GID_max1"]["dlq"]
    assert g["GID_max1"]["backlog"]["count"] == 0 and dlq["count"] == len(dlq["messages"]) >= 11
    first = dlq["messages"][0]
    assert (first["keys"], first["origin_message_id"], first["reconsume_times"], first["store_timestamp"]) == (
        ["N1", "order-1000"], N1_MSG_ID, 2, A + 10_000)
    assert doc["totals"]["dlq_messages"] == 1 + dlq["count"]  # GID_demo's N3 as well
    overdue = retry_view(simulated, A + 160_000, "GID_fail")["groups"][0]["backlog"]["levels"][0]
    assert overdue["overdue_ms"] == 60_000


def test_trace_from_a_dlq_record_reaches_the_original(simulated):
    dlq = by_group(retry_view(simulated, A + 45_000))["GID_max1"]["dlq"]["messages"][0]
    (t,) = trace(simulated, TraceQuery(offset=dlq["physical_offset"]))
    roles = [(r.record.topic, r.role) for r in t.records if r.record.reconsume_times or r.role == "stored"]
    assert roles[0] == ("DemoTopicA", "stored") and t.records[0].record.physical_offset == 0
    assert ("%DLQ%GID_max1", "dlq") in roles and ("%RETRY%GID_max1", "retry") in roles
    # GID_fail's retries of the same message come later: the message still waits at level 5 for it
    assert "dead_lettered" in [s.stage for s in t.stages] and t.verdict.state == "waiting"
