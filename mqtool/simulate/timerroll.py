"""`TimerRolls`: a ROLL unit's re-put to the timer topic kept as a row (`convert` with needRoll, then `doPut`).

Where no fault can refuse a put and no cancel waits in the slot, in a run that spools the timer topic's re-puts, a
roll of a store's record (read batch-wise: `sources`) is kept as a row instead of `TimerDequeue.put`'s
`StoreModel.append` of the converted record (`keep`); the spool rebuilds the record from it (`rebuild`) when anyone
reads it, and the enqueue takes the values it needs from the row (`enqueue_values`).
"""

from __future__ import annotations

from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.formats.properties import key_order
from mqtool.formats.timerlog import MAGIC_ROLL
from mqtool.rules.timer import CONVERT_SET, convert_size_change, next_roll_times
from mqtool.simulate.batchread import batchable, read_plain
from mqtool.simulate.model import SimMessage, tags_code
from mqtool.simulate.timerenqueue import DEQ_SEG, ENQ_SEG, NP_MAX
from mqtool.simulate.timerstate import TimerState, cached_text, int_or, signed, text

_U64 = (1 << 64) - 1
# the values `keep` takes from a plain string (`read_plain(sources=True)`)
ROLL_WANTED = (
    (
        PROPERTY_TIMER_OUT_MS,
        PROPERTY_TIMER_DEL_UNIQKEY,
        PROPERTY_REAL_TOPIC,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    )
    + CONVERT_SET
    + (PROPERTY_TAGS,)
)
_TIMER_TOPIC_B = TIMER_TOPIC.encode()


class TimerRolls:
    """A slot's rolls kept as rows."""

    def __init__(self, st: TimerState) -> None:
        self.st = st

    def sources(self, chain: list[tuple], lo: int, hi: int) -> dict[int, tuple] | None:
        """`read_plain(sources=True)` of the store records the ROLL units among `chain[lo:hi]` ((pos, unit and row))
        point at, by index (absent: read whole); None when the base is not read batch-wise."""
        m = self.st.ctx.model
        base = m.base
        if not batchable(base):
            return None
        msgs, spooled, lru = m.messages, m.spool, base.cache
        at, phys, sizes = [], [], []
        for i in range(lo, min(hi, len(chain))):
            _pos, (_prev, magic, write, _slot, ph, size, _hash, _meta, _hi, _lo) = chain[i]
            if magic & MAGIC_ROLL and write != -1 and not (ph in msgs or ph in spooled or ph in lru):  # `need_roll`
                at.append(i)
                phys.append(ph)
                sizes.append(size)
        read = read_plain(base, phys, sizes, ROLL_WANTED, sources=True)
        return {i: rec for i, rec in zip(at, read, strict=True) if rec is not None}

    def keep(self, unit: tuple, rec: tuple, slot_time: int) -> bool:
        """The roll re-put `TimerDequeue.put` would make of a unit's store record, from `rec`
        (`read_plain(sources=True)`: topic, QUEUEID, the size of its properties string with the last separator,
        BODYLENGTH and hosts, and the `ROLL_WANTED` values as bytes): its size with the three values `convert` sets
        (`StoreModel.reput_size`'s arithmetic), placed by `StoreModel.append_unit`, kept by the spool as a row
        (`RecordSpool.put_row`) of what `rebuild` and `enqueue_values` need. False (nothing done) where a row cannot
        hold it: no enqueue time to set, a cancel marker, values a row cannot hold."""
        topic, qid, n, (out_b, del_b, real_b, qid_b, uniq_b, enq_b, times_b, deq_b, tags_b) = rec
        _prev, _magic, write, _slot, ph, _size, _hash, _meta, _hi, _lo = unit
        if topic != _TIMER_TOPIC_B or qid != 0 or del_b is not None or write == -1:
            return False
        try:
            due = int(out_b)
        except (TypeError, ValueError):
            return False  # (absent, or not a number: the record is read whole)
        real, qid_text, uk = cached_text(real_b), cached_text(qid_b), text(uniq_b)
        real_qid = int_or(qid_text)
        if real_qid is None or not 0 <= due <= NP_MAX:
            return False
        st = self.st
        ctx, m = st.ctx, st.ctx.model
        now = ctx.clock()
        enq_s, deq_s, times = str(write), str(now), next_roll_times(times_b)
        n += convert_size_change(
            tuple(None if v is None else len(v) for v in (enq_b, times_b, deq_b)), (enq_s, times, deq_s)
        )
        # the delivery's row: the re-put's size but its topic part and the two properties the dequeue sets
        plain_size = n - len(enq_s) - ENQ_SEG - len(deq_s) - DEQ_SEG
        ((meta, hi, lo),) = st.rows.of_plain([plain_size], [real], [qid_text], [uk])
        if not meta:
            return False
        tags = tags_code({PROPERTY_TAGS: text(tags_b)})
        q = m.queue_info(TIMER_TOPIC, 0)
        size = m.plain_reput_size(n, q.fixed)
        pos, queue_offset = m.append_unit(q, size, tags)
        m.spool.put_row(
            pos, (ph, size, queue_offset, now, write, times, tags, due, meta, signed(hi), signed(lo)), self.rebuild
        )
        st.rolled += 1
        log = ctx.log
        if not log.keep:
            log.tally("roll")
            return True
        st.add_event("roll", (ctx.engine.now, real, real_qid, uk, ph, pos, slot_time, times))
        return True

    def rebuild(self, phys: int, row: tuple) -> SimMessage | None:
        """The roll re-put at `phys` a row stands for (`keep`), as `TimerDequeue.put` would have put it: the source read
        again, its properties with the three values set (appended where new) in the stored order, placed
        where the row says."""
        m = self.st.ctx.model
        origin, size, queue_offset, store_ts, enqueue_ms, times, tags, *_enqueue_values = row
        base = m.base
        once = getattr(base, "message_once", None)
        src = once(origin) if once is not None else base.message(origin)
        if src is None:
            return None
        props = dict(src.props)
        for key, value in zip(CONVERT_SET, (enqueue_ms, times, store_ts), strict=True):
            props[key] = str(value)  # `convert_properties` as the put made it (the roll count kept in the row)
        order, _names_len = key_order(tuple(props), m.capacity)
        n = src.derive(src.topic, src.queue_id, props if order is None else {k: props[k] for k in order})
        n.phys, n.size, n.queue_offset = phys, size, queue_offset
        n.store_ts, n.service, n.tags_code = store_ts, "timer", tags
        return n

    def enqueue_values(self, phys: int) -> tuple | None:
        """What the enqueue takes from a roll re-put kept as a row (`keep`): (TIMER_OUT_MS, False (no
        TIMER_DEL_UNIQKEY), REAL_TOPIC, REAL_QID text, UNIQ_KEY, the re-put's size for `DeliveryRows.of_plain`),
        the values it takes from a plain string; None for any other record."""
        st = self.st
        spool = st.ctx.model.spool
        r = spool.row(phys) if spool is not None else None
        if r is None:
            return None
        _origin, _size, _qo, _store_ts, _enq, _times, _tags, due, meta, hi, lo = r
        x = (meta, hi & _U64, lo & _U64)
        topic, qid = st.rows.topic_qid(meta)
        return due, False, topic, str(qid), st.rows.uniq_key(x), meta >> 34
