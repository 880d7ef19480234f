"""Store files as Arrow record batches (pyarrow + numpy only; no pyspark).

Each generator reads one partition (a CommitLog slice, a ConsumeQueue file, a TimerLog file, a
range of wheel slots) and yields `pyarrow.RecordBatch`es whose columns match the DDL schemas of
`mqtool.spark.schemas` exactly (Spark checks the Arrow types). Every row carries its file and
absolute offset. Decoding is the store's fast path (`mqtool.store.fastscan`): the CommitLog
kernel and `chunk_to_arrow` for records, numpy views (`cq_units`, `timerlog_units`,
`timerwheel_slots`) for the fixed-size units.
"""

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqtool.audit.plan import CommitLogSlice
from mqtool.formats.consumequeue import CQ_DTYPE, CQ_UNIT_SIZE
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.timerlog import TIMERLOG_DTYPE, TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import SLOT_SIZE
from mqtool.spark.schemas import (
    COMMITLOG_SCHEMA,
    CONSUMEQUEUE_SCHEMA,
    INDEX_SCHEMA,
    TIMERLOG_SCHEMA,
    TIMERWHEEL_SCHEMA,
)
from mqtool.store import fastscan
from mqtool.store.mapped_files import map_file
from mqtool.store.timer import read_wheel_slots

__all__ = ["COMMITLOG_SCHEMA", "CONSUMEQUEUE_SCHEMA", "INDEX_SCHEMA", "TIMERLOG_SCHEMA", "TIMERWHEEL_SCHEMA",
           "batchcq_batches", "commitlog_batches", "consumequeue_batches", "index_batches", "timerlog_batches",
           "timerwheel_batches"]

BATCH_ROWS = 8192

_I32 = pa.int32()
_I64 = pa.int64()
COMMITLOG_ARROW = pa.schema([
    ("file", pa.string()), ("physical_offset", _I64), ("total_size", _I32), ("magic_code", _I32),
    ("body_crc", _I32), ("crc_ok", pa.bool_()), ("queue_id", _I32), ("flag", _I32), ("queue_offset", _I64),
    ("physical_offset_field", _I64), ("sys_flag", _I32), ("born_timestamp", _I64), ("born_host", pa.string()),
    ("store_timestamp", _I64), ("store_host", pa.string()), ("reconsume_times", _I32),
    ("prepared_transaction_offset", _I64), ("topic", pa.string()), ("tags", pa.string()), ("keys", pa.string()),
    ("uniq_key", pa.string()), ("properties", pa.map_(pa.string(), pa.string())), ("body", pa.binary()),
    ("dledger_index", _I64), ("dledger_term", _I64), ("dledger_pos", _I64),
])
CONSUMEQUEUE_ARROW = pa.schema([("topic", pa.string()), ("queue_id", _I32), ("file", pa.string()),
                                ("offset", _I64), ("queue_offset", _I64), ("commitlog_offset", _I64),
                                ("size", _I32), ("tags_code", _I64), ("batch_size", _I32), ("store_time", _I64)])
TIMERLOG_ARROW = pa.schema([("file", pa.string()), ("offset", _I64), ("size", _I32), ("prev_pos", _I64),
                            ("magic", _I32), ("curr_write_time_ms", _I64), ("delayed_time_ms", _I64),
                            ("offset_py", _I64), ("size_py", _I32), ("real_topic_hash", _I32)])
TIMERWHEEL_ARROW = pa.schema([("file", pa.string()), ("slot", _I32), ("offset", _I64), ("time_ms", _I64),
                              ("first_pos", _I64), ("last_pos", _I64), ("num", _I32), ("magic", _I32)])
INDEX_ARROW = pa.schema([("file", pa.string()), ("entry", _I32), ("offset", _I64), ("key_hash", _I32),
                         ("slot", _I32), ("phy_offset", _I64), ("time_diff", _I32), ("timestamp", _I64),
                         ("prev_index", _I32)])

_PLAIN = {"file", "born_host", "store_host", "topic"}  # dictionary-encoded by chunk_to_arrow
_FROM_PROPERTIES = {"tags": PROPERTY_TAGS, "keys": PROPERTY_KEYS, "uniq_key": PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}


def commitlog_batches(task: CommitLogSlice, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The valid records of a CommitLog slice: the fast path's walk (recovery stop rules, spec §2.7)
    and its Arrow columns (`fastscan.chunk_to_arrow`), in `COMMITLOG_ARROW`'s layout.

    A DLedger data file (spec §12) is walked entry by entry (`DLedgerCommitLogView.slice_chunks`:
    the slice holds the records whose body starts in it), each row carrying its entry's index, term
    and pos; in a converted store, records of the old `commitlog/` at or past dividedCommitlogOffset
    are not part of the CommitLog (`DLedgerCommitLog.getData` reads DLedger there).
    """
    from mqtool.audit.records import open_store
    from mqtool.store.dledger import DLedgerCommitLogView

    cl = open_store(task.root).commitlog
    dledger = isinstance(cl, DLedgerCommitLogView)
    with map_file(task.path) as buf:
        if dledger and cl.is_data_file(task.path):
            chunks = cl.slice_chunks(buf, task.path, task.begin, task.end, chunk_records=batch_rows)
            view = buf
        else:
            end = min(task.end, len(buf))
            view = buf if end == len(buf) else memoryview(buf)[:end]  # the kernel stops at the view's end
            chunks = fastscan.iter_commitlog_chunks(view, task.file_start, task.begin, verify_crc=True,
                                                    chunk_records=batch_rows)
        divided = cl.dl.divided_offset if dledger else -1
        try:
            for chunk in chunks:
                if len(chunk):
                    b = _commitlog_batch(fastscan.chunk_to_arrow(buf, chunk, task.rel), chunk.dledger)
                    if divided >= 0 and chunk.dledger is None:
                        b = b.filter(pc.less(b.column("physical_offset"), divided))
                    if b.num_rows:
                        yield b
        finally:
            chunks.close()
            if view is not buf:
                view.release()


def _commitlog_batch(b: pa.RecordBatch, dledger: np.ndarray | None = None) -> pa.RecordBatch:
    props = b.column("properties")
    n = b.num_rows
    entry = {"dledger_index": 0, "dledger_term": 1, "dledger_pos": 2}
    cols = []
    for f in COMMITLOG_ARROW:
        if f.name in _FROM_PROPERTIES:
            cols.append(pc.map_lookup(props, _FROM_PROPERTIES[f.name], "first"))
        elif f.name in _PLAIN:
            cols.append(b.column(f.name).cast(pa.string()))
        elif f.name in entry:
            cols.append(pa.array(dledger[entry[f.name]]) if dledger is not None else pa.nulls(n, _I64))
        else:
            cols.append(b.column(f.name))
    return pa.RecordBatch.from_arrays(cols, schema=COMMITLOG_ARROW)


def consumequeue_batches(topic: str, queue_id: int, path: str, rel: str, file_start: int) -> Iterator[pa.RecordBatch]:
    """The written units of one ConsumeQueue file (up to the first unwritten unit: `fastscan.cq_units`)."""
    with map_file(path) as buf:
        view, _ended = fastscan.cq_units(buf)
        u = view.astype(CQ_DTYPE.newbyteorder("="))
        del view
    stop = len(u)
    idx = np.arange(stop, dtype=np.int64)
    yield pa.RecordBatch.from_arrays([
        pa.array([topic] * stop, pa.string()), pa.array(np.full(stop, queue_id, np.int32)),
        pa.array([rel] * stop, pa.string()), pa.array(file_start + idx * CQ_UNIT_SIZE),
        pa.array(file_start // CQ_UNIT_SIZE + idx), pa.array(u["commitlog_offset"].astype(np.int64)),
        pa.array(u["size"].astype(np.int32)), pa.array(u["tags_code"].astype(np.int64)),
        pa.array(np.ones(stop, np.int32)), pa.nulls(stop, _I64),
    ], schema=CONSUMEQUEUE_ARROW)


def batchcq_batches(topic: str, queue_id: int, path: str, rel: str, file_start: int) -> Iterator[pa.RecordBatch]:
    """The units of one BatchConsumeQueue file (spec §13) up to the first one `BatchConsumeQueue.recover`
    would not accept (`formats.batchcq.is_valid_unit`); `queue_offset` is the unit's msgBaseOffset."""
    from mqtool.formats.batchcq import BCQ_UNIT_SIZE
    from mqtool.store.batchcq import BCQ_DTYPE

    with map_file(path) as buf:
        n = len(buf) // BCQ_UNIT_SIZE
        units = np.frombuffer(buf, BCQ_DTYPE, count=n) if n else np.zeros(0, BCQ_DTYPE)
        u = units.astype(BCQ_DTYPE.newbyteorder("="))
        del units
    valid = (u["commitlog_offset"] >= 0) & (u["size"] > 0) & (u["msg_base_offset"] >= 0) & (u["batch_size"] > 0)
    stop = n if valid.all() else int(np.argmin(valid))
    u = u[:stop]
    yield pa.RecordBatch.from_arrays([
        pa.array([topic] * stop, pa.string()), pa.array(np.full(stop, queue_id, np.int32)),
        pa.array([rel] * stop, pa.string()), pa.array(file_start + np.arange(stop, dtype=np.int64) * BCQ_UNIT_SIZE),
        pa.array(u["msg_base_offset"].astype(np.int64)), pa.array(u["commitlog_offset"].astype(np.int64)),
        pa.array(u["size"].astype(np.int32)), pa.array(u["tags_code"].astype(np.int64)),
        pa.array(u["batch_size"].astype(np.int32)), pa.array(u["store_time"].astype(np.int64)),
    ], schema=CONSUMEQUEUE_ARROW)


def timerlog_batches(path: str, rel: str, file_start: int) -> Iterator[pa.RecordBatch]:
    """The units of one TimerLog file, up to its filler or unwritten bytes (`fastscan.timerlog_units`)."""
    with map_file(path) as buf:
        view = fastscan.timerlog_units(buf)
        u = view.astype(TIMERLOG_DTYPE.newbyteorder("="))
        del view
    stop = len(u)
    write = u["curr_write_time_ms"].astype(np.int64)
    yield pa.RecordBatch.from_arrays([
        pa.array([rel] * stop, pa.string()),
        pa.array(file_start + np.arange(stop, dtype=np.int64) * TIMERLOG_UNIT_SIZE),
        pa.array(u["size"].astype(np.int32)), pa.array(u["prev_pos"].astype(np.int64)),
        pa.array(u["magic"].astype(np.int32)), pa.array(write),
        pa.array(write + u["delayed_time_delta"].astype(np.int64)),
        pa.array(u["offset_py"].astype(np.int64)), pa.array(u["size_py"].astype(np.int32)),
        pa.array(u["real_topic_hash"].astype(np.int32)),
    ], schema=TIMERLOG_ARROW)


def timerwheel_batches(path: str, rel: str, slot_begin: int, slot_end: int,
                       precision_ms: int) -> Iterator[pa.RecordBatch]:
    """Written slots (stored time ≠ 0) of a range of the wheel."""
    s = read_wheel_slots(path, slot_begin, slot_end)
    idx = np.nonzero(s["time_units"] != 0)[0]
    s = s[idx]
    slot = (slot_begin + idx).astype(np.int64)
    yield pa.RecordBatch.from_arrays([
        pa.array([rel] * len(idx), pa.string()), pa.array(slot.astype(np.int32)), pa.array(slot * SLOT_SIZE),
        pa.array(s["time_units"].astype(np.int64) * precision_ms), pa.array(s["first_pos"].astype(np.int64)),
        pa.array(s["last_pos"].astype(np.int64)), pa.array(s["num"].astype(np.int32)),
        pa.array(s["magic"].astype(np.int32)),
    ], schema=TIMERWHEEL_ARROW)




def index_batches(path: str, rel: str, hash_slot_num: int | None, index_num: int | None) -> Iterator[pa.RecordBatch]:
    """The written entries (1 .. indexCount-1) of one IndexFile (`store.indexfile`, spec §11); the
    geometry is broker.conf's when given, else read from the file size."""
    from pathlib import Path

    from mqtool.formats.broker_conf import BrokerConfig
    from mqtool.store.findings import Findings
    from mqtool.store.indexfile import open_index_file

    raw = {k: str(v) for k, v in (("maxHashSlotNum", hash_slot_num), ("maxIndexNum", index_num)) if v}
    with open_index_file(Path(path), Findings(), BrokerConfig(raw=raw), rel) as f:
        e = f.written()
        n = len(e)
        numbers = np.arange(1, n + 1, dtype=np.int64)
        kh = e["key_hash"].astype(np.int32)
        diff = e["time_diff"].astype(np.int32)
        batch = pa.RecordBatch.from_arrays([
            pa.array([rel] * n, pa.string()), pa.array(numbers.astype(np.int32)),
            pa.array(np.array([f.entry_offset(0)], np.int64) + numbers * 20),
            pa.array(kh), pa.array((kh.astype(np.int64) % f.hash_slot_num).astype(np.int32)),
            pa.array(e["phy_offset"].astype(np.int64)), pa.array(diff),
            pa.array(f.begin_timestamp + diff.astype(np.int64) * 1000), pa.array(e["prev_index"].astype(np.int32)),
        ], schema=INDEX_ARROW)
        del e
    yield batch
