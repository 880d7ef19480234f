"""The timer's per-message walk: the reference model the library's steps are proven equal to.

`ReferenceTimerService` is `TimerService` with the enqueue and the dequeue of the broker's loops written
unit by unit, as `TimerMessageStore` reads them: each record of the timer topic read whole and enqueued by
`rules.timer.do_enqueue` (one 52-byte unit, one event, one wake of the dequeue), each unit of a slot read
whole and put by `TimerDequeue.put` (cancel check, `convert`, `doPut` with its retries). The library does the
same in runs of units (`TimerEnqueue.take`, `TimerDequeue.slot`); the equality tests run both on the same
store (`use_reference`) and compare the event logs byte for byte.
"""

from __future__ import annotations

from mqtool.formats.javahash import java_string_hash
from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.rules.timer import LONG_MAX, do_enqueue, format_time_ms, is_deleted, need_roll, put_at_once
from mqtool.simulate import runner
from mqtool.simulate.timer import TimerService
from mqtool.simulate.timerdequeue import TimerDequeue
from mqtool.simulate.timerenqueue import TimerEnqueue
from mqtool.simulate.timerstate import int_or


class ReferenceEnqueue(TimerEnqueue):
    """`TimerEnqueueGetService` + `TimerEnqueuePutService`, one record at a time."""

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
                retry = None
                write = format_time_ms(ctx.clock(), p)
                for off, (phys, size, _tags) in m.cq_units(TIMER_TOPIC, 0, st.curr_queue_offset, hi):
                    st.curr_queue_offset = off + 1
                    props, _body_len, _sys_flag = st.props_rec(phys)
                    if props is None:
                        continue
                    try:
                        delayed = int(props[PROPERTY_TIMER_OUT_MS])
                    except (KeyError, ValueError):
                        continue
                    if put_at_once(delayed, write):
                        retry = self.put(m.message(phys), LONG_MAX, 0, delayed, direct=True)
                        if retry is not None:
                            break
                        m.release(phys)
                        continue
                    self.enqueue_unit(phys, size, delayed, props, write)
                else:
                    if st.curr_queue_offset < hi:
                        st.curr_queue_offset += 1  # a unit that cannot be read is passed over
                if retry is not None:
                    yield from retry
                hi = m.cq_max(TIMER_TOPIC, 0)
            yield None

    def enqueue_unit(self, offset_py: int, size_py: int, delayed: int, props: dict[str, str], write: int) -> None:
        """`doEnqueue`: the slot and magic (`rules.timer.do_enqueue`), the 52-byte unit, the slot update, the
        event, the dequeue woken for the slot."""
        st = self.st
        original = delayed
        delete = props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None
        delayed, magic = do_enqueue(delayed, write, st.window, st.precision, delete)
        pos = st.next_unit_pos()
        last = st.last_pos(delayed)
        real = props.get(PROPERTY_REAL_TOPIC)
        st.units[pos] = (
            -1 if last is None else last,
            magic,
            write,
            delayed,
            offset_py,
            size_py,
            java_string_hash(real) if real is not None else 0,
        )
        st.new_units.append(pos)
        st.slots[delayed] = pos
        st.queue_slot(delayed)
        ctx = st.ctx
        if ctx.log.keep:
            ctx.log.batch(
                ctx.engine.now,
                "timer",
                "enqueue",
                real,
                int_or(props.get(PROPERTY_REAL_QUEUE_ID)),
                props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                offset_py,
                None,
                slot=delayed,
                timer_out_ms=original,
                roll=need_roll(magic),
                cancel=delete,
                timerlog_pos=pos,
            )
        else:
            ctx.log.tally("enqueue")
        st.wake_dequeue(delayed)


class ReferenceDequeue(TimerDequeue):
    """`TimerDequeueGetService` + `TimerDequeuePutService`, one unit at a time, every record read whole."""

    def slot(self, slot_time: int):
        st = self.st
        m = st.ctx.model
        cancels, normal = self.chain(slot_time)
        deletes: set[str] = set()
        for _pos, (_prev, _mg, _write, _slot, phys, *_rest) in cancels:
            msg = m.message(phys)
            key = msg.props.get(PROPERTY_TIMER_DEL_UNIQKEY) if msg is not None else None
            if key is not None:
                deletes.add(key)
        for i, (_pos, (_prev, magic, write, _slot, phys, *_rest)) in enumerate(normal):
            msg = m.message_once(phys)
            if msg is None:
                continue
            props = msg.props
            if is_deleted(props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), props.get(PROPERTY_REAL_TOPIC), deletes):
                st.flush_events()
                st.cancelled += 1
                st.ctx.log.batch(
                    st.ctx.engine.now,
                    "timer",
                    "cancel",
                    props.get(PROPERTY_REAL_TOPIC),
                    int_or(props.get(PROPERTY_REAL_QUEUE_ID)),
                    props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                    msg.phys,
                    slot=slot_time,
                )
                continue
            st.flush_events()
            retry = self.put(msg, write, magic, slot_time, False)
            if retry is not None:
                return self.finish_slot(retry, [unit for _pos, unit in normal[i + 1 :]], deletes, slot_time)
        if m.releasing:
            for _pos, (_prev, _mg, _write, _slot, phys, *_rest) in cancels + normal:
                m.release(phys)
        return None

    def finish_slot(self, retry, rest: list[tuple], deletes: set[str], slot_time: int):
        """The rest of a slot cut by a put that waits: the put's retries, then each unit read whole and put."""
        yield from retry
        for _prev, magic, write, _slot, phys, *_rest in rest:
            msg = self.st.ctx.model.message_once(phys)
            if msg is None or self._cancelled(msg.props, msg.phys, deletes, slot_time):
                continue
            again = self.put(msg, write, magic, slot_time, direct=False)
            if again is not None:
                yield from again


class ReferenceTimerService(TimerService):
    Enqueue = ReferenceEnqueue
    Dequeue = ReferenceDequeue


def use_reference(monkeypatch, on: bool = True) -> None:
    """The next `simulate` runs the timer's reference model (`on`), or the library's."""
    monkeypatch.setattr(runner, "TimerService", ReferenceTimerService if on else TimerService)
