"""One queue reader per (topic, queue id), whatever backs the queue (spec §3, §14).

`Store.consume_queue` returns a `QueueReader`: a file `ConsumeQueue` (20-byte units in mapped files) or,
on a `storeType=defaultRocksDB` store, a `RocksDBConsumeQueue` over the store's one read-only database.
Consumers (the views, trace, the audit plan, the simulator) call the same members on either, so no
consumer branches on the backing. A RocksDB queue has no mapped files: its `queue` lists none, which
is how the file-splitting code paths (audit tasks per CQ file, Spark partitions) skip it; the audit
reads it through `audit/` RocksDB tasks instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from mqtool.formats.consumequeue import CQ_DTYPE
from mqtool.store.consumequeue import CqUnit
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import MappedFileQueue
from mqtool.store.rocksdb import CHECK, CQ_DIR, QueueOffsets, RocksDBConsumeQueues

SCAN_CHUNK = 4096  # units per numpy block of `RocksDBConsumeQueue.scan_columns`
MAX_HOLES = 1 << 20  # missing offsets `columns` spans before it gives up on entries further on


class QueueReader(Protocol):
    """What every consumer may call on a queue (the members of `store.consumequeue.ConsumeQueue`)."""

    topic: str
    queue_id: int
    queue: MappedFileQueue

    @property
    def findings(self) -> list[Finding]: ...

    @property
    def first_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    def iter_units(self, start: int = 0) -> Iterator[CqUnit]: ...

    def scan_columns(self, start: int = 0) -> Iterator[tuple[int, np.ndarray]]: ...

    def unit(self, queue_offset: int) -> CqUnit | None: ...

    def min_offset(self, commitlog_min: int = 0) -> int: ...


class RocksDBConsumeQueue:
    """One queue of a RocksDB consume queue store, read like a file ConsumeQueue.

    Offsets come from the offset column family as the broker reads them (`getMaxOffsetInQueue`,
    `getMinOffsetInQueue`); a queue without offset entries falls back to its first / last key. Units are
    `CqUnit`s (the entry's storeTime is dropped: file units have none); gaps and short values found
    while iterating go to `scan_findings`."""

    rocksdb = True

    def __init__(self, db: RocksDBConsumeQueues, topic: str, queue_id: int, offsets: QueueOffsets | None) -> None:
        self.db, self.topic, self.queue_id = db, topic, queue_id
        self.offsets = offsets or QueueOffsets(None, None, None, None)
        self.scan_findings = Findings()
        self.queue = MappedFileQueue(Path(db.root) / CQ_DIR, [], 0, Findings())

    @property
    def root(self) -> Path:
        return Path(self.db.root)

    @property
    def findings(self) -> list[Finding]:
        """What reading the queue found so far (a RocksDB queue has no file listing)."""
        return list(self.scan_findings)

    @property
    def first_offset(self) -> int:
        if self.offsets.min_cq_offset is not None:
            return max(self.offsets.min_cq_offset, 0)
        first = next(self.db.iter_units(self.topic, self.queue_id, Findings()), None)
        return 0 if first is None else first.queue_offset

    @property
    def max_offset(self) -> int:
        """`getMaxOffsetInQueue`: the `max` entry's queue offset + 1; without one, the last key's + 1."""
        if self.offsets.max_cq_offset is not None:
            return self.offsets.max_offset
        last = self.db.last_cq_offset(self.topic, self.queue_id)
        return 0 if last is None else last + 1

    def iter_units(self, start: int = 0) -> Iterator[CqUnit]:
        for u in self.db.iter_units(self.topic, self.queue_id, self.scan_findings, max(start, self.first_offset)):
            yield CqUnit(u.queue_offset, u.commitlog_offset, u.size, u.tags_code)

    def scan_columns(self, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(queue offset of the first unit, units as a `CQ_DTYPE` array) per block of consecutive units."""
        block: list[tuple[int, int, int]] = []
        first = None
        for u in self.iter_units(start):
            if first is not None and u.queue_offset != first + len(block):
                yield first, np.array(block, dtype=CQ_DTYPE)
                block, first = [], None
            if first is None:
                first = u.queue_offset
            block.append((u.commitlog_offset, u.size, u.tags_code))
            if len(block) == SCAN_CHUNK:
                yield first, np.array(block, dtype=CQ_DTYPE)
                block, first = [], None
        if block:
            yield first, np.array(block, dtype=CQ_DTYPE)

    def unit(self, queue_offset: int) -> CqUnit | None:
        u = self.db.unit(self.topic, self.queue_id, queue_offset)
        return None if u is None else CqUnit(u.queue_offset, u.commitlog_offset, u.size, u.tags_code)

    def min_offset(self, commitlog_min: int = 0) -> int:
        """The first unit whose CommitLog offset is still in the CommitLog (as `ConsumeQueue.min_offset`)."""
        for u in self.iter_units(self.first_offset):
            if u.commitlog_offset >= commitlog_min:
                return u.queue_offset
        return self.max_offset

    def columns(self, findings: Findings) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(first queue offset, commitLogOffset, size, tagsCode, written) for every queue offset from the first
        entry to the last, as the audit reads a ConsumeQueue file: a missing offset or an unreadable value
        is an unwritten slot (`written` False), which the audit reports as a hole."""
        units = list(self.db.iter_units(self.topic, self.queue_id, findings, 0, report_gaps=False))
        if not units:
            z = np.zeros(0, np.int64)
            return self.first_offset, z, z, z, np.zeros(0, bool)
        first = units[0].queue_offset
        span = len(units) + MAX_HOLES
        far = [u for u in units if not 0 <= u.queue_offset - first < span]
        for u in far[:1]:
            findings.add(CQ_DIR, None, CHECK, "error", f"{len(far)} entries (the first at queue offset "
                         f"{u.queue_offset}) lie before the first or more than {MAX_HOLES} offsets past the others: "
                         "not read", self.topic, self.queue_id)
        units = [u for u in units if 0 <= u.queue_offset - first < span]
        n = units[-1].queue_offset - first + 1
        cols = [np.zeros(n, np.int64) for _ in range(3)]
        written = np.zeros(n, bool)
        at = np.array([u.queue_offset - first for u in units], np.int64)
        for col, name in zip(cols, ("commitlog_offset", "size", "tags_code"), strict=True):
            col[at] = [getattr(u, name) for u in units]
        written[at] = True
        return first, cols[0], cols[1], cols[2], written
