"""BatchConsumeQueues (spec §13): `batchconsumequeue/TOPIC/QID/`, 46-byte units across mapped files.

Read-only: files are memory-mapped and viewed through a numpy dtype derived from
`formats.batchcq.batchcq_unit`. A queue's data ends at the first unit that `BatchConsumeQueue.recover`
would not accept (`is_valid_unit`); all zeros there is the normal end, anything else a finding.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mqtool.formats import layout
from mqtool.formats.batchcq import BCQ_UNIT_SIZE, batchcq_unit
from mqtool.formats.names import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM
from mqtool.store.dirs import BCQ_DIR
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import MappedFile, MappedFileQueue, map_file, open_queue

BCQ_DTYPE = layout.dtype(batchcq_unit)
CHECK = "batchconsumequeue.integrity"


class BcqUnit(NamedTuple):
    """A decoded unit; `queue_offset` is its msgBaseOffset (what `CqUnit.getQueueOffset` returns)."""

    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_time: int
    batch_size: int
    compacted_offset: int
    file: str
    position: int  # byte offset of the unit inside its file

    @property
    def next_offset(self) -> int:
        """The logical offset after this batch (`queueOffset + batchNum`, the next pull's start)."""
        return self.queue_offset + self.batch_size


def set_batch_size_if_needed(properties: dict[str, str], queue_offset: int) -> tuple[int, int]:
    """(msgBaseOffset, batchSize) a record dispatches (`CommitLog.setBatchSizeIfNeeded`).

    Both INNER_NUM and INNER_BASE present: their values; otherwise the record's QUEUEOFFSET and 1
    (the `DispatchRequest` defaults). Values that Java's parseLong/parseShort refuse give (queue_offset, 1).
    """
    num, base = properties.get(PROPERTY_INNER_NUM), properties.get(PROPERTY_INNER_BASE)
    if num is None or base is None:
        return queue_offset, 1
    try:
        n = int(num)
        if not -32768 <= n <= 32767:
            raise ValueError(num)
        return int(base), n
    except ValueError:
        return queue_offset, 1


@dataclass
class BatchConsumeQueue:
    """One BatchCQ queue. Findings go to the accumulator each walk receives."""

    root: Path
    topic: str
    queue_id: int
    queue: MappedFileQueue

    @classmethod
    def open(cls, root: Path, topic: str, queue_id: int, configured_size: int | None = None) -> "BatchConsumeQueue":
        d = root / BCQ_DIR / topic / str(queue_id)
        return cls(root, topic, queue_id, open_queue(d, configured_size, BCQ_DIR, root))

    def rel(self, f: MappedFile) -> str:
        return str(f.path.relative_to(self.root))

    def _add(self, findings: Findings, file: str, offset: int | None, severity: str, message: str) -> None:
        findings.add(file, offset, CHECK, severity, message, self.topic, self.queue_id)

    def scan_columns(self, findings: Findings) -> Iterator[tuple[MappedFile, int, np.ndarray]]:
        """(file, byte position of the first unit, units) per file until the queue's data ends.

        `units` is a `BCQ_DTYPE` view over the mapped file, valid until the next item is requested.
        File-list problems, a torn or invalid unit, base offsets that do not follow on and
        CommitLog offsets that do not grow become findings.
        """
        for f in self.queue.findings:
            self._add(findings, f.file, f.offset, f.severity, f.message)
        if len(self.queue.files) > 1 and self.queue.file_size % BCQ_UNIT_SIZE:  # a lone file may be torn
            self._add(findings, str(self.queue.directory.relative_to(self.root)), None, "warning",
                      f"file size {self.queue.file_size} is not a multiple of {BCQ_UNIT_SIZE}-byte units")
        prev: tuple[int, int] | None = None  # (next logical offset, commitlog offset) of the last unit
        ended = False
        for f in self.queue.files:
            file = self.rel(f)
            with map_file(f.path) as buf:
                n = len(buf) // BCQ_UNIT_SIZE
                units = np.frombuffer(buf, BCQ_DTYPE, count=n) if n else np.zeros(0, BCQ_DTYPE)
                if ended:
                    if n and np.any(units.view(np.uint8)):
                        self._add(findings, file, 0, "error", "units after the end of the queue's data "
                                  "(the broker's recovery ignores them)")
                    del units
                    continue
                valid = ((units["commitlog_offset"] >= 0) & (units["size"] > 0)
                         & (units["msg_base_offset"] >= 0) & (units["batch_size"] > 0))
                count = n if valid.all() else int(np.argmin(valid))
                if count < n:
                    ended = True
                    rest = units[count:].view(np.uint8)
                    if np.any(rest):
                        u = units[count]
                        self._add(findings, file, count * BCQ_UNIT_SIZE, "error",
                                  f"invalid unit (offset {int(u['commitlog_offset'])}, size {int(u['size'])}, "
                                  f"base {int(u['msg_base_offset'])}, batch {int(u['batch_size'])}); the "
                                  "broker's recovery treats this as the end of the queue")
                elif len(buf) % BCQ_UNIT_SIZE and any(bytes(buf[n * BCQ_UNIT_SIZE:])):
                    self._add(findings, file, n * BCQ_UNIT_SIZE, "error",
                              f"torn unit: {len(buf) % BCQ_UNIT_SIZE} bytes at the file's end")
                good = units[:count]
                prev = self._check_order(findings, file, good, prev)
                try:
                    yield f, 0, good
                finally:
                    del good, units, valid

    def _check_order(self, findings: Findings, file: str, units: np.ndarray,
                     prev: tuple[int, int] | None) -> tuple[int, int] | None:
        """Base offsets follow on (base = previous base + batch) and CommitLog offsets grow."""
        if not len(units):
            return prev
        base = units["msg_base_offset"].astype(np.int64)
        nxt = base + units["batch_size"].astype(np.int64)
        phys = units["commitlog_offset"].astype(np.int64)
        want_base = np.concatenate(([prev[0] if prev else base[0]], nxt[:-1]))
        prev_phys = np.concatenate(([prev[1] if prev else -1], phys[:-1]))
        for i in np.flatnonzero(base != want_base).tolist():
            self._add(findings, file, i * BCQ_UNIT_SIZE, "error",
                      f"msgBaseOffset {int(base[i])} does not follow on: expected {int(want_base[i])}")
        for i in np.flatnonzero(phys <= prev_phys).tolist():
            self._add(findings, file, i * BCQ_UNIT_SIZE, "error",
                      f"CommitLog offset {int(phys[i])} is not after the previous unit's {int(prev_phys[i])}")
        return int(nxt[-1]), int(phys[-1])

    def iter_units(self, findings: Findings) -> Iterator[BcqUnit]:
        """Every unit in order, as `BcqUnit`s."""
        for f, first, units in self.scan_columns(findings):
            cols = [units[name].tolist() for name in ("msg_base_offset", "commitlog_offset", "size", "tags_code",
                                                      "store_time", "batch_size", "compacted_offset")]
            del units
            file = self.rel(f)
            for i, row in enumerate(zip(*cols, strict=True)):
                yield BcqUnit(*row, file, first + i * BCQ_UNIT_SIZE)

    def offsets(self, findings: Findings) -> tuple[int, int]:
        """(min, max) logical offsets: the first unit's base, one past the last batch (0, 0 when empty)."""
        lo = hi = None
        for u in self.iter_units(findings):
            lo = u.queue_offset if lo is None else lo
            hi = u.next_offset
        return (lo or 0, hi or 0)


def check_unit_against_record(unit: BcqUnit, topic: str, queue_id: int, record, findings: Findings) -> None:
    """A unit agrees with the CommitLog record it points to (topic, queue, size, INNER_BASE / INNER_NUM).

    `record` is a `MessageRecord` read at `unit.commitlog_offset`, or None when none starts there.
    """
    def bad(message: str) -> None:
        findings.add(unit.file, unit.position, CHECK, "error", message, topic, queue_id)

    if record is None:
        bad(f"no CommitLog record at offset {unit.commitlog_offset}")
        return
    if (record.topic, record.queue_id) != (topic, queue_id):
        bad(f"record at {unit.commitlog_offset} belongs to {record.topic}/{record.queue_id}")
    if record.total_size != unit.size:
        bad(f"unit size {unit.size} != record TOTALSIZE {record.total_size}")
    base, num = set_batch_size_if_needed(record.properties, record.queue_offset)
    if (base, num) != (unit.queue_offset, unit.batch_size):
        bad(f"unit base/batch {unit.queue_offset}/{unit.batch_size} != record's INNER_BASE/INNER_NUM "
            f"{base}/{num}")


def discover_batch_queues(root: Path) -> list[tuple[str, int]]:
    """(topic, queue id) of every queue directory under batchconsumequeue/."""
    base = root / BCQ_DIR
    found = []
    if base.is_dir():
        for t in sorted(base.iterdir()):
            if t.is_dir():
                found += [(t.name, int(q.name)) for q in t.iterdir() if q.is_dir() and q.name.lstrip("-").isdigit()]
    return sorted(found)
