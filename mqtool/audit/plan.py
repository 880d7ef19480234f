"""Cut a store into audit tasks: CommitLog files or byte ranges, ConsumeQueue files, TimerLog files,
wheel slot ranges. Planning runs once (on the driver); tasks hold only paths, ints and tuples.

A CommitLog file larger than `split_bytes` is cut at record starts taken from ConsumeQueue units
(a unit's commitLogOffset is an exact record start); each cut is checked on the driver (a valid
header whose PHYSICALOFFSET field names that position) before it is used, and a file with no usable
unit near a cut is simply not cut there. The local runner and Spark use the same plan, so both
report the same findings.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqtool.audit.dledger import dledger_cuts, is_data_file, open_dledger, plan_dledger_tasks
from mqtool.audit.index import plan_index_tasks
from mqtool.audit.records import FileSlice, is_record_start, open_store
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC
from mqtool.rules.timer import check_timer_precision
from mqtool.store import fastscan
from mqtool.store.errors import StoreError
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import MappedFileQueue, map_file, open_queue
from mqtool.store.store import Store
from mqtool.store.timer import wheel_path, wheel_slot_count

DEFAULT_SPLIT_BYTES = 256 << 20


@dataclass(frozen=True)
class CommitLogSlice(FileSlice):
    """Bytes [begin, end) of one CommitLog file; `begin` is a record start (0 or a checked cut)."""

    last_of_file: bool
    last_file: bool


@dataclass(frozen=True)
class QueueFileTask:
    """One ConsumeQueue file; `delays_ms` is set for SCHEDULE_TOPIC_XXXX (tagsCode check)."""

    index: int
    root: str
    topic: str
    queue_id: int
    path: str
    rel: str
    file_start: int
    delays_ms: tuple[int, ...] | None = None
    rocksdb: bool = False  # a RocksDB consume queue (spec §14): `path` is the database, the queue read whole


@dataclass(frozen=True)
class TimerLogTask:
    index: int
    root: str
    path: str
    rel: str
    file_start: int
    last_read_time_ms: int


@dataclass(frozen=True)
class WheelTask:
    """Slots [slot_begin, slot_end) of the timer wheel, each checked against its TimerLog chain."""

    index: int
    root: str
    path: str
    slot_begin: int
    slot_end: int
    precision_ms: int
    last_read_time_ms: int


Task = CommitLogSlice | QueueFileTask | TimerLogTask | WheelTask


@dataclass
class AuditPlan:
    """The tasks of one audit, and what the driver needs to finish it (`store` stays on the driver)."""

    store: Store
    tasks: list[Task]
    findings: Findings = field(default_factory=Findings)  # from listing the files
    commitlog_min: int = 0
    commitlog_files: list[tuple[str, int, int]] = field(default_factory=list)  # rel, start, length
    queues: list[tuple[str, int]] = field(default_factory=list)
    timercheck: dict | None = None
    timerlog_min: int = 0
    timerlog_files: int = 0

    @property
    def root(self) -> str:
        return str(self.store.root)

    @property
    def config(self) -> BrokerConfig:
        return self.store.config

    def count(self, kind: type) -> int:
        return sum(isinstance(t, kind) for t in self.tasks)


def timerlog_queue(root: str) -> MappedFileQueue:
    tl = open_store(root).timerlog
    return tl.queue if tl is not None else open_queue(Path(root) / "timerlog", None, "timerlog", Path(root))


def _timercheck(store: Store) -> dict | None:
    c = store.timercheck
    if c is None:
        return None
    return {k: int(c[k]) for k in ("last_read_time_ms", "last_timer_log_flush_pos", "last_timer_queue_offset",
                                   "master_timer_queue_offset")}


def open_audited_store(store: Store | Path | str, config: BrokerConfig | None = None) -> Store:
    """`Store.open` for an audit (StoreError when the path is not a store); a Store is used as it is."""
    if isinstance(store, Store):
        return store
    root = Path(store)
    if root.is_dir() and not any((root / d).exists() for d in ("commitlog", "consumequeue", "config")):
        raise StoreError("not a RocketMQ store: none of commitlog/, consumequeue/, config/ found", root.resolve())
    return Store.open(root, config)


def plan_audit(store: Store | Path | str, config: BrokerConfig | None = None,
               split_bytes: int = DEFAULT_SPLIT_BYTES, wheel_tasks: int = 2) -> AuditPlan:
    """All tasks for a store, in a fixed order (CommitLog, ConsumeQueues, TimerLog, wheel).

    `config` (a `BrokerConfig`, e.g. from `load_broker_conf`) is used when `store` is a path; a
    `Store` brings its own.
    """
    from mqtool.store.delaylevels import config_in_effect, delay_levels_in_effect

    st = open_audited_store(store, config)
    implied = delay_levels_in_effect(st)[2]  # the units imply other delay levels (`inspect delay` says the same)
    if config_in_effect(st) is not st.config:  # no broker.conf: check the units against the levels they imply
        st = Store.open(st.root, config_in_effect(st))
    root = st.root
    r = str(root)
    plan = AuditPlan(st, [])
    plan.findings += [implied] if implied is not None else []
    tasks = plan.tasks
    cl = st.commitlog.queue
    plan.findings += [Finding(f.file, f.offset, "commitlog.integrity", f.severity, f.message) for f in cl.findings]
    plan.commitlog_min = cl.min_offset
    plan.commitlog_files = [(str(f.path.relative_to(root)), f.start, f.length) for f in cl.files]
    plan.queues = list(st.queue_ids)
    cq_files = {}
    for topic, qid in plan.queues:
        q = st.consume_queue(topic, qid)
        if q is None:
            continue
        plan.findings += [Finding(f.file, f.offset, "consumequeue.consistency", f.severity, f.message, topic, qid)
                          for f in q.findings]
        cq_files[(topic, qid)] = q.queue

    tasks += commitlog_slices(root, split_bytes, cl, cq_files)
    tasks += plan_dledger_tasks(root, list(tasks), len(tasks))  # DLedger entries (audit/dledger.py)

    delays = tuple(st.config.delay_levels_ms())
    for (topic, qid), q in cq_files.items():
        for f in q.files:
            tasks.append(QueueFileTask(len(tasks), r, topic, qid, str(f.path), str(f.path.relative_to(root)),
                                       f.start, delays if topic == RMQ_SYS_SCHEDULE_TOPIC else None))
        if not q.files and (topic, qid) in st.rocksdb_queue_offsets:  # a RocksDB queue: one task (§14)
            tasks.append(QueueFileTask(len(tasks), r, topic, qid, str(q.directory), str(q.directory.relative_to(root)),
                                       0, delays if topic == RMQ_SYS_SCHEDULE_TOPIC else None, rocksdb=True))

    plan.timercheck = _timercheck(st)
    last_read = plan.timercheck["last_read_time_ms"] if plan.timercheck else 0
    if st.timerlog is not None:
        tl = st.timerlog.queue
        plan.findings += [Finding(f.file, f.offset, "timer", f.severity, f.message) for f in tl.findings]
        plan.timerlog_min = tl.min_offset
        plan.timerlog_files = len(tl.files)
        for f in tl.files:
            tasks.append(TimerLogTask(len(tasks), r, str(f.path), str(f.path.relative_to(root)), f.start, last_read))
    wheel = wheel_path(root)
    if wheel is not None:
        check_timer_precision(st.config.timer_precision_ms)  # the wheel's times are read by it
        slots = wheel_slot_count(wheel)
        step = -(-slots // max(1, wheel_tasks)) if slots else 1
        for b in range(0, slots, step):
            tasks.append(WheelTask(len(tasks), r, str(wheel), b, min(slots, b + step), st.config.timer_precision_ms,
                                   last_read))
    tasks += plan_index_tasks(st, len(tasks))
    return plan


def commitlog_slices(root: Path | str, split_bytes: int = DEFAULT_SPLIT_BYTES, cl: MappedFileQueue | None = None,
                     cq_files: dict | None = None) -> list[CommitLogSlice]:
    """The CommitLog's files, each cut into ranges of about `split_bytes` at checked record starts."""
    root = Path(root).resolve()
    r = str(root)
    if cl is None:
        cl = Store.open(root).commitlog.queue
    if cq_files is None:
        cq_files = {}
        if split_bytes and any(f.length > split_bytes for f in cl.files):
            st = Store.open(root)
            cq_files = {k: q.queue for k in st.queue_ids if (q := st.consume_queue(*k)) is not None}
    out: list[CommitLogSlice] = []
    dl = open_dledger(root)
    for n, f in enumerate(cl.files):
        cuts = [0]
        if split_bytes and f.length > split_bytes and is_data_file(dl, f):
            cuts += dledger_cuts(dl, f, split_bytes)  # at entry starts from the DLedger index (spec §12)
        elif split_bytes and f.length > split_bytes:
            cuts += _cuts(f.path, f.start, f.length, split_bytes, cq_files)
        for i, begin in enumerate(cuts):
            end = cuts[i + 1] if i + 1 < len(cuts) else f.length
            out.append(CommitLogSlice(len(out), r, str(f.path), str(f.path.relative_to(root)), f.start, begin, end,
                                      i + 1 == len(cuts), n + 1 == len(cl.files)))
    return out


def _cuts(path: Path, file_start: int, length: int, split: int, cq_files) -> list[int]:
    """Positions in a CommitLog file, about `split` bytes apart, where a checked record starts."""
    targets = list(range(split, length, split))
    candidates: set[int] = set()
    for q in cq_files.values():
        for c in _first_units_at_or_after(q, [file_start + t for t in targets], file_start + length):
            candidates.add(c - file_start)
    ordered = sorted(candidates)
    cuts: list[int] = []
    with map_file(path) as buf:
        for t, nxt in zip(targets, targets[1:] + [length], strict=True):
            for c in ordered:
                if c < t or c >= nxt:
                    continue
                if is_record_start(buf, file_start, c):
                    if not cuts or c > cuts[-1]:
                        cuts.append(c)
                    break
    return cuts


def _first_units_at_or_after(q: MappedFileQueue, targets: list[int], hi: int) -> list[int]:
    """For each target, the smallest unit commitLogOffset in [target, hi) of one queue (if any).

    Units are read with the fast path (`fastscan.cq_units`: written units up to the first empty one);
    a queue's commitLogOffsets only grow, so each file is a sorted column to binary-search.
    """
    out: list[int] = []
    todo = sorted(targets)
    for f in q.files:
        if not todo:
            break
        with map_file(f.path) as buf:
            units, _ended = fastscan.cq_units(buf)
            offs = units["commitlog_offset"].astype(np.int64)
            del units
        if offs.size == 0:
            continue
        rest = []
        for t in todo:
            i = int(np.searchsorted(offs, t))
            if i < offs.size:
                if offs[i] < hi:
                    out.append(int(offs[i]))
            else:
                rest.append(t)  # every unit of this file lies before t: look in the next file
        todo = rest
    return out
