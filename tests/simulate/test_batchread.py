"""The one property reader: the compiled kernel (`mqtool._native.props_scan`) equals its plain-Python reference
(`plainscan.scan_py`) row for row on the oracle stores, on generated records and on damaged bytes, and the
entry points (`read_plain`, `read_sources`, `scan_plain`) answer what the per-message light read answers,
whether a span is read (`pread`) or mapped (a sparse one)."""

import bisect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool import _native
from mqtool.builder.broker import put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats import commitlog, layout
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.properties import parse_properties
from mqtool.simulate import batchread, plainscan
from mqtool.simulate.diskread import MappedBase
from mqtool.store.store import Store

WANTED = ("UNIQ_KEY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS")
ALL_INTERNED = (1 << len(WANTED)) - 1
VALUE_COLUMNS = range(plainscan.FIXED, plainscan.FIXED + plainscan.STRIDE * len(WANTED), plainscan.STRIDE)


def batch_records(base: MappedBase, phys: list[int], sizes: list[int]) -> list[tuple | None]:
    """(properties map, BODYLENGTH, SYSFLAG) of each record the batch reader takes, None where it leaves the
    record to the per-message read: what `MappedBase._read(phys, False, True)` answers."""
    scanned = batchread.scan_plain(base, phys, sizes, ())
    if scanned is None:
        return [None] * len(phys)
    buf, out, _answers = scanned
    try:
        rows = out.tolist()
        return [
            None
            if row[plainscan.STATUS] < 0
            else (
                parse_properties(
                    buf[row[plainscan.PROPS_START] : row[plainscan.PROPS_END]].decode("utf-8", "surrogateescape")
                ),
                row[plainscan.BODY_LENGTH],
                row[plainscan.SYSFLAG],
            )
            for row in rows
        ]
    finally:
        batchread.close(buf)


def _templates_of(strings: list[bytes]) -> plainscan.Templates:
    """The templates `batchread` would learn from these properties strings (at most its cap)."""
    book = plainscan.Templates(len(WANTED))
    for s in strings:
        raw = s.decode("utf-8", "surrogateescape")
        t = plainscan.template_of(raw, parse_properties(raw), WANTED)
        if (
            t is not None
            and len(book.list) < batchread.MAX_TEMPLATES
            and all(x.keys != t.keys or x.pad != t.pad for x in book.list)
        ):
            book.add(t)
    return book


def _both(buf: bytes, rels: list[int], delta: int, n: int, flen: int, book: plainscan.Templates) -> np.ndarray:
    """The kernel's `out` after asserting it equals the reference's."""
    r = np.array(rels, np.int64)
    width = plainscan.FIXED + plainscan.STRIDE * len(WANTED)
    native, ref = np.empty((len(rels), width), np.int64), np.empty((len(rels), width), np.int64)
    args = (buf, r, delta, n, flen, plainscan.GEOMETRY, *book.arrays(), ALL_INTERNED)
    got = _native.props_scan(*args, native)
    assert plainscan.scan_py(*args, ref) == got  # (the first record no template matches, the last match's template)
    assert native.tolist() == ref.tolist()
    statuses = native[:, plainscan.STATUS].tolist()
    assert got[0] == (statuses.index(0) if 0 in statuses else len(rels))
    # one record at a time (`props_row`, the per-record read): the batch's row against no template
    bare = np.empty((len(rels), plainscan.FIXED), np.int64)
    _native.props_scan(buf, r, delta, n, flen, plainscan.GEOMETRY, *plainscan.Templates(0).arrays(), 0, bare)
    for rel, row in zip(rels, bare.tolist(), strict=True):
        one = _native.props_row(buf, rel, delta, n, flen, plainscan.GEOMETRY)
        assert one == plainscan.row_py(buf, rel, delta, n, flen, plainscan.GEOMETRY) == tuple(row)
    return native


def test_the_loaded_kernel_is_the_extensions():
    assert plainscan.KERNEL is _native.props_scan and plainscan.ROW_KERNEL is _native.props_row


# ----- the oracle stores and the torn one -----
def _file_bytes(store: Store) -> list[tuple[int, bytes]]:
    return [(f.start, f.path.read_bytes()) for f in store.commitlog.queue.files]


def _kernel_on_store(store: Store) -> int:
    """Kernel == reference over every queue's records (and a byte beside each), file by file; the rows the
    checks pass equal the light read. Returns the records matched by a template."""
    fast = MappedBase(store, cache_messages=4)
    files = _file_bytes(store)
    starts = [s for s, _b in files]
    matched = 0
    try:
        for topic, qid in store.queue_ids:
            units = [u for _o, u in fast.cq_units(topic, qid, fast.cq_min(topic, qid), fast.cq_max(topic, qid))]
            for shift in (0, 1, -1):
                by_file: dict[int, list[int]] = {}
                for u in units:
                    i = bisect.bisect_right(starts, u[0] + shift) - 1
                    if i >= 0:
                        by_file.setdefault(i, []).append(u[0] + shift)
                for i, phys in by_file.items():
                    start, data = files[i]
                    strings = [
                        fast._read(p, True).props_raw.encode("utf-8", "surrogateescape")
                        for p in phys
                        if fast._read(p, True) is not None
                    ]
                    out = _both(data, [p - start for p in phys], 0, len(data), len(data), _templates_of(strings))
                    for p, row in zip(phys, out.tolist(), strict=True):
                        light = fast._read(p, False, True)
                        assert (row[plainscan.STATUS] >= 0) == (light is not None), (topic, qid, p)
                        if light is not None:
                            raw = data[row[plainscan.PROPS_START] : row[plainscan.PROPS_END]]
                            assert parse_properties(raw.decode("utf-8", "surrogateescape")) == light[0]
                            assert [row[plainscan.BODY_LENGTH], row[plainscan.SYSFLAG]] == list(light[1:])
                            assert row[plainscan.QUEUE_ID] == qid
                            assert data[row[plainscan.TOPIC_START] : row[plainscan.TOPIC_END]] == topic.encode()
                            matched += row[plainscan.STATUS] == 1
    finally:
        fast.close()
    return matched


def test_kernel_equals_reference_on_oracle_stores(oracle_sim_store):
    name, store = oracle_sim_store
    matched = _kernel_on_store(store)
    assert matched > 0, name


def test_kernel_equals_reference_on_a_torn_store(torn_store):
    assert _kernel_on_store(torn_store) > 0


# ----- generated records, whole and damaged -----
_HEAD, _STORE_TS, _TAIL = (
    layout.struct_format(f) for f in (commitlog.HEADER, commitlog.AFTER_BORN_HOST, commitlog.AFTER_STORE_HOST)
)
_TOPIC_LEN, _PROPS_LEN = (
    layout.struct_format([commitlog.TOPIC_LENGTH_V1]),
    layout.struct_format([commitlog.PROPERTIES_LENGTH]),
)


def _record(topic: bytes, qid: int, props: bytes, body: bytes) -> bytes:
    """A V1 record with IPv4 hosts, its fields packed by the layouts `mqtool.formats.commitlog` derives."""
    host = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    rest = (
        host
        + _STORE_TS.pack(2)
        + host
        + _TAIL.pack(0, 0, len(body))
        + body
        + _TOPIC_LEN.pack(len(topic))
        + topic
        + _PROPS_LEN.pack(len(props))
        + props
    )
    total = _HEAD.size + len(rest)
    return _HEAD.pack(total, commitlog.MESSAGE_MAGIC_CODE, 0, qid, 0, 0, 0, 0, 1) + rest


_KEY = st.sampled_from([b"UNIQ_KEY", b"REAL_TOPIC", b"REAL_QID", b"TIMER_OUT_MS", b"KEYS", b"", b"A\x01B"])
_VALUE = st.one_of(
    st.sampled_from([b"", b"7", b"1800000000000", b"0123456789012345678", b"T", b"x\x01y", "é".encode()]),
    st.binary(max_size=6),
)
_PROPS = st.one_of(
    st.lists(st.tuples(_KEY, _VALUE), max_size=6).map(lambda kv: b"\x02".join(k + b"\x01" + v for k, v in kv)),
    st.binary(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_PROPS, st.booleans(), st.binary(max_size=20), st.integers(-3, 9)), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=4),
    st.integers(0, 60),
)
def test_kernel_equals_reference_on_generated_and_damaged_records(recs, hurts, cut):
    """Generated records (any properties bytes, a trailing separator or none), then bytes overwritten and
    the span cut short (a torn record): the kernel's rows are the reference's; an undamaged record whose
    string a template takes is matched and gives its values."""
    data, rels, strings = bytearray(), [], []
    for props, trailing, body, qid in recs:
        props += b"\x02" if trailing and props else b""
        rels.append(len(data))
        strings.append(props)
        data += _record(b"TopicA", qid, props, body)
    whole = bytes(data)
    for at, value in hurts:
        if at < len(data):
            data[at] = value
    data = bytes(data[: max(len(data) - cut, 0)])
    book = _templates_of(strings)
    out = _both(data, rels, 0, len(data), len(data), book)
    if data == whole:
        for props, row in zip(strings, out.tolist(), strict=True):
            assert row[plainscan.STATUS] >= 0
            raw = props.decode("utf-8", "surrogateescape")
            if plainscan.template_of(raw, parse_properties(raw), WANTED) is not None:
                assert row[plainscan.STATUS] == 1
                got = [None if row[c] < 0 else data[row[c] : row[c + 1]] for c in VALUE_COLUMNS]
                want = parse_properties(raw)
                assert got == [None if w not in want else want[w].encode("utf-8", "surrogateescape") for w in WANTED]


def test_damaged_bytes_known_cases():
    """A torn record, bad property separators, a missing key, a bad magic: hand-made, the answers known."""
    good = b"UNIQ_KEY\x01K1\x02REAL_TOPIC\x01T\x02"
    recs = [
        good,
        b"UNIQ_KEY\x01K1\x02\x02REAL_TOPIC\x01T\x02",
        b"UNIQ_KEY\x01K1\x01REAL_TOPIC\x01T\x02",
        b"UNIQ_KEY\x01K2\x02",
        good,
        good,
    ]
    data, rels = bytearray(), []
    for props in recs:
        rels.append(len(data))
        data += _record(b"TopicA", 3, props, b"body")
    data[rels[4] + 4] ^= 0xFF  # MAGICCODE
    book = _templates_of(recs[:3])  # the second string is not plain: two templates
    torn = bytes(data[:-5])  # the last record cut short
    out = _both(torn, rels, 0, len(torn), len(torn), book).tolist()
    assert [row[plainscan.STATUS] for row in out] == [1, 0, 1, 1, -1, -1]
    # the third string is one key, UNIQ_KEY, of the value "K1\x01REAL_TOPIC\x01T"; the fourth has its keys
    assert [row[plainscan.TEMPLATE] for row in out] == [0, -1, 1, 1, -1, -1]
    assert torn[out[2][plainscan.FIXED] : out[2][plainscan.FIXED + 1]] == b"K1\x01REAL_TOPIC\x01T"
    assert out[3][plainscan.FIXED + plainscan.STRIDE] == -1  # REAL_TOPIC absent
    assert torn[out[3][plainscan.FIXED] : out[3][plainscan.FIXED + 1]] == b"K2"
    assert torn[out[0][plainscan.FIXED] : out[0][plainscan.FIXED + 1]] == b"K1"
    assert out[0][plainscan.SIZE] == len(good) + 4 + 16  # the string, BODYLENGTH, two IPv4 hosts


# ----- the entry points against the light read -----
def _entry_points_same(store: Store) -> tuple[int, int]:
    """`batch_records`, `read_plain` and `read_sources` answer what the light read answers for every queue's
    units (and a byte beside them). Returns (records the batch answered, records of queues in one file)."""
    fast = MappedBase(store, cache_messages=4)
    n = want = 0
    try:
        for topic, qid in store.queue_ids:
            units = [u for _o, u in fast.cq_units(topic, qid, fast.cq_min(topic, qid), fast.cq_max(topic, qid))]
            files = {bisect.bisect_right(fast._starts, u[0]) for u in units}
            for shift in (0, 1, -1):
                phys, sizes = [u[0] + shift for u in units], [u[1] for u in units]
                plain = batchread.read_plain(fast, phys, sizes, WANTED)
                sources = batchread.read_sources(fast, phys, sizes, WANTED)
                for got, pl, src, p in zip(batch_records(fast, phys, sizes), plain, sources, phys, strict=True):
                    light = fast._read(p, False, True)
                    assert (light is not None) == (shift == 0), (topic, qid, p)
                    want += shift == 0 and len(files) == 1
                    values = light and tuple(
                        None if w not in light[0] else light[0][w].encode("utf-8", "surrogateescape") for w in WANTED
                    )
                    # `read_sources` reads a queue over several files by runs, and matches the record that makes a
                    # template (`read_plain` gives its map)
                    assert src is None or light is not None and src[:2] == (topic.encode(), qid) and src[3] == values
                    if got is None:
                        assert pl is None
                        continue
                    assert got == light, (topic, qid, p)
                    n += 1
                    assert pl == light or pl[1] == values
                    assert src is None or src[2:] == pl or pl == light
    finally:
        fast.close()
    return n, want


def test_entry_points_on_oracle_stores(oracle_sim_store):
    name, store = oracle_sim_store
    n, want = _entry_points_same(store)
    assert n == want and (want == 19 if name == "basic-5.3.1" else want > 0)  # basic: 19 of its 115 queued


def test_entry_points_on_a_torn_store(torn_store):
    n, want = _entry_points_same(torn_store)
    assert n == want == 6


def test_a_sparse_span_is_mapped(tmp_path):
    """Records far apart (one in eight of a queue, ~4.5 KB apart): `MAP_FROM` of them are mapped, fewer are
    read; the answers are the same."""
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(tmp_path / "s", config) as w:
        for i in range(8 * batchread.MAP_FROM + 8):
            put_message(
                w,
                "Sparse" if i % 8 == 0 else "Filler",
                0,
                b"f" * 500,
                [("UNIQ_KEY", f"U{i}")],
                store_timestamp=1000 + i,
            )
        w.write_checkpoint()
    store = Store.open(tmp_path / "s", config)
    fast = MappedBase(store)
    units = [u for _o, u in fast.cq_units("Sparse", 0, 0, batchread.MAP_FROM + 1)]
    phys, sizes = [u[0] for u in units], [u[1] for u in units]
    assert (phys[-1] - phys[0]) > batchread.SPARSE * len(phys)
    scanned = batchread.scan_plain(fast, phys, sizes, ("UNIQ_KEY",))
    assert type(scanned[0]).__name__ == "mmap"
    batchread.close(scanned[0])
    mapped = batchread.read_plain(fast, phys, sizes, ("UNIQ_KEY",))
    few = batchread.read_plain(fast, phys[:8], sizes[:8], ("UNIQ_KEY",))
    values = [r[1] if len(r) == 2 else r[0]["UNIQ_KEY"].encode() for r in mapped]  # the first may make the template
    assert values == [f"U{i}".encode() for i in range(0, 8 * len(phys), 8)]
    assert few[1:] == mapped[1:8]
    fast.close()


def test_without_the_extension_the_reference_reads_after_one_warning():
    """A machine without a compiler: `mqtool._native` cannot be imported, the plain-Python reader takes its
    place and says so once, however often it is used."""
    code = (
        "import sys, warnings\n"
        "sys.modules['mqtool._native'] = None\n"  # an import of it raises ImportError
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    from mqtool.simulate import batchread, plainscan\n"
        "    import importlib; importlib.import_module('mqtool.simulate.plainscan')\n"
        "print(plainscan.KERNEL is plainscan.scan_py and plainscan.ROW_KERNEL is plainscan.row_py, len(seen),"
        " seen[0].category.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.stdout.split() == ["True", "1", "RuntimeWarning"]


def test_a_span_outside_the_bytes_is_refused():
    book = plainscan.Templates(1)
    rels = np.zeros(1, np.int64)
    for kernel in (_native.props_scan, plainscan.scan_py):
        out = np.empty((1, plainscan.FIXED + plainscan.STRIDE), np.int64)
        with pytest.raises(ValueError, match="outside the bytes"):
            kernel(b"x" * 100, rels, 10, 91, 91, plainscan.GEOMETRY, *book.arrays(), 0, out)
    for row in (_native.props_row, plainscan.row_py):
        with pytest.raises(ValueError, match="outside the bytes"):
            row(b"x" * 100, 0, 10, 91, 91, plainscan.GEOMETRY)
