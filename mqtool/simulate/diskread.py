"""`MappedBase`: the simulator's read side of a store on disk, for runs over millions of records.

`DiskBase` reads one ConsumeQueue unit and one record per call through the store's readers and
keeps every decoded message; over a 2 M-record store that is minutes of decoding and gigabytes of
objects. `MappedBase` answers the same calls, with the same values:

- a queue's units are copied once, on first use, from the file mappings into numpy columns
  (20 bytes a unit; `fastscan.cq_view`), and handed out as tuples a slice at a time;
- a record is read with one `os.pread` (no mapping, so the resident size does not grow with the
  CommitLog; a read that walks forward takes `WINDOW` bytes and the next records are sliced from
  them) and decoded by `struct` from the layouts of `mqtool.formats.commitlog`; anything unusual
  (bad magic, a short read, lengths past the record) goes to `DiskBase.message`, the reference path, so
  damaged stores behave exactly as before;
- decoded messages are kept in a bounded cache (services never change a message they read:
  they copy its properties before editing them), so memory does not grow with the store.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from mqtool.formats import commitlog, layout
from mqtool.formats.commitlog import HOST_SIZE_V4, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, host_size
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.properties import parse_properties
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate.model import DiskBase, SimMessage, _new_message
from mqtool.store import fastscan, propscan
from mqtool.store.mapped_files import map_file

CACHE_MESSAGES = 1 << 15
READ_AHEAD = 1024  # bytes read with the header: most records fit in one read
WINDOW = 16 << 10  # bytes read at once by a walk forward (`MappedBase._read`)
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
# the record's fixed-width runs, as `mqtool.formats.commitlog` lays them out
_HEAD, _STORE_TS, _TAIL, _PROPS_LEN = (
    layout.struct_format(f)
    for f in (commitlog.HEADER, commitlog.AFTER_BORN_HOST, commitlog.AFTER_STORE_HOST, [commitlog.PROPERTIES_LENGTH])
)
_TOPIC_LEN = {MESSAGE_MAGIC_CODE: layout.struct_format([commitlog.TOPIC_LENGTH_V1]),
              MESSAGE_MAGIC_CODE_V2: layout.struct_format([commitlog.TOPIC_LENGTH_V2])}  # fmt: skip
# BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES .. BODYLENGTH of a record with IPv4 hosts, in one unpack
_MID_V4 = struct.Struct(f">{HOST_SIZE_V4}s{_STORE_TS.format[1:]}{HOST_SIZE_V4}s{_TAIL.format[1:]}")
_LEAD = layout.struct_format(commitlog.HEADER[:2])  # TOTALSIZE, MAGICCODE


class Span(NamedTuple):
    """The range [lo, hi) of CommitLog file `index` (it starts at `start`, open as `fd`) the fast reads read."""

    lo: int
    hi: int
    start: int
    fd: int
    index: int


class _Units:
    """One queue's units [first, first + n) as columns; `ok` is False for a unit that is not written."""

    __slots__ = ("first", "offset", "size", "tags", "ok")

    def __init__(self, first: int, offset: np.ndarray, size: np.ndarray, tags: np.ndarray, ok: np.ndarray) -> None:
        self.first, self.offset, self.size, self.tags, self.ok = first, offset, size, tags, ok


class MappedBase(DiskBase):
    """`DiskBase` with column-copied ConsumeQueues, `pread` record reads and a bounded message cache."""

    def __init__(self, store: Any, cache_messages: int = CACHE_MESSAGES) -> None:
        super().__init__(store)
        self._units: dict[tuple[str, int], _Units | None] = {}
        self._min: dict[tuple[str, int], int] = {}
        # FIFO eviction by `popitem(last=False)`: deleting a plain dict's first key again and again
        # leaves dummies that `next(iter(d))` walks over each time (30 s per 300,000 reads)
        self._lru: OrderedDict[int, SimMessage] = OrderedDict()
        self._cache_size = cache_messages
        files = store.commitlog.queue.files
        self._starts = [f.start for f in files]
        self._size = store.commitlog.queue.file_size
        self._files = files
        self._fds: dict[int, int] = {}
        self._lengths: dict[int, int] = {}  # `_file_length`
        self._topics: dict[bytes, str] = {}
        self._hosts: dict[bytes, str] = {}
        self._span: Span | None = None  # `_file` of the last read
        self._win, self._win_at, self._last = b"", 0, -1  # the last `WINDOW` read, where it starts; the last read
        # the plain key sequences `batchread` has seen, per set of wanted keys: learnt anew by each base
        self.templates: dict[tuple[str, ...], propscan.Templates] = {}

    # ----- ConsumeQueues -----
    def cq_min(self, topic: str, qid: int) -> int:
        key = (topic, qid)
        v = self._min.get(key)
        if v is None:
            v = self._min[key] = super().cq_min(topic, qid)
        return v

    def _queue(self, topic: str, qid: int) -> _Units | None:
        key = (topic, qid)
        if key in self._units:
            return self._units[key]
        q = self._cq(topic, qid)
        u = None
        if q is not None:
            u = self._load(q, self.cq_min(topic, qid), self.cq_max(topic, qid))
        self._units[key] = u
        return u

    @staticmethod
    def _load(q, first: int, stop: int) -> _Units:
        """Units [first, stop) as `ConsumeQueue.unit` reads them: not written (None) in a gap between
        files, past a file's end, or all zero."""
        n = max(0, stop - first)
        offset = np.zeros(n, np.int64)
        size = np.zeros(n, np.int32)
        tags = np.zeros(n, np.int64)
        ok = np.zeros(n, bool)
        taken = np.zeros(n, bool)  # `file_for`: the first listed file that covers a unit answers for it
        fsize = q.queue.file_size
        for f in q.queue.files:
            lo = max(first, -(-f.start // CQ_UNIT_SIZE))
            hi = min(stop, (f.start + max(f.length, fsize)) // CQ_UNIT_SIZE)
            if lo >= hi:
                continue
            a = lo - first
            with map_file(f.path) as buf:
                view = fastscan.cq_view(buf, lo * CQ_UNIT_SIZE - f.start)[: hi - lo]
                b = a + len(view)
                free = ~taken[a:b]
                o, sz, t = (view[name].astype(np.int64) for name in ("commitlog_offset", "size", "tags_code"))
                del view
            offset[a:b] = np.where(free, o, offset[a:b])
            size[a:b] = np.where(free, sz, size[a:b])
            tags[a:b] = np.where(free, t, tags[a:b])
            ok[a:b] |= free & ((o != 0) | (sz != 0) | (t != 0))
            taken[a : hi - first] = True
        return _Units(first, offset, size, tags, ok)

    def cq_unit(self, topic: str, qid: int, offset: int) -> tuple[int, int, int] | None:
        if offset >= self.cq_max(topic, qid):
            return None
        u = self._queue(topic, qid)
        if u is None:
            return None
        i = offset - u.first
        if i < 0:
            return super().cq_unit(topic, qid, offset)  # before the first file: as the reader says
        if i >= len(u.ok) or not u.ok[i]:
            return None
        return int(u.offset[i]), int(u.size[i]), int(u.tags[i])

    def cq_units(self, topic: str, qid: int, start: int, stop: int):
        """(offset, unit) for the units in [start, stop), up to the first one that cannot be read;
        converted to Python a growing slice at a time (a walk often stops after a few units)."""
        u = self._queue(topic, qid)
        stop = min(stop, self.cq_max(topic, qid))
        if u is None or start < u.first:
            yield from super().cq_units(topic, qid, start, stop)
            return
        step = 16
        off = start
        while off < stop:
            a = off - u.first
            b = min(stop - u.first, a + step)
            ok = u.ok[a:b]
            good = b if ok.all() else a + int(np.argmin(ok))  # up to the first unit not written
            cols = (u.offset[a:good].tolist(), u.size[a:good].tolist(), u.tags[a:good].tolist())
            yield from zip(range(off, good - a + off), zip(*cols, strict=True), strict=True)
            if good < b:
                return
            off += b - a
            step = min(step * 4, 4096)

    # ----- records -----
    def message(self, phys: int) -> SimMessage | None:
        if self.recovery is not None and phys >= self.recovery.end:
            return None  # cut by the broker's recovery (`DiskBase`)
        m = self._lru.get(phys)
        if m is None:
            m = self._read(phys)
            if m is None:
                m = super().message(phys)  # the reference path: errors and odd records as before
                self._cache.pop(phys, None)
            if m is not None:
                if len(self._lru) >= self._cache_size:
                    self._lru.popitem(last=False)
                self._lru[phys] = m
        return m

    def message_once(self, phys: int) -> SimMessage | None:
        """`message(phys)` for a record read for the last time (a delivery): not put in the cache,
        which it would only push older entries out of."""
        if self.recovery is not None and phys >= self.recovery.end:
            return None
        m = self._lru.get(phys) or self._read(phys)
        return m if m is not None else self.message(phys)  # the reference path, cached as before

    def props(self, phys: int) -> dict[str, str] | None:
        """`message(phys).props`, without a `SimMessage` or the cache: the timer's enqueue reads only
        the properties of a record it will read again, whole, when its slot comes (maybe a day later)."""
        if self.recovery is not None and phys >= self.recovery.end:
            return None
        m = self._lru.get(phys)
        props = m.props if m is not None else self._read(phys, False)
        if props is None:
            m = self.message(phys)  # the reference path decides
            return None if m is None else m.props
        return props

    def _host(self, raw: bytes) -> str:
        """`fastscan.host_text`, remembered (a store has a few hosts)."""
        s = fastscan.host_text(raw)
        if len(self._hosts) < 4096:
            self._hosts[raw] = s
        return s

    def _file_length(self, i: int) -> int:
        """The size of CommitLog file `i` on disk (where a `pread` of it ends)."""
        n = self._lengths.get(i)
        if n is None:
            n = self._lengths[i] = os.fstat(self._fd(i)).st_size
        return n

    def _fd(self, i: int) -> int:
        fd = self._fds.get(i)
        if fd is None:
            fd = self._fds[i] = os.open(self._files[i].path, os.O_RDONLY)
        return fd

    def _file(self, phys: int) -> Span | None:
        """The range of the file holding `phys` that the fast reads read from it, or None: before the first
        file, past a file's length, or where files overlap (the reference path decides there)."""
        i = bisect.bisect_right(self._starts, phys) - 1
        if i < 0:
            return None
        f = self._files[i]
        prev = self._files[i - 1] if i > 0 else None
        lo = f.start if prev is None else prev.start + max(prev.length, self._size)
        if phys < lo or phys - f.start >= f.length:
            return None
        hi = f.start + f.length
        if i + 1 < len(self._starts):
            hi = min(hi, self._starts[i + 1])  # the next file answers from its start on
        return Span(max(lo, f.start), hi, f.start, self._fd(i), i)

    def _bytes(self, phys: int) -> tuple[bytes, int] | None:
        """(bytes holding the whole record at `phys` from their position `o` on, `o`) by one or two `pread`s,
        or None when fewer than a header's bytes are there or the lead cannot be a record's (its length is
        then not read)."""
        span = self._span
        if span is None or not span.lo <= phys < span.hi:
            span = self._file(phys)
            if span is None:
                return None
            self._span = span
        _lo, _hi, start, fd, _i = span
        # a walk forward reads `WINDOW` bytes at once and slices the next records from them (a `pread`
        # of 16 KB costs little more than one of 1 KB); the bytes are the file's, whichever read brought them
        buf = self._win
        o = phys - self._win_at
        last, self._last = self._last, phys
        if o < 0 or o + READ_AHEAD > len(buf) or self._win_at < _lo:
            if 0 < phys - last < WINDOW:
                buf = self._win = os.pread(fd, WINDOW, phys - start)
                self._win_at = phys
            else:
                buf = os.pread(fd, READ_AHEAD, phys - start)
            o = 0
        if len(buf) - o < _HEAD.size:
            return None
        total, magic = _LEAD.unpack_from(buf, o)
        if total > len(buf) - o:
            if magic not in _MAGICS or total > propscan.MAX_TOTAL:
                return None
            return os.pread(fd, total, phys - start), 0
        return buf, o

    def _read(self, phys: int, whole: bool = True, light: bool = False):
        """The record at `phys`; None for anything but a plain, whole record. `whole` False: only its
        properties map, by the batch reader's checks (`propscan.row`); with `light`, (properties map,
        BODYLENGTH, SYSFLAG). A whole record is decoded by `struct` with its own bounds checks: a call of
        the kernel costs more than they do (2 us a record)."""
        got = self._bytes(phys)
        if got is None:
            return None
        buf, o = got
        if not whole:
            row = propscan.row(buf, o, 0, len(buf), o + 1)
            if row[propscan.STATUS] < 0:
                return None
            raw = buf[row[propscan.PROPS_START] : row[propscan.PROPS_END]].decode("utf-8", "surrogateescape")
            props = parse_properties(raw)
            return (props, row[propscan.BODY_LENGTH], row[propscan.SYSFLAG]) if light else props
        total, magic, _crc, qid, flag, qoff, _physf, sysflag, born_ts = _HEAD.unpack_from(buf, o)
        end = o + total
        p = o + _HEAD.size
        bn, sn = host_size(sysflag & BORNHOST_V6), host_size(sysflag & STOREHOST_V6)
        try:
            hosts = self._hosts
            if bn == sn == HOST_SIZE_V4:  # the usual record: hosts, store time and tail in one unpack
                raw_born, store_ts, raw_store, reconsume, prepared, body_len = _MID_V4.unpack_from(buf, p)
                p += _MID_V4.size
            else:
                raw_born = buf[p : p + bn]
                (store_ts,) = _STORE_TS.unpack_from(buf, p + bn)
                raw_store = buf[p + bn + _STORE_TS.size : p + bn + _STORE_TS.size + sn]
                p += bn + _STORE_TS.size + sn
                reconsume, prepared, body_len = _TAIL.unpack_from(buf, p)
                p += _TAIL.size
            born_host = hosts.get(raw_born) or self._host(raw_born)
            store_host = hosts.get(raw_store) or self._host(raw_store)
            if body_len < 0 or p + body_len > end:
                return None
            body = buf[p : p + body_len]
            p += body_len
            topic_len_fmt = _TOPIC_LEN[magic]
            (topic_len,) = topic_len_fmt.unpack_from(buf, p)
            raw_topic = buf[p + topic_len_fmt.size : p + topic_len_fmt.size + topic_len]
            p += topic_len_fmt.size + topic_len
            (props_len,) = _PROPS_LEN.unpack_from(buf, p)
            p += _PROPS_LEN.size
            if topic_len < 0 or props_len < 0 or p + props_len > end:
                return None
            raw = buf[p : p + props_len].decode("utf-8", "surrogateescape")
        except Exception:  # noqa: BLE001 - a record the fast path does not understand: the reference path decides
            return None
        topic = self._topics.get(raw_topic)
        if topic is None:
            topic = self._topics[raw_topic] = raw_topic.decode("utf-8", "surrogateescape")
        # `SimMessage(topic, qid, props, body=..., ...)` without the dataclass's keyword `__init__`
        m = _new_message(SimMessage)
        m.topic = topic
        m.queue_id = qid
        m.props = parse_properties(raw)
        m.body = body
        m.body_len = body_len
        m.born_ts = born_ts
        m.store_ts = store_ts
        m.sys_flag = sysflag
        m.flag = flag
        m.reconsume_times = reconsume
        m.prepared_tx_offset = prepared
        m.phys = phys
        m.size = total
        m.queue_offset = qoff
        m.born_host = born_host
        m.store_host = store_host
        m.props_raw = raw
        m.service = ""
        m.source_phys = -1
        m.tags_code = 0
        return m

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._span = None  # its descriptor is closed
        self._win, self._win_at = b"", 0
