"""IndexFile layout and writer against the files RocketMQ 5.3.1 and 4.9.8 wrote (spec §11)."""

import struct

import pytest
from indexkit import CASE_IDS, CASES, java_hash

from conftest import need_oracle
from mqtool.formats.indexfile import (
    IndexFileWriter,
    build_index_file,
    build_key,
    index_entry,
    index_file,
    index_file_size,
    index_header,
    index_key_hash,
)
from mqtool.rules.index import build_index_files


def test_sizes_are_the_brokers():
    assert index_header.sizeof() == 40
    assert index_entry.sizeof() == 20
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040  # spec §11, the default file
    assert index_file(3, 2).sizeof() == 40 + 12 + 40


def test_key_hash_hand_computed():
    assert build_key("T", "k") == "T#k"
    # "T#k": 84*31^2 + 35*31 + 107 = 80724 + 1085 + 107
    assert index_key_hash("T#k") == 81916
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE: abs overflows, the broker uses 0
    assert index_key_hash("polygenelubricants") == 0
    # everything else against the independent implementation in indexkit
    for s in ("TopicA#key0", "é#世界", "OracleTopicA#N1", "x" * 100):
        assert index_key_hash(s) == java_hash(s)


def test_put_key_numbering_and_chain_hand_computed():
    w = IndexFileWriter(hash_slot_num=4, index_num=4)
    h = index_key_hash("T#k")  # 81916 % 4 == 0
    assert w.put_key("T#k", 100, 10_000)
    assert w.put_key("T#k", 200, 12_500)
    data = w.to_bytes()
    assert struct.unpack(">qqqqii", data[:40]) == (10_000, 12_500, 100, 200, 1, 3)
    assert struct.unpack_from(">4i", data, 40) == (2, 0, 0, 0)  # slot 0 -> entry 2
    assert struct.unpack_from(">iqii", data, 56 + 20) == (h, 100, 0, 0)  # entry 1, chain end
    assert struct.unpack_from(">iqii", data, 56 + 40) == (h, 200, 2, 1)  # entry 2: 2.5 s -> 2, prev 1
    assert w.put_key("T#x", 300, 13_000)
    assert not w.put_key("T#y", 400, 14_000)  # indexCount 4 == indexNum: full
    with pytest.raises(ValueError):
        build_index_file([("a", 0, 1)] * 4, 4, 4)


def test_rolled_file_seeds_header_and_first_time_diff():
    """A new file starts from the full file's end; entry 1's timeDiff is taken against it (the
    broker sets beginTimestamp only after computing timeDiff)."""
    files = build_index_files_of([("T", 0, 1_000), ("T", 10, 1_500), ("T", 20, 4_900)], slots=2, num=3)
    assert len(files) == 2
    assert struct.unpack(">qqqqii", files[1][:40]) == (4_900, 4_900, 20, 20, 1, 2)
    assert struct.unpack_from(">iqii", files[1], 40 + 8 + 20)[1:] == (20, 3, 0)  # (4900-1500)/1000


def build_index_files_of(puts, slots, num):
    from mqtool.rules.index import DispatchRequest

    return build_index_files([DispatchRequest(t, off, ts, 0, None, f"u{off}") for t, off, ts in puts], slots, num)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_oracle_index_files_parse_and_rebuild_byte_exact(case):
    need_oracle()
    real = [p.read_bytes() for p in case.index_files()]
    assert real, case.name
    rebuilt = build_index_files(case.dispatches(), case.hash_slot_num, case.index_num)
    assert [len(b) for b in rebuilt] == [len(b) for b in real]
    assert rebuilt == real
    for data in real:
        parsed = index_file(case.hash_slot_num, case.index_num).parse(data)
        assert index_file(case.hash_slot_num, case.index_num).build(parsed) == data
        h = parsed.header
        assert struct.unpack(">qqqqii", data[:40]) == (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset,
                                                        h.end_phy_offset, h.hash_slot_count, h.index_count)
        assert parsed.entries[0].phy_offset == 0 and parsed.entries[0].key_hash == 0  # entry 0 never used
        assert sum(1 for s in parsed.slots if s) == h.hash_slot_count


def test_basic_header_is_what_rocketmq_wrote():
    need_oracle()
    data = CASES[0].index_files()[0].read_bytes()
    # summary.txt: indexLastUpdatePhyoffset=96257; 238 = 1 + 237 keys of 115 records
    assert index_header.parse(data).end_phy_offset == 96257
    assert index_header.parse(data).index_count == 238
