"""The one property reader (`mqtool.store.propscan`): the compiled kernel (`mqtool._native.props_scan`) equals its
plain-Python reference (`propscan.scan_py`) row for row on generated records and on damaged bytes (the oracle
stores: tests/simulate/test_batchread.py), and without the extension the reference reads."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool import _native
from mqtool.formats import commitlog, layout
from mqtool.formats.properties import parse_properties
from mqtool.store import propscan

WANTED = ("UNIQ_KEY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS")
VALUE_COLUMNS = range(propscan.FIXED, propscan.FIXED + propscan.STRIDE * len(WANTED), propscan.STRIDE)
MAX_TEMPLATES = 32  # `batchread.MAX_TEMPLATES`: the templates a batch reader learns at most


def _templates_of(strings: list[bytes]) -> propscan.Templates:
    """The templates a batch reader would learn from these properties strings (at most its cap)."""
    book = propscan.Templates(len(WANTED))
    for s in strings:
        raw = s.decode("utf-8", "surrogateescape")
        t = propscan.template_of(raw, parse_properties(raw), WANTED)
        if (
            t is not None
            and len(book.list) < MAX_TEMPLATES
            and all(x.keys != t.keys or x.pad != t.pad for x in book.list)
        ):
            book.add(t)
    return book


def _both(buf: bytes, rels: list[int], delta: int, n: int, flen: int, book: propscan.Templates) -> np.ndarray:
    """The kernel's `out` after asserting it equals the reference's."""
    r = np.array(rels, np.int64)
    width = propscan.FIXED + propscan.STRIDE * len(WANTED)
    native, ref = np.empty((len(rels), width), np.int64), np.empty((len(rels), width), np.int64)
    args = (buf, r, delta, n, flen, propscan.GEOMETRY, *book.arrays())
    got = _native.props_scan(*args, native)
    assert propscan.scan_py(*args, ref) == got  # (the first record no template matches, the last match's template)
    assert native.tolist() == ref.tolist()
    statuses = native[:, propscan.STATUS].tolist()
    assert got[0] == (statuses.index(0) if 0 in statuses else len(rels))
    # one record at a time (`props_row`, the per-record read): the batch's row against no template
    bare = np.empty((len(rels), propscan.FIXED), np.int64)
    _native.props_scan(buf, r, delta, n, flen, propscan.GEOMETRY, *propscan.Templates(0).arrays(), bare)
    for rel, row in zip(rels, bare.tolist(), strict=True):
        one = _native.props_row(buf, rel, delta, n, flen, propscan.GEOMETRY)
        assert one == propscan.row_py(buf, rel, delta, n, flen, propscan.GEOMETRY) == tuple(row)
    return native


def test_the_loaded_kernel_is_the_extensions():
    assert propscan.KERNEL is _native.props_scan and propscan.ROW_KERNEL is _native.props_row


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
            assert row[propscan.STATUS] >= 0
            raw = props.decode("utf-8", "surrogateescape")
            if propscan.template_of(raw, parse_properties(raw), WANTED) is not None:
                assert row[propscan.STATUS] == 1
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
    assert [row[propscan.STATUS] for row in out] == [1, 0, 1, 1, -1, -1]
    # the third string is one key, UNIQ_KEY, of the value "K1\x01REAL_TOPIC\x01T"; the fourth has its keys
    assert [row[propscan.TEMPLATE] for row in out] == [0, -1, 1, 1, -1, -1]
    assert torn[out[2][propscan.FIXED] : out[2][propscan.FIXED + 1]] == b"K1\x01REAL_TOPIC\x01T"
    assert out[3][propscan.FIXED + propscan.STRIDE] == -1  # REAL_TOPIC absent
    assert torn[out[3][propscan.FIXED] : out[3][propscan.FIXED + 1]] == b"K2"
    assert torn[out[0][propscan.FIXED] : out[0][propscan.FIXED + 1]] == b"K1"
    assert out[0][propscan.SIZE] == len(good) + 4 + 16  # the string, BODYLENGTH, two IPv4 hosts


def test_without_the_extension_the_reference_reads_after_one_warning():
    """A machine without a compiler: `mqtool._native` cannot be imported, the plain-Python reader takes its
    place and says so once, however often it is used."""
    code = (
        "import sys, warnings\n"
        "sys.modules['mqtool._native'] = None\n"  # an import of it raises ImportError
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    from mqtool.simulate import batchread\n"
        "    from mqtool.store import propscan\n"
        "    import importlib; importlib.import_module('mqtool.store.propscan')\n"
        "print(propscan.KERNEL is propscan.scan_py and propscan.ROW_KERNEL is propscan.row_py, len(seen),"
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
    book = propscan.Templates(1)
    rels = np.zeros(1, np.int64)
    for kernel in (_native.props_scan, propscan.scan_py):
        out = np.empty((1, propscan.FIXED + propscan.STRIDE), np.int64)
        with pytest.raises(ValueError, match="outside the bytes"):
            kernel(b"x" * 100, rels, 10, 91, 91, propscan.GEOMETRY, *book.arrays(), out)
    for row in (_native.props_row, propscan.row_py):
        with pytest.raises(ValueError, match="outside the bytes"):
            row(b"x" * 100, 0, 10, 91, 91, propscan.GEOMETRY)
