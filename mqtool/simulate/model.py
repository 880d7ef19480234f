"""The simulated store: the input store (read-only) plus an in-memory overlay of appended records.

Services read ConsumeQueue units and messages through `StoreModel` and append re-put records with
`StoreModel.append`, which gives them their CommitLog offset (`place`, spec §2.7), queue offset and store
timestamp as `CommitLog.asyncPutMessage` would. Nothing here writes to disk.

Two bases exist: `diskread.MappedBase` (a `Store` opened on a directory) and `MemoryBase` (messages built
in memory by tests and the benchmark).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from functools import cache
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from mqtool.formats.commitlog import BLANK_SIZE, FIXED_SIZE, hosts_size
from mqtool.formats.dledger import BODY_OFFSET as DLEDGER_BODY_OFFSET
from mqtool.formats.dledger import MIN_BLANK_LEN as DLEDGER_MIN_BLANK_LEN
from mqtool.formats.names import (
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SYSTEM_TOPICS,
    TIMER_TOPIC,
)
from mqtool.formats.properties import broker_properties_length, build_properties, key_order
from mqtool.rules.dispatch import tags_string_2_tags_code

if TYPE_CHECKING:
    from mqtool.simulate.spool import RecordSpool

BLANK_MIN = BLANK_SIZE  # END_FILE_MIN_BLANK_LENGTH: TOTALSIZE + MAGICCODE of the filler
# the system topics a service of the simulator reads back (consumers aside): the rest are write-only
_READ_BACK = (RMQ_SYS_SCHEDULE_TOPIC, TIMER_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC)


@dataclass(slots=True, eq=False, repr=False)
class SimMessage:
    """A message as the services see it (`MessageExt`): header fields and an ordered property map; identity, not
    value, makes two messages the same (`eq=False`)."""

    topic: str
    queue_id: int
    props: dict[str, str]
    _: KW_ONLY
    body: bytes | None = None
    body_len: int | None = None  # len(body) when body is given, else this or 0 (set in __post_init__)
    born_ts: int = 0
    store_ts: int = 0
    sys_flag: int = 0
    flag: int = 0
    reconsume_times: int = 0
    prepared_tx_offset: int = 0
    phys: int = -1
    size: int = 0
    queue_offset: int = -1
    born_host: str = "127.0.0.1:0"
    store_host: str = "127.0.0.1:10911"
    props_raw: str | None = None
    service: str = field(default="", init=False)
    source_phys: int = field(default=-1, init=False)
    tags_code: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.body_len = len(self.body) if self.body is not None else (self.body_len or 0)

    @property
    def uniq_key(self) -> str | None:
        return self.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def derive(self, topic: str, queue_id: int, props: dict[str, str], props_raw: str | None = None) -> SimMessage:
        """A re-put copy: body, flag, sysFlag, born time/host, store host and reconsume times copied.

        `props` may be the source's own map: a stored message's map is never changed in place
        (services copy it before they edit it), so an unchanged re-put shares it.
        """
        return message_of(
            (topic, queue_id, props, self.body, self.body_len, self.born_ts, 0, self.sys_flag, self.flag)
            + (self.reconsume_times, 0, -1, 0, -1, self.born_host, self.store_host, props_raw, "", self.phys, 0)
        )  # the fields in slot order: no store time, offsets or size yet; `source_phys` is this record's


_SCOPE: dict = {"new": object.__new__, "SimMessage": SimMessage}
exec(  # noqa: S102 - names from __slots__: one unpacking assignment of every slot, no loop of `setattr`
    "def message_of(values):\n    m = new(SimMessage)\n"
    f"    {', '.join(f'm.{f}' for f in SimMessage.__slots__)} = values\n    return m\n",
    _SCOPE,
)
message_of = _SCOPE["message_of"]
"""`message_of(values)`: the `SimMessage` of its fields' values in slot order, without `__init__` (the one builder
of a message read from a store, spooled or derived)."""


_tags_hash = cache(tags_string_2_tags_code)  # a run has a few tags: each is hashed once


def tags_code(props: dict[str, str]) -> int:
    tags = props.get(PROPERTY_TAGS)
    return _tags_hash(tags) if tags else 0


# --------------------------------------------------------------------------- bases (and `MemoryBase` below)


class EmptyBase:
    """The store below a `MemoryBase`: no ConsumeQueue unit and no record, a CommitLog ending at `end`."""

    def __init__(self, file_size: int, end: int = 0, dledger: bool = False) -> None:
        self.file_size, self.end, self.dledger = file_size, end, dledger

    def cq_max(self, topic: str, qid: int) -> int:
        return 0

    cq_min = cq_max

    def message(self, *_args) -> None:
        return None

    message_once = props = cq_unit = message

    def cq_units(self, *_args) -> tuple:
        return ()

    queue_ids = cq_units

    def max_phys(self) -> int:
        return self.end


# --------------------------------------------------------------------------- the overlay


class QueueInfo(NamedTuple):
    """What appends to a queue need (`StoreModel.queue_info`)."""

    units: list  # the overlay's units: (CommitLog offset, size, tagsCode), None for a record not kept
    base_count: int  # the base's units (the overlay's first queue offset)
    fixed: int  # the size of a record's fixed part with this topic, the hosts aside
    kept: bool  # whether units and records are kept (a service reads them back)
    listeners: list[Callable[[], None]]  # called after every append (`on_append`)


@dataclass(slots=True)
class PutResult:
    ok: bool
    status: str = "PUT_OK"
    message: SimMessage | None = None


def next_in_file(pos: int, size: int, file_size: int, blank: int) -> int:
    """Where `size` bytes go when the log ends at `pos`: there, or at the next file when they and the smallest
    filler (`blank`) do not fit in the rest of this one (the CommitLog's END_OF_FILE record, the TimerLog's BLANK)."""
    return (pos // file_size + 1) * file_size if pos % file_size + size + blank > file_size else pos


@dataclass
class StoreModel:
    """The base store plus appended records. `put_filter(now, msg, service)` may fail a put (faults)."""

    base: Any
    capacity: int = 128
    put_filter: Callable[[int, SimMessage, str], str | None] | None = None
    appended: list[SimMessage] = field(default_factory=list)
    _units: dict[tuple[str, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    messages: dict[int, SimMessage] = field(default_factory=dict)  # the overlay's records kept as messages, by offset
    _listeners: dict[tuple[str, int], list[Callable[[], None]]] = field(default_factory=dict)
    _queue_info: dict[tuple[str, int], QueueInfo] = field(default_factory=dict)
    watchers: int = 0  # the callbacks `on_append` took: a service's cached `queue_info` answers hold while it stays
    _end: int | None = None
    # False (benchmarks): records on topics no service reads (deliveries) are only counted, not kept
    keep_messages: bool = True
    trailing_separator: bool = True  # False on 4.9.8: `messageProperties2String` drops the last 0x02
    # True (a streaming run with no faults, answers or consumers, see `runner`): each kept re-put is
    # dropped once the service that reads it last is done with it (`release`, `release_below`), and the
    # ones on CHECK_MAX_TIME_TOPIC (nobody reads them) are not kept at all
    releasing: bool = False
    _released: dict[tuple[str, int], int] = field(default_factory=dict)  # queue -> overlay index released to
    # a `spool.RecordSpool` (releasing runs): the timer topic's re-puts wait there, not in `messages`
    spool: RecordSpool | None = None
    # re-puts placed without a `SimMessage` (the transaction check's put-backs): phys -> an entry whose
    # `build(phys)` makes the message the first time a reader asks for it (`materialise`)
    lazy: dict[int, Any] = field(default_factory=dict)

    def raw(self, m: SimMessage) -> str:
        """The properties string of a record: as read for input records, as the broker builds it for
        appended ones (`m.props` is already in the stored order)."""
        raw = build_properties(m.props) if m.props_raw is None else m.props_raw
        return raw if self.trailing_separator or m.props_raw is not None else raw[:-1]

    # ----- reads -----
    def cq_max(self, topic: str, qid: int) -> int:
        return self.base.cq_max(topic, qid) + len(self._units.get((topic, qid), ()))

    def cq_min(self, topic: str, qid: int) -> int:
        return self.base.cq_min(topic, qid)

    def cq_message(self, topic: str, qid: int, offset: int) -> SimMessage | None:
        """The message a queue's unit at `offset` points to; None without a unit or a readable record there."""
        bmax = self.base.cq_max(topic, qid)
        if offset < bmax:
            unit = self.base.cq_unit(topic, qid, offset)
        else:
            extra = self._units.get((topic, qid))
            unit = None if extra is None or offset - bmax >= len(extra) else extra[offset - bmax]
        if unit is None:
            return None
        phys, _size, _tags_code = unit
        return self.message(phys)

    def cq_units(self, topic: str, qid: int, start: int, stop: int):
        """(offset, unit) for the units in [start, stop), up to the first one that cannot be read
        (iterate it before appending to the same queue)."""
        bmax = self.base.cq_max(topic, qid)
        if start < bmax:
            end = min(stop, bmax)
            nxt = start
            for item in self.base.cq_units(topic, qid, start, end):
                yield item
                nxt = item[0] + 1
            if nxt < end:
                return  # a unit that cannot be read ends the walk
            start = bmax
        extra = self._units.get((topic, qid))
        if extra is not None and start < stop:
            yield from zip(range(start, stop), extra[start - bmax : stop - bmax], strict=False)

    def message(self, phys: int) -> SimMessage | None:
        m = self._kept(phys)
        return m if m is not None else self.base.message(phys)

    def _kept(self, phys: int) -> SimMessage | None:
        """The message the model itself holds for a record (appended, spooled, or placed lazily and made
        now); None where only the base has it."""
        m = self.messages.get(phys)
        if m is None and self.spool is not None:
            m = self.spool.get(phys)
        if m is None and self.lazy:
            m = self.materialise(phys)
        return m

    def materialise(self, phys: int) -> SimMessage | None:
        """The message of a record placed without one (`lazy`), kept from then on as an appended one."""
        e = self.lazy.pop(phys, None)
        if e is None:
            return None
        m = self.messages[phys] = e.build(phys)
        return m

    def message_once(self, phys: int) -> SimMessage | None:
        """`message(phys)` for a record its reader is done with once read (the base need not cache it)."""
        m = self._kept(phys)
        return m if m is not None else self.base.message_once(phys)

    def props(self, phys: int) -> dict[str, str] | None:
        """`message(phys).props`, by the base's lighter read when it has one (`MappedBase.props`)."""
        m = self._kept(phys)
        return m.props if m is not None else self.base.props(phys)

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(set(self.base.queue_ids(topic)) | {q for t, q in self._units if t == topic})

    @property
    def end(self) -> int:
        if self._end is None:
            self._end = self.base.max_phys()
        return self._end

    # ----- writes -----
    def on_append(self, topic: str, qid: int, callback: Callable[[], None]) -> None:
        """Call `callback()` after every append to that queue (a service waiting for new units)."""
        self._listeners.setdefault((topic, qid), []).append(callback)
        self.watchers += 1

    def release(self, phys: int) -> None:
        """A kept re-put its last reader is done with (the timer's dequeue of a rolled record)."""
        if self.releasing:
            if self.messages.pop(phys, None) is None and self.spool is not None:
                self.spool.drop(phys)

    def release_below(self, topic: str, qid: int, offset: int) -> None:
        """The re-puts of a queue below a consume offset its only reader has passed (the half and op
        queues at the end of a check round)."""
        key = (topic, qid)
        units = self._units.get(key) if self.releasing else None
        if not units:
            return
        start, stop = self._released.get(key, 0), min(len(units), offset - self.base.cq_max(topic, qid))
        if stop > start:
            phys = [pos for pos, _size, _tags in filter(None, units[start:stop])]  # (a unit not kept is None)
            deque(map(self.messages.pop, phys, repeat(None)), 0)  # each dropped wherever it is kept
            if self.lazy:
                deque(map(self.lazy.pop, phys, repeat(None)), 0)
            self._released[key] = stop

    def known_queue(self, topic: str, qid: int) -> QueueInfo | None:
        """`queue_info` of a queue an append has learned already, None before."""
        return self._queue_info.get((topic, qid))

    def queue_info(self, topic: str, qid: int) -> QueueInfo:
        key = (topic, qid)
        q = self._queue_info.get(key)
        if q is None:
            units = self._units.setdefault(key, [])
            tlen = len(topic.encode("utf-8", "surrogateescape"))
            keep = self.keep_messages or topic in (_READ_BACK if self.releasing else SYSTEM_TOPICS)
            fixed = FIXED_SIZE + (2 if tlen > 127 else 1) + tlen
            listeners = self._listeners.setdefault(key, [])
            q = self._queue_info[key] = QueueInfo(units, self.base.cq_max(*key), fixed, keep, listeners)
        return q

    def reput_size(self, props: dict[str, str], fixed: int, sys_flag: int, body_len: int) -> int:
        """TOTALSIZE of a re-put whose properties string the broker builds from `props` (`broker_properties_length`)
        on a queue whose records' fixed part is `fixed` (`queue_info`). Every re-put's size is this or
        `plain_reput_size`."""
        props_len = broker_properties_length(props, self.capacity, self.trailing_separator)
        return props_len + fixed + body_len + hosts_size(sys_flag)

    def record_size(self, m: SimMessage, fixed: int) -> int:
        """TOTALSIZE of `m` on a queue whose records' fixed part is `fixed` (`queue_info`): with the properties
        string it was read with, else the one the broker builds from its map (`reput_size`); the string itself
        is only built when `--out` writes it."""
        raw = m.props_raw
        if raw is None:
            return self.reput_size(m.props, fixed, m.sys_flag, m.body_len)
        plen = len(raw) if raw.isascii() else len(raw.encode("utf-8", "surrogateescape"))
        return plen + fixed + m.body_len + hosts_size(m.sys_flag)

    def plain_reput_size(self, n: int, fixed: int) -> int:
        """`reput_size` of a re-put keeping every property of a record read as a plain string
        (`batchread.read_plain`'s `n`: the string with its last separator, BODYLENGTH and the hosts)."""
        return n + fixed - (0 if self.trailing_separator else 1)

    def place(self, size: int) -> int:
        """The CommitLog offset of the next record of `size` bytes, the end moved past it: the one place
        every append goes through. A normal CommitLog ends a file with a BLANK filler where the record and
        the smallest filler do not fit (`next_in_file`, `CommitLog.asyncPutMessage`); on DLedger the record
        is an entry's body, after its header (`DLedgerMmapFileStore.appendAsLeader`, `MmapFileList.preAppend`)."""
        pos = self._end
        if pos is None:
            pos = self.end
        fs = self.base.file_size
        if self.base.dledger:
            pos = next_in_file(pos, DLEDGER_BODY_OFFSET + size, fs, DLEDGER_MIN_BLANK_LEN) + DLEDGER_BODY_OFFSET
        elif pos % fs + size + BLANK_MIN > fs:  # `next_in_file`'s test first: a call per append cost ~0.3 µs
            pos = next_in_file(pos, size, fs, BLANK_MIN)
        self._end = pos + size
        return pos

    def append(self, m: SimMessage, now: int, service: str = "") -> PutResult:
        """Put a record at `now`; a fault may refuse it (PutResult.ok False, nothing written)."""
        if self.put_filter is not None:
            status = self.put_filter(now, m, service)
            if status:
                return PutResult(False, status)
        props = m.props
        key = (m.topic, m.queue_id)
        q = self._queue_info.get(key) or self.queue_info(*key)
        m.size = size = self.record_size(m, q.fixed)
        order = key_order(tuple(props), self.capacity).order
        if order is not None:
            m.props = props = {k: props[k] for k in order}
        m.store_ts = now
        m.service = service
        if not m.tags_code:
            m.tags_code = tags_code(props)
        # a unit nobody keeps is counted for the queue offsets only: no service reads a delivered record back
        m.phys, m.queue_offset = self.append_unit(q, size, m.tags_code if q.kept else None)
        if q.kept:
            if self.spool is not None and m.topic == TIMER_TOPIC:
                self.spool.put(m)  # read back when its slot comes, maybe a day later
            else:
                self.messages[m.phys] = m
            if self.keep_messages:
                self.appended.append(m)
        return PutResult(True, "PUT_OK", m)

    def append_unit(self, q: QueueInfo, size: int, tags: int | None) -> tuple[int, int]:
        """The one place-and-size step of every append: a record of `size` bytes placed (`place`), its unit added
        to queue `q` (`queue_info`; None where `tags` is: only counted) and the queue's listeners called:
        (CommitLog offset, queue offset). `append` takes it for a `SimMessage`; a service that keeps its re-puts
        itself, or whose re-puts nobody reads, takes it directly where no fault can refuse them."""
        pos = self.place(size)
        units = q.units
        queue_offset = q.base_count + len(units)
        units.append(None if tags is None else (pos, size, tags))
        for cb in q.listeners:
            cb()
        return pos, queue_offset

    def max_phys(self) -> int:  # as a base answers it (a `MemoryBase` is a model of its own)
        return self.end


class MemoryBase(StoreModel):
    """Messages and ConsumeQueues built in memory (tests, benchmark): a model over an `EmptyBase` whose
    records are the input store's, each added where a broker's put would place it."""

    def __init__(self, commitlog_file_size: int = 1 << 30) -> None:
        super().__init__(EmptyBase(commitlog_file_size))
        self.file_size, self.dledger = commitlog_file_size, False

    def add(self, m: SimMessage, tags: int | None = None) -> SimMessage:
        """Append a message as a broker put would (offset, queue offset), its store time and properties as given."""
        q = self.queue_info(m.topic, m.queue_id)
        if m.size <= 0:
            m.size = self.record_size(m, q.fixed)
        tags = tags if tags is not None else tags_code(m.props)
        m.phys, m.queue_offset = self.append_unit(q, m.size, tags)
        self.messages[m.phys] = m
        return m
