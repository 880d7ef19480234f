"""IndexService.buildIndex / queryOffset / IndexFile.selectPhyOffset against RocketMQ's own results
(index.json, summary.txt) and against an independent chain walk for every key of every oracle store."""

import json
import re

import pytest
from indexkit import CASE_IDS, CASES, walk_chain

from conftest import ORACLE, need_oracle
from mqtool.formats.indexfile import IndexFileWriter
from mqtool.rules.index import (
    LONG_MAX,
    DispatchRequest,
    IndexService,
    index_keys,
    is_time_matched,
    query_offset,
    select_phy_offset,
)
from mqtool.store.findings import Findings
from mqtool.store.indexfile import open_index_dir


def req(offset=0, keys=None, uniq=None, sys_flag=0, topic="T", ts=1000):
    return DispatchRequest(topic, offset, ts, sys_flag, keys, uniq)


def test_index_keys_follow_build_index():
    assert index_keys(req(keys="a  b ", uniq="U")) == ["T#U", "T#a", "T#b"]  # UNIQ_KEY first, empties skipped
    assert index_keys(req(keys="", uniq=None)) == []
    assert index_keys(req(keys="a", sys_flag=0x4)) == ["T#a"]  # prepared: indexed
    assert index_keys(req(keys="a", sys_flag=0x8)) == ["T#a"]  # commit: indexed
    assert index_keys(req(keys="a", uniq="U", sys_flag=0xC)) == []  # rollback: not indexed


def test_redispatch_below_end_phy_offset_is_skipped_equal_is_not():
    s = IndexService(4, 16)
    for r in (req(0, uniq="a"), req(100, uniq="b"), req(50, uniq="c"), req(100, uniq="b")):
        s.build_index(r)
    (f,) = s.files
    assert f.index_count == 4  # a, b, then b again at offset 100 == endPhyOffset; c (50 < 100) skipped
    assert [f.entry(n)[1] for n in (1, 2, 3)] == [0, 100, 100]


def test_roll_to_a_new_file_when_full():
    s = IndexService(2, 3)
    for i in range(5):
        s.build_index(req(i * 10, uniq=f"u{i}", ts=1000 + i))
    assert [f.index_count for f in s.files] == [3, 3, 2]
    assert (s.files[1].begin_phy_offset, s.files[2].begin_timestamp) == (20, 1004)


def writer_with(times):
    """One file with key T#k put at the given store times (offsets 0, 10, 20, ...)."""
    w = IndexFileWriter(2, 16)
    for i, t in enumerate(times):
        w.put_key("T#k", i * 10, t)
    return w


def test_select_phy_offset_time_bounds_and_stop_rules_hand_computed():
    w = writer_with([10_000, 12_000, 14_000, 16_000])  # timeDiffs 0, 2, 4, 6 s
    out: list[int] = []
    select_phy_offset(w, out, "T#k", 64, 11_000, 15_000)
    # newest first: 16 s out of range (kept walking), 14 s and 12 s in, 10 s < begin: stop after it
    assert out == [20, 10]
    out = []
    select_phy_offset(w, out, "T#k", 1, 0, LONG_MAX)
    assert out == [30]  # maxNum
    out = []
    select_phy_offset(w, out, "T#other", 64, 0, LONG_MAX)
    assert out == []  # other slot, or same slot with another hash


def test_is_time_matched_hand_computed():
    w = writer_with([10_000, 20_000])
    assert is_time_matched(w, 0, LONG_MAX)  # covers
    assert is_time_matched(w, 15_000, 30_000)  # begin inside
    assert is_time_matched(w, 0, 10_000)  # end on the first entry
    assert not is_time_matched(w, 20_001, 30_000)
    assert is_time_matched(w, 10_000, 10_000)  # begin == file begin counts


def test_query_offset_caps_at_max_msgs_num_batch():
    w = writer_with([1000 + i for i in range(15)])
    assert len(query_offset([w], "T", "k", 100, 0, LONG_MAX, max_msgs_num_batch=10).phy_offsets) == 10
    r = query_offset([w], "T", "k", 100, 0, LONG_MAX)
    assert r.phy_offsets == [i * 10 for i in range(14, -1, -1)]
    assert (r.index_last_update_timestamp, r.index_last_update_phyoffset) == (1014, 140)


def test_query_offset_files_newest_first_and_break_on_older_begin():
    s = IndexService(2, 3)
    for i in range(4):
        s.build_index(req(i * 10, uniq="same", ts=10_000 * (i + 1)))
    assert [f.begin_timestamp for f in s.files] == [10_000, 30_000]
    assert query_offset(s.files, "T", "same", 64, 0, LONG_MAX).phy_offsets == [30, 20, 10, 0]
    # the newest file begins at 30 s >= 25 s: walked, then the older one (begins before 25 s) ends the loop
    assert query_offset(s.files, "T", "same", 64, 25_000, LONG_MAX).phy_offsets == [30, 20]


@pytest.mark.parametrize("name", ["dledger-5.3.1", "batchcq-5.3.1", "compaction-5.3.1"])
def test_query_offset_equals_rocketmqs_own_results(name):
    need_oracle()
    files = open_index_dir(ORACLE / name / "store", Findings())
    results = json.loads((ORACLE / name / "index.json").read_text())["queryOffsetResults"]
    for q in results.values():
        assert query_offset(files, q["topic"], q["key"], 64, 0, LONG_MAX).phy_offsets == q["phyOffsets"], q


def test_query_message_equals_basic_summary():
    need_oracle()
    files = open_index_dir(ORACLE / "basic-5.3.1/store", Findings())
    text = (ORACLE / "basic-5.3.1/summary.txt").read_text()
    lines = re.findall(r"queryMessage topic=(\S+) key=(\S+) -> phyOffsets=\[([\d,]*)\]", text)
    assert len(lines) == 6
    for topic, key, offsets in lines:
        want = sorted(int(x) for x in offsets.split(",") if x)  # queryMessage sorts the offsets
        assert sorted(query_offset(files, topic, key, 64, 0, LONG_MAX).phy_offsets) == want, key


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_every_key_agrees_with_an_independent_chain_walk(case):
    need_oracle()
    files = open_index_dir(case.store, Findings())
    datas = [p.read_bytes() for p in case.index_files()]
    keys = {(r["topic"], k) for r in case.record_lines()
            for k in [r["properties"].get("UNIQ_KEY"), *r["properties"].get("KEYS", "").split(" ")] if k}
    assert keys
    for topic, key in sorted(keys):
        want = [phy for data in reversed(datas) for phy in walk_chain(data, case.hash_slot_num, f"{topic}#{key}")]
        got = query_offset(files, topic, key, 1 << 30, 0, LONG_MAX, max_msgs_num_batch=1 << 30).phy_offsets
        assert got == want, (topic, key)
        assert got, (topic, key)  # every key a record carries is found
