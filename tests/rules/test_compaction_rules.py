"""`rules.compaction` (CompactionLog.getOffsetMap / shouldRetainMsg / getCompactionFile) against the
run RocketMQ 5.3.1 did in ../shared/oracle/compaction-5.3.1, and on hand-made records."""

from dataclasses import dataclass

import pytest

from conftest import ORACLE, need_oracle
from mqtool.builder.compaction import CompactionLogWriter
from mqtool.rules.compaction import OffsetMap, compaction, get_offset_map, should_retain_msg
from mqtool.store.compaction import CompactionQueue
from mqtool.store.findings import Findings
from mqtool.store.store import Store

SRC = ORACLE / "compaction-5.3.1" / "store"


@dataclass
class Rec:
    queue_offset: int
    keys: str | None
    body: bytes = b"v"

    @property
    def properties(self) -> dict[str, str]:
        return {} if self.keys is None else {"KEYS": self.keys}


def test_a_tombstone_removes_its_key_and_itself():
    files = [[Rec(0, "a"), Rec(1, "b"), Rec(2, "a", b"")], [Rec(3, "b"), Rec(4, "c")], [Rec(5, "a")]]
    assert [r.queue_offset for r in compaction(files)] == [3, 4]


def test_offsets_past_the_map_are_kept_and_keyless_records_dropped():
    m = OffsetMap({"a": 2}, last_offset=2)
    assert should_retain_msg(Rec(3, None), m)  # newer than anything mapped: kept whatever it is
    assert not should_retain_msg(Rec(1, None), m) and not should_retain_msg(Rec(1, "  "), m)
    assert should_retain_msg(Rec(1, "z"), m)  # key not in the map: get() is -1
    assert not should_retain_msg(Rec(1, "a"), m) and should_retain_msg(Rec(2, "a"), m)


def test_the_map_skips_offsets_up_to_the_position_and_keys_by_the_whole_keys_string():
    m = get_offset_map([[Rec(0, "a"), Rec(1, "a b")], [Rec(2, "a")]], position=0)
    assert m.offsets == {"a b": 1, "a": 2} and m.last_offset == 2


def test_no_run_with_one_file_or_nothing_new():
    assert compaction([[Rec(0, "a")]]) is None
    assert compaction([[Rec(0, "a")], [Rec(1, "a")]], position=0) is None


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    """The compaction log as it was before the real run: the CompactT records with KEYS up to offset 18
    (what `CommitLogDispatcherCompaction` put), written by the builder with the oracle's file sizes."""
    need_oracle()
    recs = [r for r in Store.open(SRC).commitlog.iter_records()
            if r.topic == "CompactT" and r.properties.get("KEYS")]
    assert [r.queue_offset for r in recs] == [o for o in range(22) if o != 6]
    w = CompactionLogWriter(tmp_path_factory.mktemp("before"), "CompactT", 0, log_file_size=1400, cq_file_size=276)
    with w:
        for r in recs[:18]:
            w.append(r)
    return w, recs


def test_the_rule_keeps_what_the_real_run_kept(before):
    w, _ = before
    assert sorted(w.files) == [0, 1380, 2760, 4140, 5520]  # README: 4 full files and 5520
    assert [r.queue_offset for r in w.next_compaction()] == [11, 13, 14, 16]


def test_the_builder_rebuilds_the_compacted_files_from_the_rule(before, tmp_path):
    w, recs = before
    with CompactionLogWriter(tmp_path, "CompactT", 0, log_file_size=1400, cq_file_size=276, start=5520) as c:
        c.write_compacted(0, w.next_compaction())
        for r in recs[16:]:  # offsets 17..21 into 5520, rolling to 6900
            c.append(r)
    for sub in ("compactionLog", "compactionCq"):
        real = sorted((SRC / "compaction" / sub / "CompactT" / "0").iterdir())
        built = sorted((tmp_path / "compaction" / sub / "CompactT" / "0").iterdir())
        assert [p.name for p in built] == [p.name for p in real]
        assert [p.read_bytes() == q.read_bytes() for p, q in zip(built, real, strict=True)] == [True] * 3


def test_the_next_run_on_the_oracle_as_the_overview_says():
    """Files 0 (11 k4, 13 k5, 14 k2, 16 k1) and 5520 (17 k4, 18 k2, 19 k1, 20 k2) are compacted, 6900 stays:
    k4 -> 17, k2 -> 20, k1 -> 19, k5 -> 13, last offset 20 (worked by hand)."""
    need_oracle()
    fs = Findings()
    q = CompactionQueue.open(SRC, "CompactT", 0, fs)
    by_start: dict[int, list] = {}
    for r in q.iter_records(fs):
        by_start.setdefault(r.physical_offset - r.position, []).append(r)
    files = [by_start.get(f.start, []) for f in q.log_files]
    assert [r.queue_offset for r in compaction(files, position=16)] == [13, 17, 19, 20]
    from mqtool.inspect.overview import overview

    doc = overview(Store.open(SRC), now_ms=0)
    assert doc["compaction_next_run"] == [{"topic": "CompactT", "queue_id": 0, "keeps": [13, 17, 19, 20]}]
