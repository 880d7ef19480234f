"""The row kernels of the numpy-free `messages` path (`_native.int64_stats`, `_native.row_checks`) against their
plain references (`store/kernels.py`), and a walk into plain buffers (`fastscan.columns_from`) against the same
walk into numpy arrays: the same columns, records and per-record findings."""

import mmap
from array import array

from hypothesis import given
from hypothesis import strategies as st

from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE, commitlog_record
from mqtool.store import extension, fastscan, kernels

NATIVE_STATS, NATIVE_CHECKS = extension.kernel("int64_stats"), extension.kernel("row_checks")
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


def test_the_row_kernels_are_the_extensions():
    assert NATIVE_STATS.__module__ == NATIVE_CHECKS.__module__ == "mqtool._native"
    assert NATIVE_STATS is not kernels.int64_stats and NATIVE_CHECKS is not kernels.row_checks
    assert NATIVE_STATS(array("q", [5, -3, 8])) == (10, -3, 8, 5 | -3 | 8)


@given(st.lists(st.integers(-(1 << 40), 1 << 40), max_size=50))
def test_int64_stats_equals_its_reference(values):
    v = array("q", values)
    assert NATIVE_STATS(v) == kernels.int64_stats(v)
    assert kernels.int64_stats(v) == ((sum(values), min(values), max(values), _or(values)) if values else (0, 0, 0, 0))


def _or(values: list[int]) -> int:
    bits = 0
    for x in values:
        bits |= x
    return bits


@given(
    st.lists(
        st.tuples(st.integers(0, 1 << 30), st.booleans(), st.integers(0, 3), st.integers(0, 2), st.integers(0, 2)),
        max_size=40,
    ),
    st.integers(0, 1 << 32),
    st.booleans(),
)
def test_row_checks_equals_its_reference(rows, base, crc_checked):
    """Rows with a PHYSICALOFFSET field off their position, empty bodies, CRCs that match or not."""
    pos = array("q", [p for p, *_ in rows])
    phys = array("q", [p + base + (0 if same else 1) for p, same, *_ in rows])
    body_len = array("q", [n for _, _, n, _, _ in rows])
    crc = array("q", [c for *_, c, _ in rows])
    stored = array("q", [s for *_, s in rows])
    got = [bytearray(len(rows)), bytearray(len(rows))]
    bad = [
        check(pos, phys, body_len, crc, stored, base, crc_checked, ok)
        for check, ok in zip((NATIVE_CHECKS, kernels.row_checks), got, strict=True)
    ]
    assert bad[0] == bad[1] and got[0] == got[1]
    crc_ok = [not crc_checked or n == 0 or c == s for _, _, n, c, s in rows]
    assert list(got[0]) == [int(ok) for ok in crc_ok]
    assert bad[0] == [i for i, (ok, (_, same, *_)) in enumerate(zip(crc_ok, rows, strict=True)) if not ok or not same]


def _record(phys: int, body: bytes, stored_crc: int) -> bytes:
    return commitlog_record.build({"total_size": 0, "magic_code": MESSAGE_MAGIC_CODE, "message": {
        "body_crc": stored_crc, "queue_id": 1, "flag": 0, "queue_offset": 0, "physical_offset": phys, "sys_flag": 0,
        "born_timestamp": 1790000000000, "born_host": "10.0.0.1:1", "store_timestamp": 1790000000001,
        "store_host": "10.0.0.2:10911", "reconsume_times": 0, "prepared_transaction_offset": 0, "body": body,
        "topic": "T", "properties": ""}})  # fmt: skip


def _damaged_file() -> bytes:
    """Five records: #1's PHYSICALOFFSET field is off by 7, #3's body CRC is wrong, #4's both, #2's body empty."""
    from mqtool.formats.commitlog import body_crc

    out = b""
    for i, body in enumerate([b"a", b"bb", b"", b"dddd", b"e"]):
        phys = 1000 + len(out) + (7 if i in (1, 4) else 0)  # the file starts at offset 1000
        out += _record(phys, body, body_crc(body) + (1 if i in (3, 4) else 0))
    return out + bytes(64)


def test_a_walk_into_plain_buffers_equals_the_walk_into_arrays():
    data = _damaged_file()
    buffers = []

    def take(nbytes: int) -> memoryview:
        buffers.append(mmap.mmap(-1, nbytes))
        return memoryview(buffers[-1])

    for verify in (True, False):
        arrays = list(fastscan.iter_commitlog_chunks(data, 1000, verify_crc=verify, chunk_records=3))
        with fastscan.columns_from(take):
            plain = list(fastscan.iter_commitlog_chunks(data, 1000, verify_crc=verify, chunk_records=3))
        assert [type(c.columns) for c in plain] == [fastscan.Columns] * 2 and [len(c) for c in plain] == [3, 2]
        for a, p in zip(arrays, plain, strict=True):
            assert (a.end, a.stop, a.detail, len(a)) == (p.end, p.stop, p.detail, len(p))
            assert [p.column(k).tolist() for k in range(fastscan.NCOL)] == a.cols.tolist()
            assert list(fastscan.records_from_chunk(data, p)) == list(fastscan.records_from_chunk(data, a))
        found = [[(i + 3 * k, m) for i, m in fastscan.record_findings(c)] for k, c in enumerate(plain)]
        assert found == [[(i + 3 * k, m) for i, m in fastscan.record_findings(c)] for k, c in enumerate(arrays)]
        phys = [(1, "PHYSICALOFFSET field 1100 != position 1093"), (4, "PHYSICALOFFSET field 1382 != position 1375")]
        crc = [(3, "body CRC mismatch"), (4, "body CRC mismatch")] if verify else []
        got = sorted((row, m.split(" (")[0]) for rows in found for row, m in rows)
        assert got == sorted(phys + crc)
        assert plain[1].cols.tolist() == arrays[1].cols.tolist()  # the numpy view, where a view asks for one
