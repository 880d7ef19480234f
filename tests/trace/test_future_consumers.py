"""`trace --until --scenario`: consumer groups continue the timeline (retries, DLQ), hand-computed times.

The demo store's last activity is A = 1790000020100 (its newest offset-file timestamp): the simulator
starts there, so a backlog message of DemoTopicA is first consumed at A (consume_delay 0). Each
schedule level polls on the grid A + 1000 + 100k, and every due time A + sum(levels) lies on it, so
the retries add no polling delay (tests/simulate/test_consumers.py explains the model):
- fail every time: levels 3..18 = 10+30+60+120+180+240+300+360+420+480+540+600+1200+1800+3600+7200
  = 17,140 s, then the DLQ at A + 17,140 s with reconsumeTimes 16;
- fail_times = 2: levels 3 and 4, consumed at A + 10 s + 30 s = A + 40 s after 2 retries.
"""

import json
import subprocess
import sys

import jsonschema
import pytest

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store
from mqtool.times import format_time
from mqtool.trace import TraceQuery, trace
from mqtool.trace.future import continue_trace

A = 1_790_000_020_100
HOUR = 3_600_000
STORE, CONF = "fixtures/demo", "fixtures/demo.broker.conf"


@pytest.fixture(scope="module")
def store():
    return Store.open(STORE, load_broker_conf(CONF))


def run(store, consumers, key="order-1000", until=A + 6 * HOUR):
    assert store.last_activity_ms() == A
    (tr,) = trace(store, TraceQuery(key=key))
    return continue_trace(store, tr, until, scenario=parse_scenario({"consumers": consumers}, A))


def sim(tr, stage):
    return [s for s in tr.stages if s.simulated and s.stage == stage]


def test_failing_group_is_dead_lettered_17140_s_after_the_first_consumption(store):
    tr = run(store, [{"group": "GID_fail", "topic": "DemoTopicA", "outcome": "fail"}])
    first = sim(tr, "consume_failed")[0]
    assert (first.time, first.place) == (A, "DemoTopicA/0@0")
    sent = sim(tr, "retry_scheduled")
    assert len(sent) == 16
    assert [s.queue_id + 1 for s in sent] == list(range(3, 19))  # SCHEDULE_TOPIC_XXXX queue = level - 1
    assert {s.topic for s in sent} == {"SCHEDULE_TOPIC_XXXX"}
    delays_s = [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]
    due = A
    for s, d in zip(sent, delays_s, strict=True):  # each retry is sent back at its consumption, due + delay
        assert s.time == due
        due += d * 1000
        assert f"due {format_time(due)}" in s.detail
    retries = sim(tr, "retry")
    assert len(retries) == 16 and {r.topic for r in retries} == {"%RETRY%GID_fail"}
    (dlq,) = sim(tr, "dead_lettered")
    assert dlq.time == A + 17_140_000 and dlq.topic == "%DLQ%GID_fail"
    assert tr.verdict.state == "dead_lettered"
    assert tr.verdict.text == (f"dead-lettered at {format_time(A + 17_140_000)} to %DLQ%GID_fail by GID_fail "
                               "after 16 retries (simulated)")


def test_fail_twice_is_consumed_40_s_after_the_first_try(store):
    tr = run(store, [{"group": "GID_two", "topic": "DemoTopicA", "fail_times": 2}], until=A + 120_000)
    assert [s.time for s in sim(tr, "consume_failed")] == [A, A + 10_000]
    (ok,) = sim(tr, "consumed")
    assert (ok.time, ok.topic) == (A + 40_000, "%RETRY%GID_two")
    assert tr.verdict.state == "consumed"
    assert tr.verdict.text == f"consumed at {format_time(A + 40_000)} by GID_two after 2 retries (simulated)"


def test_until_before_the_dlq_says_where_the_retry_waits(store):
    # at A + 100 s: retries at levels 3, 4, 5 done (10 + 30 + 60 s), level 6 (2 min) sent back at A + 100 s
    tr = run(store, [{"group": "GID_fail", "topic": "DemoTopicA", "outcome": "fail"}], until=A + 100_001)
    assert tr.verdict.state == "waiting" and tr.verdict.due == A + 220_000
    due = format_time(A + 220_000)
    assert tr.verdict.text.startswith(f"waiting for retry #4 of GID_fail (delay level 6, due {due})")


def test_two_groups_each_get_their_outcome(store):
    tr = run(store, [{"group": "GID_ok", "topic": "DemoTopicA"},
                     {"group": "GID_max1", "topic": "DemoTopicA", "outcome": "fail", "max_reconsume_times": 1}],
             until=A + 60_000)
    # GID_max1: level 3 once (10 s), then the DLQ; GID_ok consumes at once; groups in name order
    assert tr.verdict.state == "dead_lettered"
    assert tr.verdict.text == (f"dead-lettered at {format_time(A + 10_000)} to %DLQ%GID_max1 by GID_max1 after "
                               f"1 retry; consumed at {format_time(A)} by GID_ok after 0 retries (simulated)")


def test_a_message_no_group_reads_keeps_the_services_verdict(store):
    tr = run(store, [{"group": "GID_b", "topic": "DemoTopicB"}], until=A + 60_000)
    assert not sim(tr, "consumed") and "still so at" in tr.verdict.text


def test_cli_scenario_json_validates(tmp_path):
    sc = tmp_path / "sc.toml"
    sc.write_text('[[consumers]]\ngroup = "GID_two"\ntopic = "DemoTopicA"\nfail_times = 2\n')
    out = subprocess.run([sys.executable, "-m", "mqtool", "trace", STORE, "--config", CONF, "--key", "order-1000",
                          "--until", "+2m", "--scenario", str(sc), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    with open("mqtool/schemas/trace.json") as fh:
        jsonschema.validate(doc, json.load(fh))
    assert doc["verdict"] == {"state": "consumed",
                              "text": f"consumed at {format_time(A + 40_000)} by GID_two after 2 retries (simulated)"}
    bad = subprocess.run([sys.executable, "-m", "mqtool", "trace", STORE, "--key", "order-1000", "--scenario",
                          str(sc)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--until" in bad.stderr
