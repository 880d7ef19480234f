"""`TimerDequeue`: `TimerDequeueGetService` + `TimerDequeuePutService`, slot by slot (spec §6.8-6.10).

Slot by slot from `currReadTimeMs`, only while it is before `currWriteTimeMs` (= now floored to the
precision); empty slots are skipped at once. A slot's units are the chain from the wheel's `lastPos`
back along each unit's `prevPos` (`rules.timer.walk_chain`); a `prevPos` that points at no unit, or
back into the walked chain, ends the walk with a `skip` event. Cancel requests (DELETE, not ROLL) are
read first and their TIMER_DEL_UNIQKEY values collected; then the other units oldest first: a record
whose UNIQ_KEY is in that set is dropped, a ROLL unit is re-put to the timer topic (`TimerRolls`), the
rest go to REAL_TOPIC/REAL_QID (`rules.timer.convert_properties`).

A delivery `StoreModel.append` would not keep (its queue neither kept nor watched) is counted and placed
without building the record (`deliver`), from the row kept beside a plain unit (`DeliveryRows`) where
there is one; any other unit goes through `put` (`convert` + `doPut` with its retries: SERVICE_NOT_AVAILABLE
every `500 × precision / 1000` ms until it works, any other failure 3 more times 50 ms apart).
"""

from __future__ import annotations

import heapq

from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.formats.timerlog import MAGIC_DELETE, MAGIC_ROLL
from mqtool.rules.timer import (
    LOOP,
    convert_properties,
    dequeue_order,
    is_deleted,
    need_roll,
    roll_times,
    walk_chain,
)
from mqtool.simulate.batchread import batchable
from mqtool.simulate.model import BLANK_MIN, _order
from mqtool.simulate.timerroll import TimerRolls
from mqtool.simulate.timerrows import reput_size
from mqtool.simulate.timerstate import TimerState, int_or

ROLL_READ = 64  # a slot's units from which its ROLL units' records are read batch-wise (`TimerRolls.sources`)
ROLL_CHUNK = 4096  # ... this many units' at a time (the records' values are held until rolled)
_CANCEL_BITS = MAGIC_DELETE | MAGIC_ROLL  # `is_cancel_request`: DELETE without ROLL


class TimerDequeue:
    """The dequeue walk: a slot's cancels, deliveries and rolls, and the puts they make."""

    def __init__(self, st: TimerState, rolls: TimerRolls) -> None:
        self.st = st
        self.rolls = rolls
        self._light: tuple | None = None  # (what `light_reader` depends on, its reader)

    def on_clock_jump(self) -> None:
        deq = self.st.deq
        if deq is not None and deq.alive and not self.st.in_slot:
            deq.wake(0)

    def loop(self):
        st = self.st
        ctx = st.ctx
        p = st.precision
        engine = ctx.engine
        # the slots' deliveries and rolls not written yet (`TimerState.pend`): kept from slot to slot while
        # `advance` goes on without the engine, written before every yield (no other event comes between)
        st.pend = [None, []]
        while True:
            heap = st.heap  # replaced by a restart's recovery
            w = (engine._now + ctx.clock_offset) // p * p
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

    def chain(self, slot_time: int, rows: bool = False) -> list[tuple]:
        """The slot's units newest first: from the wheel's lastPos back along prevPos (`walk_chain`), as
        (pos, unit, the delivery's row kept beside it or None: `DeliveryRows`; always None unless `rows`)."""
        st = self.st
        s = st.slot(slot_time)
        if s is None:
            return []
        _first, last, _num = s
        fast = st.units.chain(last, rows)  # units all held here, prevPos always back: the usual slot
        if fast is not None:
            return fast if rows else [(pos, u, None) for pos, u in fast]
        w = walk_chain(last, st.unit, _prev_pos)
        if w.broken:
            st.broken_chains += 1
            ctx = st.ctx
            st.flush_events()  # the slots' events before this one
            ctx.log.emit(ctx.engine.now, "timer", "skip", None, None, None, None, slot=slot_time,
                         timerlog_pos=w.stop_pos, read=len(w.units),
                         reason="broken TimerLog chain: prevPos loops" if w.stop == LOOP
                         else "broken TimerLog chain: prevPos points at no unit")
        extra = st.units.extra if rows else _no_row
        return [(pos, u, extra(pos)) for pos, u in w.units]

    def slot(self, slot_time: int):
        """One slot; None when done, else a generator that finishes it (a put is being retried).

        Each unit takes the first of these that applies: its delivery from the row kept beside it, its
        delivery from its properties read lightly (`light_reader`), its roll from the bytes read for the
        slot's rolls (`TimerRolls.sources`), or the record read whole: cancelled, rolled (`TimerRolls.roll`),
        delivered (`deliver`) or put (`put`, which may wait). A put that waits cuts the slot: the units after
        it go to `finish_slot`. Deliveries and rolls join `TimerState.pend` (one `record_rows` a run)."""
        st = self.st
        m = st.ctx.model
        fast = m.put_filter is None  # no fault can refuse a put
        chain = self.chain(slot_time, fast)  # (pos, unit, its delivery's row or None), newest first
        if fast and self._rows_only(chain, slot_time):
            return None
        if any(r[1][1] & _CANCEL_BITS == MAGIC_DELETE for r in chain):
            cancels, normal_units = dequeue_order(chain, _magic)
        else:  # `dequeue_order` of a slot without cancel requests
            cancels, normal_units = [], chain[::-1]
        deletes: set[str] = set()
        for _pos, u, _x in cancels:
            msg = m.message(u[4])
            if msg is not None:
                key = msg.props.get(PROPERTY_TIMER_DEL_UNIQKEY)
                if key is not None:
                    deletes.add(key)
        message = m.message_once  # the slot's last read of each record (a rolled one is re-put anew)
        light = self.light_reader()
        # a roll's re-put wakes no one but this service's enqueue (no event of its own)
        fast_roll = fast and len(m._listeners.get((TIMER_TOPIC, 0), ())) == 1
        # a plain unit enqueued with its delivery's row (`DeliveryRows`) is delivered from it, unread
        rows = fast and not deletes
        row_target = self.row_target
        rolls = self.rolls
        # a roll slot's store records are read batch-wise, `ROLL_CHUNK` units at a time, not built
        roll_read = fast_roll and len(normal_units) >= ROLL_READ and not deletes and m.spool is not None
        sources, sources_end = None, 0
        for i, (_pos, u, x) in enumerate(normal_units):
            _prev, magic, write, delayed, phys, _size, _hash = u
            plain = not magic & MAGIC_ROLL  # not `need_roll`
            if roll_read and not plain:
                if i >= sources_end:
                    sources_end = i + ROLL_CHUNK
                    sources = rolls.sources(normal_units, i, sources_end)
                rec = sources.get(i) if sources else None
                if rec is not None and rolls.roll(None, u, slot_time, rec):
                    continue
            if rows and plain and write != -1 and x is not None:
                target = row_target(x)
                if target is not None:
                    self.deliver_row(write, delayed, phys, x, target, slot_time)
                    continue
            if light is not None and plain:
                rec = light(phys)
                if rec is not None:
                    target = self.light_target(rec[0])
                    if target is not None:
                        self.deliver(write, rec, target, deletes, slot_time, phys)
                        continue
            msg = message(phys)
            if msg is None:
                continue
            if fast and plain:
                target = self.light_target(msg.props)
                if target is not None:  # what `put` would do, without the record
                    self.deliver(write, (msg.props, msg.body_len, msg.sys_flag), target, deletes, slot_time, msg.phys)
                    continue
            if deletes and self._cancelled(msg.props, msg.phys, deletes, slot_time):
                continue
            if fast_roll and not plain:
                rolls.roll(msg, u, slot_time)
                continue
            st.flush_events()
            retry = self.put(msg, write, magic, slot_time, False)
            if retry is not None:
                return self.finish_slot(retry, [r[1] for r in normal_units[i + 1:]], deletes, slot_time)
        if m.releasing:  # the slot's records are read for the last time (a rolled one is re-put anew)
            release = m.release
            for r in chain:
                release(r[1][4])
        return None

    def _rows_only(self, chain: list[tuple], slot_time: int) -> bool:
        """The usual slot, where no fault can refuse a put: every unit plain with its delivery's row and a
        queue `deliver_row` may put to (so no cancel request either). Each is delivered from its row, oldest
        first, and the slot's records released, as `slot` would; False (nothing done) for any other slot."""
        targets = []
        row_target = self.row_target
        for _pos, u, x in chain:
            if x is None or u[2] == -1:
                return False
            target = row_target(x)
            if target is None:
                return False
            targets.append(target)
        deliver_row = self.deliver_row
        for k in range(len(chain) - 1, -1, -1):  # oldest first (`dequeue_order`)
            _pos, (_prev, _magic, write, delayed, phys, _size, _hash), x = chain[k]
            deliver_row(write, delayed, phys, x, targets[k], slot_time)
        m = self.st.ctx.model
        if m.releasing:
            release = m.release
            for r in chain:
                release(r[1][4])
        return True

    def _cancelled(self, props: dict[str, str], phys: int, deletes: set[str], slot_time: int) -> bool:
        """Is the record dropped by a cancel read in its slot? (then its `cancel` event is written)"""
        uk = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        topic = props.get(PROPERTY_REAL_TOPIC)
        if not is_deleted(uk, topic, deletes):
            return False
        st = self.st
        st.flush_events()
        st.cancelled += 1
        ctx = st.ctx
        ctx.log.emit_plain(ctx.engine.now, "timer", "cancel", topic, int_or(props.get(PROPERTY_REAL_QUEUE_ID)), uk,
                           phys, slot=slot_time)
        return True

    def light_reader(self):
        """`read(phys)` -> (properties, BODYLENGTH, SYSFLAG) of a store's own record by the base's light
        read, None where `message_once` must read it; None when a fault can refuse a put or the base is not
        read batch-wise."""
        m = self.st.ctx.model
        key = (m.put_filter, m.base, m.spool, m._msgs)
        if self._light is not None and self._light[0] == key:  # the same objects: equal at once
            return self._light[1]
        self._light = (key, _light_reader(m))
        return self._light[1]

    def light_target(self, props: dict[str, str]):
        """(topic, queue id, queue info) a delivery of a record with these properties goes to, where `deliver`
        may put it: a record that is not a cancel marker, has a REAL_TOPIC, and goes to a queue `append` has
        put to before, whose re-puts are neither kept nor watched; else None (`put` decides)."""
        if props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            return None
        topic = props.get(PROPERTY_REAL_TOPIC)
        if topic is None:
            return None
        return self._target(topic, int_or(props.get(PROPERTY_REAL_QUEUE_ID), 0))

    def row_target(self, x: tuple[int, int, int]):
        """`light_target` of the record a unit's row (`DeliveryRows`) stands for."""
        return self._target(*self.st.rows.topic_qid(x[0]))

    def _target(self, topic: str, qid: int):
        m = self.st.ctx.model
        info = m._queue_info.get((topic, qid))  # a queue's first re-put goes through `append`
        if info is None or info[3] or m._listeners.get((topic, qid)):
            return None
        return topic, qid, info

    def deliver_row(self, write: int, delayed: int, phys: int, x: tuple[int, int, int], target: tuple,
                    slot_time: int) -> None:
        """`deliver` of a plain unit (enqueue time `write` not -1, no cancel in its slot) from the row kept
        beside it (`DeliveryRows`): the re-put's size is the row's plus the topic's fixed part and the two
        properties the dequeue sets (enqueue time, dequeue time now); the due time is the slot (a plain
        unit's slot is its TIMER_OUT_MS)."""
        st = self.st
        ctx = st.ctx
        m = ctx.model
        topic, qid, (units, bmax, fixed, _keep) = target
        meta = x[0]
        size = reput_size(meta, fixed, write, ctx.engine._now + ctx.clock_offset, m.trailing_separator)
        pos = m._end  # `place`, written out for a record that fits in the current file (as `append`)
        fs = m.base.file_size
        if pos is not None and not m.base.dledger and pos % fs + size + BLANK_MIN <= fs:
            m._end = pos + size
        else:
            pos = m.place(size)
        queue_offset = st.count_delivery(units, bmax)
        if queue_offset is None:
            return
        st.add_event("deliver", (ctx.engine._now, topic, qid, st.rows.uniq_key(x), phys, pos, slot_time, delayed,
                                 False, queue_offset))

    def deliver(self, write: int, rec: tuple, target: tuple, deletes: set[str], slot_time: int, phys: int) -> None:
        """The dequeue of a plain unit (the cancel check, `put`'s convert and count) for a delivery
        `StoreModel.append` would not keep: the re-put's size and offset computed as `append` computes them
        (`reput_size`, `place`), without building the record; `rec` is (properties, BODYLENGTH, SYSFLAG) of
        the record at `phys`. Its event joins the slot's."""
        st = self.st
        ctx = st.ctx
        m = ctx.model
        props, body_len, sys_flag = rec
        if deletes and self._cancelled(props, phys, deletes, slot_time):
            return
        topic, qid, (units, bmax, fixed, _keep) = target
        new = convert_properties(props, write, False, ctx.engine._now + ctx.clock_offset)
        pos = m.place(m.reput_size(new, _order(tuple(new), m.capacity)[1], fixed, sys_flag, body_len))
        queue_offset = st.count_delivery(units, bmax)
        if queue_offset is None:
            return
        st.add_event("deliver", (ctx.engine._now, topic, qid, new.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), phys,
                                 pos, slot_time, int_or(props.get(PROPERTY_TIMER_OUT_MS)), False, queue_offset))

    def finish_slot(self, retry, rest: list[tuple], deletes: set[str], slot_time: int):
        """The rest of a slot cut by a put that waits: the put's retries, then each unit read whole and put."""
        yield from retry
        for u in rest:
            _prev, magic, write, _slot, phys, _size, _hash = u
            msg = self.st.ctx.model.message_once(phys)
            if msg is None or self._cancelled(msg.props, msg.phys, deletes, slot_time):
                continue
            again = self.put(msg, write, magic, slot_time, direct=False)
            if again is not None:
                yield from again

    def put(self, msg, enqueue_time: int, magic: int, slot_time: int, direct: bool):
        """`convert` + the first try of `doPut`; None when done, else a generator of the retries
        (they take virtual time)."""
        ctx = self.st.ctx
        roll = need_roll(magic)
        src = msg.props
        if not roll and src.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            return None  # doPut: a cancel marker is never delivered (PUT_NO_RETRY)
        now = ctx.engine._now + ctx.clock_offset
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
        """doPut's retries: SERVICE_NOT_AVAILABLE every 500 × precision / 1000 ms until it works, any
        other failure 3 more times 50 ms apart."""
        ctx = self.st.ctx
        attempts = 0
        while not res.ok:
            attempts += 1
            retry = res.status == "SERVICE_NOT_AVAILABLE"
            give_up = not retry and attempts > 3
            ctx.log.emit(ctx.engine.now, "timer", "put_failed", topic, qid, msg.uniq_key, msg.phys,
                         status=res.status, attempt=attempts, given_up=give_up)
            if give_up:
                return
            yield (500 * self.st.precision // 1000) if retry else 50
            res = ctx.put(msg.derive(topic, qid, dict(props)), "timer")
        self._put_done(msg, res.message, roll, slot_time, direct)

    def _put_done(self, msg, n, roll: bool, slot_time: int, direct: bool) -> None:
        st = self.st
        ctx = st.ctx
        src = msg.props
        if not ctx.log.keep:
            if roll:
                st.rolled += 1
                ctx.log.tally("roll")
            else:
                st.delivered += 1
                ctx.log.tally("deliver")
            return
        if roll:
            st.rolled += 1
            st.keep_rolled(n)
            ctx.log.record(ctx.engine._now, "timer", "roll", src.get(PROPERTY_REAL_TOPIC),
                           int_or(src.get(PROPERTY_REAL_QUEUE_ID)), n.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                           msg.phys, n.phys, {"slot": slot_time, "roll_times": roll_times(n.props)}, True)
        else:
            st.delivered += 1
            ctx.log.record(ctx.engine._now, "timer", "deliver", n.topic, n.queue_id,
                           n.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), msg.phys, n.phys,
                           {"slot": slot_time, "due": int_or(src.get(PROPERTY_TIMER_OUT_MS)), "direct": direct,
                            "queue_offset": n.queue_offset}, True)


def _light_reader(m):
    """The reader `TimerDequeue.light_reader` gives for the model `m` (None where it gives none)."""
    base = m.base
    if m.put_filter is not None or not batchable(base):
        return None
    msgs, lru, read = m._msgs, base._lru, base._read
    spooled = m.spool._where if m.spool is not None else {}

    def light(phys: int):
        if phys in msgs or phys in spooled or phys in lru:
            return None
        return read(phys, False, True)

    return light


def _no_row(_pos: int) -> None:
    return None


def _prev_pos(u: tuple) -> int:
    return u[0]


def _magic(u: tuple) -> int:
    return u[1]
