"""The simulator's reference read side: a `Store` read through its own readers, one unit and one record a
call, every message kept (`diskread.MappedBase` must answer every read exactly as this does)."""

from __future__ import annotations

from mqtool.simulate.model import SimMessage
from mqtool.store.recovery import Recovered, recovered
from mqtool.store.store import Store


class DiskBase:
    """A `Store` opened read-only; messages are decoded on demand and cached.

    After a crash (`recovered`) the store is seen as the broker's recovery leaves it: new records go at the
    recovered CommitLog end, ConsumeQueues end at their truncated max offset, and a record at or past the
    end reads as absent (a dangling TimerLog unit finds nothing there, or what the simulator wrote there).
    """

    def __init__(self, store: Store, recovery: Recovered | None | bool = True) -> None:
        self.store = store
        self.file_size = store.commitlog.queue.file_size or store.config.mapped_file_size_commitlog
        self.dledger = getattr(store, "dledger", None) is not None  # records are DLedger entries' bodies
        self._cache: dict[int, SimMessage] = {}
        self._max: dict[tuple[str, int], int] = {}
        # True: compute it from the store; None/False: the store as scanned (no recovery applied)
        self.recovery: Recovered | None = recovered(store) if recovery is True else (recovery or None)

    def _cq(self, topic: str, qid: int):
        return self.store.consume_queue(topic, qid)

    def cq_max(self, topic: str, qid: int) -> int:
        key = (topic, qid)
        v = self._max.get(key)
        if v is None:
            q = self._cq(topic, qid)
            v = q.max_offset if q is not None else 0
            if self.recovery is not None:
                v = min(v, self.recovery.max_offsets.get(key, v))
            self._max[key] = v
        return v

    def cq_min(self, topic: str, qid: int) -> int:
        q = self._cq(topic, qid)
        return q.first_offset if q is not None else 0

    def cq_unit(self, topic: str, qid: int, offset: int) -> tuple[int, int, int] | None:
        q = self._cq(topic, qid)
        if q is None or offset >= self.cq_max(topic, qid):
            return None
        u = q.unit(offset)
        return None if u is None else (u.commitlog_offset, u.size, u.tags_code)

    def cq_units(self, topic: str, qid: int, start: int, stop: int):
        """(offset, unit) for the units in [start, stop), up to the first one that cannot be read."""
        for off in range(start, stop):
            u = self.cq_unit(topic, qid, off)
            if u is None:
                return
            yield off, u

    def message(self, phys: int) -> SimMessage | None:
        m = self._cache.get(phys)
        if m is None:
            if self.recovery is not None and phys >= self.recovery.end:
                return None
            try:
                r = self.store.commitlog.read(phys)
            except ValueError:
                return None
            m = SimMessage(
                r.topic,
                r.queue_id,
                dict(r.properties),
                body=r.body,
                born_ts=r.born_timestamp,
                store_ts=r.store_timestamp,
                sys_flag=r.sys_flag,
                flag=r.flag,
                reconsume_times=r.reconsume_times,
                prepared_tx_offset=r.prepared_transaction_offset,
                phys=r.physical_offset,
                size=r.total_size,
                queue_offset=r.queue_offset,
                born_host=r.born_host,
                store_host=r.store_host,
                props_raw=r.properties_raw,
            )
            self._cache[phys] = m
        return m

    def props(self, phys: int) -> dict[str, str] | None:
        m = self.message(phys)
        return None if m is None else m.props

    def max_phys(self) -> int:
        return self.recovery.end if self.recovery is not None else self.store.commitlog.max_offset()

    def queue_ids(self, topic: str) -> list[int]:
        return [q for t, q in self.store.queue_ids if t == topic]
