"""`TimerDequeue`: `TimerDequeueGetService` + `TimerDequeuePutService`, slot by slot (spec §6.8-6.10).

Slot by slot from `currReadTimeMs`, only while it is before `currWriteTimeMs` (= now floored to the
precision); empty slots are skipped at once. A slot's units are the chain from the wheel's `lastPos`
back along each unit's `prevPos` (`rules.timer.walk_chain`); a `prevPos` that points at no unit, or
back into the walked chain, ends the walk with a `skip` event. Cancel requests (DELETE, not ROLL) are
read first and their TIMER_DEL_UNIQKEY values collected; then the other units oldest first: a record
whose UNIQ_KEY is in that set is dropped, a ROLL unit is re-put to the timer topic (`TimerRolls`), the
rest go to REAL_TOPIC/REAL_QID (`rules.timer.convert_properties`).
"""

from __future__ import annotations

import heapq
from itertools import chain, islice

from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.formats.timerlog import MAGIC_ROLL
from mqtool.rules.timer import (
    LOOP,
    convert_properties,
    do_put_retry,
    format_time_ms,
    is_deleted,
    need_retry_sleep,
    need_roll,
    roll_times,
    walk_chain,
)
from mqtool.simulate.batchread import batchable
from mqtool.simulate.timerroll import TimerRolls
from mqtool.simulate.timerrows import delivery_size
from mqtool.simulate.timerstate import TimerState, int_or
from mqtool.simulate.timerunits import MAGIC, OFFSET_PY, PREV_POS

ROLL_CHUNK = 4096  # a slot's units whose ROLL units' records are read together (`TimerRolls.sources`)


class TimerDequeue:
    """The dequeue walk: a slot's cancels, deliveries and rolls, and the puts they make."""

    def __init__(self, st: TimerState, rolls: TimerRolls) -> None:
        self.st = st
        self.rolls = rolls

    def loop(self):
        st = self.st
        ctx = st.ctx
        p = st.precision
        # the slots' deliveries and rolls not written yet (`TimerState.add_event`): kept from slot to slot while
        # `advance` goes on without the engine, written before every yield (no other event comes between)
        st.pend_kind, st.pend_rows = None, []
        while True:
            if ctx.clock() < st.should_start:  # "TimerDequeueGetService ready to run after {shouldStartTime}"
                st.flush_events()
                yield 1000
                continue
            heap = st.heap  # replaced by a restart's recovery
            w = format_time_ms(ctx.clock(), p)
            if not heap:
                st.curr_read = max(st.curr_read, w)
                st.flush_events()
                yield None
                continue
            slot_time = heap[0]
            if slot_time >= w:
                st.curr_read = max(st.curr_read, w)
                delay = max(0, slot_time + p - ctx.clock())
                if not st.deq.advance(delay):  # the next slot at once when nothing else runs first
                    st.flush_events()
                    yield delay
                continue
            heapq.heappop(heap)
            st.queued.discard(slot_time)
            st.curr_read = slot_time
            st.in_slot = True
            waiting = self.slot(slot_time)
            if waiting is not None:
                st.flush_events()
                yield from waiting
            st.in_slot = False
            st.curr_read = slot_time + p

    def chain(self, slot_time: int) -> tuple[list[tuple], list[tuple]]:
        """The slot's (cancel requests, other units oldest first), each as (pos, unit and delivery row)."""
        st = self.st
        last = st.last_pos(slot_time)
        if last is None:
            return [], []
        w = walk_chain(last, st.read_row, PREV_POS, magic=MAGIC)
        if w.broken:
            ctx = st.ctx
            st.flush_events()  # the slots' events before this one
            why = "loops" if w.stop == LOOP else "points at no unit"
            reason = f"broken TimerLog chain: prevPos {why}"
            read = len(w.units) + len(w.cancels)
            detail = {"slot": slot_time, "timerlog_pos": w.stop_pos, "read": read, "reason": reason}
            ctx.log.emit(ctx.engine.now, "timer", "skip", None, None, None, None, **detail)
        return w.cancels, w.units[::-1]

    def slot(self, slot_time: int):
        """One slot; None when done, else a generator that finishes it (a put is being retried).

        Where no fault can refuse a put, a plain unit is delivered from its row (`deliver`): the one kept
        beside it, or one made from its record's properties (a light read where the base gives one, else the
        record); a ROLL unit's re-put is kept as a row (`TimerRolls.keep`). Any other unit, or one a row cannot
        hold, is read whole: cancelled, or put (`put`, which may wait: it cuts the walk, which goes on with the
        units after it once the put is done). Deliveries and rolls join `TimerState`'s waiting events."""
        m = self.st.ctx.model
        cancels, normal = self.chain(slot_time)  # (pos, unit and its delivery's row)
        waiting = self._walk(normal, 0, self._deletes(cancels), slot_time) if normal else None
        if waiting is None and m.releasing:  # the slot's records are read for the last time (a roll is re-put anew)
            release = m.release
            for _pos, row in chain(cancels, normal):
                release(OFFSET_PY(row))
        return waiting

    def _walk(self, normal: list[tuple], start: int, deletes: set[str], slot_time: int):
        """`slot`'s walk over its units (cancel requests aside, oldest first) from `start`: None when done, else
        a generator that finishes it (the put that waits, then the walk on from the next unit)."""
        st = self.st
        m = st.ctx.model
        fast = m.put_filter is None  # no fault can refuse a put
        message = m.message_once  # the slot's last read of each record (a rolled one is re-put anew)
        rolls = self.rolls
        # a roll's re-put kept as a row (its record read batch-wise, not built): it wakes no one but this service's
        # enqueue, and no cancel is checked
        roll_rows = fast and not deletes and m.spool is not None and len(m.queue_info(TIMER_TOPIC, 0).listeners) == 1
        sources, sources_end = None, 0
        for i, (_pos, unit) in enumerate(islice(normal, start, None), start):
            _prev, magic, write, due, phys, _size, _hash, meta, hi, lo = unit
            msg = None
            if magic & MAGIC_ROLL:  # `need_roll`
                if roll_rows:
                    if i >= sources_end:
                        sources_end = i + ROLL_CHUNK
                        sources = rolls.sources(normal, i, sources_end)
                    rec = sources.get(i) if sources else None
                    if rec is not None and rolls.keep(unit, rec, slot_time):
                        continue
            elif fast and write != -1:
                if not meta or deletes:  # the row of the record's properties
                    rec = _light_read(m, phys)
                    if rec is None:
                        msg = message(phys)
                        if msg is None:
                            continue
                        rec = (msg.props, msg.body_len, msg.sys_flag)
                    props, _body_len, _sys_flag = rec
                    if deletes and self._cancelled(props, phys, deletes, slot_time):
                        continue
                    (meta, hi, lo), due = st.rows.of_props(*rec), int_or(props.get(PROPERTY_TIMER_OUT_MS))
                if self.deliver(write, due, phys, meta, hi, lo, slot_time):
                    continue
            if msg is None:
                msg = message(phys)
                if msg is None:
                    continue
            if deletes and self._cancelled(msg.props, msg.phys, deletes, slot_time):
                continue
            st.flush_events()
            retry = self.put(msg, write, magic, slot_time, False)
            if retry is not None:
                return self._resume(retry, normal, i + 1, deletes, slot_time)
        return None

    def _resume(self, retry, normal: list[tuple], start: int, deletes: set[str], slot_time: int):
        yield from retry
        rest = self._walk(normal, start, deletes, slot_time)
        if rest is not None:
            yield from rest

    def _deletes(self, cancels: list[tuple]) -> set[str]:
        """The TIMER_DEL_UNIQKEY values of a slot's cancel requests."""
        msgs = map(self.st.ctx.model.message, (OFFSET_PY(row) for _pos, row in cancels))
        deletes = {msg.props.get(PROPERTY_TIMER_DEL_UNIQKEY) for msg in msgs if msg is not None}
        deletes.discard(None)
        return deletes

    def _cancelled(self, props: dict[str, str], phys: int, deletes: set[str], slot_time: int) -> bool:
        """Is the record dropped by a cancel read in its slot? (then its `cancel` event is written)"""
        uk = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        topic = props.get(PROPERTY_REAL_TOPIC)
        if not is_deleted(uk, topic, deletes):
            return False
        st = self.st
        st.flush_events()
        st.cancelled += 1
        qid = int_or(props.get(PROPERTY_REAL_QUEUE_ID))
        st.ctx.log.batch(st.ctx.engine.now, "timer", "cancel", topic, qid, uk, phys, slot=slot_time)
        return True

    def deliver(self, write: int, due: int | None, phys: int, meta: int, hi: int, lo: int, slot_time: int) -> bool:
        """The delivery of a plain unit (enqueue time `write`, TIMER_OUT_MS `due`, its record at `phys`) from its
        row (`DeliveryRows`: meta, hi, lo), where `StoreModel.append` would not keep the re-put (its queue has had
        a re-put and is neither kept nor watched): the re-put's size is the row's plus the topic's fixed part and
        the two properties the dequeue sets (`convert`: enqueue time, dequeue time now), placed as `append` places
        it, counted without building it. False (nothing done) where the row is `NO_ROW` or the queue is not so."""
        if not meta:
            return False
        st = self.st
        ctx = st.ctx
        m = ctx.model
        topic, qid = st.rows.topic_qid(meta)
        info = m.known_queue(topic, qid)  # a queue's first re-put goes through `append`
        if info is None or info.kept or info.listeners:
            return False
        now = ctx.engine.now
        size = m.plain_reput_size(delivery_size(meta, write, now + ctx.clock_offset), info.fixed)
        pos, queue_offset = m.append_unit(info, size, None)
        st.delivered += 1
        if not ctx.log.keep:
            ctx.log.tally("deliver")
            return True
        uk = st.rows.uniq_key((meta, hi, lo))
        st.add_event("deliver", (now, topic, qid, uk, phys, pos, slot_time, due, False, queue_offset))
        return True

    def put(self, msg, enqueue_time: int, magic: int, slot_time: int, direct: bool):
        """`convert` + the first try of `doPut`; None when done, else a generator of the retries
        (they take virtual time)."""
        ctx = self.st.ctx
        roll = need_roll(magic)
        src = msg.props
        if not roll and src.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            return None  # doPut: a cancel marker is never delivered (PUT_NO_RETRY)
        now = ctx.clock()
        props = convert_properties(src, enqueue_time, roll, now)
        if roll:
            topic, qid = msg.topic, msg.queue_id
        else:
            topic = props.get(PROPERTY_REAL_TOPIC)
            if topic is None:
                return None
            qid = int_or(props.get(PROPERTY_REAL_QUEUE_ID), 0)
        res = ctx.model.append(msg.derive(topic, qid, props), now, "timer")
        if res.ok:
            self._put_done(msg, res.message, roll, slot_time, direct)
            return None
        return self._put_retries(msg, topic, qid, props, res, roll, slot_time, direct)

    def _put_retries(self, msg, topic, qid, props, res, roll, slot_time, direct):
        """doPut's retries (`do_put_retry`), each failure logged; they take virtual time, and after a
        PUT_NEED_RETRY the put service sleeps once more when its retry loop ends (`need_retry_sleep`)."""
        ctx = self.st.ctx
        attempts, in_call, in_loop = 0, 0, False  # failed puts in all, in this `doPut` call
        while not res.ok:
            attempts += 1
            in_call += 1
            wait = do_put_retry(res.status, in_call, self.st.precision, in_loop)
            detail = {"status": res.status, "attempt": attempts, "given_up": wait is None}
            ctx.log.emit(ctx.engine.now, "timer", "put_failed", topic, qid, msg.uniq_key, msg.phys, **detail)
            if wait is None:
                break
            if res.status == "SERVICE_NOT_AVAILABLE":  # PUT_NEED_RETRY: `run` calls `doPut` anew
                in_call, in_loop = 0, True
            if wait:
                yield wait
            res = ctx.put(msg.derive(topic, qid, dict(props)), "timer")
        if res.ok:
            self._put_done(msg, res.message, roll, slot_time, direct)
        if in_loop:
            yield need_retry_sleep(self.st.precision)

    def _put_done(self, msg, n, roll: bool, slot_time: int, direct: bool) -> None:
        """A put done: counted, and its `roll` or `deliver` event (with the details only where the log keeps them)."""
        st = self.st
        log = st.ctx.log
        if roll:
            st.rolled += 1
        else:
            st.delivered += 1
        if not log.keep:
            log.tally("roll" if roll else "deliver")
            return
        src, uk, now = msg.props, n.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), st.ctx.engine.now
        if roll:
            real, qid = src.get(PROPERTY_REAL_TOPIC), int_or(src.get(PROPERTY_REAL_QUEUE_ID))
            detail = {"slot": slot_time, "roll_times": roll_times(n.props)}
            log.batch(now, "timer", "roll", real, qid, uk, msg.phys, n.phys, **detail)
            return
        due = int_or(src.get(PROPERTY_TIMER_OUT_MS))
        detail = {"slot": slot_time, "due": due, "direct": direct, "queue_offset": n.queue_offset}
        log.batch(now, "timer", "deliver", n.topic, n.queue_id, uk, msg.phys, n.phys, **detail)


def _light_read(m, phys: int) -> tuple | None:
    """(properties, BODYLENGTH, SYSFLAG) of a store's own record by the base's light read; None where
    `message_once` must read it: a fault can refuse a put, the base is not read batch-wise, the model holds it."""
    base = m.base
    if m.put_filter is not None or not batchable(base) or phys in m.messages or phys in base.cache:
        return None
    return None if m.spool is not None and phys in m.spool else base.read(phys, False, True)
