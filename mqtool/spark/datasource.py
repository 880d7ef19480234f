"""Spark 4 Python Data Sources for a RocketMQ store directory.

    spark.read.format("rocketmq.commitlog").load("/data/store")      # or option("path", ...)
    spark.read.format("rocketmq.consumequeue").option("topic", "TopicA").load("/data/store")  # and BatchCQ
    spark.read.format("rocketmq.timerlog").load("/data/store")
    spark.read.format("rocketmq.timerwheel").option("precisionMs", 1000).load("/data/store")
    spark.read.format("rocketmq.index").option("maxHashSlotNum", 5000000).load("/data/store")

Each name also exists with an underscore (`rocketmq_commitlog`, ...). `register(spark)` registers
all of them. `partitions()` runs on the driver and plans file / byte-range slices (a CommitLog file
is cut every `splitBytes`, default 256 MiB, at record starts taken from ConsumeQueue units, a
DLedger data file at entry starts taken from the DLedger index);
`read()` runs in the executors' Python workers and yields Arrow batches (`mqtool.spark.arrow`).
The store path must be readable by every executor at the same path (local disk on one machine, or a
shared filesystem).

Imports stay light at module level (`mqtool.spark.schemas` only): Spark runs `schema()` and
`partitions()` in short-lived Python processes on the driver for every read, so numpy and
pyarrow are imported where the data is read (`read()`, in the executors' reused Python workers).
"""

from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqtool.spark import schemas

DEFAULT_SPLIT_BYTES = 256 << 20  # as mqtool.audit.plan.DEFAULT_SPLIT_BYTES (not imported: see above)


class TaskPartition(InputPartition):
    """One planned piece of work: a plain-data task (paths and ints only), pickled to the executor."""

    @property
    def task(self):
        return getattr(self, "value", None)


def _path(options) -> str:
    p = options.get("path")
    if not p:
        raise ValueError("give the store directory: .load('/path/to/store') or .option('path', ...)")
    from pathlib import Path

    root = Path(p)
    if not root.is_dir():
        raise ValueError(f"{p}: not a directory (give the store root, which holds commitlog/)")
    return str(root.resolve())


# ----- CommitLog -----
class _CommitLogReader(DataSourceReader):
    def __init__(self, options):
        self.root = _path(options)
        self.split = int(options.get("splitBytes", DEFAULT_SPLIT_BYTES))

    def partitions(self):
        from mqtool.audit.plan import commitlog_slices

        return [TaskPartition(s) for s in commitlog_slices(self.root, self.split)] or [TaskPartition(None)]

    def read(self, partition):
        if partition.task is not None:
            from mqtool.spark import arrow

            yield from arrow.commitlog_batches(partition.task)


class CommitLogDataSource(DataSource):
    """Every valid CommitLog record, one row each (spec §2), with `file` and `physical_offset`; in a
    DLedger store (spec §12, also one converted from normal mode) the entries' bodies, with the
    entry's `dledger_index`, `dledger_term`, `dledger_pos` (null for records of a normal CommitLog)."""

    @classmethod
    def name(cls):
        return "rocketmq.commitlog"

    def schema(self):
        return schemas.COMMITLOG_SCHEMA

    def reader(self, schema):
        return _CommitLogReader(self.options)


# ----- ConsumeQueue -----
@dataclass(frozen=True)
class _CqFile:
    topic: str
    queue_id: int
    path: str
    rel: str
    start: int
    batch: bool = False  # a BatchConsumeQueue file (spec §13)


class _ConsumeQueueReader(DataSourceReader):
    def __init__(self, options):
        self.root = _path(options)
        self.topic = options.get("topic")

    def partitions(self):
        from mqtool.store.store import Store

        st = Store.open(self.root)
        out = []
        for topic, qid in st.queue_ids:
            if self.topic and topic != self.topic:
                continue
            q = st.consume_queue(topic, qid)
            out += [TaskPartition(_CqFile(topic, qid, str(f.path), str(f.path.relative_to(st.root)), f.start))
                    for f in (q.queue.files if q is not None else [])]
        for topic, qid in st.batch_queue_ids:
            if self.topic and topic != self.topic:
                continue
            q = st.batch_consume_queue(topic, qid)
            out += [TaskPartition(_CqFile(topic, qid, str(f.path), str(f.path.relative_to(st.root)), f.start, True))
                    for f in (q.queue.files if q is not None else [])]
        return out or [TaskPartition(None)]

    def read(self, partition):
        t = partition.task
        if t is not None:
            from mqtool.spark import arrow

            read = arrow.batchcq_batches if t.batch else arrow.consumequeue_batches
            yield from read(t.topic, t.queue_id, t.path, t.rel, t.start)


class ConsumeQueueDataSource(DataSource):
    """Every written ConsumeQueue unit (spec §3) and BatchConsumeQueue unit (spec §13) with topic, queue
    id, file and queue offset (a BatchCQ unit's msgBaseOffset), batch size (1 for a ConsumeQueue unit)
    and store time (BatchCQ only)."""

    @classmethod
    def name(cls):
        return "rocketmq.consumequeue"

    def schema(self):
        return schemas.CONSUMEQUEUE_SCHEMA

    def reader(self, schema):
        return _ConsumeQueueReader(self.options)


# ----- TimerLog -----
class _TimerLogReader(DataSourceReader):
    def __init__(self, options):
        self.root = _path(options)

    def partitions(self):
        from mqtool.store.store import Store

        st = Store.open(self.root)
        files = st.timerlog.queue.files if st.timerlog is not None else []
        return [TaskPartition((str(f.path), str(f.path.relative_to(st.root)), f.start)) for f in files] \
            or [TaskPartition(None)]

    def read(self, partition):
        if partition.task is not None:
            from mqtool.spark import arrow

            yield from arrow.timerlog_batches(*partition.task)


class TimerLogDataSource(DataSource):
    """Every TimerLog unit (spec §6.4) with its file and TimerLog offset."""

    @classmethod
    def name(cls):
        return "rocketmq.timerlog"

    def schema(self):
        return schemas.TIMERLOG_SCHEMA

    def reader(self, schema):
        return _TimerLogReader(self.options)


# ----- TimerWheel -----
class _TimerWheelReader(DataSourceReader):
    def __init__(self, options):
        from pathlib import Path

        self.root = _path(options)
        self.precision = int(options.get("precisionMs", 1000))
        self.parts = max(1, int(options.get("partitions", 2)))
        root = Path(self.root)
        self.wheel = next((str(root / n) for n in ("timerwheel", "timerwheel.gz") if (root / n).is_file()), None)

    def partitions(self):
        if self.wheel is None:
            return [TaskPartition(None)]
        from pathlib import Path

        from mqtool.store.timer import wheel_slot_count

        slots = wheel_slot_count(Path(self.wheel))
        step = -(-slots // self.parts) or 1
        return [TaskPartition((b, min(slots, b + step))) for b in range(0, slots, step)] or [TaskPartition(None)]

    def read(self, partition):
        if partition.task is not None:
            from pathlib import Path

            from mqtool.spark import arrow

            yield from arrow.timerwheel_batches(self.wheel, Path(self.wheel).name, *partition.task, self.precision)


class TimerWheelDataSource(DataSource):
    """Written TimerWheel slots (spec §6.3): slot index, time, first/last TimerLog position, num."""

    @classmethod
    def name(cls):
        return "rocketmq.timerwheel"

    def schema(self):
        return schemas.TIMERWHEEL_SCHEMA

    def reader(self, schema):
        return _TimerWheelReader(self.options)


# ----- IndexFile -----
@dataclass(frozen=True)
class _IndexFile:
    path: str
    rel: str


class _IndexReader(DataSourceReader):
    def __init__(self, options):
        self.root = _path(options)
        self.slots = int(options["maxHashSlotNum"]) if options.get("maxHashSlotNum") else None
        self.num = int(options["maxIndexNum"]) if options.get("maxIndexNum") else None

    def partitions(self):
        from pathlib import Path

        d = Path(self.root) / "index"
        files = sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []
        return [TaskPartition(_IndexFile(str(p), f"index/{p.name}")) for p in files] or [TaskPartition(None)]

    def read(self, partition):
        t = partition.task
        if t is not None:
            from mqtool.spark import arrow

            yield from arrow.index_batches(t.path, t.rel, self.slots, self.num)


class IndexDataSource(DataSource):
    """Every written IndexFile entry (spec §11): file, entry number, keyHash and slot, phyOffset,
    time, prevIndex. Options maxHashSlotNum / maxIndexNum (broker.conf); without them the geometry
    is read from the file size (maxIndexNum = 4 x maxHashSlotNum, as by default)."""

    @classmethod
    def name(cls):
        return "rocketmq.index"

    def schema(self):
        return schemas.INDEX_SCHEMA

    def reader(self, schema):
        return _IndexReader(self.options)


def _alias(cls: type, alias: str) -> type:
    return type(cls.__name__ + "Alias", (cls,), {"name": classmethod(lambda c: alias), "__module__": __name__})


CommitLogDataSourceAlias = _alias(CommitLogDataSource, "rocketmq_commitlog")
ConsumeQueueDataSourceAlias = _alias(ConsumeQueueDataSource, "rocketmq_consumequeue")
TimerLogDataSourceAlias = _alias(TimerLogDataSource, "rocketmq_timerlog")
TimerWheelDataSourceAlias = _alias(TimerWheelDataSource, "rocketmq_timerwheel")
IndexDataSourceAlias = _alias(IndexDataSource, "rocketmq_index")

DATA_SOURCES = (CommitLogDataSource, ConsumeQueueDataSource, TimerLogDataSource, TimerWheelDataSource,
                IndexDataSource, CommitLogDataSourceAlias, ConsumeQueueDataSourceAlias, TimerLogDataSourceAlias,
                TimerWheelDataSourceAlias, IndexDataSourceAlias)


def register(spark) -> None:
    """Register every mqtool data source with a SparkSession."""
    for cls in DATA_SOURCES:
        spark.dataSource.register(cls)
