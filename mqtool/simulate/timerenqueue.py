"""`TimerEnqueue`: `TimerEnqueueGetService` + `TimerEnqueuePutService` over the timer topic's queue 0.

From `currQueueOffset` on, each record's TIMER_OUT_MS: before `currWriteTimeMs` the message is put at once
(`rules.timer.put_at_once`, enqueue time Long.MAX_VALUE: `TimerDequeue.put`); else `doEnqueue` appends a
52-byte unit. `take` is that one step over a run of n >= 1 units (`rules.timer.do_enqueue_many`), from the
columns the walk gathers for a batch of the queue's units (`_values`); a put at once cuts the run.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain, islice

import numpy as np

from mqtool.formats.javahash import java_string_hash
from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.rules.timer import DELIVERY_SET, LONG_MAX, do_enqueue_many, format_time_ms, need_roll, put_at_once
from mqtool.simulate.batchread import batchable, close, scan_plain
from mqtool.simulate.timerstate import TimerState, cached_text, int_or, text
from mqtool.simulate.timerunits import UNIT_DTYPE
from mqtool.store import propscan

ENQUEUE_BATCH = 4096  # the queue's units the enqueue walk reads together (`_batch`)
NP_MAX = 2**62  # TIMER_OUT_MS is computed in int64: a larger one rolls as this one does (`take`)
_TEXT_KEYS = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)  # as texts
# the values `scan_plain` takes from a plain string (`_values`)
ENQ_WANTED = (PROPERTY_TIMER_OUT_MS, PROPERTY_TIMER_DEL_UNIQKEY, *_TEXT_KEYS, *DELIVERY_SET)
ENQ_VALUES = ("due", "delete", "real_topic", "real_qid", "uniq_key", "src")  # `_values`' columns, `take`'s arguments
ENQ_SEG, DEQ_SEG = (len(k) + 2 for k in DELIVERY_SET)  # the two dequeue properties' name and separators
_MATCHED = 1  # `propscan.STATUS` of a record a template matched (0: the map parsed instead; -1: not read)
_PASSED_OVER = (None,) * len(ENQ_VALUES)


class TimerEnqueue:
    """The enqueue walk and its one step, `take`."""

    def __init__(self, st: TimerState, put, roll_values) -> None:
        self.st = st
        self.put = put  # `TimerDequeue.put`: a message put at once
        self.roll_values = roll_values  # `TimerRolls.enqueue_values`

    def on_append(self) -> None:
        enq = self.st.enq
        if enq is not None and enq.alive and enq.wake_time is None:
            enq.wake(0)

    def loop(self):
        st = self.st
        ctx, m = st.ctx, st.ctx.model
        p = st.precision
        while True:
            lo = m.cq_min(TIMER_TOPIC, 0)
            if st.curr_queue_offset < lo:
                st.curr_queue_offset = lo
            hi = m.cq_max(TIMER_TOPIC, 0)
            while st.curr_queue_offset < hi:
                write = format_time_ms(ctx.clock(), p)  # no time passes in the walk
                units = list(islice(m.cq_units(TIMER_TOPIC, 0, st.curr_queue_offset, hi), ENQUEUE_BATCH))
                if not units:
                    st.curr_queue_offset += 1  # a unit that cannot be read is passed over
                    continue
                retry = self._batch(units, write)
                if retry is not None:
                    yield from retry  # the put waits: re-read the queue afterwards
                hi = m.cq_max(TIMER_TOPIC, 0)
            yield None

    def _batch(self, units: list, write: int):
        """The walk over a batch of queue units ((offset, (phys, size, tags))): `take` of the units up to each
        one put at once, then its put; None when done, else the put's retries (the walk stops after it)."""
        st = self.st
        m = st.ctx.model
        offs, cq_units = zip(*units, strict=True)
        phys, sizes, _tags = map(list, zip(*cq_units, strict=True))
        cols = self._values(offs, phys, sizes)
        due, *_others = cols
        n = len(units)
        start = 0
        while start < n:
            end = next((k for k in range(start, n) if due[k] is not None and put_at_once(due[k], write)), n)
            run = [k for k in range(start, end) if due[k] is not None]
            if run:
                run_phys, run_sizes, *run_values = ([col[k] for k in run] for col in (phys, sizes, *cols))
                st.wake_dequeue(self.take(run_phys, run_sizes, run_values, write))
            if end == n:
                break
            st.curr_queue_offset = offs[end] + 1
            retry = self.put(m.message(phys[end]), LONG_MAX, 0, due[end], direct=True)
            if retry is not None:
                return retry
            m.release(phys[end])  # delivered at once: no unit points at it
            start = end + 1
        st.curr_queue_offset = offs[-1] + 1
        return None

    def _values(self, offs: list[int], phys: list[int], sizes: list[int]) -> list[list]:
        """`take`'s columns (`ENQ_VALUES`) of a batch's records: the store's own records' from one
        `batchread.scan_plain` (`_scanned_columns`), any other's from its roll row (`TimerRolls.enqueue_values`),
        else from its map (`_map_values`); all None for a record passed over."""
        st = self.st
        b = st.ctx.model.base
        n = len(phys)
        own = bisect_left(offs, b.cq_max(TIMER_TOPIC, 0)) if batchable(b) else 0  # the store's records first
        scanned = scan_plain(b, phys[:own], sizes[:own], ENQ_WANTED) if own else None
        ks, matched = [], []
        if scanned is not None:
            buf, out, _answers = scanned
            try:
                ks = self._matched(out, phys[:own])
                matched = _scanned_columns(out, buf, ks)
            finally:
                close(buf)
            if len(ks) == n:
                return matched
        got = dict(zip(ks, zip(*matched, strict=True), strict=True))
        for k in set(range(n)).difference(ks):
            got[k] = self.roll_values(phys[k]) or _map_values(st.props_rec(phys[k])) or _PASSED_OVER
        return [list(col) for col in zip(*map(got.__getitem__, range(n)), strict=True)]

    def _matched(self, out: np.ndarray, phys: list[int]) -> list[int]:
        """The records of `batchread.scan_plain`'s columns whose values are taken as columns: matched by a
        template, with a TIMER_OUT_MS of ASCII digits, read here (not in the overlay, spool or read cache)."""
        m = self.st.ctx.model
        ok = (out[:, propscan.STATUS] == _MATCHED) & (out[:, propscan.FIXED] >= 0) & (out[:, propscan.NUMBER] >= 0)
        for held in (m.messages, m.spool if m.spool is not None else {}, m.base.cache):
            if any(map(held.__contains__, phys)):
                ok &= ~np.fromiter(map(held.__contains__, phys), bool, len(phys))
        return np.flatnonzero(ok).tolist()

    def take(self, phys: list[int], sizes: list[int], values: list[list], write: int) -> int:
        """`doEnqueue` of a run of n >= 1 units in order, from `_values`' columns (`ENQ_VALUES`; `srcs`: the re-put's
        size for `DeliveryRows.of_plain`, or (properties, BODYLENGTH or None, SYSFLAG) for `of_props`); each slot's
        chain linked in order, the units' columns written together, the events by one `EventLog.batch`. Returns
        the earliest slot (the caller wakes the dequeue for it)."""
        due, delete, reals, qid_texts, uniqs, srcs = values
        st = self.st
        n = len(phys)
        try:
            due_a = np.array(due, np.int64)
        except OverflowError:  # past int64: any TIMER_OUT_MS past NP_MAX rolls as NP_MAX does
            due_a = np.array([max(min(d, NP_MAX), -NP_MAX) for d in due], np.int64)
        slot_a, magic_a = do_enqueue_many(due_a, write, st.window, st.precision, np.array(delete, bool))
        slot_of = slot_a.tolist()
        positions = [st.next_unit_pos() for _ in range(n)]
        prevs = []
        for t, pos in zip(slot_of, positions, strict=True):
            last = st.last_pos(t)
            prevs.append(-1 if last is None else last)
            st.slots[t] = pos
            st.queue_slot(t)
        hashes = st.topic_hash
        for real in set(reals).difference(hashes):
            hashes[real] = java_string_hash(real)
        rows = np.empty(n, UNIT_DTYPE)
        rows["prev_pos"] = prevs
        rows["magic"] = magic_a
        rows["write_time"] = write
        rows["delayed_time"] = slot_a
        rows["offset_py"] = phys
        rows["size_py"] = sizes
        rows["topic_hash"] = [hashes[real] for real in reals]
        extra = self._delivery_rows(srcs, delete, magic_a, reals, qid_texts, uniqs)
        st.units.put_run(positions, rows, extra)
        st.new_units.extend(positions)
        ctx = st.ctx
        log = ctx.log
        if log.keep:
            qids = {q: int_or(q) for q in set(qid_texts)}
            qid_of = list(map(qids.__getitem__, qid_texts))
            detail = {"slot": slot_of, "timer_out_ms": due, "roll": need_roll(magic_a), "cancel": delete}
            detail["timerlog_pos"] = positions
            log.batch(ctx.engine.now, "timer", "enqueue", reals, qid_of, uniqs, phys, None, **detail)
        else:
            log.tally("enqueue", n)
        return min(slot_of)

    def _delivery_rows(
        self, srcs: list, delete: list[bool], magic_a: np.ndarray, reals: list, qid_texts: list, uniqs: list
    ) -> np.ndarray:
        """The `DeliveryRows` kept beside a run's units (uint64 rows of 3; `NO_ROW` for a ROLL or cancel unit,
        whose record is read again)."""
        rows = self.st.rows
        extra = np.zeros((len(srcs), 3), np.uint64)
        kept = np.flatnonzero(~need_roll(magic_a) & ~np.array(delete, bool)).tolist()
        plain = [k for k in kept if srcs[k].__class__ is int]
        if plain:
            packed = rows.of_plain(*([col[k] for k in plain] for col in (srcs, reals, qid_texts, uniqs)))
            extra[plain] = np.fromiter(chain.from_iterable(packed), np.uint64, 3 * len(plain)).reshape(-1, 3)
        for k in kept:
            if srcs[k].__class__ is not int:
                props, body_len, sys_flag = srcs[k]
                if body_len is not None:
                    extra[k] = rows.of_props(props, body_len, sys_flag)
        return extra


def _map_values(rec: tuple) -> tuple | None:
    """`take`'s values of a record from its (properties, BODYLENGTH, SYSFLAG): None where it is not read or
    has no TIMER_OUT_MS that is a number (passed over)."""
    props, _body_len, _sys_flag = rec
    try:
        delayed = int(props[PROPERTY_TIMER_OUT_MS])
    except (TypeError, KeyError, ValueError):  # (TypeError: no properties)
        return None
    real, qid, uk = map(props.get, _TEXT_KEYS)
    return delayed, props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None, real, qid, uk, rec


def _scanned_columns(out: np.ndarray, buf, ks: list[int]) -> list[list]:
    """(due, delete, REAL_TOPIC, REAL_QID, UNIQ_KEY, re-put size) of the matched records `ks` of
    `scan_plain`'s `out` (the re-put's size less the two properties the dequeue sets)."""
    F, W = propscan.FIXED, propscan.STRIDE
    rows = out[ks]
    cols: list = [rows[:, propscan.NUMBER].tolist(), (rows[:, F + W] >= 0).tolist()]
    for w, decode in ((2, cached_text), (3, cached_text), (4, text)):
        starts, ends = rows[:, F + W * w].tolist(), rows[:, F + W * w + 1].tolist()
        cols.append([decode(buf[s:e] if s >= 0 else None) for s, e in zip(starts, ends, strict=True)])
    size = rows[:, propscan.SIZE].copy()
    for w, seg in ((5, ENQ_SEG), (6, DEQ_SEG)):
        s, e = rows[:, F + W * w], rows[:, F + W * w + 1]
        size -= np.where(s >= 0, e - s + seg, 0)
    cols.append(size.tolist())
    return cols
