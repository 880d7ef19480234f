"""The read-only index/ reader: headers and stats against the oracle files, damage as findings."""

import struct
from pathlib import Path

import numpy as np
import pytest
from indexkit import CASE_IDS, CASES, java_hash

from conftest import ORACLE, need_oracle
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.findings import Findings
from mqtool.store.indexfile import (
    ENTRY_DTYPE,
    HEADER_DTYPE,
    check_index_file,
    index_file_stats,
    index_geometry,
    name_time_ms,
    open_index_dir,
    open_index_file,
)

PAIR = ORACLE / "pair_default/B/index/20261122193452593"


def test_dtypes_follow_the_construct_layout():
    assert HEADER_DTYPE.names == ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset",
                                  "hash_slot_count", "index_count")
    assert HEADER_DTYPE.itemsize == 40 and ENTRY_DTYPE.itemsize == 20
    assert ENTRY_DTYPE["phy_offset"] == np.dtype(">i8")


def test_geometry_from_config_or_size():
    assert index_geometry(BrokerConfig(raw={"maxHashSlotNum": "500", "maxIndexNum": "2000"}), 1) == (
        500, 2000, "broker.conf")
    assert index_geometry(None, 42040) == (500, 2000, "file size")
    assert index_geometry(None, 420_000_040) == (5_000_000, 20_000_000, "default")


def independent_stats(data: bytes, slots: int) -> tuple[int, int]:
    """(slots used, longest chain) by walking every slot with struct."""
    count = struct.unpack_from(">i", data, 36)[0]
    used = longest = 0
    for s in range(slots):
        cur = struct.unpack_from(">i", data, 40 + 4 * s)[0]
        used += cur != 0
        n = 0
        while 0 < cur < count:
            n += 1
            cur = struct.unpack_from(">i", data, 40 + slots * 4 + cur * 20 + 16)[0]
        longest = max(longest, n)
    return used, longest


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_oracle_headers_and_stats(case):
    need_oracle()
    findings = Findings()
    files = open_index_dir(case.store, findings)
    assert [f.path for f in files] == case.index_files()
    for f in files:
        data = f.path.read_bytes()
        head = struct.unpack(">qqqqii", data[:40])
        assert tuple(f.header.values()) == head
        assert (f.hash_slot_num, f.index_num) == (case.hash_slot_num, case.index_num)
        check_index_file(f, findings)
        offsets = [r["offset"] for r in case.record_lines()]
        row = index_file_stats(f, (min(offsets), max(offsets) + 1))
        assert (row["slots_used"], row["longest_chain"]) == independent_stats(data, case.hash_slot_num)
        assert row["entries"] == head[5] - 1
        assert row["fill_ratio"] == round((head[5] - 1) / (case.index_num - 1), 6)
        assert row["entries_outside_commitlog"] == 0
        assert index_file_stats(f, (head[3], head[3] + 1))["entries_outside_commitlog"] == sum(
            1 for o in struct.iter_unpack(">iqii", data[40 + case.hash_slot_num * 4 + 20:
                                                           40 + case.hash_slot_num * 4 + head[5] * 20])
            if o[1] != head[3])
        f.close()
    assert findings == [], findings  # what RocketMQ wrote is clean


def test_name_time():
    assert name_time_ms("20261122154713760") == 1795362433760  # 2026-11-22T15:47:13.760Z
    assert name_time_ms("2026112215471376") is None
    assert name_time_ms("20261399154713760") is None


def damaged(tmp_path: Path, name: str, edit) -> Path:
    need_oracle()
    p = tmp_path / "index" / name
    p.parent.mkdir()
    data = bytearray(PAIR.read_bytes())
    edit(data)
    p.write_bytes(bytes(data))
    return p


def findings_of(p: Path, conf: BrokerConfig | None = None) -> list:
    fs = Findings()
    with open_index_file(p, fs, conf) as f:
        check_index_file(f, fs)
        index_file_stats(f, (0, 1 << 40))
    return fs


def test_clean_copy_has_no_findings(tmp_path):
    assert findings_of(damaged(tmp_path, PAIR.name, lambda d: None)) == []


def test_prev_index_beyond_index_count(tmp_path):
    pos = 40 + 500 * 4 + 5 * 20 + 16  # entry 5's prevIndex
    p = damaged(tmp_path, PAIR.name, lambda d: d.__setitem__(slice(pos, pos + 4), struct.pack(">i", 500)))
    fs = findings_of(p)
    assert [(f.offset, f.severity, f.message) for f in fs] == [
        (pos - 16, "error", "entry 5: prevIndex 500 beyond indexCount 97")]


def test_prev_index_loop_and_slot_beyond(tmp_path):
    pos = 40 + 500 * 4 + 7 * 20 + 16

    def edit(d):
        d[pos:pos + 4] = struct.pack(">i", 9)  # entry 7 -> 9: not older
        d[40:44] = struct.pack(">i", 1000)  # slot 0 -> 1000

    fs = findings_of(damaged(tmp_path, PAIR.name, edit))
    messages = {f.message for f in fs}
    assert "slot 0 points to entry 1000, beyond indexCount 97" in messages
    assert "entry 7: prevIndex 9 is not an older entry (the chain can loop)" in messages


def test_timestamp_outside_header(tmp_path):
    pos = 40 + 500 * 4 + 3 * 20 + 12  # entry 3's timeDiff
    p = damaged(tmp_path, PAIR.name, lambda d: d.__setitem__(slice(pos, pos + 4), struct.pack(">i", 100_000)))
    (f,) = findings_of(p)
    assert f.offset == pos - 12 and "entry 3: timestamp 1795476092574 outside the header's range" in f.message


def test_name_before_first_entry_and_not_a_time(tmp_path):
    (f,) = findings_of(damaged(tmp_path, "20260101000000000", lambda d: None))
    assert "before its first entry was stored" in f.message
    fs = Findings()
    with open_index_file(PAIR, fs) as ix:
        ix.path = Path("index/notatime")
        check_index_file(ix, fs)
    assert [f.message for f in fs] == ["file name is not a creation time (yyyyMMddHHmmssSSS)"]


def test_torn_and_tiny_files_give_findings_not_exceptions(tmp_path):
    conf = BrokerConfig(raw={"maxHashSlotNum": "500", "maxIndexNum": "2000"})
    torn = damaged(tmp_path, PAIR.name, lambda d: d.__delitem__(slice(2040 + 50 * 20 + 7, None)))
    fs = Findings()
    with open_index_file(torn, fs, conf) as f:
        check_index_file(f, fs)
        assert len(f.entries) == 50 and len(f.written()) == 49
        assert index_file_stats(f)["index_count"] == 97
    assert any(x.message.startswith("torn or short file: 3047 of 42040 bytes") for x in fs)
    for size in (0, 12, 40, 1000):
        p = tmp_path / f"t{size}"
        p.write_bytes(PAIR.read_bytes()[:size])
        fs = Findings()
        with open_index_file(p, fs, conf) as f:
            check_index_file(f, fs)
            index_file_stats(f, (0, 1))
        assert fs and fs[0].severity == "error", size


def test_geometry_mismatch_with_broker_conf(tmp_path):
    p = damaged(tmp_path, PAIR.name, lambda d: None)
    fs = findings_of(p, BrokerConfig(raw={"maxHashSlotNum": "100", "maxIndexNum": "400"}))
    assert any("is broker.conf the store's?" in f.message for f in fs)


def test_index_dir_missing(tmp_path):
    assert open_index_dir(tmp_path, Findings()) == []


def test_chain_of_a_real_key():
    """The slot a real key hashes to holds the newest entry of that key (pair_default/B: N1)."""
    need_oracle()
    fs = Findings()
    (f,) = open_index_dir(ORACLE / "pair_default/B", fs)
    h = java_hash("OracleTopicA#N1")
    head = f.slot(h % 500)
    assert f.entry(head)[0] == h and f.entry(head)[1] == 0  # N1 is the record at offset 0
