"""StoreWriter: appends to a real-layout RocketMQ store, every byte built by the `mqtool.formats` structs.

Mirrors the write side of the store, RocketMQ 5.3.1 (spec section in brackets):
`CommitLog.DefaultAppendMessageCallback.doAppend` (record placement, 8-byte BLANK filler when
`size + 8 > remaining`, QUEUEOFFSET 0 for prepared/rollback records) [§2.1, §2.7];
`DefaultMessageStore.CommitLogDispatcherBuildConsumeQueue` + `ConsumeQueue.putMessagePositionInfo`
(+ `fillPreBlank`) and `CommitLog.checkMessageAndReturnSize` (tagsCode) [§3, §4.3];
`TimerLog.append` (16-byte filler when `52 + 16 > remaining`) and `TimerWheel.putSlot`/`getSlot` [§6.3, §6.4];
`StoreCheckpoint` [§8], `TimerCheckpoint` [§6.9], `MixAll.string2File` (`.bak`) [§4.7, §5];
`CommitLogDispatcherBuildIndex` + `IndexService.buildIndex` (`rules.index.IndexService`) [§11] when
broker.conf sets `maxHashSlotNum` / `maxIndexNum` (the default geometry makes 420 MB files).

The writer is low level: it writes what it is given. The broker's put-time rewrites live in
`mqtool.builder.broker`. Output is deterministic: same calls, same bytes.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.checkpoint import checkpoint
from mqtool.formats.commitlog import (
    BLANK_MAGIC_CODE,
    BLANK_SIZE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    body_crc,
    commitlog_record,
    computed_size,
)
from mqtool.formats.consumequeue import CQ_UNIT_SIZE, consumequeue_unit
from mqtool.formats.indexfile import DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM, IndexFileWriter, index_file_name
from mqtool.formats.message import MessageRecord, record_to_container
from mqtool.formats.names import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from mqtool.formats.offsets_json import ConsumerOffsets, DelayOffsets, dump_consumer_offsets, dump_delay_offsets
from mqtool.formats.properties import build_properties, parse_properties
from mqtool.formats.sysflag import (
    BORNHOST_V6,
    STOREHOST_V6,
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
)
from mqtool.formats.text import utf8
from mqtool.formats.timercheck import timercheck
from mqtool.formats.timerlog import (
    TIMERLOG_BLANK_SIZE,
    TIMERLOG_UNIT_SIZE,
    timerlog_blank,
    timerlog_unit,
)
from mqtool.formats.timerwheel import SLOT_SIZE, SLOTS_TOTAL, slot_index, timerwheel_slot, wheel_length
from mqtool.rules import recovery as rules
from mqtool.rules.dispatch import tags_string_2_tags_code
from mqtool.rules.index import DispatchRequest, IndexService
from mqtool.rules.schedule import schedule_tags_code
from mqtool.store import fastscan, recovery
from mqtool.store.commitlog import CommitLog
from mqtool.store.consumequeue import ConsumeQueue, discover_queues
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import open_queue
from mqtool.store.store import Store
from mqtool.store.timer import EMPTY_SLOT, Slot  # the reader's slot: the wheel reads back as it was written

DEFAULT_BORN_HOST = "127.0.0.1:51234"
DEFAULT_STORE_HOST = "127.0.0.1:10911"
CQ_PRE_BLANK_SIZE = 0x7FFFFFFF  # ConsumeQueue.fillPreBlank: (0, Integer.MAX_VALUE, 0) units

Properties = str | Sequence[tuple[str, str]]


def name20(offset: int) -> str:
    """A mapped file's name: its first global offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


def cq_file_size(configured: int) -> int:
    """`MessageStoreConfig.getMappedFileSizeConsumeQueue`: rounded up to whole 20-byte units."""
    return -(-configured // CQ_UNIT_SIZE) * CQ_UNIT_SIZE


def is_v5(broker_version: str) -> bool:
    return not broker_version.startswith("4")


def java_length(s: str) -> int:
    """`String.length()`: UTF-16 code units (what the broker compares with 127 for V2)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def to_properties_string(properties: Properties) -> str:
    """A raw properties string as is; pairs joined in the order given."""
    return properties if isinstance(properties, str) else build_properties(properties)


def tags_code_of(props: dict[str, str]) -> int:
    """`MessageExtBrokerInner.tagsString2tagsCode`: `String.hashCode()` of TAGS (whole string if multi-tag)."""
    return tags_string_2_tags_code(props.get(PROPERTY_TAGS))


class MappedFiles:
    """One mapped-file queue on disk: files of `file_size` bytes named by start offset, pre-allocated with zeros."""

    def __init__(self, directory: Path, file_size: int):
        if file_size <= 0:
            raise ValueError(f"mapped file size must be positive, got {file_size}")
        self.directory = directory
        self.file_size = file_size
        self._handles: dict[int, BinaryIO] = {}

    def start_of(self, offset: int) -> int:
        return offset - offset % self.file_size

    def remaining(self, offset: int) -> int:
        """Bytes left in the file that holds `offset`."""
        return self.file_size - offset % self.file_size

    def starts(self) -> list[int]:
        """Start offsets of the files on disk, ascending."""
        if not self.directory.is_dir():
            return []
        return sorted(int(p.name) for p in self.directory.iterdir() if p.is_file() and p.name.isdigit())

    def _handle(self, start: int) -> BinaryIO:
        h = self._handles.get(start)
        if h is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / name20(start)
            if path.exists():
                h = path.open("r+b")
            else:
                h = path.open("w+b")
                h.truncate(self.file_size)  # pre-allocated: unwritten space reads as zeros
            self._handles[start] = h
        return h

    def ensure(self, offset: int) -> None:
        """Create (zero-filled) the file holding `offset`, as `getLastMappedFile` does."""
        self._handle(self.start_of(offset))

    def write(self, offset: int, data: bytes) -> None:
        start = self.start_of(offset)
        if offset - start + len(data) > self.file_size:
            raise ValueError(f"{len(data)} bytes at {offset} cross the end of file {name20(start)}")
        h = self._handle(start)
        h.seek(offset - start)
        h.write(data)

    def read(self, offset: int, size: int) -> bytes:
        h = self._handle(self.start_of(offset))
        h.seek(offset % self.file_size)
        return h.read(size)

    def close(self) -> None:
        for h in self._handles.values():
            h.close()
        self._handles.clear()


def message_magic(topic: str, broker_version: str) -> int:
    """V2 on 5.x when the topic exceeds 127 chars (`autoMessageVersionOnTopicLen`); 4.x writes V1 only."""
    if java_length(topic) > 127:
        if not is_v5(broker_version):
            raise ValueError(f"a {broker_version} broker cannot store a {java_length(topic)}-char topic")
        return MESSAGE_MAGIC_CODE_V2
    return MESSAGE_MAGIC_CODE


class WheelFile:
    """The timerwheel file (`TimerWheel`), created with zeros when a slot is first read or written."""

    def __init__(self, path: Path, precision_ms: int):
        self.path = path
        self.precision_ms = precision_ms
        self._file: BinaryIO | None = None

    def _open(self) -> BinaryIO:
        if self._file is None:
            if self.path.exists():
                self._file = self.path.open("r+b")
            else:
                self._file = self.path.open("w+b")
                self._file.truncate(wheel_length())
        return self._file

    def raw_slot(self, time_ms: int) -> Slot:
        """`TimerWheel.getRawSlot`: whatever the slot index holds, time scaled back by the precision."""
        f = self._open()
        f.seek(slot_index(time_ms, self.precision_ms) * SLOT_SIZE)
        s = timerwheel_slot.parse(f.read(SLOT_SIZE))
        return Slot(s.time_units * self.precision_ms, s.first_pos, s.last_pos, s.num, s.magic)

    def get_slot(self, time_ms: int) -> Slot:
        """`TimerWheel.getSlot`: the slot only when it belongs to this time, else empty."""
        s = self.raw_slot(time_ms)
        return s if s.time_ms == time_ms // self.precision_ms * self.precision_ms else EMPTY_SLOT

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int = 0) -> None:
        """`TimerWheel.putSlot`: the slot stores `timeMs / precision` (compatibility with 1000 ms wheels)."""
        f = self._open()
        f.seek(slot_index(time_ms, self.precision_ms, SLOTS_TOTAL) * SLOT_SIZE)
        f.write(
            timerwheel_slot.build(
                {
                    "time_units": time_ms // self.precision_ms,
                    "first_pos": first_pos,
                    "last_pos": last_pos,
                    "num": num,
                    "magic": magic,
                }
            )
        )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class IndexFiles:
    """The index/ files (`IndexService`) a writer builds as it dispatches records; `service` None: this store
    gets no index/ (`index_service`). Each file is named by the time of the record that made it."""

    def __init__(self, directory: Path, service: IndexService | None):
        self.directory = directory
        self.service = service
        self.names: list[str] = []  # each index file's name (its creation time)

    def build(self, rec: MessageRecord) -> None:
        """`CommitLogDispatcherBuildIndex`: every dispatched record goes to `IndexService.buildIndex`
        (prepared and commit records too; the rule skips rollbacks)."""
        if self.service is None:
            return
        props = rec.properties
        before = len(self.service.files)
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        self.service.build_index(
            DispatchRequest(
                rec.topic, rec.physical_offset, rec.store_timestamp, rec.sys_flag, props.get(PROPERTY_KEYS), uniq
            )
        )
        self.names += [index_file_name(rec.store_timestamp)] * (len(self.service.files) - before)

    def load(self) -> None:
        """Continue a copied store's index files (`IndexService.load`)."""
        if self.service is None or not self.directory.is_dir():
            return
        for p in sorted(x for x in self.directory.iterdir() if x.is_file()):
            self.service.files.append(
                IndexFileWriter.load(p.read_bytes(), self.service.hash_slot_num, self.service.index_num)
            )
            self.names.append(p.name)

    def write(self) -> None:
        """Flush every index file (`IndexFile.flush`: the header, then the mapped bytes)."""
        if self.service is None or not self.service.files:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, f in zip(self.names, self.service.files, strict=True):
            (self.directory / name).write_bytes(f.to_bytes())


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class StoreWriter:
    """Append-only writer of one store directory (CommitLog, ConsumeQueues, TimerLog, wheel, checkpoints)."""

    def __init__(
        self,
        root: Path | str,
        config: BrokerConfig | None = None,
        broker_version: str = "5.3",
        *,
        commitlog_start: int = 0,
        _existing: bool = False,
    ):
        self.root = Path(root)
        if not _existing and self.root.exists() and any(self.root.iterdir()):
            raise FileExistsError(f"{self.root} is not empty; use StoreWriter.extend to continue a store")
        self.root.mkdir(parents=True, exist_ok=True)
        self.config = config or BrokerConfig.for_version(broker_version)
        self.broker_version = broker_version
        self.v5 = is_v5(broker_version)
        self.commitlog = MappedFiles(self.root / "commitlog", self.config.mapped_file_size_commitlog)
        if commitlog_start % self.commitlog.file_size:
            raise ValueError("commitlog_start must be a multiple of the CommitLog file size")
        self.commitlog_end = commitlog_start
        self.timerlog = MappedFiles(self.root / "timerlog", self.config.mapped_file_size_timer_log)
        self.timerlog_end = 0
        self.cq_size = cq_file_size(self.config.mapped_file_size_consume_queue)
        self._cqs: dict[tuple[str, int], MappedFiles] = {}
        self._cq_end: dict[tuple[str, int], int] = {}  # next unit index (= write position / 20)
        self._next_qoff: dict[tuple[str, int], int] = {}
        self.wheel = WheelFile(self.root / "timerwheel", self.config.timer_precision_ms)
        self.last_store_timestamp = 0
        self.records: list[MessageRecord] = []  # appended by this writer, in order
        self.index = IndexFiles(self.root / "index", index_service(self.config))

    # ----------------------------------------------------------------- continuing a store

    @classmethod
    def extend(
        cls, src_root: Path | str, out_root: Path | str, config: BrokerConfig | None = None, broker_version: str = "5.3"
    ) -> StoreWriter:
        """Copy `src_root` to `out_root` (source untouched) and continue after its last valid data.

        The ends are where the broker's restart leaves them (`_recover`, the rules of
        `mqtool.rules.recovery` on the `mqtool.store` readers): CommitLog files past the recovered end
        are dropped from the copy (`truncateDirtyFiles`). A shipped `timerwheel.gz` without
        `timerwheel` is gunzipped.
        Without `config` the mapped file sizes are read from the files.
        """
        src, out = Path(src_root), Path(out_root)
        if out.exists() and any(out.iterdir()):
            raise FileExistsError(f"{out} is not empty")
        _copy_store(src, out)
        config = config or _infer_config(out, broker_version)
        w = cls(out, config, broker_version, _existing=True)
        w._recover()
        return w

    def _recover(self) -> None:
        """Continue where the broker's restart leaves the copied files, read through `mqtool.store`:
        the CommitLog's recovered end (files past it deleted, `truncateDirtyFiles`), the TimerLog's
        (`recoverAndRevise`) and each ConsumeQueue's (`ConsumeQueue.recover`; units past the CommitLog
        end are kept, not cut by `truncateDirtyLogicFiles`, so queue offsets continue from the queue)."""
        self.index.load()
        store = Store(self.root, self.config)
        cl = recovered_commitlog(store, v4=not self.v5)
        if cl is not None:
            self.commitlog_end = cl["end_offset"]
            self.last_store_timestamp = last_store_timestamp(store.commitlog, self.commitlog_end)
        self.timerlog_end = recovered_timerlog_end(store)
        for topic, queue_id in discover_queues(self.root):
            end = recovered_queue_end(ConsumeQueue.open(self.root, topic, queue_id, self.cq_size))
            if end is not None:
                self._cq_end[(topic, queue_id)] = self._next_qoff[(topic, queue_id)] = end
        for name in cl["deleted_files"] if cl is not None and store.dledger is None else ():
            (self.root / "commitlog" / name).unlink()  # DLedger data: truncated by DLedgerWriter.resume

    # ----------------------------------------------------------------- CommitLog

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The QUEUEOFFSET the next dispatched record of this queue gets (`assignQueueOffset`)."""
        return self._next_qoff.get((topic, queue_id), 0)

    def make_record(
        self,
        topic: str,
        queue_id: int,
        body: bytes = b"",
        properties: Properties = "",
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int | None = None,
        born_host: str = DEFAULT_BORN_HOST,
        store_timestamp: int = 0,
        store_host: str = DEFAULT_STORE_HOST,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        queue_offset: int = 0,
        magic_code: int | None = None,
        crc: int | None = None,
    ) -> MessageRecord:
        """A record not yet placed (PHYSICALOFFSET 0); the V6 host flags follow the host strings."""
        props = to_properties_string(properties)
        if "[" in born_host or born_host.count(":") > 1:
            sys_flag |= BORNHOST_V6
        if "[" in store_host or store_host.count(":") > 1:
            sys_flag |= STOREHOST_V6
        magic = message_magic(topic, self.broker_version) if magic_code is None else magic_code
        size = computed_size(sys_flag, len(body), len(utf8(topic)), len(utf8(props)), magic == MESSAGE_MAGIC_CODE_V2)
        return MessageRecord(
            physical_offset=0,
            total_size=size,
            magic_code=magic,
            body_crc=body_crc(body) if crc is None else crc,
            queue_id=queue_id,
            flag=flag,
            queue_offset=queue_offset,
            physical_offset_field=0,
            sys_flag=sys_flag,
            born_timestamp=store_timestamp if born_timestamp is None else born_timestamp,
            born_host=born_host,
            store_timestamp=store_timestamp,
            store_host=store_host,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            body=bytes(body),
            topic=topic,
            properties_raw=props,
        )

    def append_message(
        self,
        topic: str,
        queue_id: int,
        body: bytes = b"",
        properties: Properties = "",
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int | None = None,
        born_host: str = DEFAULT_BORN_HOST,
        store_timestamp: int = 0,
        store_host: str = DEFAULT_STORE_HOST,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        queue_offset: int | None = None,
        magic_code: int | None = None,
        crc: int | None = None,
        tags_code: int | None = None,
        dispatch: bool = True,
    ) -> MessageRecord:
        """Append one record, then dispatch its ConsumeQueue unit as the broker's reput service would.

        `queue_offset=None` takes the queue's next offset (prepared/rollback records store 0 and are not
        dispatched); `magic_code`, `crc` and `tags_code` override the computed values to build damaged
        or unusual stores; `dispatch=False` leaves the ConsumeQueue untouched (reput lagging behind).
        """
        rec = self.make_record(
            topic,
            queue_id,
            body,
            properties,
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
            store_timestamp=store_timestamp,
            store_host=store_host,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            magic_code=magic_code,
            crc=crc,
        )
        return self.append_records([rec], [queue_offset], tags_code=tags_code, dispatch=dispatch)[0]

    def append_batch(
        self,
        topic: str,
        queue_id: int,
        items: Iterable[tuple[bytes, Properties]],
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int | None = None,
        born_host: str = DEFAULT_BORN_HOST,
        store_timestamp: int = 0,
        store_host: str = DEFAULT_STORE_HOST,
        reconsume_times: int = 0,
    ) -> list[MessageRecord]:
        """A client batch (`doAppend(MessageExtBatch)`): consecutive records that must all fit in one file."""
        recs = [
            self.make_record(
                topic,
                queue_id,
                body,
                props,
                flag=flag,
                sys_flag=sys_flag,
                born_timestamp=born_timestamp,
                born_host=born_host,
                store_timestamp=store_timestamp,
                store_host=store_host,
                reconsume_times=reconsume_times,
            )
            for body, props in items
        ]
        return self.append_records(recs, [None] * len(recs))

    def append_records(
        self,
        recs: Sequence[MessageRecord],
        queue_offsets: Sequence[int | None],
        *,
        tags_code: int | None = None,
        dispatch: bool = True,
    ) -> list[MessageRecord]:
        """Place records contiguously (one put), after a BLANK filler if they do not fit the current file."""
        total = sum(r.total_size for r in recs)
        pos = self._reserve(total)
        out = []
        for rec, qoff in zip(recs, queue_offsets, strict=True):
            out.append(self._write_record(rec, pos, qoff, tags_code, dispatch))
            pos += rec.total_size
        return out

    def _reserve(self, total: int) -> int:
        """`doAppend`'s space check: a BLANK filler ends the file when `total + 8 > remaining`."""
        pos = self.commitlog_end
        remaining = self.commitlog.remaining(pos)
        if total + BLANK_SIZE > remaining:
            if remaining == self.commitlog.file_size:
                raise ValueError(f"{total} bytes never fit a {self.commitlog.file_size}-byte CommitLog file")
            blank = commitlog_record.build({"total_size": remaining, "magic_code": BLANK_MAGIC_CODE, "message": None})
            self.commitlog.write(pos, blank)
            pos += remaining
        self.commitlog.ensure(pos)
        return pos

    def _write_record(
        self, rec: MessageRecord, pos: int, queue_offset: int | None, tags_code: int | None, dispatch: bool
    ) -> MessageRecord:
        key = (rec.topic, rec.queue_id)
        tran = rec.sys_flag & TRANSACTION_MASK
        dispatchable = tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT)
        if queue_offset is None:
            queue_offset = self.next_queue_offset(*key) if dispatchable else 0
        name = name20(self.commitlog.start_of(pos))
        rec = replace(
            rec,
            physical_offset=pos,
            physical_offset_field=pos,
            queue_offset=queue_offset,
            file=name,
            position=pos - int(name),
        )
        data = commitlog_record.build(record_to_container(rec))
        if len(data) != rec.total_size:
            raise ValueError(f"built {len(data)} bytes but TOTALSIZE says {rec.total_size}")
        self.commitlog.write(pos, data)
        self.commitlog_end = pos + len(data)
        self.last_store_timestamp = rec.store_timestamp
        if dispatchable:
            self._next_qoff[key] = queue_offset + 1
            if dispatch:
                code = self.tags_code(rec) if tags_code is None else tags_code
                self.dispatch_cq(rec.topic, rec.queue_id, queue_offset, pos, rec.total_size, code)
                rec.extra["tags_code"] = code
        if dispatch:
            self.index.build(rec)
        self.records.append(rec)
        return rec

    def tags_code(self, rec: MessageRecord) -> int:
        """`checkMessageAndReturnSize`: TAGS hash, or for the schedule topic the deliver timestamp."""
        props = parse_properties(rec.properties_raw)
        code = tags_code_of(props)
        level_text = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if rec.topic == RMQ_SYS_SCHEDULE_TOPIC:
            deliver = schedule_tags_code(level_text, rec.store_timestamp, self.config.delay_levels_ms())
            if deliver is not None:
                code = deliver
        return code

    # ----------------------------------------------------------------- ConsumeQueue

    def _cq(self, topic: str, queue_id: int) -> MappedFiles:
        key = (topic, queue_id)
        files = self._cqs.get(key)
        if files is None:
            files = MappedFiles(self.root / "consumequeue" / topic / str(queue_id), self.cq_size)
            self._cqs[key] = files
        return files

    def dispatch_cq(
        self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int, size: int, tags_code: int
    ) -> int | None:
        """`ConsumeQueue.putMessagePositionInfo`: returns the unit index written, None if skipped.

        A queue's first file starting at a non-zero offset is filled with pre-blank units; a unit for an
        offset already written is skipped; one for a later offset lands at the write position anyway
        (RocketMQ logs "[BUG]logic queue order maybe wrong").
        """
        key = (topic, queue_id)
        files = self._cq(topic, queue_id)
        end = self._cq_end.get(key)
        if end is None:
            end = queue_offset
            expect = queue_offset * CQ_UNIT_SIZE
            start = files.start_of(expect)
            blank = consumequeue_unit.build({"commitlog_offset": 0, "size": CQ_PRE_BLANK_SIZE, "tags_code": 0})
            for p in range(start, expect, CQ_UNIT_SIZE):
                files.write(p, blank)
            files.ensure(expect)
        elif queue_offset < end:
            return None
        self.put_cq_unit(topic, queue_id, end, commitlog_offset, size, tags_code)
        return end

    def put_cq_unit(
        self, topic: str, queue_id: int, index: int, commitlog_offset: int, size: int, tags_code: int
    ) -> None:
        """Write one unit at exactly `index` (raw: tests build gaps or wrong units with it)."""
        unit = consumequeue_unit.build({"commitlog_offset": commitlog_offset, "size": size, "tags_code": tags_code})
        self._cq(topic, queue_id).write(index * CQ_UNIT_SIZE, unit)
        key = (topic, queue_id)
        self._cq_end[key] = max(self._cq_end.get(key, 0), index + 1)

    # ----------------------------------------------------------------- TimerLog

    def append_timerlog_unit(
        self,
        prev_pos: int,
        magic: int,
        curr_write_time_ms: int,
        delayed_time_delta: int,
        offset_py: int,
        size_py: int,
        real_topic_hash: int,
        reserved: int = 0,
    ) -> int:
        """`TimerLog.append`: one 52-byte unit; returns its TimerLog offset."""
        pos = self.timerlog_end
        remaining = self.timerlog.remaining(pos)
        if TIMERLOG_UNIT_SIZE + TIMERLOG_BLANK_SIZE > remaining:
            if remaining == self.timerlog.file_size:
                raise ValueError(f"a TimerLog file of {self.timerlog.file_size} bytes holds no unit")
            self.timerlog.write(pos, timerlog_blank.build({"remaining": remaining, "zero": 0}))
            pos += remaining
        unit = timerlog_unit.build(
            {
                "size": TIMERLOG_UNIT_SIZE,
                "prev_pos": prev_pos,
                "magic": magic,
                "curr_write_time_ms": curr_write_time_ms,
                "delayed_time_delta": delayed_time_delta,
                "offset_py": offset_py,
                "size_py": size_py,
                "real_topic_hash": real_topic_hash,
                "reserved": reserved,
            }
        )
        self.timerlog.write(pos, unit)
        self.timerlog_end = pos + TIMERLOG_UNIT_SIZE
        return pos

    # ----------------------------------------------------------------- checkpoints and config files

    def write_timercheck(
        self,
        last_read_time_ms: int,
        last_timer_log_flush_pos: int | None = None,
        last_timer_queue_offset: int = 0,
        master_timer_queue_offset: int | None = None,
        *,
        state_version: int = 0,
        timestamp: int = 0,
        counter: int = 0,
    ) -> None:
        """config/timercheck (`TimerCheckpoint`); flush pos defaults to the TimerLog end."""
        data = timercheck.build(
            {
                "last_read_time_ms": last_read_time_ms,
                "last_timer_log_flush_pos": self.timerlog_end
                if last_timer_log_flush_pos is None
                else last_timer_log_flush_pos,
                "last_timer_queue_offset": last_timer_queue_offset,
                "master_timer_queue_offset": last_timer_queue_offset
                if master_timer_queue_offset is None
                else master_timer_queue_offset,
                "state_version": state_version,
                "timestamp": timestamp,
                "counter": counter,
            }
        )
        _write_file(self.root / "config" / "timercheck", data)

    def write_checkpoint(
        self,
        physic_msg_timestamp: int | None = None,
        logics_msg_timestamp: int | None = None,
        index_msg_timestamp: int = 0,
        master_flushed_offset: int = 0,
        confirm_phy_offset: int = 0,
    ) -> None:
        """`StoreCheckpoint`; the timestamps default to the last record's store timestamp."""
        physic = self.last_store_timestamp if physic_msg_timestamp is None else physic_msg_timestamp
        data = checkpoint.build(
            {
                "physic_msg_timestamp": physic,
                "logics_msg_timestamp": physic if logics_msg_timestamp is None else logics_msg_timestamp,
                "index_msg_timestamp": index_msg_timestamp,
                "master_flushed_offset": master_flushed_offset,
                "confirm_phy_offset": confirm_phy_offset,
            }
        )
        _write_file(self.root / "checkpoint", data)

    def write_delay_offsets(self, offsets: DelayOffsets) -> None:
        """config/delayOffset.json as `ScheduleMessageService.persist` writes it."""
        self.write_config_file("delayOffset.json", dump_delay_offsets(offsets))

    def write_consumer_offsets(self, offsets: ConsumerOffsets, **dump_options: int) -> None:
        """config/consumerOffset.json as `ConsumerOffsetManager.persist` writes it."""
        self.write_config_file("consumerOffset.json", dump_consumer_offsets(offsets, **dump_options))

    def write_config(self, name: str, model: object) -> None:
        """config/`name` (topics.json, subscriptionGroup.json, timermetrics, ...) from its model."""
        from mqtool.builder.config import write_config

        write_config(self, name, model)

    def write_config_file(self, name: str, text: str) -> None:
        """`MixAll.string2File`: the previous content (if any) goes to `<name>.bak` first."""
        path = self.root / "config" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            (path.parent / (name + ".bak")).write_bytes(path.read_bytes())
        path.write_bytes(text.encode("utf-8"))

    # ----------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush and close every open file."""
        self.index.write()
        self.commitlog.close()
        self.timerlog.close()
        for files in self._cqs.values():
            files.close()
        self.wheel.close()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------- extend helpers


def _copy_store(src: Path, out: Path) -> None:
    """Copy file contents (not the read-only modes of shipped stores); gunzip a lone timerwheel.gz."""
    out.mkdir(parents=True, exist_ok=True)
    gz = src / "timerwheel.gz"
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        target = out / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path != gz:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    if gz.is_file() and not (src / "timerwheel").exists():
        with gzip.open(gz, "rb") as fin, (out / "timerwheel").open("wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)


def index_service(config: BrokerConfig) -> IndexService | None:
    """The builder's IndexService, when broker.conf sets the index geometry and `messageIndexEnable`
    is not false (the defaults, 5,000,000 slots and 20,000,000 entries, make 420 MB files)."""
    raw = config.raw
    if raw.get("messageIndexEnable", "true").strip().lower() == "false":
        return None
    if "maxHashSlotNum" not in raw and "maxIndexNum" not in raw:
        return None
    return IndexService(
        int(raw.get("maxHashSlotNum", DEFAULT_HASH_SLOT_NUM)), int(raw.get("maxIndexNum", DEFAULT_INDEX_NUM))
    )


def _file_length(directory: Path) -> int | None:
    """The common length of a mapped-file queue's files (the first file's), None without files."""
    if not directory.is_dir():
        return None
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit())
    return files[0].stat().st_size if files else None


def _infer_config(root: Path, broker_version: str) -> BrokerConfig:
    """Default settings with the mapped file sizes the store's files show."""
    config = BrokerConfig.for_version(broker_version)
    changes = {}
    if (n := _file_length(root / "commitlog")) is not None:
        changes["mapped_file_size_commitlog"] = n
    if (n := _file_length(root / "timerlog")) is not None:
        changes["mapped_file_size_timer_log"] = n
    cq_root = root / "consumequeue"
    if cq_root.is_dir():
        sizes = [n for q in sorted(cq_root.glob("*/*")) if (n := _file_length(q)) is not None]
        if sizes:
            changes["mapped_file_size_consume_queue"] = sizes[0]
    return replace(config, **changes)


def recovered_commitlog(store: Store, v4: bool = False) -> dict | None:
    """Where the broker's restart ends the CommitLog (`mqtool.store.recovery.commitlog_recovery`):
    `recoverNormally`, or `recoverAbnormally` after a crash (the `abort` file), on the store's record
    walk; it stops at a body CRC mismatch when `checkCRCOnRecover` (the default). None without files."""
    clean = recovery.shutdown_state(store)["clean"]
    check_crc = recovery.java_bool(store.config, "checkCRCOnRecover", True)
    return recovery.commitlog_recovery(store, clean, check_crc, v4, Findings())


def recovered_timerlog_end(store: Store) -> int:
    """`TimerMessageStore.recover`: `recoverAndRevise` from one file before `timercheck`'s flush
    position (0 without a timercheck, as a fresh `TimerCheckpoint` reads)."""
    tl, tc = store.timerlog, store.timercheck
    if tl is None or not tl.queue.files:
        return 0
    flush = int(tc.last_timer_log_flush_pos) if tc is not None else 0
    begin = rules.timer_recover_begin(flush, tl.queue.files[-1].length)
    return rules.recover_and_revise(recovery.timerlog_steps(store), begin)


def last_store_timestamp(cl: CommitLog, end: int) -> int:
    """STORETIMESTAMP of the last record ending at or before `end` (0: none), newest file first."""
    for f in reversed([f for f in cl.files if f.start < end]):
        walk = cl.scan_columns(f.start, verify_crc=False)
        stamps = []
        try:
            for g, chunk in walk:
                if g.start != f.start:
                    break
                ends = chunk.physical_offset + chunk.cols[fastscan.C_TOTAL]
                stamps += chunk.cols[fastscan.C_STORE_TS][ends <= end].tolist()
        finally:
            walk.close()
        if stamps:
            return stamps[-1]
    return 0


def recovered_queue_end(cq: ConsumeQueue) -> int | None:
    """Index after the last unit `ConsumeQueue.recover` keeps; None for a queue without files."""
    if not cq.queue.files:
        return None
    first = cq.first_offset
    units = [
        (off, size)
        for _, u in cq.scan_columns(first)
        for off, size in zip(u["commitlog_offset"].tolist(), u["size"].tolist(), strict=True)
    ]
    return first + rules.consume_queue_recover(units)


def read_records(commitlog_dir: Path | str) -> list[MessageRecord]:
    """Every record the store's CommitLog walk decodes, in offset order (each file up to its BLANK
    filler, zero tail or first invalid record); `file` is the file's name."""
    directory = Path(commitlog_dir)
    cl = CommitLog(directory.parent, open_queue(directory, None, "commitlog", directory.parent))
    out = []
    for rec in cl.iter_records():
        rec.file = Path(rec.file).name
        out.append(rec)
    return out


__all__ = [
    "DEFAULT_BORN_HOST",
    "DEFAULT_STORE_HOST",
    "EMPTY_SLOT",
    "MappedFiles",
    "Properties",
    "Slot",
    "StoreWriter",
    "cq_file_size",
    "is_v5",
    "java_length",
    "name20",
    "read_records",
    "tags_code_of",
    "to_properties_string",
]
