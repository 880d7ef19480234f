"""A file ConsumeQueue's units copied into numpy columns at once (20 bytes a unit), for a reader that walks
millions of them (the simulator's store)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.store import fastscan
from mqtool.store.mapped_files import map_file

if TYPE_CHECKING:
    from mqtool.store.consumequeue import ConsumeQueue


class QueueUnits:
    """One queue's units [first, first + n) as columns; `ok` is False for a unit that is not written."""

    __slots__ = ("first", "offset", "size", "tags", "ok")

    def __init__(self, first: int, offset: np.ndarray, size: np.ndarray, tags: np.ndarray, ok: np.ndarray) -> None:
        self.first, self.offset, self.size, self.tags, self.ok = first, offset, size, tags, ok


def queue_units(q: ConsumeQueue, first: int, stop: int) -> QueueUnits:
    """Units [first, stop) as `ConsumeQueue.unit` reads them: not written (None) in a gap between
    files, past a file's end, or all zero."""
    n = max(0, stop - first)
    offset = np.zeros(n, np.int64)
    size = np.zeros(n, np.int32)
    tags = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    taken = np.zeros(n, bool)  # `file_for`: the first listed file that covers a unit answers for it
    fsize = q.queue.file_size
    for f in q.queue.files:
        lo = max(first, -(-f.start // CQ_UNIT_SIZE))
        hi = min(stop, (f.start + max(f.length, fsize)) // CQ_UNIT_SIZE)
        if lo >= hi:
            continue
        a = lo - first
        with map_file(f.path) as buf:
            view = fastscan.cq_view(buf, lo * CQ_UNIT_SIZE - f.start)[: hi - lo]
            b = a + len(view)
            free = ~taken[a:b]
            o, sz, t = (view[name].astype(np.int64) for name in ("commitlog_offset", "size", "tags_code"))
            del view
        offset[a:b] = np.where(free, o, offset[a:b])
        size[a:b] = np.where(free, sz, size[a:b])
        tags[a:b] = np.where(free, t, tags[a:b])
        ok[a:b] |= free & ((o != 0) | (sz != 0) | (t != 0))
        taken[a : hi - first] = True
    return QueueUnits(first, offset, size, tags, ok)
