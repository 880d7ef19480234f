"""`inspect restart` on the crash store (`mqtool.builder.crash`), against what a person works out from its story.

The store (see the builder's docstring): delayOffset.json {1: 1, 2: 0} persisted before D1b, D1c and D2a
were delivered; timercheck's lastReadTimeMs 6000 before T8's slot (8000) was delivered; the half offset
0 persisted before H1 was checked (copy 3) and committed through its copy, H3 checked (copy 4) and never
answered; H2 committed with its op. Record X (D1d's delivery) has a torn body, record Y (timer T30) is
torn after its header. The broker restarts two minutes after the crash.
"""

import json
from dataclasses import replace

import jsonschema
import pytest

from mqtool.builder.crash import build_crash, crash_config
from mqtool.builder.demo import T0
from mqtool.formats.names import TIMER_TOPIC
from mqtool.inspect import load_schema
from mqtool.inspect.restart import restart_headline, restart_preview
from mqtool.store.store import Store

AT = T0 + 120_000


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash") / "store"
    return root, build_crash(root)


@pytest.fixture(scope="module")
def preview(crash, tmp_path_factory):
    root, _ = crash
    events = tmp_path_factory.mktemp("events") / "ev.jsonl"
    return restart_preview(Store.open(root, crash_config()), None, AT, 600_000, events)


def _no_crc_config():
    c = crash_config()
    return replace(c, raw={**c.raw, "checkCRCOnRecover": "false"})


def test_recovery_is_abnormal_and_ends_at_the_torn_body(preview, crash):
    _, r = crash
    cl = preview["recovery"]["commitlog"]
    assert preview["recovery"]["shutdown"] == {"clean": False, "abort_file": True, "abort_pid": "4242"}
    # checkpoint: min(9000, 8500) - 3000 = 5500; file 8192 starts with filler F?? (stored at +4000..4011),
    # file 12288 with T8's delivery (+8005): the newest file whose first record is not after 5500 is 8192
    assert (cl["mode"], cl["min_timestamp"], cl["check_from_offset"]) == ("abnormal", T0 + 5_500, 8192)
    assert cl["end_offset"] == r["X"].physical_offset == 12907
    assert cl["scan_end_offset"] == r["Y"].physical_offset
    assert cl["deleted_files"] == []


def test_truncations_past_the_end(preview, crash):
    _, r = crash
    cq = preview["recovery"]["consume_queues"]
    assert cq["max_physic_offset"] == r["Y"].physical_offset + r["Y"].total_size
    assert [(t["topic"], t["queue_id"], t["from_queue_offset"], t["commitlog_offsets"]) for t in cq["truncated"]] == [
        ("CrashTopicB", 1, r["X"].queue_offset, [r["X"].physical_offset]),
        (TIMER_TOPIC, 0, 3, [r["Y"].physical_offset]),
    ]
    tl = preview["recovery"]["timerlog"]
    # four units (T5, T8, T60, T30) all valid: nothing cut from the TimerLog; T30's points past the end
    assert (tl["end_offset"], tl["truncated_units"]) == (4 * 52, [])
    assert [d["offset_py"] for d in tl["dangling_units"]] == [r["Y"].physical_offset]
    # T30's record is gone: reviseQueueOffset -> -1 -> lastTimerQueueOffset 4, but the queue ends at 3
    assert (tl["enqueue_queue_offset"], tl["timer_queue_max_offset"]) == (4, 3)


def _named(rows):
    return sorted((d["kind"], d["keys"][0]) for d in rows)


def test_every_duplicate_and_nothing_else(preview, crash):
    _, r = crash
    assert _named(preview["duplicates"]) == [("delay", "D1b"), ("delay", "D1c"), ("delay", "D2a"),
                                              ("timer", "T8"), ("transaction", "H1")]
    by_key = {d["keys"][0]: d for d in preview["duplicates"]}
    assert {k: d["delivered_offset"] for k, d in by_key.items()} == {
        "D1b": r["D1b@"].physical_offset, "D1c": r["D1c@"].physical_offset, "D2a": r["D2a@"].physical_offset,
        "T8": r["T8@"].physical_offset, "H1": r["H1commit"].physical_offset}
    assert by_key["D1b"]["again_at_ms"] == AT + 1000  # FIRST_DELAY_TIME
    assert by_key["T8"]["slot_ms"] == T0 + 8000
    assert by_key["H1"]["half_queue_offset"] == 0
    assert "copy at queue offset 3" in by_key["H1"]["reason"]
    # H3 is checked again without having been delivered; H2's op covers it
    assert _named(preview["rechecks"]) == [("transaction", "H3")]


def test_without_crc_check_the_torn_body_survives_and_d1d_is_a_duplicate(crash):
    root, r = crash
    doc = restart_preview(Store.open(root, _no_crc_config()), None, AT, replay=False)
    assert doc["recovery"]["commitlog"]["end_offset"] == r["Y"].physical_offset
    assert [(t["topic"], t["from_queue_offset"]) for t in doc["recovery"]["consume_queues"]["truncated"]] == [
        (TIMER_TOPIC, 3)]
    assert ("delay", "D1d") in _named(doc["duplicates"])
    assert len(doc["duplicates"]) == 6


def test_late_and_headline(preview, crash):
    root, _ = crash
    late = preview["late"]
    # D1d (level 1, due +9100, its delivery lost with the torn tail) and T60 (slot +60000); T30 is dangling.
    # Per level every unit from the restart offset is overdue, delivered before or not (the delay view's
    # answer): level 1 restarts at D1b (due +101 + 1 s = +1101), D1c and D1d (2 of them delivered before),
    # level 2 at D2a (due +200 + 5 s = +5200, delivered before); both heads go out with the first task, AT + 1 s.
    assert [(lv["level"], lv["overdue"], lv["delivered_before"], lv["overdue_by_ms"], lv["goes_out_ms"])
            for lv in late["delay_levels"]] == [(1, 3, 2, AT - (T0 + 1101), AT + 1000),
                                                (2, 1, 1, AT - (T0 + 5200), AT + 1000)]
    assert (late["timer"]["pending"], late["timer"]["overdue"]) == (1, 1)
    assert late["overdue"] == 2
    assert preview["headline"] == "restart preview: 5 duplicates, 2 overdue"
    assert restart_headline(Store.open(root, crash_config()), None, AT) == preview["headline"]


def test_the_replay_delivers_the_predicted_duplicates_again(preview, crash):
    _, r = crash
    rp = preview["replay"]
    # The simulator appends at the recovered end (X's offset), so T30's dangling TimerLog unit (slot
    # +39000, pointing at Y's offset) finds no record there: T8 is delivered once more, not twice.
    assert rp["violations"] == []
    assert rp["counts"]["timer deliver"] == 2  # T8 again and T60
    assert rp["first"]["timer deliver"][0]["new_physical_offset"] == r["X"].physical_offset
    again = {e["uniq_key"] for e in rp["delivered_again"]}
    assert again == {d["uniq_key"] for d in preview["duplicates"]}
    lines = open(rp["events_path"], encoding="utf-8").read().splitlines()
    assert len(lines) == rp["events"] and json.loads(lines[0])["time"] >= AT


def test_matches_its_schema_and_text(preview):
    schema = load_schema("restart")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(preview)))
    sections = dict((s.split(" (")[0], rows) for s, rows in preview["text"])
    assert len(sections["duplicates"]) == 5
    assert any("valid data ends at 12907" in row for row in sections["recovery"])


def test_a_clean_store_has_no_headline_and_no_duplicates(demo_dir, demo_conf):
    from mqtool.formats.broker_conf import load_broker_conf

    store = Store.open(demo_dir, load_broker_conf(demo_conf))
    doc = restart_preview(store, None, T0 + 30_000, replay=False)
    assert doc["headline"] is None and restart_headline(store) is None
    cl = doc["recovery"]["commitlog"]
    assert (cl["mode"], cl["end_offset"], cl["dropped_bytes"]) == ("normal", cl["scan_end_offset"], 0)
    assert doc["duplicates"] == [] and doc["recovery"]["consume_queues"]["truncated"] == []


def test_real_clean_shutdown_recovers_to_the_end(open_oracle):
    store = open_oracle("pair_default/A")
    doc = restart_preview(store, None, None, replay=False)
    cl = doc["recovery"]["commitlog"]
    assert cl["mode"] == "normal" and cl["end_offset"] == cl["scan_end_offset"]
    assert doc["duplicates"] == [] and doc["headline"] is None


def test_the_overview_headline_names_the_restart_preview(crash, demo_dir, demo_conf):
    from mqtool.formats.broker_conf import load_broker_conf
    from mqtool.inspect.overview import overview

    root, _ = crash
    assert overview(Store.open(root, crash_config()), AT)["restart_preview"] == \
        "restart preview: 5 duplicates, 2 overdue"
    assert "restart_preview" not in overview(Store.open(demo_dir, load_broker_conf(demo_conf)), T0 + 20_000)


def test_a_clean_store_late_and_due_at_its_stop(demo_dir, demo_conf):
    """The demo broker stopped at T0 + 20000: D1c (level 1) is due at +20700, D3 (level 3) at +25000, D18
    (level 18, stored at +32) at +32 + 2 h; none is overdue, each goes out at the first poll of its level
    at or after its due time: the first task at start + 1 s (+21000), then every 100 ms (D18: +7200100)."""
    from mqtool.formats.broker_conf import load_broker_conf

    doc = restart_preview(Store.open(demo_dir, load_broker_conf(demo_conf)), None, T0 + 20_000, replay=False)
    assert [(lv["level"], lv["backlog"], lv["overdue"], lv["goes_out_ms"]) for lv in doc["late"]["delay_levels"]] == [
        (1, 1, 0, T0 + 21_000), (3, 1, 0, T0 + 25_000), (18, 2, 0, T0 + 7_200_100)]
    assert doc["late"]["overdue"] == 0


def test_the_stored_pass_starts_at_the_earliest_candidate(crash, demo_dir, demo_conf):
    """Crash store: level 1 restarts at queue offset 1 (D1b's schedule record), before D2a (level 2), T8's timer
    record (slot +8000, between lastReadTimeMs +6000 and the crash) and the halves. Demo store: level 18 restarts
    at 0, D18's record at 3972 (fixtures/README.md), before D3 (26448), D1c (27051) and H3pending (26702)."""
    from mqtool.formats.broker_conf import load_broker_conf
    from mqtool.inspect.delay import delay_view
    from mqtool.inspect.restart import _scan_from
    from mqtool.inspect.timer import timer_view
    from mqtool.inspect.transactions import transactions_view
    from mqtool.store.findings import Findings
    from mqtool.store.recovery import recovery_plan

    root, r = crash
    for store, at, expected in ((Store.open(root, crash_config()), AT, r["D1b"].physical_offset),
                                (Store.open(demo_dir, load_broker_conf(demo_conf)), T0 + 20_000, 3972)):
        plan = recovery_plan(store, Findings())
        views = delay_view(store, at), timer_view(store, at), transactions_view(store, at)
        assert _scan_from(store, *views, plan) == expected


def test_the_crash_store_s_levels_agree_with_the_delay_view_and_the_replay(preview, crash):
    """Level 2 holds only D2a (due +200 + 5 s, already delivered as D2a@): the delay view says it is
    overdue by AT - (T0 + 5200), and the broker puts it again with the level's first task, AT + 1 s.
    The restart view says the same (it said "overdue 0, goes out -" while it left duplicates out)."""
    from mqtool.inspect.delay import delay_view

    root, _ = crash
    dv = {r["level"]: r for r in delay_view(Store.open(root, crash_config()), AT)["levels"]}
    late = {lv["level"]: lv for lv in preview["late"]["delay_levels"]}
    assert dv[2]["overdue_ms"] == late[2]["overdue_by_ms"] == AT - (T0 + 5200)
    assert dv[1]["overdue_ms"] == late[1]["overdue_by_ms"] == AT - (T0 + 1101)  # D1b
    assert late[2]["goes_out_ms"] == late[1]["goes_out_ms"] == AT + 1000
    replayed = {e["uniq_key"]: e["time"] for e in preview["replay"]["delivered_again"] if e["service"] == "schedule"}
    d2a = next(d for d in preview["duplicates"] if d["keys"] == ["D2a"])
    assert replayed[d2a["uniq_key"]] == late[2]["goes_out_ms"] == d2a["again_at_ms"]
