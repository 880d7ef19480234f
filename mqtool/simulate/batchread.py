"""Batch reads of the store's own records for the simulator's walks over many units at once.

`MappedBase.props` reads one record with one `pread` and `struct` unpacks; the timer's enqueue of
a store's units (a million at the start of a full-scale run) spends most of its time there. Here a
run of records is read with one `pread` of the byte range they span (mapped instead when they lie
more than `SPARSE` bytes apart on average, as a delay level's records do), and the header fields that
locate the properties (TOTALSIZE, MAGICCODE, SYSFLAG, BODYLENGTH, TOPICLENGTH, PROPERTIESLENGTH)
are gathered for all of them by numpy. The checks are `MappedBase._read(phys, whole=False)`'s, so a
record answered here gets the same map; any record they do not pass (a short read, bad magic,
lengths past TOTALSIZE, files that overlap) is answered None: the caller asks `StoreModel.props`,
the per-message path, which decides as it always did.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from mqtool.formats import layout
from mqtool.formats.commitlog import HEADER, HOST_SIZE_V4, HOST_SIZE_V6, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.message import _HEAD, _STORE_TS, _TAIL
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate.diskread import MappedBase, fast_properties

MAX_SPAN = 16 << 20  # bytes one batch read may cover
SPARSE = 4096  # from this many bytes of span a record on, the span is mapped instead of read
_HEAD_SIZE = _HEAD.size
_TAIL_SIZE = _TAIL.size
_STORE_TS_SIZE = _STORE_TS.size
_OFFSETS = layout.offsets(HEADER)
_TOTAL_AT, _MAGIC_AT, _SYSFLAG_AT = _OFFSETS["total_size"], _OFFSETS["magic_code"], _OFFSETS["sys_flag"]


def batchable(base) -> bool:
    """A base whose records can be read batch-wise: a `MappedBase` of a normal-mode store seen as
    scanned (no recovery cut: a record past the recovered end reads as absent)."""
    return isinstance(base, MappedBase) and base.recovery is None and not base.dledger


_STEPS = {n: np.arange(n) for n in (1, 2, 4)}
_SIGNED_BE = {1: np.dtype("i1"), 2: np.dtype(">i2"), 4: np.dtype(">i4")}


def _be(a: np.ndarray, at: np.ndarray, n: int) -> np.ndarray:
    """The signed big-endian `n`-byte integers at the positions `at` of the bytes `a` (positions
    clipped into the bytes: the caller masks what lies outside), by one gather of `n` bytes a row."""
    at = np.minimum(np.maximum(at, 0), len(a) - n)
    return a[at[:, None] + _STEPS[n]].view(_SIGNED_BE[n])[:, 0].astype(np.int64)


def read_props(base: MappedBase, phys: list[int], sizes: list[int]) -> list[dict[str, str] | None]:
    """The properties map of the record at each `phys` (ConsumeQueue `sizes` bound the read), as
    `base.props` gives it, or None where the per-message read must decide."""
    out: list[dict[str, str] | None] = [None] * len(phys)
    scan = _scan(base, phys, sizes)
    if scan is not None:
        buf, ok, begin, end, _body_len, _sysflag = scan
        try:
            for k in np.flatnonzero(ok).tolist():
                out[k] = fast_properties(buf[begin[k]:end[k]].decode("utf-8", "surrogateescape"))
        finally:
            _close(buf)
    return out


def read_records(base: MappedBase, phys: list[int], sizes: list[int]) -> list[tuple[dict[str, str], int, int] | None]:
    """(properties map, BODYLENGTH, SYSFLAG) of the record at each `phys`, where `base.message_once`
    would read them by its fast path (the same checks: `read_props`), else None."""
    out: list[tuple[dict[str, str], int, int] | None] = [None] * len(phys)
    scan = _scan(base, phys, sizes)
    if scan is not None:
        buf, ok, begin, end, body_len, sysflag = scan
        body_len = body_len.tolist()
        sysflag = sysflag.tolist()
        try:
            for k in np.flatnonzero(ok).tolist():
                out[k] = (fast_properties(buf[begin[k]:end[k]].decode("utf-8", "surrogateescape")), body_len[k],
                          sysflag[k])
        finally:
            _close(buf)
    return out


def _close(buf) -> None:
    if isinstance(buf, mmap.mmap):
        buf.close()


def _scan(base: MappedBase, phys: list[int], sizes: list[int]):
    """(the span's bytes or file mapping, ok mask, properties starts and ends in it, BODYLENGTH,
    SYSFLAG) of the records at `phys`, or None when none of them can be read batch-wise; the caller
    closes a mapping (`_close`)."""
    if not phys:
        return None
    p = np.asarray(phys, np.int64)
    s = np.asarray(sizes, np.int64)
    starts = np.asarray(base._starts, np.int64)
    fi = np.searchsorted(starts, p, side="right") - 1
    i = int(fi[0])
    files = base._files
    if i < 0 or not (fi == i).all():
        return None  # records in more files than one: each is read on its own
    if i > 0 and files[i - 1].start + max(files[i - 1].length, base._size) > int(p.min()):
        return None  # files that overlap: the reference path decides
    f = files[i]
    pos = p - f.start
    lo = int(pos.min())
    hi = int((pos + np.maximum(s, 0)).max())
    if lo < 0 or hi - lo > MAX_SPAN or hi <= lo:
        return None
    fd = base._fd(i)
    n = min(hi, base._file_length(i)) - lo  # the bytes a `pread` of [lo, hi) gives
    if n < _HEAD_SIZE:
        return None
    if n > SPARSE * len(phys):
        # mapped, not copied: a delay level's records lie ~5 KB apart among the other topics' records
        # (a `pread` of the span copies 18 times their bytes); only the pages they lie on are touched
        at = lo - lo % mmap.ALLOCATIONGRANULARITY
        buf = mmap.mmap(fd, lo + n - at, access=mmap.ACCESS_READ, offset=at)
    else:
        at, buf = lo, os.pread(fd, n, lo)
    delta = lo - at
    a = np.frombuffer(buf, np.uint8, n, delta)
    r = pos - lo
    avail = (pos < f.length) & (r + _HEAD_SIZE <= n)
    total = _be(a, r + _TOTAL_AT, 4)
    magic = _be(a, r + _MAGIC_AT, 4)
    sysflag = _be(a, r + _SYSFLAG_AT, 4)
    ok = avail & ((magic == MESSAGE_MAGIC_CODE) | (magic == MESSAGE_MAGIC_CODE_V2))
    ok &= (total > _HEAD_SIZE) & (total <= 1 << 30) & (r + total <= n)
    bn = np.where(sysflag & BORNHOST_V6, HOST_SIZE_V6, HOST_SIZE_V4)
    sn = np.where(sysflag & STOREHOST_V6, HOST_SIZE_V6, HOST_SIZE_V4)
    tail = _HEAD_SIZE + bn + _STORE_TS_SIZE + sn  # relative to the record
    ok &= tail + _TAIL_SIZE <= total
    body_len = _be(a, r + tail + _TAIL_SIZE - 4, 4)
    after_body = tail + _TAIL_SIZE + body_len
    ok &= (body_len >= 0) & (after_body <= total)
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    topic_len = np.where(v2, _be(a, r + after_body, 2), _be(a, r + after_body, 1))
    props_at = after_body + np.where(v2, 2, 1) + topic_len
    props_len = _be(a, r + props_at, 2)
    props_start = props_at + 2
    ok &= (topic_len >= 0) & (props_len >= 0) & (props_start + props_len <= total)
    del a  # no view of a mapping outlives the scan: the caller closes it
    r += delta
    return buf, ok, (r + props_start).tolist(), (r + props_start + props_len).tolist(), body_len, sysflag
