"""TimerMessageStore: timer enqueue, roll, cancel and dequeue (spec §6.5-6.10; 5.x only).

Mirrors `org.apache.rocketmq.store.timer.TimerMessageStore` at rocketmq-all-5.3.1:

- recovery: TimerLog units are read back into wheel slots; `currQueueOffset` = the queue offset of
  the last unit's record + 1 (else timercheck's `lastTimerQueueOffset`), capped at
  `masterTimerQueueOffset`; `currReadTimeMs` = `lastReadTimeMs`, but not earlier than
  `now − slotsTotal × precision + 60 × precision`. A store shut down cleanly has its timers already
  in the TimerLog, so nothing is enqueued twice.
- enqueue (`rmq_sys_wheel_timer` queue 0 from `currQueueOffset`): `delayedTime = TIMER_OUT_MS`; when
  it is before `currWriteTimeMs` the message is put at once (TIMER_ENQUEUE_MS = Long.MAX_VALUE);
  else `doEnqueue`: the roll rule (≥ rollWindow ahead ⇒ ROLL, target write + window/2 when the rest
  is under window/3, else write + window), DELETE for TIMER_DEL_UNIQKEY, a 52-byte unit appended,
  the slot's last position and count updated.
- dequeue: slot by slot from `currReadTimeMs`, only while it is before `currWriteTimeMs` (= now
  floored to the precision); empty slots are skipped at once. In a slot, delete units (DELETE, not
  ROLL) are read first and their TIMER_DEL_UNIQKEY values collected; then the other units oldest
  first: a record whose UNIQ_KEY is in that set is dropped (cancelled); a ROLL unit is re-put to the
  timer topic with TIMER_ROLL_TIMES + 1; the rest go to REAL_TOPIC/REAL_QID (`convert`: TIMER_ENQUEUE_MS,
  TIMER_DEQUEUE_MS set, the string built before REAL_TOPIC/REAL_QID are removed).
- put retries (`doPut`): SERVICE_NOT_AVAILABLE is retried every `500 × precision / 1000` ms until it
  works; any other failure is tried 3 more times 50 ms apart, then given up.
"""

from __future__ import annotations

import heapq

from mqtool.formats.javahash import java_string_hash
from mqtool.formats.timerlog import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, TIMERLOG_UNIT_SIZE
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import PERSIST, TIMER_DEQUEUE, TIMER_ENQUEUE, Process
from mqtool.simulate.model import TIMER_TOPIC

SLOTS_TOTAL = 7 * 86400
TIMER_BLANK_SLOTS = 60
TIMERLOG_BLANK_SIZE = 16
LONG_MAX = 2**63 - 1


class TimerService:
    """`units[pos] = (prev_pos, magic, write_time, delayed_time, offset_py, size_py, topic_hash)`."""

    def __init__(self, ctx: SimContext, timercheck=None, units=None, timerlog_end: int = 0,
                 timerlog_file_size: int | None = None) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.precision = int(getattr(cfg, "timer_precision_ms", 1000))
        self.window = cfg.timer_roll_window_slots() if hasattr(cfg, "timer_roll_window_slots") else 172800
        self.file_size = timerlog_file_size or int(getattr(cfg, "mapped_file_size_timer_log", 100 << 20))
        self.units: dict[int, tuple[int, int, int, int, int, int, int]] = {}
        self.new_units: list[int] = []  # positions appended during the run, in order
        self.fillers: list[tuple[int, int]] = []
        self.slots: dict[int, list[int]] = {}  # delayed time -> [first_pos, last_pos, num]
        self._heap: list[int] = []
        self.end = timerlog_end
        self.tc = {"last_read_time_ms": 0, "last_timer_log_flush_pos": 0, "last_timer_queue_offset": 0,
                   "master_timer_queue_offset": 0}
        if timercheck is not None:
            for k in self.tc:
                self.tc[k] = int(getattr(timercheck, k, 0))
        for u in units or ():
            self.units[u[0]] = tuple(u[1:])
        self.curr_read = 0
        self.curr_queue_offset = 0
        self.enq: Process | None = None
        self.deq: Process | None = None
        self.flusher: Process | None = None
        self.persisted = dict(self.tc)
        self._in_slot = False
        self.delivered = 0
        self.cancelled = 0
        self.rolled = 0
        ctx.model.on_append(TIMER_TOPIC, 0, self._on_append)

    # ----- recovery and life cycle -----
    def _recover(self) -> None:
        now = self.ctx.clock()
        p = self.precision
        floor_now = now // p * p
        self.curr_read = max(self.tc["last_read_time_ms"], floor_now - SLOTS_TOTAL * p + TIMER_BLANK_SLOTS * p)
        self.slots.clear()
        self._heap = []
        for pos in sorted(self.units):
            self._add_to_slot(pos, self.units[pos][3])
        offset = -1
        if self.units:
            last = self.units[max(self.units)]
            msg = self.ctx.model.message(last[4])
            if msg is not None:
                offset = msg.queue_offset
        q = self.tc["last_timer_queue_offset"] if offset == -1 else offset + 1
        master = self.tc["master_timer_queue_offset"]
        self.curr_queue_offset = min(q, master) if master > 0 or offset == -1 else q

    def _add_to_slot(self, pos: int, delayed: int) -> None:
        if delayed < self.curr_read:
            return  # already dequeued before the start
        s = self.slots.get(delayed)
        if s is None:
            self.slots[delayed] = [pos, pos, 1]
            heapq.heappush(self._heap, delayed)
        else:
            s[1] = pos
            s[2] += 1

    def start(self) -> None:
        self._recover()
        e = self.ctx.engine
        self.enq = e.process(self._enqueue_loop(), TIMER_ENQUEUE, 0, "timer-enqueue")
        self.deq = e.process(self._dequeue_loop(), TIMER_DEQUEUE, 0, "timer-dequeue")
        if any(f.kind == "crash" for f in self.ctx.scenario.faults):
            self.flusher = e.process(self._flush_loop(), PERSIST, 1000, "timer-flush")

    def stop(self, clean: bool) -> None:
        for pr in (self.enq, self.deq, self.flusher):
            if pr is not None:
                pr.stop()
        if clean:
            self._checkpoint()
            self.persisted = dict(self.tc)
        else:
            self.tc = dict(self.persisted)

    def _checkpoint(self) -> None:
        """`prepareTimerCheckPoint`: the cursors a flush writes to config/timercheck."""
        self.tc["last_read_time_ms"] = self.read_time()
        self.tc["last_timer_log_flush_pos"] = self.end
        self.tc["last_timer_queue_offset"] = self.curr_queue_offset
        self.tc["master_timer_queue_offset"] = self.curr_queue_offset

    def _flush_loop(self):
        while True:
            self._checkpoint()
            self.persisted = dict(self.tc)
            yield 1000

    def write_time(self) -> int:
        return self.ctx.clock() // self.precision * self.precision

    def read_time(self) -> int:
        """`currReadTimeMs` now: it runs over empty slots up to the write time at once."""
        nxt = self._heap[0] if self._heap else None
        w = self.write_time()
        target = w if nxt is None else min(nxt, w)
        return max(self.curr_read, target)

    # ----- enqueue -----
    def _on_append(self) -> None:
        if self.enq is not None and self.enq.alive and self.enq.wake_time is None:
            self.enq.wake(0)

    def _enqueue_loop(self):
        m = self.ctx.model
        while True:
            lo = m.cq_min(TIMER_TOPIC, 0)
            if self.curr_queue_offset < lo:
                self.curr_queue_offset = lo
            hi = m.cq_max(TIMER_TOPIC, 0)
            while self.curr_queue_offset < hi:
                off = self.curr_queue_offset
                unit = m.cq_unit(TIMER_TOPIC, 0, off)
                self.curr_queue_offset = off + 1
                if unit is None:
                    continue
                msg = m.message(unit[0])
                if msg is None:
                    continue
                try:
                    delayed = int(msg.props["TIMER_OUT_MS"])
                except (KeyError, ValueError):
                    continue
                if delayed < self.write_time():
                    yield from self._put(msg, LONG_MAX, 0, delayed, direct=True)
                else:
                    self._do_enqueue(unit[0], unit[1], delayed, msg)
                hi = m.cq_max(TIMER_TOPIC, 0)
            yield None

    def _do_enqueue(self, offset_py: int, size_py: int, delayed: int, msg) -> None:
        ctx = self.ctx
        write = self.write_time()
        p, w = self.precision, self.window
        magic = MAGIC_DEFAULT
        roll = delayed - write >= w * p
        original = delayed
        if roll:
            magic |= MAGIC_ROLL
            if delayed - write - w * p < (w // 3) * p:
                delayed = write + (w // 2) * p
            else:
                delayed = write + w * p
        delete = msg.props.get("TIMER_DEL_UNIQKEY") is not None
        if delete:
            magic |= MAGIC_DELETE
        pos = self.end
        if pos % self.file_size + TIMERLOG_UNIT_SIZE + TIMERLOG_BLANK_SIZE > self.file_size:
            nxt = (pos // self.file_size + 1) * self.file_size
            self.fillers.append((pos, nxt - pos))
            pos = nxt
        self.end = pos + TIMERLOG_UNIT_SIZE
        s = self.slots.get(delayed)
        prev = s[1] if s is not None else -1
        real = msg.props.get("REAL_TOPIC")
        self.units[pos] = (prev, magic, write, delayed, offset_py, size_py, java_string_hash(real) if real else 0)
        self.new_units.append(pos)
        if s is None:
            self.slots[delayed] = [pos, pos, -1 if delete else 1]
            heapq.heappush(self._heap, delayed)
        else:
            s[1] = pos
            s[2] += -1 if delete else 1
        ctx.log.emit(ctx.engine.now, "timer", "enqueue", msg.props.get("REAL_TOPIC"),
                     _int(msg.props.get("REAL_QID")), msg.uniq_key, offset_py, slot=delayed,
                     timer_out_ms=original, roll=roll, cancel=delete, timerlog_pos=pos)
        if self.deq is not None and self.deq.alive and not self._in_slot:
            target = delayed + p - ctx.clock_offset
            if self.deq.wake_time is None or target < self.deq.wake_time:
                self.deq.wake_at(max(target, ctx.engine.now))

    # ----- dequeue -----
    def on_clock_jump(self) -> None:
        if self.deq is not None and self.deq.alive and not self._in_slot:
            self.deq.wake(0)

    def _dequeue_loop(self):
        ctx = self.ctx
        p = self.precision
        while True:
            w = self.write_time()
            if not self._heap:
                self.curr_read = max(self.curr_read, w)
                yield None
                continue
            slot_time = self._heap[0]
            if slot_time >= w:
                self.curr_read = max(self.curr_read, w)
                yield max(0, slot_time + p - ctx.clock())
                continue
            heapq.heappop(self._heap)
            self.curr_read = slot_time
            self._in_slot = True
            yield from self._dequeue_slot(slot_time)
            self._in_slot = False
            self.curr_read = slot_time + p

    def _dequeue_slot(self, slot_time: int):
        ctx, m = self.ctx, self.ctx.model
        s = self.slots.pop(slot_time, None)
        if s is None:
            return
        chain = []
        pos = s[1]
        while pos != -1 and pos in self.units and self.units[pos][3] == slot_time:
            chain.append(pos)
            pos = self.units[pos][0]
        chain.reverse()  # oldest first
        deletes: set[str] = set()
        normal = []
        for pos in chain:
            u = self.units[pos]
            if u[1] & MAGIC_DELETE and not u[1] & MAGIC_ROLL:
                msg = m.message(u[4])
                if msg is not None and msg.props.get("TIMER_DEL_UNIQKEY") is not None:
                    deletes.add(msg.props["TIMER_DEL_UNIQKEY"])
            else:
                normal.append(pos)
        for pos in normal:
            u = self.units[pos]
            msg = m.message(u[4])
            if msg is None:
                continue
            uk = msg.uniq_key
            if uk is not None and uk in deletes:
                self.cancelled += 1
                ctx.log.emit(ctx.engine.now, "timer", "cancel", msg.props.get("REAL_TOPIC"),
                             _int(msg.props.get("REAL_QID")), uk, msg.phys, slot=slot_time)
                continue
            yield from self._put(msg, u[2], u[1], slot_time, direct=False)

    def _put(self, msg, enqueue_time: int, magic: int, slot_time: int, direct: bool):
        """`convert` + `doPut` with its retries; a generator (retries take virtual time)."""
        ctx = self.ctx
        roll = bool(magic & MAGIC_ROLL)
        if not roll and msg.props.get("TIMER_DEL_UNIQKEY") is not None:
            return  # doPut: a cancel marker is never delivered (PUT_NO_RETRY)
        props = dict(msg.props)
        if enqueue_time != -1:
            props["TIMER_ENQUEUE_MS"] = str(enqueue_time)
        if roll:
            props["TIMER_ROLL_TIMES"] = str(_int(props.get("TIMER_ROLL_TIMES"), 0) + 1)
        props["TIMER_DEQUEUE_MS"] = str(ctx.clock())
        if roll:
            topic, qid = msg.topic, msg.queue_id
        else:
            topic, qid = props.get("REAL_TOPIC"), _int(props.get("REAL_QID"), 0)
            if topic is None:
                return
        attempts = 0
        while True:
            new = msg.derive(topic, qid, dict(props))
            res = ctx.put(new, "timer")
            if res.ok:
                break
            attempts += 1
            retry = res.status == "SERVICE_NOT_AVAILABLE"
            give_up = not retry and attempts > 3
            ctx.log.emit(ctx.engine.now, "timer", "put_failed", topic, qid, msg.uniq_key, msg.phys,
                         status=res.status, attempt=attempts, given_up=give_up)
            if give_up:
                return
            yield (500 * self.precision // 1000) if retry else 50
        n = res.message
        if roll:
            self.rolled += 1
            ctx.log.emit(ctx.engine.now, "timer", "roll", msg.props.get("REAL_TOPIC"),
                         _int(msg.props.get("REAL_QID")), n.uniq_key, msg.phys, n.phys, slot=slot_time,
                         roll_times=_int(n.props.get("TIMER_ROLL_TIMES")))
        else:
            self.delivered += 1
            ctx.log.emit(ctx.engine.now, "timer", "deliver", n.topic, n.queue_id, n.uniq_key, msg.phys, n.phys,
                         slot=slot_time, due=_int(msg.props.get("TIMER_OUT_MS")), direct=direct,
                         queue_offset=n.queue_offset)

    # ----- summary -----
    def pending(self) -> int:
        """Timer messages still in the wheel (cancel markers excluded)."""
        n = 0
        for s in self.slots.values():
            pos = s[1]
            while pos != -1 and pos in self.units:
                u = self.units[pos]
                if not (u[1] & MAGIC_DELETE and not u[1] & MAGIC_ROLL):
                    n += 1
                pos = u[0]
        return n


def _int(v, default=None):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default
