"""The delay view against what RocketMQ wrote (oracle READMEs) and the demo fixture's README."""

import json

import pytest

from mqtool.inspect.delay import correct_delay_offset, delay_view, time_histogram
from mqtool.store.store import Store

BASIC_NOW = 1795362444000  # basic-5.3.1's timercheck lastReadTimeMs: 10 s after its writes


def by_level(doc: dict) -> dict[int, dict]:
    return {r["level"]: r for r in doc["levels"]}


def test_basic_levels_1_3_18_and_the_clamped_level_20(basic: Store):
    doc = delay_view(basic, BASIC_NOW)
    lv = by_level(doc)
    assert [r["level"] for r in doc["levels"]] == list(range(1, 19))
    assert not doc["offset_file"]["present"]  # no delayOffset.json: every level starts at 0
    assert all(r["offset"] == 0 and not r["offset_stored"] for r in doc["levels"])
    assert (lv[1]["backlog"], lv[3]["backlog"], lv[18]["backlog"]) == (1, 1, 2)
    assert (lv[1]["max_offset"], lv[3]["max_offset"], lv[18]["max_offset"]) == (1, 1, 2)
    assert lv[2]["max_offset"] is None and lv[2]["backlog"] == 0 and lv[2]["head_deliver_timestamp"] is None
    # summary.txt: the units' tagsCode (= store time + delay) are the deliver timestamps
    assert lv[1]["head_deliver_timestamp"] == 1795362434801
    assert lv[3]["head_deliver_timestamp"] == 1795362443802
    assert lv[18]["head_deliver_timestamp"] == lv[18]["last_deliver_timestamp"] == 1795369633805
    assert lv[1]["overdue_ms"] == BASIC_NOW - 1795362434801
    assert lv[18]["overdue_ms"] < 0  # due in about 2 h
    assert lv[18]["head"]["real_topic"] and lv[18]["head"]["keys"] == ["dkey18"]
    assert doc["totals"] == {
        "backlog": 4,
        "overdue_levels": 2,
        "corrections": 0,
        "never_delivered": 0,
        "never_levels": [],
    }
    assert sum(b["count"] for b in doc["histogram"]) == 4
    assert doc["findings"] == []


def test_basic_level_18_holds_the_level_20_message_stored_with_delay_18(basic: Store):
    cq = basic.consume_queue("SCHEDULE_TOPIC_XXXX", 17)
    second = basic.commitlog.read(cq.unit(1).commitlog_offset)
    assert second.keys == ["dkey20"] and second.properties["DELAY"] == "18"


def test_pair_default_b_offsets_after_151_s_of_the_real_schedule_service(open_oracle):
    doc = delay_view(open_oracle("pair_default/B"), 1795376251537)
    stored = {r["level"]: r["offset"] for r in doc["levels"] if r["offset_stored"]}
    assert stored == {1: 2, 2: 1, 3: 2, 5: 1, 6: 1, 18: 0}
    lv = by_level(doc)
    assert [lv[n]["backlog"] for n in (1, 2, 3, 5, 6)] == [0, 0, 0, 0, 0]
    assert lv[18]["backlog"] == 2  # D18 and D99 (capped to 18) still pending
    assert doc["offset_file"]["data_version"]["counter"] == 15


def test_pair_49_b_has_no_entry_for_level_18(open_oracle):
    doc = delay_view(open_oracle("pair-4.9/B"), 1795376251537)
    lv = by_level(doc)
    assert {r["level"]: r["offset"] for r in doc["levels"] if r["offset_stored"]} == {1: 3, 2: 2, 3: 3, 5: 3, 6: 2}
    assert doc["offset_file"]["data_version"] is None  # 4.x files have no dataVersion
    assert not lv[18]["offset_stored"] and lv[18]["backlog"] == 4  # D18a/b, D19, D99


def test_demo_offsets_and_pending_levels(demo: Store):
    doc = delay_view(demo, 1790000020000)
    lv = by_level(doc)
    assert {r["level"]: r["offset"] for r in doc["levels"] if r["offset_stored"]} == {1: 3, 3: 1, 18: 0}
    assert (lv[1]["backlog"], lv[3]["backlog"], lv[18]["backlog"]) == (1, 1, 2)
    assert lv[1]["head"]["keys"] == ["D1c"] and lv[1]["head_deliver_timestamp"] == 1790000020700
    assert lv[3]["head"]["keys"] == ["D3"] and lv[3]["head_deliver_timestamp"] == 1790000025000
    assert lv[1]["overdue_ms"] == -700


@pytest.mark.parametrize("stored, expected", [(None, None), (0, 1), (1, 1), (2, 2), (3, 3), (9, 3)])
def test_correct_delay_offset_clamps_into_the_queue(stored, expected):
    assert correct_delay_offset(stored, 1, 3) == expected


def test_an_out_of_range_offset_is_shown_with_its_correction(basic_copy):
    (basic_copy / "config" / "delayOffset.json").write_text('{"offsetTable":{1:7,3:0,5:4}}')
    doc = delay_view(Store.open(basic_copy), BASIC_NOW)
    lv = by_level(doc)
    assert lv[1]["correction"]["from"] == 7 and lv[1]["correction"]["to"] == 1 and lv[1]["backlog"] == 0
    assert lv[3]["correction"] is None and lv[3]["backlog"] == 1
    # level 5 has no queue: findOrCreateConsumeQueue gives an empty one (min = max = 0)
    assert lv[5]["correction"]["to"] == 0
    assert doc["totals"]["corrections"] == 2
    assert [f["check"] for f in doc["findings"]] == ["delay.offset", "delay.offset"]


def test_a_garbage_delay_offset_file_is_a_warning_not_a_crash(basic_copy):
    (basic_copy / "config" / "delayOffset.json").write_text("{not json")
    doc = delay_view(Store.open(basic_copy), BASIC_NOW)
    assert [f["severity"] for f in doc["findings"]] == ["warning"]
    assert "delayOffset.json: unparsable" in doc["findings"][0]["message"]
    json.dumps(doc)


def test_time_histogram_buckets_cover_every_time():
    h = time_histogram([1000, 1500, 61_000])
    assert sum(b["count"] for b in h) == 3
    assert h[0]["start_ms"] <= 1000 and h[-1]["end_ms"] > 61_000
    assert time_histogram([]) == []
