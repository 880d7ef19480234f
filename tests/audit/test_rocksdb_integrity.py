"""`rocksdb.integrity` audit (audit/rocksdb.py, spec §14) on damaged copies of a RocksDB consume queue store.

No real RocksDB-mode store exists here: `builder/rocksdb.py` turns fixtures/demo's ConsumeQueues into a
database (max/min entries per queue as `putMaxPhyAndCqOffset` / `correctMinCqOffset` leave them, CHECKPOINT =
the CommitLog's end 27307). Each case damages a copy with a RocksDB writer before the audit reads it.
Numbers from fixtures/demo (hand-checked with `inspect queue`): DemoTopicB/1 has queue offsets 0..27, its last
unit at CommitLog offset 25856 (592 bytes); DemoTopicA/0 has 0..2, the last at 8609; the CommitLog's last
record is SCHEDULE_TOPIC_XXXX/0 unit 3 at 27051 (256 bytes), ending at 27307.
"""

import shutil

import pytest

from mqtool.audit.results import RocksDBState
from mqtool.audit.rocksdb import check_state
from mqtool.audit.runner import run_local
from mqtool.builder.rocksdb import ROCKSDICT_CONFIG, rocksdb_copy_of
from mqtool.formats.rocksdb_cq import (
    MAX,
    MIN,
    build_checkpoint_key,
    build_cq_key,
    build_offset_key,
    cq_value,
    offset_value,
)
from mqtool.store.findings import Findings
from mqtool.store.rocksdb import QueueKeyRange, QueueOffsets, RocksCqUnit

END = 27307
CQ = "consumequeue"


@pytest.fixture(scope="module")
def rocks(tmp_path_factory):
    return rocksdb_copy_of("fixtures/demo", tmp_path_factory.mktemp("rocks-integrity") / "store")


def _damaged(rocks, tmp_path, edit):
    from rocksdict import Options, Rdict

    root = tmp_path / "store"
    shutil.copytree(rocks, root)
    db = Rdict(str(root / CQ), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)})
    try:
        edit(db, db.get_column_family("offset"))
    finally:
        db.close()
        (root / CQ / ROCKSDICT_CONFIG).unlink(missing_ok=True)
    return run_local(root)


def _rocks_findings(report) -> list[tuple]:
    """The report's `rocksdb.integrity` findings, sorted by topic, queue id and message (not the report's order)."""
    return sorted(((f["severity"], f["file"], f["offset"], f["topic"], f["queue_id"], f["message"])
                   for f in report["findings"] if f["check"] == "rocksdb.integrity"),
                  key=lambda t: (t[3] or "", -1 if t[4] is None else t[4], t[5]))


def _offset(phy: int, cq: int) -> bytes:
    return offset_value.build({"phy_offset": phy, "cq_offset": cq})


def test_an_intact_copy_has_no_findings_and_a_summary(rocks):
    report = run_local(rocks)
    assert _rocks_findings(report) == []
    assert report["summary"]["rocksdb"] == {"queues": 16, "offset_table_queues": 16, "max_entries": 16,
                                            "min_entries": 16, "queues_without_offsets": 0, "checkpoint": END,
                                            "commitlog_end": END}


def test_max_entry_past_the_last_key(rocks, tmp_path):
    def edit(db, off):
        off[build_offset_key("DemoTopicB", 1, MAX)] = _offset(25856, 29)

    assert _rocks_findings(_damaged(rocks, tmp_path, edit)) == [
        ("error", CQ, None, "DemoTopicB", 1, "the offset table's max entry names queue offset 29 but the last entry "
         "is 27: offsets 28..29 have no entry (getMaxOffsetInQueue answers 30)")]


def test_entries_beyond_the_max_entry_and_a_wrong_max_commitlog_offset(rocks, tmp_path):
    def edit(db, off):
        off[build_offset_key("DemoTopicB", 1, MAX)] = _offset(25000, 25)
        off[build_offset_key("DemoTopicA", 0, MAX)] = _offset(8000, 2)

    assert _rocks_findings(_damaged(rocks, tmp_path, edit)) == [
        ("error", CQ, None, "DemoTopicA", 0, "the offset table's max entry names CommitLog offset 8000 for queue "
         "offset 2, the entry there names 8609"),
        ("warning", CQ, None, "DemoTopicB", 1, "entries at queue offsets 26..27 lie beyond the offset table's max "
         "entry 25: the broker does not serve them (getMaxOffsetInQueue answers 26) and overwrites them when it "
         "dispatches those offsets again (left so by truncateDirty)")]


def test_min_entry_before_and_after_the_first_key(rocks, tmp_path):
    def edit(db, off):
        off[build_offset_key("DemoTopicB", 1, MIN)] = _offset(0, 2)  # entries 0, 1 below the min
        del db[build_cq_key("DemoTopicA", 2, 0)]  # the min entry (0) names a key that is gone

    got = _rocks_findings(_damaged(rocks, tmp_path, edit))
    assert got == [
        ("warning", CQ, None, "DemoTopicA", 2, "the offset table's min entry names queue offset 0 but the first "
         "entry is 1: offsets 0..0 have no entry (getMinOffsetInQueue answers 0)"),
        ("warning", CQ, None, "DemoTopicB", 1, "entries at queue offsets 0..1 lie below the offset table's min "
         "entry 2: consumers starting at the min never get them")]


def test_entries_without_offset_table_entries_are_invisible(rocks, tmp_path):
    def edit(db, off):
        for i in range(3):
            db[build_cq_key("Ghost", 4, 10 + i)] = cq_value.build(
                {"phy_offset": 100 * i, "size": 10, "tags_code": 0, "store_time": 0})
        del off[build_offset_key("DemoTopicA", 1, MAX)]

    report = _damaged(rocks, tmp_path, edit)
    assert _rocks_findings(report) == [
        ("warning", CQ, None, "DemoTopicA", 1, "entries at queue offsets 0..1 but no max entry in the offset table: "
         "the broker's getMaxOffsetInQueue answers 0, consumers never see them"),
        ("warning", CQ, None, "Ghost", 4, "entries at queue offsets 10..12 but no max entry in the offset table: "
         "the broker's getMaxOffsetInQueue answers 0, consumers never see them")]
    s = report["summary"]["rocksdb"]
    assert (s["queues"], s["offset_table_queues"], s["max_entries"], s["queues_without_offsets"]) == (17, 16, 15, 1)


def test_checkpoint_beyond_the_commitlog_end(rocks, tmp_path):
    def edit(db, off):
        off[build_checkpoint_key()] = (END + 500).to_bytes(8, "big")

    assert _rocks_findings(_damaged(rocks, tmp_path, edit)) == [
        ("error", CQ, None, None, None, f"CHECKPOINT {END + 500} is beyond the CommitLog's end {END}: the consume "
         "queue was built from 500 bytes the CommitLog does not have (at start the broker truncates the offset "
         "table to the CommitLog's end: truncateDirty)")]


def test_checkpoint_before_max_entries_and_the_end(rocks, tmp_path):
    def edit(db, off):
        off[build_checkpoint_key()] = (26500).to_bytes(8, "big")

    # the max entries of SCHEDULE_TOPIC_XXXX/0 (27051 + 256 = 27307), RMQ_SYS_TRANS_HALF_TOPIC/0 (26702 + 349 =
    # 27051) and SCHEDULE_TOPIC_XXXX/2 (26448 + 254 = 26702) end beyond 26500; DemoTopicB/1's at 26448 does not
    assert _rocks_findings(_damaged(rocks, tmp_path, edit)) == [
        ("error", CQ, None, None, None, "3 queue(s)' max entries name records ending beyond the CHECKPOINT 26500 "
         f"(furthest: SCHEDULE_TOPIC_XXXX/0, up to {END}); they are written in one batch with it"),
        ("info", CQ, None, None, None, f"CHECKPOINT 26500 is {END - 26500} bytes before the CommitLog's end {END}: "
         "records after it are not dispatched yet")]


@pytest.mark.parametrize("value, want", [
    (None, ("warning", "no CHECKPOINT entry in the offset column family (getMaxPhyOffset answers 0): the highest "
            "CommitLog offset dispatched into the 'default' family is unknown")),
    (b"\x00" * 4, ("error", "the CHECKPOINT value is 4 bytes, not 8")),
])
def test_missing_or_short_checkpoint(rocks, tmp_path, value, want):
    def edit(db, off):
        if value is None:
            del off[build_checkpoint_key()]
        else:
            off[build_checkpoint_key()] = value

    report = _damaged(rocks, tmp_path, edit)
    assert _rocks_findings(report) == [(want[0], CQ, None, None, None, want[1])]
    assert report["summary"]["rocksdb"]["checkpoint"] is None


def test_stale_entries_before_the_commitlog_are_info():
    """Retention: the compaction filter and the lazy min correction leave these states (no store needed)."""
    unit = RocksCqUnit
    state = RocksDBState(
        offsets={("T", 0): QueueOffsets(500, 9, 100, 4), ("T", 1): QueueOffsets(900, 6, 950, 5),
                 ("T", 2): QueueOffsets(50, 7, 40, 6), ("T", 3): QueueOffsets(900, 3, 950, 5)},
        keys={("T", 0): QueueKeyRange(6, unit(6, 300, 10, 0, 0), 9, unit(9, 500, 10, 0, 0)),
              ("T", 1): QueueKeyRange(1, unit(1, 200, 10, 0, 0), 6, unit(6, 900, 10, 0, 0)),
              ("T", 3): QueueKeyRange(2, unit(2, 800, 10, 0, 0), 3, unit(3, 900, 10, 0, 0))},
        checkpoint=(1000).to_bytes(8, "big"))
    findings = Findings()
    summary = check_state(state, 400, 1000, findings)
    assert [(f.severity, f.topic, f.queue_id, f.message) for f in findings] == [
        ("info", "T", 0, "the offset table's min entry (queue offset 4, CommitLog offset 100) is before the "
         "CommitLog's first file 400: stale, the broker corrects it when next asked (getMinCqOffset)"),
        ("info", "T", 1, "entries at queue offsets 1..4, below the offset table's min entry 5, name records before "
         "the CommitLog's first file: the compaction filter drops them"),
        ("info", "T", 2, "no entries left; the offset table's max entry (queue offset 7, CommitLog offset 50) is "
         "before the CommitLog's first file 400: deleted by retention (the compaction filter drops expired "
         "entries)"),
        ("error", "T", 3, "the offset table's min entry 5 is beyond its max entry 3")]
    assert summary["checkpoint"] == 1000
