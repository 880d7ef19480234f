"""`MappedBase`: the simulator's read side of a store on disk, for runs over millions of records.

- a queue's units are copied once, on first use, into numpy columns (`store.queueunits`), and handed out
  as tuples a slice at a time;
- a record's bytes are read by `pread` (`store.recordfiles`), checked by `propscan.row` (the batch
  reads' own checks) and its fields unpacked by `mqtool.formats.message`'s `HEAD_FORMAT` and `MID_FORMATS`; anything
  unusual (bad magic, a short read, lengths past the record, files that overlap) is read by the store's
  own reader (`_stored`), as tests/reference_base.py (the reference) reads every record;
- decoded messages are kept in a bounded cache (services never change a message they read:
  they copy its properties before editing them), so memory does not grow with the store.

After a crash (`recovery`) the store is seen as the broker's recovery leaves it: new records go at the
recovered CommitLog end, ConsumeQueues end at their truncated max offset, and a record at or past the
end reads as absent (a dangling TimerLog unit finds nothing there, or what the simulator wrote there).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from mqtool.formats.message import HEAD_FORMAT, HOST_BITS, MID_FORMATS
from mqtool.formats.properties import parse_properties
from mqtool.simulate.model import SimMessage, message_of
from mqtool.store import fastscan, propscan
from mqtool.store.queueunits import QueueUnits, queue_units
from mqtool.store.recordfiles import RecordFiles
from mqtool.store.recovery import Recovered, recovered

if TYPE_CHECKING:
    from mqtool.store.store import Store

CACHE_MESSAGES = 1 << 15


class MappedBase:
    """A `Store` opened read-only, as the simulator reads it: column-copied ConsumeQueues, `pread` record reads
    and a bounded message cache. `recovery` True: the store as the broker's recovery leaves it; None: as scanned."""

    def __init__(
        self, store: Store, cache_messages: int = CACHE_MESSAGES, recovery: Recovered | None | bool = True
    ) -> None:
        self.store = store
        self.file_size = store.commitlog.queue.file_size or store.config.mapped_file_size_commitlog
        self.dledger = getattr(store, "dledger", None) is not None  # records are DLedger entries' bodies
        self.recovery: Recovered | None = recovered(store) if recovery is True else (recovery or None)
        self._max: dict[tuple[str, int], int] = {}
        self._min: dict[tuple[str, int], int] = {}
        self._units: dict[tuple[str, int], QueueUnits | None] = {}
        # FIFO eviction by `popitem(last=False)`: deleting a plain dict's first key again and again
        # leaves dummies that `next(iter(d))` walks over each time (30 s per 300,000 reads)
        self.cache: OrderedDict[int, SimMessage] = OrderedDict()  # the read cache: phys -> message
        self._cache_size = cache_messages
        self.files = RecordFiles(store.commitlog.queue)
        self._topics: dict[bytes, str] = {}
        self._hosts: dict[bytes, str] = {}
        # the plain key sequences `batchread` has seen, per set of wanted keys: learnt anew by each base
        self.templates: dict[tuple[str, ...], propscan.Templates] = {}

    # ----- ConsumeQueues -----
    def cq_max(self, topic: str, qid: int) -> int:
        key = (topic, qid)
        v = self._max.get(key)
        if v is None:
            q = self.store.consume_queue(topic, qid)
            v = q.max_offset if q is not None else 0
            if self.recovery is not None:
                v = min(v, self.recovery.max_offsets.get(key, v))
            self._max[key] = v
        return v

    def cq_min(self, topic: str, qid: int) -> int:
        key = (topic, qid)
        v = self._min.get(key)
        if v is None:
            q = self.store.consume_queue(topic, qid)
            v = self._min[key] = q.first_offset if q is not None else 0
        return v

    def queue_ids(self, topic: str) -> list[int]:
        return [q for t, q in self.store.queue_ids if t == topic]

    def units(self, topic: str, qid: int) -> QueueUnits | None:
        key = (topic, qid)
        if key in self._units:
            return self._units[key]
        q = self.store.consume_queue(topic, qid)
        u = None
        if q is not None:
            u = queue_units(q, self.cq_min(topic, qid), self.cq_max(topic, qid))
        self._units[key] = u
        return u

    def cq_unit(self, topic: str, qid: int, offset: int) -> tuple[int, int, int] | None:
        if offset >= self.cq_max(topic, qid):
            return None
        u = self.units(topic, qid)
        if u is None:
            return None
        i = offset - u.first
        if i < 0 or i >= len(u.ok) or not u.ok[i]:  # before the first file (no file holds it) or not written
            return None
        return int(u.offset[i]), int(u.size[i]), int(u.tags[i])

    def cq_units(self, topic: str, qid: int, start: int, stop: int):
        """(offset, unit) for the units in [start, stop), up to the first one that cannot be read;
        converted to Python a growing slice at a time (a walk often stops after a few units)."""
        u = self.units(topic, qid)
        stop = min(stop, self.cq_max(topic, qid))
        if u is None or start < u.first:
            return  # no file holds the first unit
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
    def message(self, phys: int, cache: bool = True) -> SimMessage | None:
        if self.recovery is not None and phys >= self.recovery.end:
            return None  # cut by the broker's recovery
        m = self.cache.get(phys)
        if m is None:
            m = self.read(phys) or self._stored(phys)
            if m is not None and cache:
                if len(self.cache) >= self._cache_size:
                    self.cache.popitem(last=False)
                self.cache[phys] = m
        return m

    def message_once(self, phys: int) -> SimMessage | None:
        """A record read for the last time (a delivery): not put in the cache, which it would only push older
        entries out of."""
        return self.message(phys, False)

    def props(self, phys: int) -> dict[str, str] | None:
        """`message(phys).props`, without a `SimMessage` or the cache: the timer's enqueue reads only
        the properties of a record it will read again, whole, when its slot comes (maybe a day later)."""
        if self.recovery is not None and phys >= self.recovery.end:
            return None
        m = self.cache.get(phys)
        props = m.props if m is not None else self.read(phys, False)
        if props is None and (m := self.message(phys)) is not None:  # the store's reader decides
            props = m.props
        return props

    def max_phys(self) -> int:
        return self.recovery.end if self.recovery is not None else self.store.commitlog.max_offset()

    def _stored(self, phys: int) -> SimMessage | None:
        """The record at `phys` as the store's own reader reads it (what `read` does not take), or None."""
        try:
            r = self.store.commitlog.read(phys)
        except ValueError:
            return None
        return message_of(
            (r.topic, r.queue_id, dict(r.properties), r.body, len(r.body), r.born_timestamp, r.store_timestamp)
            + (r.sys_flag, r.flag, r.reconsume_times, r.prepared_transaction_offset, r.physical_offset, r.total_size)
            + (r.queue_offset, r.born_host, r.store_host, r.properties_raw, "", -1, 0)
        )  # `SimMessage`'s fields in slot order

    def _host(self, raw: bytes) -> str:
        """`fastscan.host_text`, remembered (a store has a few hosts)."""
        s = fastscan.host_text(raw)
        if len(self._hosts) < 4096:
            self._hosts[raw] = s
        return s

    def read(self, phys: int, whole: bool = True, light: bool = False):
        """The record at `phys`; None for anything but a plain, whole record (`propscan.row`'s checks). `whole`
        False: only its properties map; with `light`, (properties map, BODYLENGTH, SYSFLAG)."""
        got = self.files.record(phys)
        if got is None:
            return None
        buf, o = got
        row = propscan.row(buf, o, 0, len(buf), o + 1)
        if row[propscan.STATUS] < 0:
            return None
        raw = buf[row[propscan.PROPS_START] : row[propscan.PROPS_END]].decode("utf-8", "surrogateescape")
        if not whole:
            props = parse_properties(raw)
            return (props, row[propscan.BODY_LENGTH], row[propscan.SYSFLAG]) if light else props
        # the fields the checks did not hand back, at places they proved inside the record
        total, _magic, _crc, qid, flag, qoff, _physf, sysflag, born_ts = HEAD_FORMAT.unpack_from(buf, o)
        mid = MID_FORMATS[sysflag & HOST_BITS]
        raw_born, store_ts, raw_store, reconsume, prepared, body_len = mid.unpack_from(buf, o + HEAD_FORMAT.size)
        hosts = self._hosts
        raw_topic = buf[row[propscan.TOPIC_START] : row[propscan.TOPIC_END]]
        topic = self._topics.get(raw_topic)
        if topic is None:
            topic = self._topics[raw_topic] = raw_topic.decode("utf-8", "surrogateescape")
        p = o + HEAD_FORMAT.size + mid.size
        born_host = hosts.get(raw_born) or self._host(raw_born)
        store_host = hosts.get(raw_store) or self._host(raw_store)
        return message_of(
            (topic, qid, parse_properties(raw), buf[p : p + body_len], body_len, born_ts, store_ts, sysflag, flag)
            + (reconsume, prepared, phys, total, qoff, born_host, store_host, raw, "", -1, 0)
        )  # `SimMessage`'s fields in slot order

    def close(self) -> None:
        self.files.close()
