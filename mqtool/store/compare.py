"""Byte comparison of two copies of one mapped-file queue (a master's CommitLog and a slave's), read-only.

Classic HA ships the master's CommitLog bytes unchanged (`DefaultHAConnection` sends file slices,
`DefaultHAClient` appends them at the same offset with `CommitLog#appendData`), so a healthy slave's files
are a byte prefix of the master's: comparing the mapped ranges answers "where do they differ" without
decoding either side. The files are mapped and compared as 64-bit words in blocks (numpy, several GB/s
from the page cache); only a block that differs is looked at byte by byte.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field

import numpy as np

from mqtool.store.mapped_files import MappedFile, MappedFileQueue, map_file

BLOCK = 1 << 22  # bytes compared at once: big enough for numpy's speed, small enough for the cache
REGION_GAP = 64  # differing bytes closer than this form one region (a torn record is not a hundred regions)
MAX_REGIONS = 1000  # regions listed; the byte count goes on past them


@dataclass
class Difference:
    """Where two copies of a byte range differ: merged regions [start, end) and the bytes that differ."""

    compared_bytes: int = 0
    differing_bytes: int = 0
    regions: list[list[int]] = field(default_factory=list)  # [start, end) global offsets, at most MAX_REGIONS
    more_regions: bool = False

    @property
    def first(self) -> int | None:
        return self.regions[0][0] if self.regions else None

    def _add(self, offsets: np.ndarray) -> None:
        """Differing global offsets (ascending) into merged regions."""
        self.differing_bytes += int(offsets.size)
        cuts = np.flatnonzero(np.diff(offsets) > REGION_GAP) + 1
        for part in np.split(offsets, cuts):
            lo, hi = int(part[0]), int(part[-1]) + 1
            if self.regions and lo - self.regions[-1][1] <= REGION_GAP:
                self.regions[-1][1] = hi
            elif len(self.regions) < MAX_REGIONS:
                self.regions.append([lo, hi])
            else:
                self.more_regions = True


def _file_at(queue: MappedFileQueue, start: int) -> MappedFile | None:
    return next((f for f in queue.files if f.start == start), None)


def compare_queues(a: MappedFileQueue, b: MappedFileQueue, lo: int, hi: int) -> Difference:
    """Compare the global range [lo, hi) of two queues with the same file size; a byte one side's files
    do not hold counts as differing (a missing middle file)."""
    diff = Difference()
    size = a.file_size or b.file_size
    if hi <= lo or size <= 0:
        return diff
    start = lo - lo % size
    while start < hi:
        p, q = max(lo, start), min(hi, start + size)
        fa, fb = _file_at(a, start), _file_at(b, start)
        if fa is None or fb is None:
            diff.compared_bytes += q - p
            diff._add(np.arange(p, q, dtype=np.int64))
        else:
            _compare_files(fa, fb, p - start, q - start, diff)
        start += size
    return diff


def _compare_files(fa: MappedFile, fb: MappedFile, p: int, q: int, diff: Difference) -> None:
    """Positions [p, q) of two files (bytes past a file's end read as missing, i.e. differing)."""
    with map_file(fa.path) as ba, map_file(fb.path) as bb:
        na, nb = len(ba), len(bb)
        x = np.frombuffer(ba, np.uint8) if na else np.zeros(0, np.uint8)
        y = np.frombuffer(bb, np.uint8) if nb else np.zeros(0, np.uint8)
        try:
            both = min(q, na, nb)
            done = p - p % mmap.PAGESIZE
            for s in range(p, both, BLOCK):
                e = min(both, s + BLOCK)
                diff.compared_bytes += e - s
                if not _equal(x, y, s, e):
                    diff._add(np.flatnonzero(x[s:e] != y[s:e]).astype(np.int64) + s + fa.start)
                done = _release((ba, bb), done, e)  # the compared pages leave the process's resident set
            if q > max(p, both):
                first = max(p, both)
                diff.compared_bytes += q - first
                diff._add(np.arange(first, q, dtype=np.int64) + fa.start)
        finally:
            del x, y  # the views go before the mappings close


def _release(maps: tuple, done: int, upto: int) -> int:
    """`madvise(MADV_DONTNEED)` the whole pages of [done, upto) of each mapping (a read-only file mapping
    reads them back from the page cache if needed); returns the new `done`."""
    upto -= upto % mmap.PAGESIZE
    if upto <= done:
        return done
    for m in maps:
        if isinstance(m, mmap.mmap) and hasattr(m, "madvise"):
            try:
                m.madvise(mmap.MADV_DONTNEED, done, min(upto, len(m) - len(m) % mmap.PAGESIZE) - done)
            except (OSError, ValueError):  # pragma: no cover - a platform without it, or a short file
                pass
    return upto


def _equal(x: np.ndarray, y: np.ndarray, s: int, e: int) -> bool:
    """Bytes [s, e) equal: 64-bit words for the aligned middle, bytes at the edges."""
    s8, e8 = -(-s // 8) * 8, e // 8 * 8
    if e8 <= s8:
        return bool(np.array_equal(x[s:e], y[s:e]))
    if not (np.array_equal(x[s:s8], y[s:s8]) and np.array_equal(x[e8:e], y[e8:e])):
        return False
    return bool(np.array_equal(x[s8:e8].view(np.uint64), y[s8:e8].view(np.uint64)))
