"""The timer view against basic-5.3.1's summary.txt (RocketMQ's own TimerCheckpoint, TimerLog, TimerWheel)."""

import struct

from mqtool.inspect.timer import timer_view
from mqtool.store.store import Store

NOW = 1795362444000


def test_basic_checkpoint_units_and_slots(basic: Store):
    doc = timer_view(basic, NOW)
    assert {k: doc["checkpoint"][k] for k in ("last_read_time_ms", "last_timer_log_flush_pos",
                                              "last_timer_queue_offset", "master_timer_queue_offset")} == {
        "last_read_time_ms": 1795362444000, "last_timer_log_flush_pos": 312,
        "last_timer_queue_offset": 6, "master_timer_queue_offset": 6}
    assert doc["units"] == {"normal": 4, "roll": 1, "delete": 1, "total": 6}
    assert doc["timer_queue"] == {"present": True, "min_offset": 0, "max_offset": 6, "enqueue_behind": 0}
    assert doc["timerlog"]["end_offset"] == 312 and doc["timerlog"]["flush_behind_bytes"] == 0
    slots = [(s["time_ms"], s["num"], s["first_pos"], s["last_pos"]) for s in doc["slots"]]
    assert slots == [(1795362438000, 1, 0, 0), (1795362523000, 1, 260, 260), (1795366033000, 1, 52, 52),
                     (1795369633000, 0, 156, 208), (1795535233000, 1, 104, 104)]
    assert all(s["chain_ok"] for s in doc["slots"])
    assert [s["read"] for s in doc["slots"]] == [True, False, False, False, False]  # +5 s was delivered
    # pending: +90 s, +1 h and the rolled +3 d - 60 s (its TIMER_OUT_MS); the +2 h victim is cancelled
    assert doc["pending"]["count"] == 3
    assert doc["pending"]["earliest_ms"] == 1795362523000 and doc["pending"]["latest_ms"] == 1795621573000
    assert sum(b["count"] for b in doc["pending"]["histogram"]) == 3
    assert doc["missing_records"] == [] and doc["findings"] == []
    assert doc["chain"] is None


def test_at_walks_the_cancelled_slot(basic: Store):
    chain = timer_view(basic, NOW, at_ms=1795369633500)["chain"]
    assert chain["time_ms"] == 1795369633000
    assert chain["slot"] == {"time_ms": 1795369633000, "num": 0, "first_pos": 156, "last_pos": 208}
    units = [(u["pos"], u["magic"], u["kind"], u["state"]) for u in chain["units"]]
    assert units == [(156, 1, "normal", "cancelled"), (208, 5, "delete", "cancel request")]
    assert chain["units"][1]["del_uniq_key"] == chain["units"][0]["uniq_key"]


def test_at_the_roll_slot_and_an_empty_slot(basic: Store):
    roll = timer_view(basic, NOW, at_ms=1795535233000)["chain"]
    assert [(u["pos"], u["magic"], u["state"]) for u in roll["units"]] == [(104, 3, "rolls on")]
    assert roll["units"][0]["timer_out_ms"] == 1795621573000
    empty = timer_view(basic, NOW, at_ms=1795362440000)["chain"]
    assert empty["slot"] is None and empty["units"] == []


def test_pair_default_b_dequeue_moved_on(open_oracle):
    doc = timer_view(open_oracle("pair_default/B"), 1795376251537)
    assert doc["checkpoint"]["last_read_time_ms"] == 1795376251000
    assert doc["checkpoint"]["last_timer_queue_offset"] == 7
    assert doc["units"] == {"normal": 6, "roll": 0, "delete": 1, "total": 7}
    assert doc["pending"]["count"] == 1  # T600
    cancelled = [s for s in doc["slots"] if s["num"] == 0]
    assert len(cancelled) == 1 and cancelled[0]["chain_length"] == 2  # T60c and its cancel


def test_a_store_without_timer_files(open_oracle):
    doc = timer_view(open_oracle("pair-4.9/B"), 0)
    assert doc["checkpoint"] is None and doc["units"]["total"] == 0 and doc["slots"] == []


def test_demo_timer(demo: Store):
    doc = timer_view(demo, 1790000020000)
    assert doc["checkpoint"]["last_read_time_ms"] == 1790000020000
    assert doc["units"] == {"normal": 3, "roll": 1, "delete": 1, "total": 5}
    assert doc["pending"]["count"] == 2  # T600 and TROLL; TV is cancelled, T5 delivered
    assert [s["num"] for s in doc["slots"] if s["chain_length"] == 2] == [0]


def test_a_unit_pointing_to_no_record_is_reported(basic_copy):
    tl = basic_copy / "timerlog" / "00000000000000000000"
    data = bytearray(tl.read_bytes())
    struct.pack_into(">q", data, 52 + 28, 123)  # offset_py of the unit at pos 52 (the +1 h timer)
    tl.write_bytes(bytes(data))
    doc = timer_view(Store.open(basic_copy), NOW)
    assert [(m["pos"], m["offset_py"]) for m in doc["missing_records"]] == [(52, 123)]
    assert "no CommitLog record at 123" in doc["missing_records"][0]["problem"]
    assert [(f["check"], f["severity"], f["offset"]) for f in doc["findings"]] == [("timer.record", "error", 52)]
