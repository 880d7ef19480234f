"""CommitLog records read by `os.pread`, one at a time or a span of them at once (the simulator's reads of
the store it replays).

No mapping stays open, so the resident size does not grow with the CommitLog. A read that walks forward
takes `WINDOW` bytes and slices the next records from them; a span of many records far apart (a delay
level's records lie ~5 KB apart among the other topics' records) is mapped instead of read. Only the bytes
are answered here: `propscan` checks and reads them.
"""

from __future__ import annotations

import bisect
import mmap
import operator
import os
from typing import NamedTuple

from mqtool.formats import commitlog, layout
from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.store.mapped_files import MappedFileQueue
from mqtool.store.propscan import MAX_TOTAL

READ_AHEAD = 1024  # bytes read with the header: most records fit in one read
WINDOW = 16 << 10  # bytes read at once by a walk forward (`record`)
MAX_SPAN = 16 << 20  # bytes one span read may cover
SPARSE = 4096  # from this many bytes of span a record on, the span is mapped instead of read
MAP_FROM = 256  # ... when there are this many records
CHUNK = 4096  # records one span holds at most (`runs`)
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
_HEAD_SIZE = layout.size(commitlog.HEADER)
_LEAD = layout.struct_format(commitlog.HEADER[:2])  # TOTALSIZE, MAGICCODE


class Span(NamedTuple):
    """The range [lo, hi) of CommitLog file `index` (it starts at `start`, open as `fd`) the reads read."""

    lo: int
    hi: int
    start: int
    fd: int
    index: int


def close_span(buf) -> None:
    """Close the bytes `RecordFiles.span` handed out (a mapping; bytes need nothing)."""
    if isinstance(buf, mmap.mmap):
        buf.close()


class RecordFiles:
    """The files of a CommitLog (`MappedFileQueue`), each opened on its first read; `close()` closes them (a
    read after it opens them again)."""

    def __init__(self, queue: MappedFileQueue) -> None:
        self.files = queue.files
        self.starts = [f.start for f in self.files]
        self._size = queue.file_size
        self._fds: dict[int, int] = {}
        self._lengths: dict[int, int] = {}  # `file_length`
        self._span: Span | None = None  # `file` of the last read
        self._win, self._win_at, self._last = b"", 0, -1  # the last `WINDOW` read, where it starts; the last read

    def fd(self, i: int) -> int:
        fd = self._fds.get(i)
        if fd is None:
            fd = self._fds[i] = os.open(self.files[i].path, os.O_RDONLY)
        return fd

    def file_length(self, i: int) -> int:
        """The size of file `i` on disk (where a `pread` of it ends)."""
        n = self._lengths.get(i)
        if n is None:
            n = self._lengths[i] = os.fstat(self.fd(i)).st_size
        return n

    def file(self, phys: int) -> Span | None:
        """The range of the file holding `phys` that the reads read from it, or None: before the first
        file, past a file's length, or where files overlap (the store's own reader decides there)."""
        i = bisect.bisect_right(self.starts, phys) - 1
        if i < 0:
            return None
        f = self.files[i]
        prev = self.files[i - 1] if i > 0 else None
        lo = f.start if prev is None else prev.start + max(prev.length, self._size)
        if phys < lo or phys - f.start >= f.length:
            return None
        hi = f.start + f.length
        if i + 1 < len(self.starts):
            hi = min(hi, self.starts[i + 1])  # the next file answers from its start on
        return Span(max(lo, f.start), hi, f.start, self.fd(i), i)

    def record(self, phys: int) -> tuple[bytes, int] | None:
        """(bytes holding the whole record at `phys` from their position `o` on, `o`) by one or two `pread`s,
        or None when fewer than a header's bytes are there or the lead cannot be a record's (its length is
        then not read)."""
        span = self._span
        if span is None or not span.lo <= phys < span.hi:
            span = self.file(phys)
            if span is None:
                return None
            self._span = span
        lo, _hi, start, fd, _i = span
        # a walk forward reads `WINDOW` bytes at once and slices the next records from them (a `pread`
        # of 16 KB costs little more than one of 1 KB); the bytes are the file's, whichever read brought them
        buf = self._win
        o = phys - self._win_at
        last, self._last = self._last, phys
        if o < 0 or o + READ_AHEAD > len(buf) or self._win_at < lo:
            if 0 < phys - last < WINDOW:
                buf = self._win = os.pread(fd, WINDOW, phys - start)
                self._win_at = phys
            else:
                buf = os.pread(fd, READ_AHEAD, phys - start)
            o = 0
        if len(buf) - o < _HEAD_SIZE:
            return None
        total, magic = _LEAD.unpack_from(buf, o)
        if total > len(buf) - o:
            if magic not in _MAGICS or total > MAX_TOTAL:
                return None
            return os.pread(fd, total, phys - start), 0
        return buf, o

    def span(self, phys: list[int], sizes: list[int]):
        """The bytes of the records at `phys` (ConsumeQueue `sizes` bound them): (the span's bytes or file
        mapping, where the span starts in it, each record's position in the span, the span's length, the
        position in the span where the file's listed length ends), or None when they lie in more files than
        one, in files that overlap, over more than `MAX_SPAN` bytes or in fewer than a header's; the caller
        closes a mapping (`close_span`)."""
        if not phys:
            return None
        if len(phys) != len(sizes):
            raise ValueError("phys and sizes differ in length")
        p_lo, p_hi = min(phys), max(phys)
        f = self.file(p_lo)
        if f is None or p_hi >= f.hi:
            return None
        lo = p_lo - f.start
        if min(sizes) > 0:
            hi = max(map(operator.add, phys, sizes)) - f.start
        else:
            hi = max([p + s if s > 0 else p for p, s in zip(phys, sizes, strict=True)]) - f.start
        if hi - lo > MAX_SPAN or hi <= lo:
            return None
        n = min(hi, self.file_length(f.index)) - lo  # the bytes a `pread` of [lo, hi) gives
        if n < _HEAD_SIZE:
            return None
        rels, flen = [p - p_lo for p in phys], self.files[f.index].length - lo
        # mapped, not copied, when sparse, but a few records' span is read: mapping it and faulting its pages
        # in costs more; only the pages the records lie on are touched
        if n > SPARSE * len(phys) and len(phys) >= MAP_FROM:
            at = lo - lo % mmap.ALLOCATIONGRANULARITY
            return mmap.mmap(f.fd, lo + n - at, access=mmap.ACCESS_READ, offset=at), lo - at, rels, n, flen
        return os.pread(f.fd, n, lo), 0, rels, n, flen

    def runs(self, phys: list[int], sizes: list[int]):
        """(i, j) of the runs of `phys[i:j]` that lie in one file within `MAX_SPAN` bytes, `CHUNK` records at
        most."""
        starts = self.starts
        i = 0
        while i < len(phys):
            lo = phys[i]
            f = bisect.bisect_right(starts, lo) - 1
            end = starts[f + 1] if f + 1 < len(starts) else 1 << 62
            j = i + 1
            while j < len(phys) and j - i < CHUNK and lo <= phys[j] < end and phys[j] + sizes[j] - lo <= MAX_SPAN:
                j += 1
            yield i, j
            i = j

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._span = None  # its descriptor is closed
        self._win, self._win_at = b"", 0
