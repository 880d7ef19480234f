"""`trace --key K --topic T`: only messages sent to T (stored there, or parked for it with REAL_TOPIC T),
and the IndexFile is asked for T (plus the parking topics) only. Demo fixture (fixtures/README.md):
N2 carries order-1001 on DemoTopicA; D18 waits in SCHEDULE_TOPIC_XXXX for DemoTopicA."""

import json
import subprocess
import sys

import pytest

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace
from mqtool.trace.indexfile import indexfile_finder
from mqtool.trace.model import TraceError

CONF = "fixtures/demo.broker.conf"


@pytest.fixture(scope="module")
def demo():
    return Store.open("fixtures/demo", load_broker_conf(CONF))


def _run(*args):
    return subprocess.run([sys.executable, "-m", "mqtool", "trace", "fixtures/demo", "--config", CONF, *args,
                           "--json"], capture_output=True, text=True)


def test_topic_keeps_the_messages_sent_to_it():
    r = _run("--key", "order-1001", "--topic", "DemoTopicA")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout.splitlines()[0])["query"]
    assert (q["by"], q["value"], q["topic"], q["lookup"]) == ("key", "order-1001", "DemoTopicA", "indexfile")
    r = _run("--key", "order-1001", "--topic", "DemoTopicB")
    assert r.returncode == 1 and "not found" in r.stderr


def test_a_parked_message_is_found_by_its_real_topic(demo):
    [t] = trace(demo, TraceQuery(key="D18", topic="DemoTopicA"))
    assert [r.record.topic for r in t.records] == ["SCHEDULE_TOPIC_XXXX"]
    assert trace(demo, TraceQuery(key="D18", topic="DemoTopicB")) == []


def test_without_topic_the_query_json_is_unchanged(demo):
    [t] = trace(demo, TraceQuery(key="order-1001"))
    assert "topic" not in TraceQuery(key="order-1001").as_dict() and t.records


def test_the_indexfile_is_asked_for_the_topic_only(demo):
    finder, ki = indexfile_finder(demo)
    asked = []
    real = ki.offsets

    def spy(key, topics=None, *a, **k):
        asked.append(topics)
        return real(key, topics, *a, **k)

    ki.offsets = spy
    try:
        finder.by_key("order-1001", "DemoTopicA")
        finder.by_key("order-1001")
    finally:
        ki.close()
    assert asked[0][0] == "DemoTopicA" and set(asked[0][1:]) <= {"SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer",
                                                                 "RMQ_SYS_TRANS_HALF_TOPIC"}
    assert "DemoTopicB" not in asked[0] and asked[1] is None  # without --topic: every known topic


def test_topic_needs_key():
    with pytest.raises(TraceError):
        TraceQuery(uniq_key="ABC", topic="DemoTopicA")
