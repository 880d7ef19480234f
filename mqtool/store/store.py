"""`Store`: a RocketMQ store directory opened read-only (spec §1).

Discovers the CommitLog, ConsumeQueues, TimerLog, TimerWheel, checkpoint and config files; each
part is opened lazily so that a view reads only what it needs. Nothing here ever writes.
`layouts` says which production layouts the files show (spec §12-§16): a DLedger store's
`commitlog` is a `DLedgerCommitLogView` (same interface), BatchCQ queues are `batch_consume_queue`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import REVIVE_TOPIC
from mqtool.store.commitlog import CommitLog
from mqtool.store.dirs import BCQ_DIR, find_dledger_dirs
from mqtool.store.errors import StoreError
from mqtool.store.findings import Finding, Findings, sort_findings
from mqtool.store.mapped_files import read_at

if TYPE_CHECKING:
    # imported where used: a view that reads the CommitLog alone (`messages`) loads neither the config JSON
    # parsers, the RocksDB readers, the timer's, the readers of the other layouts and queues, nor the Construct
    # definitions of the checkpoint pages (nor numpy, which the ConsumeQueue's format brings)
    from mqtool.store.batchcq import BatchConsumeQueue
    from mqtool.store.config_files import ConfigFiles
    from mqtool.store.consumequeue import ConsumeQueue
    from mqtool.store.dledger import DLedgerCommitLog
    from mqtool.store.queues import QueueReader
    from mqtool.store.rocksdb import QueueOffsets, RocksDBConsumeQueues
    from mqtool.store.timer import TimerLog, TimerWheel

ROCKSDB_DIRS = ("consumequeue", "rocksdbstore")  # where a RocksDB consume queue may live (spec §14)
ROCKSDB_CONFIG_DIRS = ("config/topics", "config/subscriptionGroups", "config/consumerOffsets", "config/rdb")
COMPACTION_DIR = "compaction"
COMPACTION_PARTS = ("compactionLog", "compactionCq")  # every 5.3.1 store has compaction/position-checkpoint alone


def is_rocksdb_dir(d: Path) -> bool:
    """A RocksDB database directory: CURRENT plus a MANIFEST-* or *.sst file."""
    return (d / "CURRENT").is_file() and (any(d.glob("MANIFEST-*")) or any(d.glob("*.sst")))


@dataclass(frozen=True)
class Layouts:
    """The production layouts a store's files show (spec §12-§16); empty for a plain store."""

    dledger: tuple[str, ...] = ()  # dledger-<selfId> directories
    converted: bool = False  # commitlog/ below dividedCommitlogOffset, then DLedger (§12)
    batch_consume_queue: bool = False  # batchconsumequeue/ (§13)
    rocksdb_consume_queue: tuple[str, ...] = ()  # directories holding a RocksDB consume queue (§14)
    rocksdb_config: tuple[str, ...] = ()  # config/ RocksDB directories (§14)
    compaction: bool = False  # compaction/compactionLog or compactionCq: a COMPACTION topic (§16)
    revive_topics: tuple[str, ...] = ()  # POP revive topics with a queue directory (§15)

    @classmethod
    def detect(cls, root: Path) -> Layouts:
        dl = tuple(p.name for p in find_dledger_dirs(root))
        cl = root / "commitlog"
        revive = sorted(
            {
                t.name
                for d in ("consumequeue", BCQ_DIR)
                if (root / d).is_dir()
                for t in (root / d).iterdir()
                if t.is_dir() and t.name.startswith(REVIVE_TOPIC)
            }
        )
        return cls(
            dl,
            bool(dl) and cl.is_dir() and any(cl.iterdir()),
            (root / BCQ_DIR).is_dir(),
            tuple(d for d in ROCKSDB_DIRS if is_rocksdb_dir(root / d)),
            tuple(d for d in ROCKSDB_CONFIG_DIRS if (root / d).is_dir()),
            any((root / COMPACTION_DIR / d).is_dir() for d in COMPACTION_PARTS),
            tuple(revive),
        )

    def names(self) -> list[str]:
        """The layouts found, by name ("dledger", "batchconsumequeue", "rocksdb", "compaction", "pop")."""
        found = [
            ("dledger", self.dledger),
            ("batchconsumequeue", self.batch_consume_queue),
            ("rocksdb", self.rocksdb_consume_queue or self.rocksdb_config),
            ("compaction", self.compaction),
            ("pop", self.revive_topics),
        ]
        return [name for name, hit in found if hit]

    def as_dict(self) -> dict:
        return {"found": self.names(), **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}}


@dataclass
class Store:
    """A store directory and its parts; `findings` is the accumulator that opening them adds to."""

    root: Path
    config: BrokerConfig
    findings: Findings = field(default_factory=Findings)

    @classmethod
    def open(cls, path: Path | str, config: BrokerConfig | None = None, findings: Findings | None = None) -> Store:
        """Open a store directory; StoreError when it is not one. What opening its parts finds (file
        listings, short pages, unusable config JSON) is added to `findings` (a new one by default)."""
        root = Path(path)
        if not root.exists():
            raise StoreError("no such directory", root)
        if not root.is_dir():
            raise StoreError("not a directory (give the store root, which holds commitlog/)", root)
        known = ("commitlog", "consumequeue", "timerlog", "config", "checkpoint", BCQ_DIR)
        if not any((root / k).exists() for k in known) and not find_dledger_dirs(root):
            raise StoreError("not a RocketMQ store: none of commitlog/, consumequeue/, config/ found", root)
        return cls(root.resolve(), config or BrokerConfig(), Findings() if findings is None else findings)

    @cached_property
    def layouts(self) -> Layouts:
        return Layouts.detect(self.root)

    # ----- CommitLog and queues -----
    @cached_property
    def dledger(self) -> DLedgerCommitLog | None:
        """The DLedger CommitLog (spec §12), None in normal mode."""
        if not self.layouts.dledger:
            return None
        from mqtool.store.dledger import DLedgerCommitLog

        return DLedgerCommitLog.open(self.root)

    @cached_property
    def commitlog(self) -> CommitLog:
        """The CommitLog; in DLedger mode a `DLedgerCommitLogView` reading the entries' bodies."""
        if self.dledger is not None:
            from mqtool.store.dledger import DLedgerCommitLogView

            cl = DLedgerCommitLogView.of(self.dledger)
        else:
            cl = CommitLog.open(
                self.root,
                self.config.mapped_file_size_commitlog,
                expected_size=_configured(self.config, "mappedFileSizeCommitLog"),
            )
        self.findings += cl.queue.findings  # the listing's findings stay on the queue too
        return cl

    @property
    def commitlog_file_size(self) -> int:
        """The length the broker maps every CommitLog file with, as far as the store shows: broker.conf's
        mappedFileSizeCommitLog when it sets one, else the files' usual length (`open_queue` infers it)."""
        return _configured(self.config, "mappedFileSizeCommitLog") or self.commitlog.queue.file_size

    @cached_property
    def queue_ids(self) -> list[tuple[str, int]]:
        """Every ConsumeQueue: the file queues' directories and the RocksDB consume queue's queues (§14)."""
        from mqtool.store.consumequeue import discover_queues

        return sorted({*discover_queues(self.root), *self.rocksdb_queue_offsets})

    def consume_queue(self, topic: str, queue_id: int) -> QueueReader | None:
        """A queue reader whatever backs it (`store/queues.py`): the file ConsumeQueue when its directory
        exists, else the RocksDB consume queue's; None when neither has the queue."""
        if (topic, queue_id) not in self._queues:
            d = self.root / "consumequeue" / topic / str(queue_id)
            if not d.is_dir():
                if (topic, queue_id) in self.rocksdb_queue_offsets:
                    from mqtool.store.queues import RocksDBConsumeQueue

                    return RocksDBConsumeQueue(
                        self.rocksdb_consume_queues, topic, queue_id, self.rocksdb_queue_offsets[(topic, queue_id)]
                    )
                return None
            from mqtool.store.consumequeue import ConsumeQueue

            self._queues[(topic, queue_id)] = ConsumeQueue.open(
                self.root,
                topic,
                queue_id,
                self.config.mapped_file_size_consume_queue,
                expected_size=self.consume_queue_file_size,
            )
        return self._queues[(topic, queue_id)]

    @cached_property
    def consume_queue_file_size(self) -> int | None:
        """The length every ConsumeQueue file must have: broker.conf's `mappedFileSizeConsumeQueue` when it
        sets one (`getMappedFileSizeConsumeQueue`), else the length most of the store's files have."""
        if "mappedFileSizeConsumeQueue" in self.config.raw:  # rounded up to whole units like the getter
            from mqtool.formats.consumequeue import CQ_UNIT_SIZE

            return -(-self.config.mapped_file_size_consume_queue // CQ_UNIT_SIZE) * CQ_UNIT_SIZE
        from mqtool.store.consumequeue import common_file_size, discover_queues

        return common_file_size(self.root, discover_queues(self.root))

    def consume_queues(self, topic: str | None = None) -> list[QueueReader]:
        return [q for t, i in self.queue_ids if topic in (None, t) if (q := self.consume_queue(t, i))]

    @cached_property
    def _queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        return {}

    @cached_property
    def batch_queue_ids(self) -> list[tuple[str, int]]:
        from mqtool.store.batchcq import discover_batch_queues

        return discover_batch_queues(self.root)

    def batch_consume_queue(self, topic: str, queue_id: int) -> BatchConsumeQueue | None:
        """A BatchConsumeQueue (spec §13), or None when it has no directory."""
        if (topic, queue_id) not in self.batch_queue_ids:
            return None
        from mqtool.store.batchcq import BatchConsumeQueue

        return BatchConsumeQueue.open(self.root, topic, queue_id)

    # ----- RocksDB consume queues (spec §14) -----
    @cached_property
    def rocksdb_queue_offsets(self) -> dict[tuple[str, int], QueueOffsets]:
        """The offset table of a RocksDB consume queue (`consumequeue/` is a database); empty otherwise.
        A database that will not open is one finding."""
        return {} if self.rocksdb_consume_queues is None else self.rocksdb_consume_queues.offset_table(self.findings)

    @cached_property
    def rocksdb_consume_queues(self) -> RocksDBConsumeQueues | None:
        """The RocksDB consume queue (None without one) opened once, read-only, shared by the readers and the
        audit; closed when the last of them goes, or at exit."""
        if "consumequeue" not in self.layouts.rocksdb_consume_queue:
            return None
        from mqtool.store.rocksdb import CHECK as ROCKSDB_CHECK
        from mqtool.store.rocksdb import RocksDBConsumeQueues, RocksDBUnavailable

        try:
            db = RocksDBConsumeQueues.open(self.root)
        except RocksDBUnavailable as e:
            self.findings.add("consumequeue", None, ROCKSDB_CHECK, "error", str(e))
            return None
        return db

    # ----- timer -----
    @cached_property
    def timerlog(self) -> TimerLog | None:
        if not (self.root / "timerlog").is_dir():
            return None
        from mqtool.store.timer import TimerLog

        return TimerLog.open(
            self.root,
            self.config.mapped_file_size_timer_log,
            expected_size=_configured(self.config, "mappedFileSizeTimerLog"),
        )

    @cached_property
    def timer_wheel(self) -> TimerWheel | None:
        from mqtool.store.timer import TimerWheel

        return TimerWheel.open(self.root, self.config.timer_precision_ms)

    @cached_property
    def timercheck(self):
        """config/timercheck as a Construct container, or None when absent (read like `TimerCheckpoint`:
        a short file's missing bytes as 0, with a finding)."""
        from mqtool.formats.timercheck import TIMERCHECK_SIZE, timercheck

        return _read_page(self.root, "config/timercheck", timercheck, TIMERCHECK_SIZE, "TimerCheckpoint", self.findings)

    @cached_property
    def checkpoint(self):
        """checkpoint as a Construct container, or None when absent (read like `StoreCheckpoint`)."""
        from mqtool.formats.checkpoint import CHECKPOINT_SIZE, checkpoint

        return _read_page(self.root, "checkpoint", checkpoint, CHECKPOINT_SIZE, "StoreCheckpoint", self.findings)

    # ----- config JSON -----
    @cached_property
    def config_files(self) -> ConfigFiles:
        """config/'s JSON files (topics, offsets, groups, metrics), each with the copy it came from."""
        from mqtool.store.config_files import ConfigFiles

        return ConfigFiles(self.root, self.layouts.rocksdb_config, self.findings)

    # ----- store-wide facts -----
    def file_findings(self) -> list[Finding]:
        """What the store's files show without walking their records: the listings of the CommitLog, every
        ConsumeQueue and BatchConsumeQueue and the TimerLog, the checkpoint and timercheck pages, the config
        JSON files; and what the CommitLog walks done so far found. For the commands that run on a store
        (simulate, trace) and must say when it is damaged without the overview's full CRC scan."""
        cf = self.config_files
        self.checkpoint, self.timercheck, cf.delay_offsets, cf.topics  # noqa: B018 - read for their findings
        cf.consumer_offsets, cf.subscription_groups  # noqa: B018
        found = [*self.findings, *self.commitlog.findings]
        for q in self.consume_queues():
            found += q.findings
        for t, q in self.batch_queue_ids:
            found += self.batch_consume_queue(t, q).queue.findings
        if self.timerlog is not None:
            found += self.timerlog.queue.findings
        return sort_findings(list(dict.fromkeys(found)))

    def last_activity_ms(self) -> int:
        """The store's own "now": its last sign of life, never the wall clock.

        The newest of the last CommitLog file's store timestamps, the checkpoint's flush times,
        timercheck's read time and dataVersion time, and the offset files' dataVersion times.
        simulate starts here by default; trace and inspect count waiting times from here.
        """
        times = [last_file_store_timestamp(self.commitlog)]
        if self.checkpoint is not None:
            times += [self.checkpoint.physic_msg_timestamp, self.checkpoint.logics_msg_timestamp]
        if self.timercheck is not None:
            times += [self.timercheck.last_read_time_ms, self.timercheck.timestamp]
        for offsets in (self.config_files.delay_offsets, self.config_files.consumer_offsets):
            if offsets is not None and offsets.data_version is not None:
                times.append(offsets.data_version.timestamp)
        return max(times)


def _configured(config: BrokerConfig, java_name: str) -> int | None:
    """A mapped file size broker.conf sets (None when it leaves the default: the files then tell)."""
    if java_name not in config.raw:
        return None
    return next(getattr(config, f.name) for f in fields(BrokerConfig) if f.metadata.get("java") == java_name)


def _read_page(root: Path, rel: str, fmt, size: int, java: str, findings: Findings):
    """The page as the broker reads it: it maps `size` bytes of the file, growing a short one with zeros,
    and reads its longs from there (`fmt`'s named fields: 40 bytes of StoreCheckpoint, 56 of TimerCheckpoint).
    A file shorter than the bytes it reads is an error finding."""
    from construct import ConstructError

    read = sum(sc.sizeof() for sc in fmt.subcons if sc.name)
    p = root / rel
    if not p.is_file():
        return None
    data = read_at(p, 0, size)
    if len(data) < read:
        what = "empty" if not data else f"{len(data)} bytes, shorter than the {read} {java} reads"
        findings.add(
            rel,
            len(data),
            "store.files",
            "error",
            f"file is {what}: the broker maps a {size}-byte page and reads the missing bytes as 0",
        )
    try:
        return fmt.parse(data.ljust(size, b"\x00"))
    except ConstructError as e:  # pragma: no cover - fixed-size longs always parse
        findings.add(rel, 0, "store.files", "error", str(e))
        return None


def last_file_store_timestamp(commitlog: CommitLog) -> int:
    """Newest STORETIMESTAMP in the last CommitLog file (a column scan that records no findings)."""
    from mqtool.store import fastscan
    from mqtool.store.mapped_files import map_file

    files = commitlog.files
    if not files:
        return 0
    latest = 0
    last = files[-1]
    dledger = getattr(commitlog, "is_data_file", None)  # DLedger: bodies after 48-byte entry headers
    with map_file(last.path) as buf:
        chunks = (
            commitlog.slice_chunks(buf, str(last.path), 0, len(buf), False)
            if dledger is not None and dledger(str(last.path))
            else fastscan.iter_commitlog_chunks(buf, last.start, 0, False, fastscan.DEFAULT_CHUNK)
        )
        for chunk in chunks:
            if len(chunk):
                latest = max(latest, int(chunk.cols[fastscan.C_STORE_TS].max()))
    return latest
