"""Typed task results: what each audit task sends back to the driver, one class per task kind.

Results cross process boundaries (pickled from Spark's Python workers), so they are plain
module-level dataclasses of ints, strings, lists, dicts and numpy arrays. `AuditResults` groups
one audit's results by kind, in task order, and derives once what several driver checks share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

from mqtool.store.findings import Findings


class QueueStats(NamedTuple):
    """Per (topic, queue) counters of the CommitLog walk (`stats`)."""

    count: int
    bytes: int
    first_store_ts: int
    last_store_ts: int
    min_queue_offset: int
    max_queue_offset: int


@dataclass(kw_only=True)
class TaskResult:
    """What every task returns: its index in the plan and its findings; `worker` is set by Spark
    (process id, start and end time) for the benchmark's concurrency figures only."""

    index: int
    findings: Findings = field(default_factory=Findings)
    worker: dict | None = None


@dataclass(kw_only=True)
class CommitLogResult(TaskResult):
    """One CommitLog slice: how its walk ended and what the driver's checks need from it."""

    file: str
    file_start: int
    begin: int
    end: int
    valid_end: int  # file position where the walk stopped
    stop: str  # why it stopped (`fastscan.stop_reason`, or "end of range")
    trailing_bytes: int  # non-zero bytes after an invalid record, up to the range's end
    last_of_file: bool
    records: int
    bytes: int
    queues: dict[tuple[str, int], QueueStats]
    kept: list[dict]  # the system-topic records (schedule, timer, transactions)
    key_hashes: np.ndarray  # 63-bit UNIQ_KEY hashes of ordinary records, sorted
    key_offsets: np.ndarray  # their record offsets, in the same order
    commits: np.ndarray  # (offset, prepared transaction offset) of COMMIT records


@dataclass(kw_only=True)
class ConsumeQueueResult(TaskResult):
    """One ConsumeQueue file's units, checked against the records they name."""

    topic: str
    queue_id: int
    file: str
    file_start: int
    first_offset: int  # queue offset of the file's first unit
    units: int  # written units
    end_offset: int  # queue offset after the file's last written unit
    max_commitlog_end: int  # largest commitLogOffset + size of a unit
    bad_units: int
    schedule_tags: list[tuple[int, int]]  # (queue offset, tagsCode) of SCHEDULE_TOPIC_XXXX units


@dataclass(kw_only=True)
class TimerLogResult(TaskResult):
    file: str
    file_start: int
    units: int
    pending_units: int
    end: int  # TimerLog offset after the file's last unit


@dataclass(kw_only=True)
class WheelResult(TaskResult):
    """A range of wheel slots, each checked against its TimerLog chain."""

    slots: int  # written slots checked
    broken: int
    chain_units: int
    pending_by_time: dict[int, int]  # slot time -> num, for slots not yet read


@dataclass
class QueueUnits:
    """One ConsumeQueue's units merged over its files (the driver's view of a queue)."""

    min_offset: int
    max_offset: int
    units: int = 0
    bad_units: int = 0
    max_commitlog_end: int = 0
    file: str = ""  # the file holding the unit that reaches furthest into the CommitLog


@dataclass(kw_only=True)
class IndexResult(TaskResult):
    """One IndexFile: its entry counts (`audit/index.py`)."""

    file: str
    counts: dict[str, int]


@dataclass(kw_only=True)
class DLedgerSliceResult(TaskResult):
    """One slice's walk. Its findings travel in `entry_findings`: the driver drops those of slices the
    broker's recovery never reaches (after a stop earlier in the same file), as the serial walk does."""

    file: str
    file_no: int
    begin: int
    entries: int
    first: tuple[int, int, int] | None  # index, term, file position of the first entry
    last: tuple[int, int, int, int] | None  # index, term, global offset, size of the last entry
    stopped: int | None  # file position where the data ended without a filler
    complete: bool  # the walk reached the slice's end (or the file's end): a later slice continues it
    entry_findings: Findings = field(default_factory=Findings)


@dataclass
class AuditResults:
    """One audit's task results by kind, each list in task order."""

    commitlog: list[CommitLogResult] = field(default_factory=list)
    consumequeue: list[ConsumeQueueResult] = field(default_factory=list)
    timerlog: list[TimerLogResult] = field(default_factory=list)
    wheel: list[WheelResult] = field(default_factory=list)
    index: list[IndexResult] = field(default_factory=list)
    dledger: list[DLedgerSliceResult] = field(default_factory=list)
    ordered: list[TaskResult] = field(default_factory=list)  # every result

    @classmethod
    def collect(cls, results: list[TaskResult]) -> AuditResults:
        """Sort by task index, so the report never depends on which worker finished first."""
        out = cls()
        lists = {
            CommitLogResult: out.commitlog,
            ConsumeQueueResult: out.consumequeue,
            TimerLogResult: out.timerlog,
            WheelResult: out.wheel,
            IndexResult: out.index,
            DLedgerSliceResult: out.dledger,
        }
        out.ordered = sorted(results, key=lambda r: r.index)
        for r in out.ordered:
            lists[type(r)].append(r)
        return out

    @cached_property
    def queue_stats(self) -> dict[tuple[str, int], QueueStats]:
        """The walk's per-queue counters merged over every slice."""
        out: dict[tuple[str, int], QueueStats] = {}
        for r in self.commitlog:
            for key, s in r.queues.items():
                cur = out.get(key)
                out[key] = (
                    s
                    if cur is None
                    else QueueStats(
                        cur.count + s.count,
                        cur.bytes + s.bytes,
                        min(cur.first_store_ts, s.first_store_ts),
                        max(cur.last_store_ts, s.last_store_ts),
                        min(cur.min_queue_offset, s.min_queue_offset),
                        max(cur.max_queue_offset, s.max_queue_offset),
                    )
                )
        return out

    @cached_property
    def queues(self) -> dict[tuple[str, int], QueueUnits]:
        """Each ConsumeQueue's units merged over its files."""
        out: dict[tuple[str, int], QueueUnits] = {}
        for r in self.consumequeue:
            q = out.setdefault((r.topic, r.queue_id), QueueUnits(r.first_offset, r.first_offset, file=r.file))
            q.min_offset = min(q.min_offset, r.first_offset)
            if r.units:
                q.max_offset = max(q.max_offset, r.end_offset)
            q.units += r.units
            q.bad_units += r.bad_units
            if r.max_commitlog_end > q.max_commitlog_end:
                q.max_commitlog_end, q.file = r.max_commitlog_end, r.file
        return out

    @property
    def max_offset(self) -> int:
        """The CommitLog's end: where the walk of the last file's last slice stopped."""
        last = [r for r in self.commitlog if r.last_of_file]
        return last[-1].file_start + last[-1].valid_end if last else 0

    @property
    def now(self) -> int:
        """The store's now: its newest store timestamp (0 for an empty CommitLog)."""
        return max((s.last_store_ts for s in self.queue_stats.values()), default=0)

    @property
    def kept(self) -> list[dict]:
        return [k for r in self.commitlog for k in r.kept]


@dataclass
class RocksDBState:
    """What the RocksDB audit reads on the driver (`audit/rocksdb.py`; the consume queue is one database):
    the offset table (`QueueOffsets` per queue), each queue's first and last key (`QueueKeyRange`), the
    CHECKPOINT entry's raw value, and the entry the offset table's max names (for its size)."""

    offsets: dict  # (topic, queue id) -> store.rocksdb.QueueOffsets
    keys: dict  # (topic, queue id) -> store.rocksdb.QueueKeyRange
    checkpoint: bytes | None
    max_units: dict = field(default_factory=dict)  # (topic, queue id) -> RocksCqUnit at the max entry's offset
