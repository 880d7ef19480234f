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

import bisect
import mmap
import operator
import os
import re
import struct

import numpy as np

from mqtool.formats import layout
from mqtool.formats.commitlog import (
    AFTER_STORE_HOST,
    HEADER,
    HOST_SIZE_V4,
    HOST_SIZE_V6,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
)
from mqtool.formats.message import _PROPS_LEN, _TOPIC_LEN
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate import plainscan
from mqtool.simulate.diskread import MappedBase, fast_properties

MAX_SPAN = 16 << 20  # bytes one batch read may cover
SPARSE = 4096  # from this many bytes of span a record on, the span is mapped instead of read
MAP_FROM = 256  # ... when there are this many records (`read_plain`)
# the header's places and widths, derived from `commitlog_record` once (`plainscan`, whose kernel uses them too)
_HEAD_SIZE, _TAIL_SIZE, _STORE_TS_SIZE = plainscan.HEAD, plainscan.TAIL, plainscan.STORE_TS
_TOTAL_AT, _MAGIC_AT, _SYSFLAG_AT = plainscan.TOTAL_AT, plainscan.MAGIC_AT, plainscan.SYSFLAG_AT
_TOTAL_W, _MAGIC_W, _SYSFLAG_W = plainscan.TOTAL_W, plainscan.MAGIC_W, plainscan.SYSFLAG_W
_BL, _TL1, _TL2, _PL = plainscan.BL, plainscan.TL1, plainscan.TL2, plainscan.PL  # BODYLENGTH, TOPICLENGTH, ...
# `read_plain`'s readers, derived from `commitlog_record` like `formats.message`'s
_LEAD_SYS = layout.struct_format([f for f in HEADER if f.name in ("total_size", "magic_code", "sys_flag")])
_BODY_LEN = layout.struct_format(AFTER_STORE_HOST[-1:])  # BODYLENGTH, the tail's last field
MAX_TEMPLATES = 32  # plain key sequences remembered per set of wanted keys (`read_plain`)


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


def _span_bytes(base: MappedBase, i: int, lo: int, hi: int, mapped: bool):
    """(the bytes of file `i`'s [lo, hi) as a `pread` gives them, or a read-only mapping of them when
    `mapped`; where `lo` lies in them; their length), None when they are shorter than a header."""
    fd = base._fd(i)
    n = min(hi, base._file_length(i)) - lo  # the bytes a `pread` of [lo, hi) gives
    if n < _HEAD_SIZE:
        return None
    if mapped:  # only the pages the records lie on are touched
        at = lo - lo % mmap.ALLOCATIONGRANULARITY
        return mmap.mmap(fd, lo + n - at, access=mmap.ACCESS_READ, offset=at), lo - at, n
    return os.pread(fd, n, lo), 0, n


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
    # mapped, not copied, when sparse: a delay level's records lie ~5 KB apart among the other topics'
    # records (a `pread` of the span copies 18 times their bytes)
    span = _span_bytes(base, i, lo, hi, min(hi, base._file_length(i)) - lo > SPARSE * len(phys))
    if span is None:
        return None
    buf, delta, n = span
    a = np.frombuffer(buf, np.uint8, n, delta)
    r = pos - lo
    avail = (pos < f.length) & (r + _HEAD_SIZE <= n)
    total = _be(a, r + _TOTAL_AT, _TOTAL_W)
    magic = _be(a, r + _MAGIC_AT, _MAGIC_W)
    sysflag = _be(a, r + _SYSFLAG_AT, _SYSFLAG_W)
    ok = avail & ((magic == MESSAGE_MAGIC_CODE) | (magic == MESSAGE_MAGIC_CODE_V2))
    ok &= (total > _HEAD_SIZE) & (total <= 1 << 30) & (r + total <= n)
    bn = np.where(sysflag & BORNHOST_V6, HOST_SIZE_V6, HOST_SIZE_V4)
    sn = np.where(sysflag & STOREHOST_V6, HOST_SIZE_V6, HOST_SIZE_V4)
    tail = _HEAD_SIZE + bn + _STORE_TS_SIZE + sn  # relative to the record
    ok &= tail + _TAIL_SIZE <= total
    body_len = _be(a, r + tail + _TAIL_SIZE - _BL, _BL)
    after_body = tail + _TAIL_SIZE + body_len
    ok &= (body_len >= 0) & (after_body <= total)
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    topic_len = np.where(v2, _be(a, r + after_body, _TL2), _be(a, r + after_body, _TL1))
    props_at = after_body + np.where(v2, _TL2, _TL1) + topic_len
    props_len = _be(a, r + props_at, _PL)
    props_start = props_at + _PL
    ok &= (topic_len >= 0) & (props_len >= 0) & (props_start + props_len <= total)
    del a  # no view of a mapping outlives the scan: the caller closes it
    r += delta
    return buf, ok, (r + props_start).tolist(), (r + props_start + props_len).tolist(), body_len, sysflag


def _open_span(base: MappedBase, phys: list[int], sizes: list[int]):
    """`_scan`'s choice of the bytes, by plain Python (no numpy set-up for a few records): (the
    span's bytes or file mapping, where the span starts in it, each record's position in the span,
    the span's length, the position in the span where the file's listed length ends), or None when
    the records cannot be read batch-wise; the caller closes a mapping (`_close`)."""
    if not phys:
        return None
    starts = base._starts
    p_lo, p_hi = min(phys), max(phys)
    i = bisect.bisect_right(starts, p_lo) - 1
    if i < 0 or bisect.bisect_right(starts, p_hi) - 1 != i:
        return None  # records in more files than one: each is read on its own
    files = base._files
    if i > 0 and files[i - 1].start + max(files[i - 1].length, base._size) > p_lo:
        return None  # files that overlap: the reference path decides
    f = files[i]
    lo = p_lo - f.start
    if len(phys) != len(sizes):
        raise ValueError("phys and sizes differ in length")
    if min(sizes) > 0:
        hi = max(map(operator.add, phys, sizes)) - f.start
    else:
        hi = max([p + s if s > 0 else p for p, s in zip(phys, sizes, strict=True)]) - f.start
    if lo < 0 or hi - lo > MAX_SPAN or hi <= lo:
        return None
    # mapped as `_scan` maps, but a few records' span is read: mapping it and faulting its pages in costs more
    sparse = min(hi, base._file_length(i)) - lo > SPARSE * len(phys)
    span = _span_bytes(base, i, lo, hi, sparse and len(phys) >= MAP_FROM)
    if span is None:
        return None
    buf, delta, n = span
    return buf, delta, [p - p_lo for p in phys], n, f.length - lo


class _Template:
    """A plain key sequence: the regular expression that matches exactly the properties strings
    with these keys, in this order, each with a non-empty value (`fast_properties` parses such a
    string by its splits into a map of as many entries as segments), and the groups of the wanted
    keys' values (an absent key's: a last group that never takes part, so one `match.group(*groups)`
    gives them all, None for an absent one)."""

    __slots__ = ("pattern", "groups", "pad", "keys")

    def __init__(self, keys: list[str], trailing: bool, wanted: tuple[str, ...]) -> None:
        self.keys = [k.encode("utf-8", "surrogateescape") for k in keys]  # for `plainscan`
        parts = [re.escape(k.encode("utf-8", "surrogateescape")) + b"\x01([^\x02]+)" for k in keys]
        never = b"(?:()(?!))?"  # group len(keys) + 1: matches nothing, so it is always None
        self.pattern = re.compile(b"\x02".join(parts) + (b"\x02" if trailing else b"") + never)
        self.groups = tuple(keys.index(w) + 1 if w in keys else len(keys) + 1 for w in wanted)
        self.pad = 0 if trailing else 1  # the separator a re-put's string ends with (4.9.8 cuts it later)

    def pick(self, m: re.Match) -> tuple[bytes | None, ...] | bytes | None:
        """The wanted values of a match (a tuple for two keys or more)."""
        return m.group(*self.groups)


_TEMPLATES: dict[tuple[str, ...], list[_Template]] = {}


def _plain_template(raw: str, props: dict[str, str], wanted: tuple[str, ...]) -> _Template | None:
    """The template of a properties string `fast_properties` parsed into `props`, or None when it is
    not plain (a duplicate key, an empty name or value, a segment without a separator)."""
    segs = raw.split("\x02")
    trailing = segs[-1] == ""
    if trailing:
        segs.pop()
    if not segs or len(segs) != len(props):
        return None
    keys = []
    for seg in segs:
        k, sep, v = seg.partition("\x01")
        if not k or not sep or not v:
            return None
        keys.append(k)
    return _Template(keys, trailing, wanted)


def search_templates(templates: list[_Template], last: _Template | None, buf, b: int, e: int) -> tuple:
    """(the match, its template) of the first of `templates` whose expression matches `buf[b:e]` whole, or
    (None, `last`): the search after the template the previous record matched (`last`) failed."""
    for t in templates:
        m = t.pattern.fullmatch(buf, b, e)
        if m is not None:
            return m, t
    return None, last


def read_plain(base: MappedBase, phys: list[int], sizes: list[int], wanted: tuple[str, ...]) -> list[tuple | None]:
    """For the record at each `phys` (ConsumeQueue `sizes` bound the read), what a re-put that keeps
    every property needs, read with `read_records`'s checks (else None: the per-message read decides):

    - a plain properties string (`_Template`): `(n, values)`, `values` the UTF-8 bytes of the
      `wanted` keys' values (None: absent; a tuple for two keys or more) and `n` the bytes of the
      re-put besides its topic's fixed part: the string with its last separator (its length: every
      property is kept, so `props_length` of the map is the string's own length), BODYLENGTH and the
      hosts (as SYSFLAG sizes them);
    - any other string: `(properties map, BODYLENGTH, SYSFLAG)`, as `read_records` answers.

    No map is built for a plain string: one regular-expression match checks it and picks the values.
    """
    out: list[tuple | None] = [None] * len(phys)
    span = _open_span(base, phys, sizes)
    if span is None:
        return out
    buf, delta, rels, n, flen = span
    templates = _TEMPLATES.setdefault(wanted, [])
    last = templates[0] if templates else None
    head, no_hosts, tail_end, magic2 = _HEAD_SIZE, plainscan.NO_HOSTS, plainscan.tail_end, MESSAGE_MAGIC_CODE_V2
    lead, body_of, props_len_of = _LEAD_SYS.unpack_from, _BODY_LEN.unpack_from, _PROPS_LEN.unpack_from
    topic_v2, topic_v1 = _TOPIC_LEN[MESSAGE_MAGIC_CODE_V2], _TOPIC_LEN[MESSAGE_MAGIC_CODE]
    tv2, tv1 = topic_v2.unpack_from, topic_v1.unpack_from
    try:
        for k, rel in enumerate(rels):
            if rel >= flen or rel + head > n:
                continue
            r = rel + delta
            total, magic, sysflag = lead(buf, r)
            after_tail = tail_end(rel, total, magic, sysflag, n)
            if after_tail < 0:
                continue
            hosts = after_tail - no_hosts
            (body_len,) = body_of(buf, r + after_tail - _BODY_LEN.size)
            after_body = after_tail + body_len
            if body_len < 0 or after_body > total:
                continue
            try:
                if magic == magic2:
                    (topic_len,) = tv2(buf, r + after_body)
                    props_at = after_body + topic_v2.size + topic_len
                else:
                    (topic_len,) = tv1(buf, r + after_body)
                    props_at = after_body + topic_v1.size + topic_len
                (props_len,) = props_len_of(buf, r + props_at)
            except struct.error:
                continue  # past the bytes: the checks below fail for such a record anyway
            if topic_len < 0 or props_len < 0 or props_at + _PL + props_len > total:
                continue
            b = r + props_at + _PL
            e = b + props_len
            m = last.pattern.fullmatch(buf, b, e) if last is not None else None
            if m is None:
                m, last = search_templates(templates, last, buf, b, e)
            if m is not None:
                out[k] = (props_len + last.pad + body_len + hosts, m.group(*last.groups))
                continue
            raw = buf[b:e].decode("utf-8", "surrogateescape")
            props = fast_properties(raw)
            out[k] = (props, body_len, sysflag)
            if len(templates) < MAX_TEMPLATES:
                t = _plain_template(raw, props, wanted)
                if t is not None:
                    templates.append(t)
                    last = t
    finally:
        _close(buf)
    if last is not None and templates and templates[0] is not last:
        templates.remove(last)
        templates.insert(0, last)  # the sequence a next batch most likely has
    return out



_ARRAYS: dict[tuple[str, ...], plainscan.Templates] = {}


def scan_plain(base: MappedBase, phys: list[int], sizes: list[int], wanted: tuple[str, ...], intern: int = 0):
    """`read_plain`'s answers as columns (`plainscan`'s `out`), for a caller that takes the values by their
    offsets: (the span's bytes or mapping, `out`, {k: `(properties map, BODYLENGTH, SYSFLAG)`} of the
    records no template matches), or None when the records cannot be read batch-wise. A string no
    template matches is parsed as `read_plain` parses it and may make a template, which the records
    after it are matched against (their rows scanned again), so each record gets `read_plain`'s answer:
    status 1 its `(n, values)` (`n` = column 1), 0 the map in the dict, -1 None. The caller closes
    the bytes (`close`)."""
    span = _open_span(base, phys, sizes)
    if span is None:
        return None
    buf, delta, rels, n, flen = span
    templates = _TEMPLATES.setdefault(wanted, [])
    arrays = _ARRAYS.setdefault(wanted, plainscan.Templates())
    nw = len(wanted)
    answers: dict[int, tuple] = {}
    a = np.frombuffer(buf, np.uint8)
    try:
        r = np.array(rels, np.int64)
        out = plainscan.scan(a, r, delta, n, flen, templates, arrays, nw, intern)
        last = None
        k = 0
        while True:
            left = np.flatnonzero(out[k:, 0] == 0)
            if not len(left):
                break
            k += int(left[0])
            row = out[k].tolist()
            raw = buf[row[4]:row[5]].decode("utf-8", "surrogateescape")
            props = fast_properties(raw)
            answers[k] = (props, row[2], row[3])
            k += 1
            if len(templates) < MAX_TEMPLATES:
                t = _plain_template(raw, props, wanted)
                if t is not None:
                    templates.append(t)
                    last = len(templates) - 1
                    if k < len(rels):  # the records after it are matched against it too
                        again = plainscan.scan(a, r[k:], delta, n, flen, templates, arrays, nw, intern)
                        firsts = again[:, plainscan.FIXED + 2::plainscan.STRIDE]
                        firsts[firsts >= 0] += k  # the rows' own indices
                        out[k:] = again
        matched = out[:, 6][out[:, 0] == 1]
        if len(matched):
            last = int(matched[-1])
    except BaseException:
        del a
        _close(buf)
        raise
    del a  # no view of a mapping outlives this: the caller closes it
    if last:
        templates.insert(0, templates.pop(last))  # the sequence a next batch most likely has
    return buf, out, answers


def close(buf) -> None:
    """Close the bytes `scan_plain` handed out (a mapping; bytes need nothing)."""
    _close(buf)
