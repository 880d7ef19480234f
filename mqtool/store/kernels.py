"""The plain-Python references of the scan's column kernels (`mqtool._native`'s `gather`, `property_pairs`,
`host_keys`, in `mqtool/_kernels/scan.pxi`; `int64_stats` and `row_checks`, in `jsonl.pxi`).

`fastscan.compiled_kernels()` gives the extension's kernels; these run only where `mqtool._native` cannot
be imported (a machine without a C compiler; `fastscan` warns once), and in the tests, which prove both
equal. Same arguments and results as the compiled ones: numpy arrays in, results written into the
arrays given.
"""

from __future__ import annotations

import numpy as np


def gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> None:
    """Copy a[starts[i]:starts[i]+lens[i]] to out[offsets[i]:...] (Arrow binary/string data)."""
    for s, n, o in zip(starts.tolist(), lens.tolist(), offsets[: len(starts)].tolist(), strict=True):
        out[o : o + n] = a[s : s + n]


def property_pairs(
    a: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    rec_offsets: np.ndarray,
    kpos: np.ndarray,
    klen: np.ndarray,
    vpos: np.ndarray,
    vlen: np.ndarray,
) -> int:
    """`string2messageProperties` on bytes (0x01/0x02 never occur inside a UTF-8 sequence).

    Pairs in stored order; a repeated name keeps its first place and its last value (dict order).
    Returns the number of pairs (rec_offsets[i] is record i's first pair), or -1 when the pair
    arrays are too small.
    """
    m = 0
    cap = len(kpos)
    for r, (start, n) in enumerate(zip(starts.tolist(), lens.tolist(), strict=True)):
        rec_offsets[r] = m
        seen: dict[bytes, int] = {}
        i = start
        for segment in a[start : start + n].tobytes().split(b"\x02"):
            k = segment.find(b"\x01")
            if 0 < k < len(segment) - 1:  # a name and a value
                name = segment[:k]
                q = seen.get(name)
                if q is None:
                    if m == cap:
                        return -1
                    q = seen[name] = m
                    kpos[q], klen[q] = i, k
                    m += 1
                vpos[q], vlen[q] = i + k + 1, len(segment) - k - 1
            i += len(segment) + 1
    rec_offsets[len(starts)] = m
    return m


def host_keys(a: np.ndarray, pos: np.ndarray, out: np.ndarray) -> None:
    """IPv4 address and port of each host as one int64 (only meaningful for IPv4 hosts)."""
    if len(pos):
        out[:] = a[np.asarray(pos)[:, None] + np.arange(8)].copy().view(">i8").ravel()


def int64_stats(v) -> tuple[int, int, int, int]:
    """(sum, min, max, bitwise or) of a sequence of int64 (0, 0, 0, 0 when empty)."""
    values = list(v)
    if not values:
        return 0, 0, 0, 0
    bits = 0
    for x in values:
        bits |= x
    return sum(values), min(values), max(values), bits


def row_checks(pos, phys, body_len, crc, body_crc, base: int, crc_checked: bool, crc_ok) -> list[int]:
    """Per row: `crc_ok[i]` 1 when the body CRC matches (an empty body always does, as all rows when the CRC was
    not checked); returns the rows whose PHYSICALOFFSET field is not their position or whose CRC does not match."""
    bad = []
    for i, (p, f, n, c, b) in enumerate(zip(pos, phys, body_len, crc, body_crc, strict=False)):
        ok = not crc_checked or n == 0 or c == b
        crc_ok[i] = 1 if ok else 0
        if not ok or f != p + base:
            bad.append(i)
    return bad
