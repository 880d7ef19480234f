"""The one property reader of a batch of CommitLog records (the simulator's batch reads), checked and matched at once.

A service step reads a few properties of many records (the timer's enqueue: TIMER_OUT_MS, REAL_TOPIC, ...;
a delay level's deliveries: REAL_TOPIC, REAL_QID, UNIQ_KEY). `scan` gives one row of `out` a record:

- 0 status: -1 the per-message read decides (a short read, bad magic, lengths past TOTALSIZE: the checks of
  `MappedBase._read`), 0 header good but no template matches, 1 matched;
- 1 the re-put's size but its topic part (properties length, with the last separator a matched template
  lacks, BODYLENGTH and the hosts), 2 BODYLENGTH, 3 SYSFLAG, 4 and 5 the properties' start and end in the
  bytes, 6 the template, 7 the first wanted value as a number (1 to 18 ASCII digits; else -1), 8 QUEUEID,
  9 and 10 the topic's start and end;
- from `FIXED` on, `STRIDE` columns per wanted key: its value's start and end (-1: absent).

A template (`Template`) is a plain key sequence: it matches exactly the strings with these keys in order, each
followed by SOH and a non-empty value without STX, STX between them (and at the end for a trailing one).
The kernel is `mqtool._native.props_scan` (`_kernels/props.pxi`); `scan_py` below is its reference and
its fallback where the extension is missing (a warning says so once). The record's layout comes from
`mqtool.formats.commitlog` (`GEOMETRY`), for both.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mqtool.formats import commitlog, layout
from mqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.store import extension

# `out`'s columns by name
(STATUS, SIZE, BODY_LENGTH, SYSFLAG, PROPS_START, PROPS_END, TEMPLATE, NUMBER, QUEUE_ID, TOPIC_START,
 TOPIC_END) = range(11)  # fmt: skip
FIXED = 11  # `out`'s columns before the wanted values' (start, end)
STRIDE = 2
MAX_TOTAL = 1 << 30  # a TOTALSIZE past this is not a record (`MappedBase._read`)
Geometry = namedtuple(
    "Geometry",
    "total_at total_w magic_at magic_w qid_at qid_w sysflag_at sysflag_w head no_hosts bl v4 v6 born_v6 store_v6 "
    "m1 m2 tl1 tl2 pl sep nv max_total fixed stride",
)
"""The kernel's view of a record and of `out`, in `props.pxi`'s order (G_TOTAL_AT ...)."""


def _geometry() -> Geometry:
    at = {f.name: f for f in commitlog.HEADER}
    head = layout.size(commitlog.HEADER)
    return Geometry(
        *(x for name in ("total_size", "magic_code", "queue_id", "sys_flag") for x in (at[name].offset, at[name].size)),
        head=head,
        no_hosts=head + layout.size(commitlog.AFTER_BORN_HOST) + layout.size(commitlog.AFTER_STORE_HOST),
        bl=commitlog.AFTER_STORE_HOST[-1].size,  # BODYLENGTH, the tail's last field
        v4=commitlog.HOST_SIZE_V4,
        v6=commitlog.HOST_SIZE_V6,
        born_v6=BORNHOST_V6,
        store_v6=STOREHOST_V6,
        m1=commitlog.MESSAGE_MAGIC_CODE,
        m2=commitlog.MESSAGE_MAGIC_CODE_V2,
        tl1=commitlog.TOPIC_LENGTH_V1.size,
        tl2=commitlog.TOPIC_LENGTH_V2.size,
        pl=commitlog.PROPERTIES_LENGTH.size,
        sep=ord(PROPERTY_SEPARATOR),
        nv=ord(NAME_VALUE_SEPARATOR),
        max_total=MAX_TOTAL,
        fixed=FIXED,
        stride=STRIDE,
    )


GEOMETRY = np.array(_geometry(), np.int64)
# the reference reads the fields by the formats' own `struct`s
_HEAD = layout.struct_format(commitlog.HEADER)
_HEAD_NAMES = [f.name for f in commitlog.HEADER]
_BODY_LEN = layout.struct_format(commitlog.AFTER_STORE_HOST[-1:])
_TOPIC_LEN = {commitlog.MESSAGE_MAGIC_CODE: layout.struct_format([commitlog.TOPIC_LENGTH_V1]),
              commitlog.MESSAGE_MAGIC_CODE_V2: layout.struct_format([commitlog.TOPIC_LENGTH_V2])}  # fmt: skip
_PROPS_LEN = layout.struct_format([commitlog.PROPERTIES_LENGTH])
_NO_HOSTS = (
    layout.size(commitlog.HEADER) + layout.size(commitlog.AFTER_BORN_HOST) + layout.size(commitlog.AFTER_STORE_HOST)
)
_SEP, _NV = PROPERTY_SEPARATOR.encode(), NAME_VALUE_SEPARATOR.encode()


def _row(buf, rel: int, delta: int, n: int, flen: int, keys: list, trail: list, row: list, spans: list) -> None:
    """One record's row, as the module describes it (the wanted values' spans in `spans`)."""
    if rel >= flen or rel + _HEAD.size > n:
        return
    r = rel + delta
    h = dict(zip(_HEAD_NAMES, _HEAD.unpack_from(buf, r), strict=True))
    total, magic, sysflag = h["total_size"], h["magic_code"], h["sys_flag"]
    if magic not in _TOPIC_LEN or not _HEAD.size < total <= MAX_TOTAL or rel + total > n:
        return
    after_tail = _NO_HOSTS + commitlog.hosts_size(sysflag)
    if after_tail > total:
        return
    (body_len,) = _BODY_LEN.unpack_from(buf, r + after_tail - _BODY_LEN.size)
    after_body = after_tail + body_len
    if body_len < 0 or after_body > total:
        return
    tl = _TOPIC_LEN[magic]
    if r + after_body + tl.size > len(buf):
        return
    (topic_len,) = tl.unpack_from(buf, r + after_body)
    props_at = after_body + tl.size + topic_len
    if topic_len < 0 or r + props_at + _PROPS_LEN.size > len(buf):
        return
    (props_len,) = _PROPS_LEN.unpack_from(buf, r + props_at)
    if props_len < 0 or props_at + _PROPS_LEN.size + props_len > total:
        return
    b = r + props_at + _PROPS_LEN.size
    row[STATUS], row[SIZE], row[BODY_LENGTH], row[SYSFLAG] = (
        0,
        props_len + body_len + after_tail - _NO_HOSTS,
        body_len,
        sysflag,
    )
    row[PROPS_START], row[PROPS_END] = b, b + props_len
    row[QUEUE_ID], row[TOPIC_START], row[TOPIC_END] = h["queue_id"], r + after_body + tl.size, r + props_at
    segs = bytes(buf[b : b + props_len]).split(_SEP)
    trailing = segs[-1] == b""
    if trailing:
        segs.pop()
    for t, tkeys in enumerate(keys):
        if trailing != bool(trail[t]) or len(segs) != len(tkeys):
            continue
        p, places = b, []
        for seg, key in zip(segs, tkeys, strict=True):
            k, sep, v = seg.partition(_NV)
            if k != key or not sep or not v:
                break
            places.append((p + len(k) + 1, p + len(seg)))
            p += len(seg) + 1
        else:
            row[STATUS], row[TEMPLATE] = 1, t
            row[SIZE] += 0 if trailing else 1  # the separator a re-put's string ends with
            spans[:] = places
            return


def scan_py(
    buf, rels, delta: int, n: int, flen: int, geo, keys, key_at, first, trail, groups, out: np.ndarray
) -> tuple[int, int]:
    """The kernel's reference, in plain Python: `out`'s row of each record at `rels[k]` (a position in the
    span, which starts at `buf[delta]` and has `n` bytes; the file's listed length ends at `flen`); template
    t's keys are `keys[key_at[j]:key_at[j + 1]]` for j in [first[t], first[t + 1]), its wanted keys' indices
    `groups[t]` (-1: not among its keys).
    Returns (the first record no template matches, or `len(rels)`; the template of the last one matched, or -1)."""
    if not np.array_equal(geo, GEOMETRY):
        raise ValueError("scan_py reads the layout of mqtool.formats.commitlog only")
    if delta < 0 or n < 0 or delta + n > len(buf):
        raise ValueError("scan_py: the span lies outside the bytes")
    key_at, first, groups = list(key_at), list(first), np.asarray(groups).tolist()
    tkeys = [
        [bytes(keys[key_at[j] : key_at[j + 1]]) for j in range(first[t], first[t + 1])] for t in range(len(first) - 1)
    ]
    nw = len(groups[0]) if groups else 0
    unmatched, last = len(rels), -1
    for k, rel in enumerate(np.asarray(rels).tolist()):
        row, spans = [-1] * out.shape[1], []
        _row(buf, rel, delta, n, flen, tkeys, list(trail), row, spans)
        if row[STATUS] == 0:
            unmatched = min(unmatched, k)
        if row[STATUS] == 1:
            last = row[TEMPLATE]
            for w, g in enumerate(groups[row[TEMPLATE]]):
                if g >= 0:
                    row[FIXED + STRIDE * w : FIXED + STRIDE * w + 2] = spans[g]
            s, e = row[FIXED], row[FIXED + 1]
            value = bytes(buf[s:e])
            if nw and s >= 0 and 0 < e - s <= 18 and value.isdigit():
                row[NUMBER] = int(value)
        out[k] = row
    return unmatched, last


def row_py(buf, rel: int, delta: int, n: int, flen: int, geo) -> tuple[int, ...]:
    """`scan_py`'s row of one record against no template (its first `FIXED` columns), as a tuple."""
    out = np.empty((1, FIXED), np.int64)
    scan_py(buf, [rel], delta, n, flen, geo, b"\0", [0], [0], [0], [[]], out)
    return tuple(out[0].tolist())


# the extension's kernels, else (`extension.kernel` warns once) the references
KERNEL = extension.kernel("props_scan") or scan_py
ROW_KERNEL = extension.kernel("props_row") or row_py


class Template:
    """A plain key sequence (`template_of` makes one of a properties string) and the indices of the
    wanted keys among its keys (-1: absent); `pad` 1 where the string lacks the separator a re-put ends with."""

    __slots__ = ("keys", "groups", "pad")

    def __init__(self, keys: list[str], trailing: bool, wanted: tuple[str, ...]) -> None:
        self.keys = [k.encode("utf-8", "surrogateescape") for k in keys]
        self.groups = [keys.index(w) if w in keys else -1 for w in wanted]
        self.pad = 0 if trailing else 1


def template_of(raw: str, props: dict[str, str], wanted: tuple[str, ...]) -> Template | None:
    """The template of a properties string `parse_properties` parsed into `props`, or None when it is
    not plain (a duplicate key, an empty name or value, a segment without a separator)."""
    segs = raw.split(PROPERTY_SEPARATOR)
    trailing = segs[-1] == ""
    if trailing:
        segs.pop()
    if not segs or len(segs) != len(props):
        return None
    keys = []
    for seg in segs:
        k, sep, v = seg.partition(NAME_VALUE_SEPARATOR)
        if not k or not sep or not v:
            return None
        keys.append(k)
    return Template(keys, trailing, wanted)


class Templates:
    """The templates seen for one set of wanted keys (most recent match first), as the kernel's arrays."""

    def __init__(self, nwanted: int) -> None:
        self.list: list[Template] = []
        self.nwanted = nwanted
        self._arrays: tuple | None = None

    def add(self, t: Template) -> None:
        self.list.append(t)
        self._arrays = None

    def first(self, i: int) -> None:
        """Template `i` first: the sequence a next batch most likely has."""
        if i:
            self.list.insert(0, self.list.pop(i))
            self._arrays = None

    def arrays(self) -> tuple:
        if self._arrays is None:
            keys, key_at, first, trail = bytearray(), [0], [0], []
            groups = np.full((max(len(self.list), 1), self.nwanted), -1, np.int64)
            for t, tp in enumerate(self.list):
                for kb in tp.keys:
                    keys += kb
                    key_at.append(len(keys))
                first.append(len(key_at) - 1)
                trail.append(1 - tp.pad)
                groups[t] = tp.groups
            self._arrays = (
                np.frombuffer(bytes(keys) or b"\0", np.uint8),
                np.array(key_at, np.int64),
                np.array(first, np.int64),
                np.array(trail or [0], np.int64),
                groups,
            )
        return self._arrays


def scan(buf, rels: np.ndarray, delta: int, n: int, flen: int, templates: Templates):
    """(`out` (see the module) of the records at `rels` of `buf` against `templates`, the first record no template
    matches or `len(rels)`, the template of the last one matched or -1)."""
    out = np.empty((len(rels), FIXED + STRIDE * templates.nwanted), np.int64)
    return (out, *KERNEL(buf, rels, delta, n, flen, GEOMETRY, *templates.arrays(), out))


def row(buf, rel: int, delta: int, n: int, flen: int) -> tuple[int, ...]:
    """The first `FIXED` columns of `out` for one record, matched against no template (status 0 or -1)."""
    return ROW_KERNEL(buf, rel, delta, n, flen, GEOMETRY)


def answer(out: np.ndarray, k: int, buf, nwanted: int, as_tuple: bool = False):
    """`(n, values)` of a matched record `k` of `out` (status 1): its SIZE and the wanted values' bytes (None:
    absent), a tuple for two wanted keys or more or `as_tuple`, else the one value."""
    row = out[k].tolist()
    values = tuple(
        [buf[row[i] : row[i + 1]] if row[i] >= 0 else None for i in range(FIXED, FIXED + STRIDE * nwanted, STRIDE)]
    )
    return row[SIZE], values if nwanted > 1 or as_tuple else values[0]
