"""`batchread.read_plain`'s per-record work as one compiled loop: header checks and template match.

`read_plain` checks each record's header (`MappedBase._read`'s checks) and matches its properties
string against the plain key sequences seen so far (`batchread._Template`), one `struct` unpack
and one regular expression a record. `plain_scan` does both for a whole batch in native code
(numba compiles it, `store/native.py` loads the object code without numba): per record a row of
`out` = status (-1: the per-message read decides, 0: header good but no template matches, 1:
matched), the re-put's size but the template's pad (properties length, BODYLENGTH and the hosts),
BODYLENGTH, SYSFLAG, the properties' start and end in the bytes, the template's index, the first
wanted value as a number (1 to 18 ASCII digits; else -1), then for each wanted key the start and end
of its value (-1, -1: absent) and, for the keys the caller interns, the first record of the scan
with the same value (the same bytes, or absent too; -1 past `INTERNED` distinct values): a caller
makes one text of each distinct value. A template matches exactly the strings
its expression matches: its keys in order, each followed by SOH and a non-empty value without STX,
STX between them, an STX at the end for a trailing template. The same function runs as plain
Python when neither native code nor numba is wanted (`tests/simulate/test_enqueue_columns.py`
runs it both ways).
"""

from __future__ import annotations

import numpy as np

from mqtool.formats import commitlog, layout
from mqtool.formats.message import _HEAD, _PROPS_LEN, _STORE_TS, _TAIL, _TOPIC_LEN
from mqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6

HEAD = _HEAD.size
STORE_TS = _STORE_TS.size
TAIL = _TAIL.size
M1, M2 = commitlog.MESSAGE_MAGIC_CODE, commitlog.MESSAGE_MAGIC_CODE_V2
V4, V6 = commitlog.HOST_SIZE_V4, commitlog.HOST_SIZE_V6
TL1 = _TOPIC_LEN[M1].size
TL2 = _TOPIC_LEN[M2].size
PL = _PROPS_LEN.size
BL = layout.struct_format(commitlog.AFTER_STORE_HOST[-1:]).size  # BODYLENGTH, the tail's last field
_AT = layout.offsets(commitlog.HEADER)
TOTAL_AT, MAGIC_AT, SYSFLAG_AT = _AT["total_size"], _AT["magic_code"], _AT["sys_flag"]
_W = {f.name: layout.struct_format([f]).size for f in commitlog.HEADER}
TOTAL_W, MAGIC_W, SYSFLAG_W = _W["total_size"], _W["magic_code"], _W["sys_flag"]
SEP, NV = ord(PROPERTY_SEPARATOR), ord(NAME_VALUE_SEPARATOR)  # between properties; between a name and its value
BORN_V6, STORE_V6 = BORNHOST_V6, STOREHOST_V6
NO_HOSTS = HEAD + STORE_TS + TAIL  # a record's bytes up to its tail's end, but the two hosts
FIXED = 8  # `out`'s columns before the wanted values' (start, end, first record with an equal value)
STRIDE = 3
INTERNED = 64  # distinct values a scan interns per key (the rest: -1)


def _rd(a, at, w):
    """The signed big-endian `w`-byte integer at `a[at:at + w]`."""
    v = 0
    for i in range(w):
        v = (v << 8) | int(a[at + i])
    if v >= 1 << (8 * w - 1):
        v -= 1 << (8 * w)
    return v


def tail_end(rel, total, magic, sysflag, n):
    """Where a record's tail (its BODYLENGTH) ends, counted from the record's start, when the header read
    passes `MappedBase._read`'s checks (a known magic, a total above the header and at most 1 GiB that
    lies in the `n` bytes read from `rel`, the hosts SYSFLAG sizes and the tail inside it), else -1.
    `_plain_scan` and `batchread.read_plain` / `rollread.read_sources` share it (numba inlines it)."""
    if (magic != M1 and magic != M2) or total <= HEAD or total > 1 << 30 or rel + total > n:
        return -1
    end = NO_HOSTS + (V6 if sysflag & BORN_V6 else V4) + (V6 if sysflag & STORE_V6 else V4)
    return end if end <= total else -1


def _plain_scan(a, rels, delta, n, flen, keys, key_at, first, trail, groups, vs, ve, intern, table, cnt, out):
    """`out`'s row of each record at `rels[k]` (a position in the span; the span starts at `a[delta]` and
    has `n` bytes, the file's listed length ends at `flen`); the templates' keys are `keys[key_at[j]:
    key_at[j + 1]]` for j in [first[t], first[t + 1]); `vs`, `ve` scratch of the longest template; the
    wanted keys whose bits `intern` sets get their first equal record (`table`, `cnt`: scratch)."""
    size = a.shape[0]
    nw = groups.shape[1]
    nt = first.shape[0] - 1
    for k in range(rels.shape[0]):
        out[k, 0] = -1
        rel = rels[k]
        if rel >= flen or rel + HEAD > n:
            continue
        r = rel + delta
        total = _rd(a, r + TOTAL_AT, TOTAL_W)
        magic = _rd(a, r + MAGIC_AT, MAGIC_W)
        sysflag = _rd(a, r + SYSFLAG_AT, SYSFLAG_W)
        after_tail = tail_end(rel, total, magic, sysflag, n)
        if after_tail < 0:
            continue
        hosts = after_tail - NO_HOSTS
        body_len = _rd(a, r + after_tail - BL, BL)
        after_body = after_tail + body_len
        if body_len < 0 or after_body > total:
            continue
        tw = TL2 if magic == M2 else TL1
        if r + after_body + tw > size:
            continue
        topic_len = _rd(a, r + after_body, tw)
        if topic_len < 0:
            continue
        props_at = after_body + tw + topic_len
        if r + props_at + PL > size:
            continue
        props_len = _rd(a, r + props_at, PL)
        if props_len < 0 or props_at + PL + props_len > total:
            continue
        b = r + props_at + PL
        e = b + props_len
        out[k, 0] = 0
        out[k, 1] = props_len + body_len + hosts
        out[k, 2] = body_len
        out[k, 3] = sysflag
        out[k, 4] = b
        out[k, 5] = e
        out[k, 6] = -1
        for t in range(nt):
            p = b
            ok = True
            for j in range(first[t], first[t + 1]):
                if j > first[t]:
                    if p >= e or a[p] != SEP:
                        ok = False
                        break
                    p += 1
                ks = key_at[j]
                kl = key_at[j + 1] - ks
                if p + kl + 1 > e:
                    ok = False
                    break
                for i in range(kl):
                    if a[p + i] != keys[ks + i]:
                        ok = False
                        break
                if not ok:
                    break
                p += kl
                if a[p] != NV:
                    ok = False
                    break
                p += 1
                s = p
                while p < e and a[p] != SEP:
                    p += 1
                if p == s:
                    ok = False
                    break
                vs[j - first[t]] = s
                ve[j - first[t]] = p
            if not ok:
                continue
            if trail[t]:
                if p + 1 != e or a[p] != SEP:
                    continue
            elif p != e:
                continue
            out[k, 0] = 1
            if not trail[t]:
                out[k, 1] += 1  # the separator a re-put's string ends with
            out[k, 6] = t
            for w in range(nw):
                g = groups[t, w]
                if g >= 0:
                    out[k, FIXED + STRIDE * w] = vs[g]
                    out[k, FIXED + STRIDE * w + 1] = ve[g]
                else:
                    out[k, FIXED + STRIDE * w] = -1
                    out[k, FIXED + STRIDE * w + 1] = -1
            break
    # the first wanted value as a number (1 to 18 ASCII digits, else -1); the interned values' first record
    for w in range(nw):
        cnt[w] = 0
    for k in range(rels.shape[0]):
        if out[k, 0] != 1:
            continue
        num = -1
        s = out[k, FIXED]
        e = out[k, FIXED + 1]
        if s >= 0 and 0 < e - s <= 18:
            num = 0
            for i in range(s, e):
                c = int(a[i])
                if c < 48 or c > 57:
                    num = -1
                    break
                num = num * 10 + (c - 48)
        out[k, 7] = num
        for w in range(nw):
            col = FIXED + STRIDE * w
            out[k, col + 2] = -1
            if not (intern >> w) & 1:
                continue
            s = out[k, col]
            e = out[k, col + 1]
            found = -1
            for q in range(cnt[w]):
                j = table[w, q]
                js = out[j, col]
                if s < 0 or js < 0:
                    if s < 0 and js < 0:
                        found = j
                        break
                    continue
                if out[j, col + 1] - js != e - s:
                    continue
                same = True
                for i in range(e - s):
                    if a[s + i] != a[js + i]:
                        same = False
                        break
                if same:
                    found = j
                    break
            if found < 0 and cnt[w] < table.shape[1]:
                table[w, cnt[w]] = k
                cnt[w] += 1
                found = k
            out[k, col + 2] = found


_SPEC = "u1[:] i8[:] i8 i8 i8 u1[:] i8[:] i8[:] i8[:] i8[:,:] i8[:] i8[:] i8 i8[:,:] i8[:] i8[:,:]"
_SOURCES = ("mqtool/simulate/plainscan.py", "mqtool/store/kernels.py", "mqtool/store/native.py",
            "mqtool/formats/commitlog.py", "mqtool/formats/message.py", "mqtool/formats/sysflag.py",
            "mqtool/formats/layout.py", "mqtool/formats/properties.py", "mqtool/store/compiled.py")
ENGINE: str | None = None  # "python": `_plain_scan` as plain Python (tests); else native, or numba's
_compiled = None
_numba_compiled = None


def kernel():
    """`_plain_scan` as native code (`store/native.py`), else numba's dispatcher; plain Python when
    `ENGINE` is "python"."""
    global _compiled
    if ENGINE == "python":
        return _plain_scan
    if _compiled is None:
        from mqtool.store import native

        _compiled = native.kernels_or_numba("plainscan", {"scan": _SPEC}, lambda: {"scan": _numba_scan()},
                                            _SOURCES)["scan"]
    return _compiled


def _numba_scan():
    """`_plain_scan` compiled with numba (cached on disk), `_rd` and `tail_end` inlined."""
    global _numba_compiled
    if _numba_compiled is None:
        from mqtool.store import compiled

        _numba_compiled = compiled.kernel(_plain_scan, (_rd, tail_end))
    return _numba_compiled


class Templates:
    """A list of `batchread._Template`s as the kernel's arrays (rebuilt when the list changes)."""

    def __init__(self) -> None:
        self._key: tuple = ()
        self.arrays: tuple = ()

    def of(self, templates: list, nwanted: int) -> tuple:
        key = tuple(map(id, templates))
        if key != self._key or not self.arrays:
            keys, key_at, first, trail = bytearray(), [0], [0], []
            groups = np.full((max(len(templates), 1), nwanted), -1, np.int64)
            width = 1
            for t, tp in enumerate(templates):
                for kb in tp.keys:
                    keys += kb
                    key_at.append(len(keys))
                first.append(len(key_at) - 1)
                trail.append(0 if tp.pad else 1)
                nk = len(tp.keys)
                width = max(width, nk)
                groups[t] = [g - 1 if g <= nk else -1 for g in tp.groups]
            self.arrays = (np.frombuffer(bytes(keys) or b"\0", np.uint8), np.array(key_at, np.int64),
                           np.array(first, np.int64), np.array(trail or [0], np.int64), groups,
                           np.empty(width, np.int64), np.empty(width, np.int64))
            self._key = key
        return self.arrays


def scan(a: np.ndarray, rels: np.ndarray, delta: int, n: int, flen: int, templates: list, arrays: Templates,
         nwanted: int, intern: int = 0) -> np.ndarray:
    """`out` (see the module) of the records at `rels` against `templates`; `intern`: a bit per wanted key
    whose values get their first record."""
    out = np.empty((len(rels), FIXED + STRIDE * nwanted), np.int64)
    keys, key_at, first, trail, groups, vs, ve = arrays.of(templates, nwanted)
    table = np.empty((nwanted, INTERNED), np.int64)
    cnt = np.empty(nwanted, np.int64)
    kernel()(a, rels, delta, n, flen, keys, key_at, first, trail, groups, vs, ve, intern, table, cnt, out)
    return out


def answer(out: np.ndarray, k: int, buf, nwanted: int):
    """`read_plain`'s `(n, values)` of a matched record `k` of `out` (status 1)."""
    row = out[k].tolist()
    values = tuple([buf[row[i]:row[i + 1]] if row[i] >= 0 else None
                    for i in range(FIXED, FIXED + STRIDE * nwanted, STRIDE)])
    return row[1], values if nwanted > 1 else values[0]
