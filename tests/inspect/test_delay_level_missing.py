"""A delay level missing from messageDelayLevel: every view, trace and the simulator give one answer.

fixtures/demo (fixtures/README.md) holds D18 (SCHEDULE_TOPIC_XXXX/17@0, stored +32) and D20 (DELAY=20
clamped to 18, /17@1, stored +33), pending at the stop (T0 + 20000). Started with
`messageDelayLevel=1s 5s 10s`, `ScheduleMessageService.parseDelayLevel` fills levels 1-3 only and `start`
schedules a `DeliverDelayedMessageTimerTask` per table entry: nothing ever reads queue 17, so D18 and D20
are never delivered while level 18 is missing (RocketMQ 5.3.1 and 4.9.8 alike).
"""

from dataclasses import replace

import pytest

from conftest import FIXTURES
from mqtool.builder.demo import T0
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect.delay import delay_view
from mqtool.inspect.overview import overview
from mqtool.inspect.restart import headline, restart_preview
from mqtool.simulate import simulate
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace
from mqtool.trace.future import continue_trace

STOP = T0 + 20_000
THREE_LEVELS = "1s 5s 10s"


@pytest.fixture
def three_levels(demo_dir, demo_conf) -> Store:
    return Store.open(demo_dir, replace(load_broker_conf(demo_conf), message_delay_level=THREE_LEVELS))


def test_the_delay_view_says_never_delivered_with_a_finding(three_levels):
    doc = delay_view(three_levels, STOP)
    lv = {r["level"]: r for r in doc["levels"]}
    r18 = lv[18]
    assert (r18["configured"], r18["delay_ms"], r18["backlog"], r18["never_delivered"]) == (False, None, 2, 2)
    # no due time: neither "due in 1h59m" nor an effective deliver time
    assert (r18["overdue_ms"], r18["head_effective_deliver_timestamp"]) == (None, None)
    assert doc["totals"]["never_delivered"] == 2 and doc["totals"]["never_levels"] == [18]
    # levels 1 and 3 are still configured: D1c due +20700 (1 s level), D3 due +25000 (10 s level)
    assert (lv[1]["overdue_ms"], lv[3]["overdue_ms"]) == (STOP - (T0 + 20_700), STOP - (T0 + 25_000))
    assert sum(b["count"] for b in doc["histogram"]) == 2  # D1c and D3; level 18 has no deliver time
    (f,) = [f for f in doc["findings"] if f["check"] == "delay.levels"]
    assert f["severity"] == "warning" and f["queue_id"] == 17
    assert "level 18 is not in messageDelayLevel (3 levels)" in f["message"]
    assert "its 2 message(s) from queue offset 0 are never delivered" in f["message"]
    # the units themselves say the broker that wrote them had level 18 = 2 h (tagsCode - store time)
    (data,) = [f for f in doc["findings"] if f["check"] == "delay.implied"]
    assert "level 18 = 2h (missing in the table)" in data["message"]
    assert "messageDelayLevel of the broker.conf given is used" in data["message"]
    assert doc["delay_levels"] == {"source": "config", "levels_ms": [1000, 5000, 10000]}


def test_the_overview_counts_them(three_levels):
    d = overview(three_levels, STOP)["delay"]
    assert (d["never_delivered"], d["never_levels"], d["backlog"]) == (2, [18], 4)


def test_restart_never_sends_them_and_the_headline_says_so(three_levels):
    doc = restart_preview(three_levels, None, STOP, replay=False)
    lv = {r["level"]: r for r in doc["late"]["delay_levels"]}
    assert (lv[18]["configured"], lv[18]["never_delivered"], lv[18]["goes_out_ms"], lv[18]["overdue"]) == (
        False,
        2,
        None,
        0,
    )
    assert (lv[1]["goes_out_ms"], lv[3]["goes_out_ms"]) == (STOP + 1000, T0 + 25_000)
    assert doc["late"]["never_delivered"] == 2
    assert doc["headline"] is None  # the demo broker was shut down cleanly
    assert (
        headline(False, 0, 1, 2) == "restart preview: 0 duplicates, 1 overdue, 2 never delivered (delay level "
        "not configured)"
    )
    assert headline(False, 5, 2) == "restart preview: 5 duplicates, 2 overdue"


def test_trace_verdict_is_never_also_after_a_simulated_3h(three_levels):
    (tr,) = trace(three_levels, TraceQuery(key="D18"), as_of=STOP)
    assert tr.verdict.state == "never" and tr.verdict.due is None
    assert "delay level 18 is not in messageDelayLevel (3 levels)" in tr.verdict.text
    parked = [s for s in tr.stages if s.stage == "parked"]
    assert "delay level 18 (not in messageDelayLevel: 3 levels)" in parked[0].detail
    assert "never delivered while the level is missing" in parked[0].detail
    later = continue_trace(three_levels, tr, STOP + 3 * 3_600_000)
    assert later.verdict.state == "never"
    assert not [s for s in later.stages if s.simulated and s.stage == "delivered"]


def test_the_simulator_agrees_and_delivers_them_once_the_level_is_back(three_levels, demo_dir, demo_conf):
    until = STOP + 3 * 3_600_000
    r = simulate(three_levels, three_levels.config, STOP, until)
    keys = {e.uniq_key for e in r.events if e.service == "schedule" and e.event == "deliver"}
    (d18,) = trace(three_levels, TraceQuery(key="D18"), as_of=STOP)
    (d20,) = trace(three_levels, TraceQuery(key="D20"), as_of=STOP)
    assert len(keys) == 2 and not keys & {*d18.uniq_keys, *d20.uniq_keys}  # D1c and D3 only
    # the default 18 levels: both go out at the first 100 ms poll at or after +7200032 / +7200033
    full = Store.open(demo_dir, load_broker_conf(demo_conf))
    r = simulate(full, full.config, STOP, until)
    times = {e.uniq_key: e.time for e in r.events if e.service == "schedule" and e.event == "deliver"}
    first_poll = STOP + 1000
    assert [times[k] for k in (*d18.uniq_keys, *d20.uniq_keys)] == [first_poll + 71_791 * 100] * 2


def test_the_message_view_says_so_too(three_levels):
    from mqtool.inspect.messages import explain
    from mqtool.inspect.queue import expected_tags_code

    d18 = three_levels.commitlog.read(3972)  # fixtures/README.md
    assert explain(three_levels, d18) == [
        "delay-level message (level 18, DELAY=18) waiting for DemoTopicA/1; never delivered: level 18 is not in "
        "messageDelayLevel (3 levels)"
    ]
    assert expected_tags_code(three_levels, d18) is None  # the broker that wrote it had level 18: not predictable


def test_correct_delay_offset_leaves_a_missing_level_alone(tmp_path, demo_conf):
    """`correctDelayOffset` walks delayLevelTable: level 18's stored 5 (its queue holds [0, 2]) stays 5, so
    no correction and nothing waits from there; the audit agrees (no offset error, nothing overdue)."""
    import shutil

    from mqtool.audit import schedule
    from mqtool.store.findings import Findings

    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", root)
    (root / "config" / "delayOffset.json").write_text('{"offsetTable":{1:3,3:1,18:5}}')
    store = Store.open(root, replace(load_broker_conf(demo_conf), message_delay_level=THREE_LEVELS))
    doc = delay_view(store, STOP)
    r18 = next(r for r in doc["levels"] if r["level"] == 18)
    assert (r18["offset"], r18["corrected_offset"], r18["correction"], r18["backlog"]) == (5, 5, None, 0)
    assert doc["totals"]["corrections"] == 0 and not [f for f in doc["findings"] if f["check"] == "delay.offset"]
    (f,) = [f for f in doc["findings"] if f["check"] == "delay.levels"]
    assert f["file"] == "config/delayOffset.json" and "nothing waits in it" in f["message"]
    found = Findings()
    summary = schedule.check(
        {18: 5}, {17: {"min": 0, "max": 2}}, {17: [(0, 1), (1, 2)]}, [1000, 5000, 10000], STOP, found
    )
    assert summary["18"]["pending"] == 0 and [f.severity for f in found] == ["warning"]


def test_the_simulator_s_summary_keeps_them_in_the_backlog(three_levels):
    r = simulate(three_levels, three_levels.config, STOP, STOP + 3 * 3_600_000)
    assert r.summary["delay_backlog_per_level"] == {"18": 2}  # D1c and D3 went out; D18 and D20 never do
