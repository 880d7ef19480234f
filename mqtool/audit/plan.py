"""Cut a store into audit tasks: CommitLog files or byte ranges, ConsumeQueue files, TimerLog files,
wheel slot ranges. Planning runs once (on the driver); tasks hold only paths, ints and tuples.

A CommitLog file larger than `split_bytes` is cut at record starts taken from ConsumeQueue units
(a unit's commitLogOffset is an exact record start); each cut is checked on the driver (a valid
header whose PHYSICALOFFSET field names that position) before it is used, and a file with no usable
unit near a cut is simply not cut there. The local runner and Spark use the same plan, so both
report the same findings.
"""

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from mqtool.audit.settings import AuditSettings
from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.message import RecordError, decode_message
from mqtool.formats.timercheck import timercheck as timercheck_struct
from mqtool.formats.timerwheel import SLOT_SIZE
from mqtool.store.consumequeue import discover_queues
from mqtool.store.errors import StoreError
from mqtool.store.findings import Finding
from mqtool.store.mapped_files import MappedFileQueue, open_queue, read_at

DEFAULT_SPLIT_BYTES = 256 << 20
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRANS_GROUP = "CID_RMQ_SYS_TRANS"
SYSTEM_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC, HALF_TOPIC, OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC)


@dataclass(frozen=True)
class CommitLogSlice:
    """Bytes [begin, end) of one CommitLog file; `begin` is a record start (0 or a checked cut)."""

    index: int
    root: str
    path: str
    rel: str
    file_start: int
    begin: int
    end: int
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
    root: str
    settings: AuditSettings
    tasks: list[Task]
    findings: list[Finding] = field(default_factory=list)  # from listing the files
    commitlog_min: int = 0
    commitlog_files: list[tuple[str, int, int]] = field(default_factory=list)  # rel, start, length
    queues: list[tuple[str, int]] = field(default_factory=list)
    timercheck: dict | None = None
    timerlog_min: int = 0
    timerlog_files: int = 0
    delay_offsets_path: str | None = None
    consumer_offsets_path: str | None = None

    def count(self, kind: type) -> int:
        return sum(isinstance(t, kind) for t in self.tasks)


@lru_cache(maxsize=8)
def commitlog_queue(root: str) -> MappedFileQueue:
    """The CommitLog's files (listed once per process; workers reuse it for every task)."""
    return open_queue(Path(root) / "commitlog", None, "commitlog", Path(root))


@lru_cache(maxsize=8)
def timerlog_queue(root: str) -> MappedFileQueue:
    return open_queue(Path(root) / "timerlog", None, "timerlog", Path(root))


def read_timercheck(root: Path) -> dict | None:
    p = root / "config" / "timercheck"
    if not p.is_file():
        return None
    data = read_at(p, 0, 4096)
    if len(data) < 56:
        return None
    c = timercheck_struct.parse(data.ljust(4096, b"\x00"))
    return {k: int(c[k]) for k in ("last_read_time_ms", "last_timer_log_flush_pos", "last_timer_queue_offset",
                                   "master_timer_queue_offset")}


def plan_audit(root: Path | str, settings: AuditSettings | None = None,
               split_bytes: int = DEFAULT_SPLIT_BYTES, wheel_tasks: int = 2) -> AuditPlan:
    """All tasks for a store, in a fixed order (CommitLog, ConsumeQueues, TimerLog, wheel)."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise StoreError("no such directory", root)
    if not any((root / d).exists() for d in ("commitlog", "consumequeue", "config")):
        raise StoreError("not a RocketMQ store: none of commitlog/, consumequeue/, config/ found", root)
    settings = settings or AuditSettings()
    r = str(root)
    plan = AuditPlan(r, settings, [])
    tasks = plan.tasks
    cl = commitlog_queue.__wrapped__(r)
    plan.findings += [Finding(f.file, f.offset, "commitlog.integrity", f.severity, f.message) for f in cl.findings]
    plan.commitlog_min = cl.min_offset
    plan.commitlog_files = [(str(f.path.relative_to(root)), f.start, f.length) for f in cl.files]
    plan.queues = discover_queues(root)
    cq_files = {}
    for topic, qid in plan.queues:
        q = open_queue(root / "consumequeue" / topic / str(qid), None, "consumequeue", root)
        plan.findings += [Finding(f.file, f.offset, "consumequeue.consistency", f.severity, f.message, topic, qid)
                          for f in q.findings]
        cq_files[(topic, qid)] = q

    tasks += commitlog_slices(root, split_bytes, cl, cq_files)

    for (topic, qid), q in cq_files.items():
        delays = settings.delay_levels_ms if topic == SCHEDULE_TOPIC else None
        for f in q.files:
            tasks.append(QueueFileTask(len(tasks), r, topic, qid, str(f.path), str(f.path.relative_to(root)),
                                       f.start, delays))

    plan.timercheck = read_timercheck(root)
    last_read = plan.timercheck["last_read_time_ms"] if plan.timercheck else 0
    if (root / "timerlog").is_dir():
        tl = open_queue(root / "timerlog", None, "timerlog", root)
        plan.findings += [Finding(f.file, f.offset, "timer", f.severity, f.message) for f in tl.findings]
        plan.timerlog_min = tl.min_offset
        plan.timerlog_files = len(tl.files)
        for f in tl.files:
            tasks.append(TimerLogTask(len(tasks), r, str(f.path), str(f.path.relative_to(root)), f.start, last_read))
    wheel = root / "timerwheel"
    if not wheel.is_file() and (root / "timerwheel.gz").is_file():
        wheel = root / "timerwheel.gz"
    if wheel.is_file():
        slots = _wheel_slots(wheel)
        step = -(-slots // max(1, wheel_tasks)) if slots else 1
        for b in range(0, slots, step):
            tasks.append(WheelTask(len(tasks), r, str(wheel), b, min(slots, b + step), settings.timer_precision_ms,
                                   last_read))
    for name, attr in (("delayOffset.json", "delay_offsets_path"), ("consumerOffset.json", "consumer_offsets_path")):
        p = root / "config" / name
        if p.is_file() or p.with_name(name + ".bak").is_file():
            setattr(plan, attr, str(p))
    return plan


def commitlog_slices(root: Path | str, split_bytes: int = DEFAULT_SPLIT_BYTES, cl: MappedFileQueue | None = None,
                     cq_files: dict | None = None) -> list[CommitLogSlice]:
    """The CommitLog's files, each cut into ranges of about `split_bytes` at checked record starts."""
    root = Path(root).resolve()
    r = str(root)
    cl = cl or commitlog_queue.__wrapped__(r)
    if cq_files is None:
        cq_files = {}
        if split_bytes and any(f.length > split_bytes for f in cl.files):
            cq_files = {(t, q): open_queue(root / "consumequeue" / t / str(q), None, "consumequeue", root)
                        for t, q in discover_queues(root)}
    out: list[CommitLogSlice] = []
    for n, f in enumerate(cl.files):
        cuts = [0]
        if split_bytes and f.length > split_bytes:
            cuts += _cuts(root, f.start, f.length, split_bytes, cq_files)
        for i, begin in enumerate(cuts):
            end = cuts[i + 1] if i + 1 < len(cuts) else f.length
            out.append(CommitLogSlice(len(out), r, str(f.path), str(f.path.relative_to(root)), f.start, begin, end,
                                      i + 1 == len(cuts), n + 1 == len(cl.files)))
    return out


def _wheel_slots(path: Path) -> int:
    if path.suffix == ".gz":
        with open(path, "rb") as fh:  # gzip's trailer: ISIZE, the plain length mod 2**32 (the wheel: 38 MB)
            fh.seek(-4, 2)
            return int.from_bytes(fh.read(4), "little") // SLOT_SIZE
    return path.stat().st_size // SLOT_SIZE


_HEAD = struct.Struct(">ii")


def _cuts(root: Path, file_start: int, length: int, split: int, cq_files) -> list[int]:
    """Positions in a CommitLog file, about `split` bytes apart, where a checked record starts."""
    targets = list(range(split, length, split))
    candidates: set[int] = set()
    for q in cq_files.values():
        for t in targets:
            c = _first_unit_at_or_after(q, file_start + t, file_start + length)
            if c is not None:
                candidates.add(c - file_start)
    ordered = sorted(candidates)
    cuts: list[int] = []
    path = root / "commitlog" / f"{file_start:020d}"
    for t, nxt in zip(targets, targets[1:] + [length], strict=True):
        for c in ordered:
            if c < t or c >= nxt:
                continue
            if _is_record_start(path, file_start, c):
                if not cuts or c > cuts[-1]:
                    cuts.append(c)
                break
    return cuts


def _is_record_start(path: Path, file_start: int, pos: int) -> bool:
    head = read_at(path, pos, 8)
    if len(head) < 8:
        return False
    total, magic = _HEAD.unpack(head)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or total <= 0 or total > (1 << 30):
        return False
    try:
        rec = decode_message(read_at(path, pos, total), 0, file_start + pos)
    except RecordError:
        return False
    return rec.physical_offset_field == file_start + pos and rec.computed_size == total


def _first_unit_at_or_after(q: MappedFileQueue, lo: int, hi: int) -> int | None:
    """The smallest unit commitLogOffset in [lo, hi) of one queue (binary search over its files)."""
    inf = 1 << 62
    for f in q.files:
        n = f.length // CQ_UNIT_SIZE
        with open(f.path, "rb") as fh:
            def off(i, fh=fh, first=(f.start == 0)):
                fh.seek(i * CQ_UNIT_SIZE)
                unit = fh.read(CQ_UNIT_SIZE)
                if unit.count(0) == CQ_UNIT_SIZE and not (first and i == 0):
                    return inf  # an unwritten unit: sorts after every written one
                return int.from_bytes(unit[:8], "big", signed=True)
            a, b = 0, n
            while a < b:
                m = (a + b) // 2
                if off(m) < lo:
                    a = m + 1
                else:
                    b = m
            v = off(a) if a < n else inf
        if v == inf:
            continue  # every written unit of this file lies before lo
        return v if v < hi else None
    return None
