"""TimerMessageStore: timer enqueue, roll, cancel and dequeue (spec §6.5-6.10; 5.x only).

Mirrors `org.apache.rocketmq.store.timer.TimerMessageStore` at rocketmq-all-5.3.1: `TimerService` (here) is the
recovery (`recover` / `recoverAndRevise`, from `recovered_state`; a store shut down cleanly has its timers already
in the TimerLog: nothing is enqueued twice), the life cycle and the checkpoint; `TimerEnqueue`, `TimerDequeue` and
`TimerRolls` (`timerenqueue.py`, `timerdequeue.py`, `timerroll.py`) share one `TimerState` with it.

Every rule is `mqtool.rules.timer`'s (`convert_properties` is the only writer of TIMER_ROLL_TIMES /
TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS, `next_roll_times` the only reader of a roll count).
"""

from __future__ import annotations

from mqtool.formats.names import (
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.formats.timerlog import TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import SLOTS_TOTAL
from mqtool.rules.recovery import timer_read_time
from mqtool.rules.timer import (
    check_timer_precision,
    format_time_ms,
    is_deleted,
    need_delete,
    need_roll,
    revise_from,
    revise_slots,
    walk_chain,
)
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import PERSIST, TIMER_DEQUEUE, TIMER_ENQUEUE, Process
from mqtool.simulate.timerdequeue import TimerDequeue
from mqtool.simulate.timerenqueue import TimerEnqueue
from mqtool.simulate.timerroll import TimerRolls
from mqtool.simulate.timerstate import TimerState, int_or
from mqtool.simulate.timerunits import PREV_POS

_NO_DELETES: frozenset[str] = frozenset()  # a slot without cancel requests


# a stored TimerLog unit's columns (`store.timer.TimerLog.scan_columns`), in `TimerUnits.UNIT_FIELDS`' order
_STORED_COLUMNS = "prev_pos magic curr_write_time_ms delayed_time_delta offset_py size_py real_topic_hash".split()
_TIMERCHECK = ("last_read_time_ms", "last_timer_queue_offset", "master_timer_queue_offset")  # those `_recover` reads


class TimerService:
    """The timer as one `Service`: its parts (`enqueue`, `dequeue`, `rolls`) over one `TimerState` (`st`)."""

    Enqueue = TimerEnqueue
    Dequeue = TimerDequeue

    def __init__(self, ctx: SimContext, timercheck=None, units=(), end=0, file_size=None, wheel=None, timerlog=None):
        """`recovered_state`'s fields: the timercheck, the TimerLog units read at the start ((pos, *unit)),
        the TimerLog's end and file size, the store's wheel and TimerLog (None: none)."""
        self.ctx = ctx
        check_timer_precision(ctx.config.timer_precision_ms)  # the broker cannot run its timer with it
        st = self.st = TimerState(ctx, file_size or ctx.config.mapped_file_size_timer_log, wheel, timerlog)
        st.end = end
        # the timercheck's cursors (0 without one), as a crash finds them
        self.tc = {k: int(getattr(timercheck, k, 0)) for k in _TIMERCHECK}
        for pos, *unit in units:
            st.units[pos] = unit
        # `recoverAndRevise`: each unit read at the start makes itself its slot's lastPos (`revise_slots`; the
        # firstPos and num it keeps or rebuilds feed no walk, so the old slot is not read for them)
        slot_of = {pos: delayed for pos, _prev, _magic, _write, delayed, *_rest in units}
        revised = revise_slots(sorted(slot_of.items()), lambda _t: None)
        st.slots.update((t, last) for t, (_first, last, _num) in revised.items())
        self.flusher: Process | None = None
        self.rolls = TimerRolls(st)
        self.dequeue = self.Dequeue(st, self.rolls)
        self.enqueue = self.Enqueue(st, self.dequeue.put, self.rolls.enqueue_values)
        ctx.model.on_append(TIMER_TOPIC, 0, self.enqueue.on_append)

    # ----- recovery and life cycle -----
    def _recover(self) -> None:
        """`recover`: `currReadTimeMs` = `lastReadTimeMs`, not earlier than now − (slotsTotal − 60) × precision;
        `currQueueOffset` = the queue offset of the last unit's record + 1 (else timercheck's
        `lastTimerQueueOffset`), capped at `masterTimerQueueOffset`."""
        st = self.st
        p = st.precision
        st.curr_read = timer_read_time(self.tc["last_read_time_ms"], self.ctx.clock(), p, SLOTS_TOTAL)
        st.heap = []
        st.queued = set()
        times = set(st.slots)
        if st.wheel is not None:
            col = st.wheel.slots["time_units"]
            times.update(int(v) * p for v in col[col * p >= st.curr_read].tolist())
        for t in sorted(times):
            if t >= st.curr_read and st.last_pos(t) is not None:
                st.queue_slot(t)
        offset = -1
        last = st.unit(st.end - TIMERLOG_UNIT_SIZE) if st.end >= TIMERLOG_UNIT_SIZE else None
        if last is not None:
            _prev, _magic, _write, _delayed, phys, _size, _hash = last
            msg = self.ctx.model.message(phys)
            if msg is not None:
                offset = msg.queue_offset
        q = self.tc["last_timer_queue_offset"] if offset == -1 else offset + 1
        master = self.tc["master_timer_queue_offset"]
        st.curr_queue_offset = min(q, master) if master > 0 or offset == -1 else q

    def start(self) -> None:
        self._recover()
        st = self.st
        # TimerMessageStore.start: shouldStartTime = now + disappearTimeAfterStart (-1 by default: no wait)
        st.should_start = self.ctx.clock() + self.ctx.config.disappear_time_after_start
        e = self.ctx.engine
        st.enq = e.process(self.enqueue.loop(), TIMER_ENQUEUE, 0, "timer-enqueue")
        st.deq = e.process(self.dequeue.loop(), TIMER_DEQUEUE, 0, "timer-dequeue")
        if any(f.kind == "crash" for f in self.ctx.scenario.faults):
            self.flusher = e.process(self._flush_loop(), PERSIST, 1000, "timer-flush")

    def stop(self, clean: bool) -> None:
        for pr in (self.st.enq, self.st.deq, self.flusher):
            if pr is not None:
                pr.stop()
        if clean:
            self.persist()

    def persist(self) -> None:
        """A timercheck flush (`prepareTimerCheckPoint`): the cursors as a checkpoint, the copy a crash goes back to."""
        self.tc["last_read_time_ms"] = self.read_time()
        self.tc["last_timer_queue_offset"] = self.tc["master_timer_queue_offset"] = self.st.curr_queue_offset

    def _flush_loop(self):
        """`TimerFlushService`'s checkpoint each second: only the last before a crash is ever read (a clean stop
        persists anew), so the loop sleeps through the seconds before it."""
        e = self.ctx.engine
        crashes = [f.start for f in self.ctx.scenario.faults if f.kind == "crash"]
        while ahead := [c for c in crashes if c > e.now]:
            self.persist()
            yield max(1, (min(ahead) - 1 - e.now) // 1000) * 1000  # the last second before the next crash

    def read_time(self) -> int:
        """`currReadTimeMs` now: it runs over empty slots up to the write time at once."""
        st = self.st
        write = format_time_ms(self.ctx.clock(), st.precision)
        return max(st.curr_read, min(st.heap[0], write) if st.heap else write)

    def on_clock_jump(self) -> None:
        deq = self.st.deq
        if deq is not None and deq.alive and not self.st.in_slot:
            deq.wake(0)

    # ----- summary -----
    def pending(self) -> int:
        """Timer messages still in the wheel, in slots not yet dequeued, that will be delivered: no cancel unit
        (rolled or not), no message a cancel waiting in the slot it ends in drops (`rules.timer.cancels_in_slot`:
        a roll unit ends in the slot of its TIMER_OUT_MS), as `inspect timer` counts them."""
        st = self.st
        units = []
        for t in st.queued:
            last = st.last_pos(t)
            if last is not None:
                units += [u for _, u in walk_chain(last, st.read_row, PREV_POS).units]
        if not any(need_delete(magic) for _prev, magic, *_rest in units):
            return len(units)  # (no record is read)
        cancels: dict[int, set[str]] = {}  # the slot a cancel ends in -> its TIMER_DEL_UNIQKEY values
        targets = []  # (the slot it ends in, properties) of each other unit
        for _prev, magic, _write, end, phys, *_rest in units:
            props = st.props_rec(phys)[0] or {}
            if need_roll(magic):  # a ROLL unit's message ends in the slot of its TIMER_OUT_MS
                out = int_or(props.get(PROPERTY_TIMER_OUT_MS))
                end = None if out is None else format_time_ms(out, st.precision)
            if not need_delete(magic):
                targets.append((end, props))
            elif (key := props.get(PROPERTY_TIMER_DEL_UNIQKEY)) is not None and end is not None:
                cancels.setdefault(end, set()).add(key)
        uk, real = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_REAL_TOPIC
        return sum(not is_deleted(p.get(uk), p.get(real), cancels.get(end, _NO_DELETES)) for end, p in targets)


def recovered_state(store) -> dict | None:
    """What TimerMessageStore recovers from, as `TimerService`'s arguments: timercheck, the wheel, and the
    TimerLog units it re-reads. With a `timerwheel` file, only the units from the file before
    `lastTimerLogFlushPos` on are read (`recover` → `recoverAndRevise`); the rest are read through the
    wheel's chains when their slot is dequeued. Without one, every unit is read and the slots rebuilt from them.
    """
    if store is None or store.timercheck is None and store.timerlog is None:
        return None
    tl = store.timerlog
    if tl is None:
        return {"timercheck": store.timercheck}
    q, wheel, first = tl.queue, store.timer_wheel, 0
    size = q.file_size or None
    if wheel is not None and q.files:
        flush = int(getattr(store.timercheck, "last_timer_log_flush_pos", 0) or 0)
        first = revise_from([f.start for f in q.files], flush, size or q.files[-1].length)
    units, end = [], q.min_offset
    for start, cols in tl.scan_columns():
        if size and start + size <= first:
            del cols
            continue
        lists = [cols[name].tolist() for name in _STORED_COLUMNS]
        del cols  # a view over the file's mapping: it must be gone before the file is closed
        end = start + len(lists[0]) * TIMERLOG_UNIT_SIZE  # recoverAndRevise's processOffset: where the scan stops
        for i, (prev, magic, write, delta, offset_py, size_py, topic_hash) in enumerate(zip(*lists, strict=True)):
            pos = start + i * TIMERLOG_UNIT_SIZE
            if pos >= first:
                units.append((pos, prev, magic, write, write + delta, offset_py, size_py, topic_hash))
    return dict(timercheck=store.timercheck, units=units, end=end, file_size=size, wheel=wheel, timerlog=tl)
