"""Store files as Arrow record batches (pyarrow + numpy only; no pyspark).

Each generator reads one partition (a CommitLog slice, a ConsumeQueue file, a TimerLog file, a
range of wheel slots) and yields `pyarrow.RecordBatch`es whose columns match the DDL schemas below
exactly (Spark checks the Arrow types). Every row carries its file and absolute offset.
CommitLog records are decoded by `mqtool.formats.message.decode_message` (the fast decoder).
"""

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from mqtool.audit.plan import CommitLogSlice
from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.message import RecordError, decode_message, peek_magic
from mqtool.formats.timerlog import TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import SLOT_SIZE
from mqtool.store.mapped_files import map_file

BATCH_ROWS = 8192

COMMITLOG_SCHEMA = (
    "file STRING, physical_offset BIGINT, total_size INT, magic_code INT, body_crc INT, crc_ok BOOLEAN, "
    "queue_id INT, flag INT, queue_offset BIGINT, physical_offset_field BIGINT, sys_flag INT, "
    "born_timestamp BIGINT, born_host STRING, store_timestamp BIGINT, store_host STRING, reconsume_times INT, "
    "prepared_transaction_offset BIGINT, topic STRING, tags STRING, keys STRING, uniq_key STRING, "
    "properties STRING, body BINARY"
)
CONSUMEQUEUE_SCHEMA = ("topic STRING, queue_id INT, file STRING, offset BIGINT, queue_offset BIGINT, "
                       "commitlog_offset BIGINT, size INT, tags_code BIGINT")
TIMERLOG_SCHEMA = ("file STRING, offset BIGINT, size INT, prev_pos BIGINT, magic INT, curr_write_time_ms BIGINT, "
                   "delayed_time_ms BIGINT, offset_py BIGINT, size_py INT, real_topic_hash INT")
TIMERWHEEL_SCHEMA = ("file STRING, slot INT, offset BIGINT, time_ms BIGINT, first_pos BIGINT, last_pos BIGINT, "
                     "num INT, magic INT")

_I32 = pa.int32()
_I64 = pa.int64()
COMMITLOG_ARROW = pa.schema([
    ("file", pa.string()), ("physical_offset", _I64), ("total_size", _I32), ("magic_code", _I32),
    ("body_crc", _I32), ("crc_ok", pa.bool_()), ("queue_id", _I32), ("flag", _I32), ("queue_offset", _I64),
    ("physical_offset_field", _I64), ("sys_flag", _I32), ("born_timestamp", _I64), ("born_host", pa.string()),
    ("store_timestamp", _I64), ("store_host", pa.string()), ("reconsume_times", _I32),
    ("prepared_transaction_offset", _I64), ("topic", pa.string()), ("tags", pa.string()), ("keys", pa.string()),
    ("uniq_key", pa.string()), ("properties", pa.string()), ("body", pa.binary()),
])
CONSUMEQUEUE_ARROW = pa.schema([("topic", pa.string()), ("queue_id", _I32), ("file", pa.string()),
                                ("offset", _I64), ("queue_offset", _I64), ("commitlog_offset", _I64),
                                ("size", _I32), ("tags_code", _I64)])
TIMERLOG_ARROW = pa.schema([("file", pa.string()), ("offset", _I64), ("size", _I32), ("prev_pos", _I64),
                            ("magic", _I32), ("curr_write_time_ms", _I64), ("delayed_time_ms", _I64),
                            ("offset_py", _I64), ("size_py", _I32), ("real_topic_hash", _I32)])
TIMERWHEEL_ARROW = pa.schema([("file", pa.string()), ("slot", _I32), ("offset", _I64), ("time_ms", _I64),
                              ("first_pos", _I64), ("last_pos", _I64), ("num", _I32), ("magic", _I32)])

_FIELDS = [f.name for f in COMMITLOG_ARROW]


def commitlog_batches(task: CommitLogSlice, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The valid records of a CommitLog slice, walked with the recovery's stop rules (spec §2.7)."""
    cols: dict[str, list] = {k: [] for k in _FIELDS}
    with map_file(task.path) as buf:
        pos, end = task.begin, min(task.end, len(buf))
        while pos < end:
            head = peek_magic(buf, pos)
            if head is None or head[1] == BLANK_MAGIC_CODE or head == (0, 0):
                break
            try:
                r = decode_message(buf, pos, task.file_start)
            except RecordError:
                break
            if r.total_size <= 0 or r.total_size != r.computed_size:
                break
            p = r.properties
            for k, v in (("file", task.rel), ("physical_offset", r.physical_offset), ("total_size", r.total_size),
                         ("magic_code", r.magic_code), ("body_crc", r.body_crc), ("crc_ok", r.crc_ok),
                         ("queue_id", r.queue_id), ("flag", r.flag), ("queue_offset", r.queue_offset),
                         ("physical_offset_field", r.physical_offset_field), ("sys_flag", r.sys_flag),
                         ("born_timestamp", r.born_timestamp), ("born_host", r.born_host),
                         ("store_timestamp", r.store_timestamp), ("store_host", r.store_host),
                         ("reconsume_times", r.reconsume_times),
                         ("prepared_transaction_offset", r.prepared_transaction_offset), ("topic", r.topic),
                         ("tags", p.get("TAGS")), ("keys", p.get("KEYS")), ("uniq_key", p.get("UNIQ_KEY")),
                         ("properties", r.properties_raw), ("body", r.body)):
                cols[k].append(v)
            pos += r.total_size
            if len(cols["file"]) >= batch_rows:
                yield pa.RecordBatch.from_pydict(cols, schema=COMMITLOG_ARROW)
                cols = {k: [] for k in _FIELDS}
    if cols["file"]:
        yield pa.RecordBatch.from_pydict(cols, schema=COMMITLOG_ARROW)


_CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])


def consumequeue_batches(topic: str, queue_id: int, path: str, rel: str, file_start: int) -> Iterator[pa.RecordBatch]:
    """The written units of one ConsumeQueue file (up to the first unwritten unit), vectorised."""
    with map_file(path) as buf:
        n = len(buf) // CQ_UNIT_SIZE
        u = np.frombuffer(buf, dtype=_CQ_DTYPE, count=n).copy() if n else np.zeros(0, _CQ_DTYPE)
    empty = (u["offset"] == 0) & (u["size"] == 0) & (u["tags"] == 0)
    stop = int(np.argmax(empty)) if empty.any() else n  # pre-allocated zeros end the queue
    u = u[:stop]
    idx = np.arange(stop, dtype=np.int64)
    yield pa.RecordBatch.from_arrays([
        pa.array([topic] * stop, pa.string()), pa.array(np.full(stop, queue_id, np.int32)),
        pa.array([rel] * stop, pa.string()), pa.array(file_start + idx * CQ_UNIT_SIZE),
        pa.array(file_start // CQ_UNIT_SIZE + idx), pa.array(u["offset"].astype(np.int64)),
        pa.array(u["size"].astype(np.int32)), pa.array(u["tags"].astype(np.int64)),
    ], schema=CONSUMEQUEUE_ARROW)


_TL_DTYPE = np.dtype([("size", ">i4"), ("prev", ">i8"), ("magic", ">i4"), ("write", ">i8"), ("delta", ">i4"),
                      ("offset_py", ">i8"), ("size_py", ">i4"), ("hash", ">i4"), ("reserved", ">i8")])
assert _TL_DTYPE.itemsize == TIMERLOG_UNIT_SIZE


def timerlog_batches(path: str, rel: str, file_start: int) -> Iterator[pa.RecordBatch]:
    """The units of one TimerLog file, up to its filler or unwritten bytes."""
    with map_file(path) as buf:
        n = len(buf) // TIMERLOG_UNIT_SIZE
        u = np.frombuffer(buf, dtype=_TL_DTYPE, count=n).copy() if n else np.zeros(0, _TL_DTYPE)
    bad = u["size"] != TIMERLOG_UNIT_SIZE
    stop = int(np.argmax(bad)) if bad.any() else n
    u = u[:stop]
    write = u["write"].astype(np.int64)
    yield pa.RecordBatch.from_arrays([
        pa.array([rel] * stop, pa.string()),
        pa.array(file_start + np.arange(stop, dtype=np.int64) * TIMERLOG_UNIT_SIZE),
        pa.array(u["size"].astype(np.int32)), pa.array(u["prev"].astype(np.int64)),
        pa.array(u["magic"].astype(np.int32)), pa.array(write), pa.array(write + u["delta"].astype(np.int64)),
        pa.array(u["offset_py"].astype(np.int64)), pa.array(u["size_py"].astype(np.int32)),
        pa.array(u["hash"].astype(np.int32)),
    ], schema=TIMERLOG_ARROW)


def timerwheel_batches(path: str, rel: str, slot_begin: int, slot_end: int,
                       precision_ms: int) -> Iterator[pa.RecordBatch]:
    """Written slots (stored time ≠ 0) of a range of the wheel."""
    from mqtool.audit.timer import _load_slots

    s = _load_slots(path, slot_begin, slot_end)
    idx = np.nonzero(s["time"] != 0)[0]
    s = s[idx]
    slot = (slot_begin + idx).astype(np.int64)
    yield pa.RecordBatch.from_arrays([
        pa.array([rel] * len(idx), pa.string()), pa.array(slot.astype(np.int32)), pa.array(slot * SLOT_SIZE),
        pa.array(s["time"].astype(np.int64) * precision_ms), pa.array(s["first"].astype(np.int64)),
        pa.array(s["last"].astype(np.int64)), pa.array(s["num"].astype(np.int32)),
        pa.array(s["magic"].astype(np.int32)),
    ], schema=TIMERWHEEL_ARROW)


