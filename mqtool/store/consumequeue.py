"""ConsumeQueues (spec §3): per topic and queue id, 20-byte units across mapped files."""

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mqtool.formats.consumequeue import CQ_UNIT, CQ_UNIT_SIZE, is_empty_unit
from mqtool.store import fastscan
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import MappedFileQueue, map_file, open_queue, read_at


class CqUnit(NamedTuple):
    """A decoded unit; `queue_offset` is its logical index in the queue."""

    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int


@dataclass
class ConsumeQueue:
    """One queue's units. `max_offset` is one past the last written unit (like the broker's)."""

    root: Path
    topic: str
    queue_id: int
    queue: MappedFileQueue
    _max: int | None = field(default=None, repr=False)

    @classmethod
    def open(cls, root: Path, topic: str, queue_id: int, configured_size: int | None = None,
             findings: Findings | None = None, expected_size: int | None = None) -> "ConsumeQueue":
        """`findings` (the queue's accumulator, `queue.findings`) receives what listing the files finds;
        `expected_size`: the store's ConsumeQueue file length when known (`Store.consume_queue_file_size`)."""
        d = root / "consumequeue" / topic / str(queue_id)
        return cls(root, topic, queue_id, open_queue(d, configured_size, "consumequeue", root, findings,
                                                     expected_size))

    @property
    def findings(self) -> list[Finding]:
        """The listing's findings, with this queue's topic and id."""
        return [Finding(f.file, f.offset, f.check, f.severity, f.message, self.topic, self.queue_id)
                for f in self.queue.findings]

    @property
    def first_offset(self) -> int:
        """Logical offset of the first unit on disk (older files may have been deleted)."""
        return self.queue.min_offset // CQ_UNIT_SIZE

    def iter_units(self, start: int = 0) -> Iterator[CqUnit]:
        """Units from logical offset `start` until the first empty (never written) unit."""
        for first, units in self.scan_columns(start):
            cols = [units[name].tolist() for name in ("commitlog_offset", "size", "tags_code")]
            del units  # the view must be gone before the file's mapping closes
            for i, (off, size, tags) in enumerate(zip(*cols, strict=True), first):
                yield CqUnit(i, off, size, tags)

    def scan_columns(self, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(logical offset of the first unit, units) per file, from `start` to the first empty unit.

        `units` is a big-endian structured view (`CQ_DTYPE` of `consumequeue_unit`: commitlog_offset, size,
        tags_code) over the mapped file, valid until the next item is requested: copy what must
        outlive it. This is the fast path (numpy, no object per unit); `iter_units` is built on it.
        """
        start = max(start, self.first_offset)
        for f in self.queue.files:
            fsize = max(f.length, self.queue.file_size)
            if f.start + fsize <= start * CQ_UNIT_SIZE:
                continue
            with map_file(f.path) as buf:
                pos = max(0, start * CQ_UNIT_SIZE - f.start)
                units, ended = fastscan.cq_units(buf, pos)
                first = (f.start + pos) // CQ_UNIT_SIZE
                try:
                    yield first, units
                finally:
                    count = len(units)
                    del units
            if ended:
                # pre-allocated zeros: the end of the written units
                self._max = first + count
                return
        if self.queue.files:
            last = self.queue.files[-1]
            self._max = (last.start + last.length) // CQ_UNIT_SIZE

    def unit(self, queue_offset: int) -> CqUnit | None:
        """The unit at a logical offset, or None when it is not written."""
        f = self.queue.file_for(queue_offset * CQ_UNIT_SIZE)
        if f is None:
            return None
        data = read_at(f.path, queue_offset * CQ_UNIT_SIZE - f.start, CQ_UNIT_SIZE)
        if len(data) < CQ_UNIT_SIZE:
            return None
        off, size, tags = CQ_UNIT.unpack_from(data, 0)
        return None if is_empty_unit(off, size, tags) else CqUnit(queue_offset, off, size, tags)

    @property
    def max_offset(self) -> int:
        if self._max is None:
            for _first, units in self.scan_columns(self._last_file_start()):  # sets _max; no object per unit
                del units
            if self._max is None:
                self._max = self.first_offset
        return self._max

    def _last_file_start(self) -> int:
        return self.queue.files[-1].start // CQ_UNIT_SIZE if self.queue.files else 0

    def min_offset(self, commitlog_min: int = 0) -> int:
        """The first unit whose CommitLog offset is still in the CommitLog (`ConsumeQueue.minLogicOffset`)."""
        for first, units in self.scan_columns(self.first_offset):
            hits = np.flatnonzero(units["commitlog_offset"] >= commitlog_min)
            del units
            if len(hits):
                return first + int(hits[0])
        return self.max_offset


def common_file_size(root: Path, queues: list[tuple[str, int]]) -> int | None:
    """The length most of the store's ConsumeQueue files have (every queue maps its files with the same
    `mappedFileSizeConsumeQueue`); None without files or when two lengths are equally common."""
    counts = Counter(p.stat().st_size for t, q in queues if (d := root / "consumequeue" / t / str(q)).is_dir()
                     for p in d.iterdir() if p.is_file() and len(p.name) == 20 and p.name.isdigit())
    top = counts.most_common(2)
    if not top or len(top) == 2 and top[0][1] == top[1][1]:
        return None
    return top[0][0]


def discover_queues(root: Path) -> list[tuple[str, int]]:
    """(topic, queue id) of every queue directory under consumequeue/."""
    base = root / "consumequeue"
    found = []
    if base.is_dir():
        for t in sorted(base.iterdir()):
            if t.is_dir():
                found += [(t.name, int(q.name)) for q in sorted(t.iterdir(), key=lambda p: p.name)
                          if q.is_dir() and q.name.lstrip("-").isdigit()]
    return sorted(found)
