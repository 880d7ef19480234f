"""TimerMessageStore: timer enqueue, roll, cancel and dequeue (spec §6.5-6.10; 5.x only).

Mirrors `org.apache.rocketmq.store.timer.TimerMessageStore` at rocketmq-all-5.3.1:

- recovery (`recover`/`recoverAndRevise`): the slots are the store's `timerwheel`; the TimerLog units
  from the file before `lastTimerLogFlushPos` on revise their slot's last position (`reviseSlot`,
  forced). A store without a wheel file gets its slots rebuilt from every TimerLog unit. `currQueueOffset`
  = the queue offset of the last unit's record + 1 (else timercheck's `lastTimerQueueOffset`), capped
  at `masterTimerQueueOffset`; `currReadTimeMs` = `lastReadTimeMs`, but not earlier than
  `now − slotsTotal × precision + 60 × precision`. A store shut down cleanly has its timers already
  in the TimerLog, so nothing is enqueued twice.
- enqueue (`rmq_sys_wheel_timer` queue 0 from `currQueueOffset`): `delayedTime = TIMER_OUT_MS`; when
  it is before `currWriteTimeMs` the message is put at once (`rules.timer.put_at_once`, enqueue time Long.MAX_VALUE);
  else `doEnqueue`: the roll rule (≥ rollWindow ahead ⇒ ROLL, target write + window/2 when the rest
  is under window/3, else write + window), DELETE for TIMER_DEL_UNIQKEY, a 52-byte unit appended,
  the slot's last position and count updated.
- dequeue: slot by slot from `currReadTimeMs`, only while it is before `currWriteTimeMs` (= now
  floored to the precision); empty slots are skipped at once. A slot's units are the chain from the
  wheel's `lastPos` back along each unit's `prevPos` (`TimerLog` reads for the store's units, memory
  for the ones appended here; `mqtool.rules.timer.walk_chain`); a `prevPos` that points at no unit,
  or back into the walked chain, ends the walk with a `skip` event (`reason` "broken TimerLog chain")
  instead of an error. In a slot, delete units (DELETE, not
  ROLL) are read first and their TIMER_DEL_UNIQKEY values collected; then the other units oldest
  first: a record whose UNIQ_KEY is in that set is dropped (cancelled); a ROLL unit is re-put to the
  timer topic with its roll count + 1; the rest go to REAL_TOPIC/REAL_QID (`convert`: the enqueue and dequeue
  times set, the string built before REAL_TOPIC/REAL_QID are removed). `convert`'s properties are set by
  `rules.timer.convert_properties` only.
- a plain unit enqueued during the run keeps, beside it, what its delivery needs (`timerrows.DeliveryRows`: REAL_TOPIC,
  REAL_QID, UNIQ_KEY packed, the re-put's size but the two properties the dequeue sets); where no fault
  can refuse a put and no cancel is in the slot, the dequeue delivers it from that row (`_deliver_row`)
  instead of reading the record again: the same event and offsets, `tests/simulate/test_timer_rows.py`.
- put retries (`doPut`): SERVICE_NOT_AVAILABLE is retried every `500 × precision / 1000` ms until it
  works; any other failure is tried 3 more times 50 ms apart, then given up.
"""

from __future__ import annotations

import heapq
from array import array
from itertools import chain, repeat

import numpy as np

from mqtool.formats.commitlog import hosts_size
from mqtool.formats.javahash import java_string_hash
from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.formats.timerlog import MAGIC_DELETE, MAGIC_ROLL, TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import SLOTS_TOTAL
from mqtool.rules.recovery import timer_read_time
from mqtool.rules.timer import (
    CONVERT_SET,
    DELIVERY_SET,
    LONG_MAX,
    LOOP,
    check_timer_precision,
    convert_properties,
    convert_size_change,
    dequeue_order,
    do_enqueue,
    do_enqueue_many,
    format_time_ms,
    is_deleted,
    need_delete,
    need_roll,
    next_roll_times,
    put_at_once,
    revise_slots,
    roll_times,
    walk_chain,
)
from mqtool.simulate import plainscan
from mqtool.simulate.batchread import batchable, close, read_plain, read_sources, scan_plain
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import PERSIST, TIMER_DEQUEUE, TIMER_ENQUEUE, Process
from mqtool.simulate.model import SimMessage, _order, next_in_file, tags_code
from mqtool.simulate.timerrows import FORMATS, NO_ROW, DeliveryRows
from mqtool.simulate.timerrows import reput_size as row_reput_size
from mqtool.simulate.timerunits import TimerUnits

TIMERLOG_BLANK_SIZE = 16
ENQUEUE_BATCH = 4096  # the store's units read together by the enqueue walk (`_enqueue_base`)
COLUMNS_FROM = 1024  # from this many units on, a batch is read as columns (`batchread.scan_plain`)
ROLLED_KEPT = 8192  # roll re-puts whose properties wait for the enqueue in memory (the rest: the spool)
ROLL_READ = 64  # a slot's units from which its ROLL units' records are read batch-wise (`_roll_sources`)
ROLL_CHUNK = 4096  # ... this many units' at a time (the records' values are held until rolled)
PENDING_EVENTS = 4096  # a slot's events waiting for one `record_batch` (a roll slot holds a third of a run)
_NP_MAX = 2**62  # a TIMER_OUT_MS past this is left to the per-message walk (the batch computes in int64)
_ENQUEUE_KEYS = ("slot", "timer_out_ms", "roll", "cancel", "timerlog_pos")
_EVENT_KEYS = {"deliver": ("slot", "due", "direct", "queue_offset"), "roll": ("slot", "roll_times")}
_CANCEL_BITS = MAGIC_DELETE | MAGIC_ROLL  # `is_cancel_request`: DELETE without ROLL
# `_enqueue_base`: the values `read_plain` takes from a plain string, and the two dequeue properties' segment
# lengths but their values (name, separators)
_ENQ_WANTED = (PROPERTY_TIMER_OUT_MS, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID,
               PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) + DELIVERY_SET
_ENQ_INTERN = 0b1100  # REAL_TOPIC and REAL_QID: a text of each distinct value (`_scanned_columns`)
_ENQ_SEG, _DEQ_SEG = (len(k) + 2 for k in DELIVERY_SET)
# `_roll`'s three properties, in the order `convert` sets them (a source without them gets them appended so)
_ROLL_SET = CONVERT_SET
_ROLL_TIMES_KEY = CONVERT_SET[1]
# (a source's keys, map capacity) -> UTF-8 length of the keys and separators of its roll re-put (`_roll_row`)
_ROLL_KEYS: dict[tuple[tuple[str, ...], int], int] = {}
_U64 = (1 << 64) - 1
_NO_DELETES: frozenset[str] = frozenset()  # a slot without cancel requests
# the values `_roll_plain` takes from a plain string (`rollread.read_sources`)
_ROLL_WANTED = (PROPERTY_TIMER_OUT_MS, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID,
                PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) + _ROLL_SET + (PROPERTY_TAGS,)
_TIMER_TOPIC_B = TIMER_TOPIC.encode()


class _Texts(dict):
    """Bytes `read_plain` gives -> their text (`_text`), made on the first look-up of each (a subscript of a
    dict subclass costs less than a `get` and a test)."""

    __slots__ = ()

    def __missing__(self, value: bytes | None) -> str | None:
        text = self[value] = _text(value)
        return text


_ROLL_TEXTS = _Texts()  # REAL_TOPIC/REAL_QID bytes -> text (`_roll_plain`)
_TEXTS = _Texts()  # REAL_TOPIC/REAL_QID bytes -> text (`_enqueue_base`)


class TimerService:
    """`units[pos] = (prev_pos, magic, write_time, delayed_time, offset_py, size_py, topic_hash)`.

    `slots[time] = [first_pos, last_pos, num]` is the wheel as the broker holds it: read from the
    store's `timerwheel` on first use (`wheel`), updated by every enqueue, never cleared by a
    dequeue (as on disk). `_heap` holds the times of the non-empty slots not yet dequeued.
    """

    batch = True  # False: every unit by the per-message walk (tests compare the two)
    _roll_rows = 0  # roll re-puts kept as rows in the spool so far (`_roll_row`, `_roll_enqueue`)

    def __init__(self, ctx: SimContext, timercheck=None, units=None, timerlog_end: int = 0,
                 timerlog_file_size: int | None = None, wheel=None, timerlog=None) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.precision = cfg.timer_precision_ms
        check_timer_precision(self.precision)  # the broker cannot run its timer with it
        self.window = cfg.timer_roll_window_slots()
        self.file_size = timerlog_file_size or cfg.mapped_file_size_timer_log
        self.wheel = wheel  # mqtool.store.timer.TimerWheel, or None: slots rebuilt from `units`
        self.timerlog = timerlog  # mqtool.store.timer.TimerLog: units not held in `units`
        self.units = TimerUnits(self.file_size)  # pos -> unit tuple, in compact columns
        self.new_units = array("q")  # positions appended during the run, in order
        self.fillers: list[tuple[int, int]] = []
        self.slots: dict[int, list[int]] = {}  # delayed time -> [first_pos, last_pos, num]
        self._heap: list[int] = []
        self._queued: set[int] = set()  # the times in _heap
        self.end = timerlog_end
        self.tc = {"last_read_time_ms": 0, "last_timer_log_flush_pos": 0, "last_timer_queue_offset": 0,
                   "master_timer_queue_offset": 0}
        if timercheck is not None:
            for k in self.tc:
                self.tc[k] = int(getattr(timercheck, k, 0))
        loaded = set()
        for u in units or ():
            self.units[u[0]] = tuple(u[1:])
            loaded.add(u[0])
        self._loaded = sorted(loaded)  # the store's units read at the start (revise range)
        self._revised = False
        self.curr_read = 0
        self.curr_queue_offset = 0
        self.enq: Process | None = None
        self.deq: Process | None = None
        self.flusher: Process | None = None
        self.persisted = dict(self.tc)
        self._in_slot = False
        self._topic_hash: dict[str | None, int] = {None: 0}
        self.delivered = 0
        self.cancelled = 0
        self.rolled = 0
        self.broken_chains = 0
        # phys -> properties of the roll re-puts not yet enqueued again (runs that release records, where
        # nothing but this service reads them): `StoreModel.props` would read them back from the spool
        self._rolled: dict[int, tuple[dict[str, str], int, int]] = {}  # (properties, BODYLENGTH, SYSFLAG)
        self._light: tuple | None = None  # (what `_light_reader` depends on, its reader)
        self.rows = DeliveryRows(lambda: ctx.model.capacity)  # a plain delivery's row beside its unit
        ctx.model.on_append(TIMER_TOPIC, 0, self._on_append)

    # ----- the wheel -----
    def _slot(self, t: int) -> list[int] | None:
        """`TimerWheel.getSlot(t)`: [first_pos, last_pos, num], None when empty."""
        s = self.slots.get(t)
        if s is None and self.wheel is not None:
            ws = self.wheel.get_slot(t)
            if ws.time_ms == -1:
                return None
            s = self.slots[t] = [ws.first_pos, ws.last_pos, ws.num]
        return s

    def _unit(self, pos: int):
        """The unit at a TimerLog position: appended here, read at the start, or read from the store."""
        u = self.units.get(pos)
        if u is None and self.timerlog is not None and pos >= 0:
            r = self.timerlog.read_unit(pos)
            if r is not None and r.magic != 0:
                u = (r.prev_pos, r.magic, r.curr_write_time_ms, r.delayed_time_ms, r.offset_py, r.size_py,
                     r.real_topic_hash)
        return u

    def _queue_slot(self, t: int) -> None:
        if t not in self._queued:
            self._queued.add(t)
            heapq.heappush(self._heap, t)

    # ----- recovery and life cycle -----
    def _recover(self) -> None:
        p = self.precision
        self.curr_read = timer_read_time(self.tc["last_read_time_ms"], self.ctx.clock(), p, SLOTS_TOTAL)
        if not self._revised:
            self._revised = True
            # recoverAndRevise: each unit read at the start makes itself its slot's last position
            if self.wheel is not None:
                units = self.units
                self.slots.update(revise_slots(((pos, units[pos][3]) for pos in self._loaded), self._slot))
            else:  # no wheel file: the slots are rebuilt from every unit, counted as doEnqueue counts
                for pos in self._loaded:
                    u = self.units[pos]
                    s = self.slots.get(u[3])
                    if s is None:
                        self.slots[u[3]] = [pos, pos, 1]
                    else:
                        s[1] = pos
                        s[2] += 1
        self._heap = []
        self._queued = set()
        times = set(self.slots)
        if self.wheel is not None:
            col = self.wheel.slots["time_units"]
            times.update(int(v) * p for v in col[col * p >= self.curr_read].tolist())
        for t in sorted(times):
            if t >= self.curr_read and self._slot(t) is not None:
                self._queue_slot(t)
        offset = -1
        last = self._unit(self.end - TIMERLOG_UNIT_SIZE) if self.end >= TIMERLOG_UNIT_SIZE else None
        if last is not None:
            msg = self.ctx.model.message(last[4])
            if msg is not None:
                offset = msg.queue_offset
        q = self.tc["last_timer_queue_offset"] if offset == -1 else offset + 1
        master = self.tc["master_timer_queue_offset"]
        self.curr_queue_offset = min(q, master) if master > 0 or offset == -1 else q

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
            self.persist()
        else:
            self.tc = dict(self.persisted)

    def persist(self) -> None:
        """A timercheck flush: the cursors as a checkpoint, the copy a crash falls back to."""
        self._checkpoint()
        self.persisted = dict(self.tc)

    def _checkpoint(self) -> None:
        """`prepareTimerCheckPoint`: the cursors a flush writes to config/timercheck."""
        self.tc["last_read_time_ms"] = self.read_time()
        self.tc["last_timer_log_flush_pos"] = self.end
        self.tc["last_timer_queue_offset"] = self.curr_queue_offset
        self.tc["master_timer_queue_offset"] = self.curr_queue_offset

    def _flush_loop(self):
        while True:
            self.persist()
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
        ctx, m = self.ctx, self.ctx.model
        rolled = self._rolled
        p = self.precision
        roll_row = getattr(self, "_roll_enqueue", None)  # the dequeue's rows of roll re-puts (s7roll)
        while True:
            lo = m.cq_min(TIMER_TOPIC, 0)
            if self.curr_queue_offset < lo:
                self.curr_queue_offset = lo
            hi = m.cq_max(TIMER_TOPIC, 0)
            while self.curr_queue_offset < hi:
                retry = None
                write = (ctx.engine._now + ctx.clock_offset) // p * p  # no time passes in the walk
                # the store's own units batch-wise, up to one the per-message path must take
                base_end = self._enqueue_base(hi, write) if self.batch else 0
                if self.curr_queue_offset >= hi:
                    hi = m.cq_max(TIMER_TOPIC, 0)
                    continue
                # units `_enqueue_many` takes at once
                pend: tuple[list, ...] = ([], [], [], [], [], [], [], [])  # `_enqueue_many`'s columns
                try:
                    for off, unit in m.cq_units(TIMER_TOPIC, 0, self.curr_queue_offset, hi):
                        self.curr_queue_offset = off + 1
                        # a roll re-put the dequeue keeps as a row: its columns (`_roll_enqueue`, when there)
                        got = roll_row(unit[0]) if roll_row is not None and self._roll_rows else None
                        if got is not None:
                            delayed, props = got[0], None
                        else:
                            rec = rolled.pop(unit[0], None) if rolled else None  # a roll re-put just made
                            if rec is None:
                                rec = self._props_rec(unit[0])
                            props = rec[0]
                            if props is None:
                                continue
                            try:
                                delayed = int(props[PROPERTY_TIMER_OUT_MS])
                            except (KeyError, ValueError):
                                continue
                        if put_at_once(delayed, write):
                            if pend[0]:
                                self._flush_enqueues(pend, write)
                            retry = self._put(m.message(unit[0]), LONG_MAX, 0, delayed, direct=True)
                            if retry is not None:
                                break  # the put waits: re-read the queue afterwards
                            m.release(unit[0])  # delivered at once: no unit points at it
                        elif self.batch and delayed <= _NP_MAX:
                            pend[0].append(unit[0])
                            pend[1].append(unit[1])
                            if got is not None:
                                for col, v in zip(pend[2:], got, strict=True):
                                    col.append(v)
                            else:
                                pend[2].append(delayed)
                                pend[3].append(props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None)
                                pend[4].append(props.get(PROPERTY_REAL_TOPIC))
                                pend[5].append(props.get(PROPERTY_REAL_QUEUE_ID))
                                pend[6].append(props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
                                pend[7].append(rec)
                            if len(pend[0]) >= ENQUEUE_BATCH:
                                self._flush_enqueues(pend, write)
                        else:
                            if pend[0]:
                                self._flush_enqueues(pend, write)
                            if props is None:
                                props = self._props_rec(unit[0])[0]
                            self._enqueue_unit(unit[0], unit[1], delayed, props, write)
                        if off + 1 < base_end:
                            break  # back to the batch for the store's units after this one
                    else:
                        if self.curr_queue_offset < hi:
                            self.curr_queue_offset += 1  # a unit that cannot be read is passed over
                finally:
                    if pend[0]:
                        self._flush_enqueues(pend, write)
                if retry is not None:
                    yield from retry
                hi = m.cq_max(TIMER_TOPIC, 0)
            yield None

    def _props_rec(self, phys: int) -> tuple:
        """(properties, BODYLENGTH, SYSFLAG) of a re-put kept in the overlay or the spool; (properties,
        None, None) of any other record (`StoreModel.props`: the record is read whole when its slot comes)."""
        m = self.ctx.model
        msg = m._msgs.get(phys)
        if msg is None and m.spool is not None:
            msg = m.spool.get(phys)
        if msg is not None:
            return msg.props, msg.body_len, msg.sys_flag
        return m.props(phys), None, None

    def _flush_enqueues(self, pend: tuple[list, ...], write: int) -> None:
        """`_enqueue_unit` of each unit gathered by the walk (`_enqueue_many`'s columns: phys, size, delivery
        time, TIMER_DEL_UNIQKEY present, REAL_TOPIC, REAL_QID, UNIQ_KEY, src), at once, and the dequeue woken
        as the last of their wakes would leave it (`_enqueue_base`'s argument: nothing else is scheduled
        in between)."""
        t = self._enqueue_many(*pend, write)
        for col in pend:
            col.clear()
        self._wake_dequeue(t)

    def _enqueue_base(self, hi: int, write: int) -> int:
        """The per-message walk of `_enqueue_loop` over the store's own units of the timer queue, from
        `curr_queue_offset` up to the first unit it must leave to that walk (one delivered at once,
        one not written); the base's end of the range (or 0) is returned.

        Equivalent by construction: the units come from the same columns `cq_units` hands out, a
        record's properties from `batchread.read_plain` (the checks of `MappedBase.props`; else
        `StoreModel.props` itself, and always when the record is in the overlay or the read cache):
        a plain string by one match giving the values `_enqueue_many` needs and its length (the
        re-put's size, `DeliveryRows.of_plain`), any other parsed into a map as before (a batch of
        `COLUMNS_FROM` units or more: the same answers as columns of offsets, `batchread.scan_plain`,
        `_enqueue_scanned`); each unit goes through
        `_enqueue_unit`'s arithmetic in queue order, and the dequeue is woken once at the end at the
        time the last of the per-unit wakes would have left (nothing else is scheduled during the
        walk, so the engine's order is the same).
        """
        m = self.ctx.model
        base = m.base
        if not batchable(base):
            return 0
        u = base._queue(TIMER_TOPIC, 0)
        stop = min(hi, base.cq_max(TIMER_TOPIC, 0))
        off = self.curr_queue_offset
        if u is None or off < u.first or off >= stop:
            return 0
        msgs, lru = m._msgs, base._lru
        spooled = m.spool._where if m.spool is not None else {}
        first = u.first
        wake = None
        texts = _TEXTS
        try:
            while off < stop:
                a = off - first
                b = min(stop - first, a + ENQUEUE_BATCH)
                ok = u.ok[a:b]
                if not ok.all():
                    b = a + int(np.argmin(ok))
                    if b == a:
                        return stop  # a unit that is not written: the per-message walk passes it over
                phys = u.offset[a:b].tolist()
                sizes = u.size[a:b].tolist()
                scanned = scan_plain(base, phys, sizes, _ENQ_WANTED, _ENQ_INTERN) if len(phys) >= COLUMNS_FROM else None
                if scanned is not None:
                    try:
                        done, halt, t = self._enqueue_scanned(scanned[1], scanned[0], scanned[2], phys, sizes, write,
                                                              msgs, spooled, lru)
                    finally:
                        close(scanned[0])
                    off += done
                    self.curr_queue_offset = off
                    if t is not None and (wake is None or t < wake):
                        wake = t
                else:
                    records = read_plain(base, phys, sizes, _ENQ_WANTED)
                    take: list[int] = []  # the units `_enqueue_unit` would take, in queue order
                    cols: tuple[list, ...] = ([], [], [], [], [], [])  # due, delete, topic, qid, UNIQ_KEY, src
                    halt = False
                    try:
                        for k, ph in enumerate(phys):
                            rec = records[k]
                            if rec is None or ph in msgs or ph in spooled or ph in lru:
                                rec = self._props_rec(ph)  # the per-message read decides
                            got = self._base_unit(rec, write)
                            if got is False:
                                halt = True  # put at once (or past int64): the per-message walk does it
                                break
                            off += 1
                            if got is not None:
                                take.append(k)
                                for col, v in zip(cols, got, strict=True):
                                    col.append(v)
                    finally:
                        self.curr_queue_offset = off
                        if take:
                            if len(take) < len(phys):
                                phys, sizes = [phys[k] for k in take], [sizes[k] for k in take]
                            t = self._enqueue_many(phys, sizes, *cols, write)
                            if wake is None or t < wake:
                                wake = t
                if len(texts) > FORMATS:
                    texts.clear()  # a store has a few REAL_TOPIC/REAL_QID values
                if halt:
                    return stop
            return stop
        finally:
            if wake is not None:
                self._wake_dequeue(wake)

    def _base_unit(self, rec: tuple, write: int):
        """What `_enqueue_loop`'s per-message walk does with a store's unit whose record `read_plain` (or
        `_props_rec`) answered `rec`: None passed over (no TIMER_OUT_MS, not a number), False left to
        that walk (put at once, or past int64), else the unit's (delivery time, TIMER_DEL_UNIQKEY present,
        REAL_TOPIC, REAL_QID, UNIQ_KEY, src) for `_enqueue_many`."""
        texts = _TEXTS
        if len(rec) == 2:  # a plain string (`read_plain`): its values as bytes
            n, (out_b, del_b, real_b, qid_b, uniq_b, enq_b, deq_b) = rec
            if out_b is None:
                return None
            try:
                delayed = int(out_b)  # ASCII digits: what `int` of the text gives
            except ValueError:
                delayed = _int(out_b.decode("utf-8", "surrogateescape"))
                if delayed is None:
                    return None
            if put_at_once(delayed, write) or delayed > _NP_MAX:
                return False
            real = texts[real_b]
            qid = texts[qid_b]
            if enq_b is not None:
                n -= len(enq_b) + _ENQ_SEG
            if deq_b is not None:
                n -= len(deq_b) + _DEQ_SEG
            return (delayed, del_b is not None, real, qid,
                    None if uniq_b is None else uniq_b.decode("utf-8", "surrogateescape"), n)
        props = rec[0]
        if props is None:
            return None
        try:
            delayed = int(props[PROPERTY_TIMER_OUT_MS])
        except (KeyError, ValueError):
            return None
        if put_at_once(delayed, write) or delayed > _NP_MAX:
            return False
        return (delayed, props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None, props.get(PROPERTY_REAL_TOPIC),
                props.get(PROPERTY_REAL_QUEUE_ID), props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), rec)

    def _enqueue_scanned(self, out: np.ndarray, buf, answers: dict[int, tuple], phys: list[int], sizes: list[int],
                         write: int, msgs, spooled, lru) -> tuple[int, bool, int | None]:
        """`_enqueue_base`'s walk over one batch from `batchread.scan_plain`'s columns: a matched record's
        values taken by their offsets for all at once (TIMER_OUT_MS as the kernel's number, the texts of
        REAL_TOPIC and REAL_QID once per distinct value, the re-put's size by numpy), any other record
        (no template, a TIMER_OUT_MS not of 1 to 18 ASCII digits, one in the overlay, spool or read cache)
        by `_base_unit` as the `read_plain` walk does; the units up to the first one the per-message walk
        must take go to one `_enqueue_many`. Returns (records walked, stopped there, the earliest slot)."""
        n = len(phys)
        F = plainscan.FIXED
        num = out[:, 7]
        out_s = out[:, F]
        py = out[:, 0] != 1
        py |= (out_s >= 0) & (num < 0)  # a TIMER_OUT_MS `int` reads (or refuses) as text
        if any(any(map(c.__contains__, phys)) for c in (msgs, spooled, lru)):
            py |= np.fromiter((ph in msgs or ph in spooled or ph in lru for ph in phys), bool, n)
        take = ~py & (out_s >= 0)
        halts = np.flatnonzero(take & (put_at_once(num, write) | (num > _NP_MAX)))
        end = int(halts[0]) if len(halts) else n
        singles: dict[int, tuple] = {}  # k -> `_base_unit` of a record taken one by one
        for k in np.flatnonzero(py[:end]).tolist():
            if out[k, 0] == 1 and phys[k] not in msgs and phys[k] not in spooled and phys[k] not in lru:
                rec = plainscan.answer(out, k, buf, len(_ENQ_WANTED))
            elif out[k, 0] == 0 and k in answers and phys[k] not in msgs and phys[k] not in spooled \
                    and phys[k] not in lru:
                rec = answers[k]
            else:
                rec = self._props_rec(phys[k])  # the per-message read decides
            got = self._base_unit(rec, write)
            if got is False:
                end = k
                break
            if got is not None:
                singles[k] = got
        take[end:] = False
        ks = np.flatnonzero(take)
        cols = self._scanned_columns(out, buf, ks)
        if singles:  # merged in queue order
            merged: tuple[list, ...] = ([], [], [], [], [], [])
            at = dict(zip(ks.tolist(), range(len(ks)), strict=True))
            order = sorted([*at, *singles])
            for k in order:
                j = at.get(k)
                for col, v in zip(merged, singles[k] if j is None else [c[j] for c in cols], strict=True):
                    col.append(v)
            cols, ks = merged, order
        else:
            ks = ks.tolist()
        if not ks:
            return end, end < n, None
        if len(ks) < n:
            phys, sizes = [phys[k] for k in ks], [sizes[k] for k in ks]
        return end, end < n, self._enqueue_many(phys, sizes, *cols, write)

    def _scanned_columns(self, out: np.ndarray, buf, ks: np.ndarray) -> tuple[list, ...]:
        """(due, delete, REAL_TOPIC, REAL_QID, UNIQ_KEY, re-put size) of the matched records `ks` of
        `scan_plain`'s `out`, as `_base_unit` gives them for their `(n, values)`: REAL_TOPIC's and
        REAL_QID's texts made once per distinct value (the kernel's first record of each)."""
        F, W = plainscan.FIXED, plainscan.STRIDE
        rows = out[ks]
        texts = _TEXTS
        cols: list = [rows[:, 7].tolist(), (rows[:, F + W] >= 0).tolist()]
        for w in (2, 3):
            c = F + W * w
            reps = rows[:, c + 2].tolist()
            values: dict[int, str | None] = {}
            for j in dict.fromkeys(reps):
                s, e = (int(out[j, c]), int(out[j, c + 1])) if j >= 0 else (-1, -1)
                b = buf[s:e] if s >= 0 else None
                values[j] = texts[b]
            if -1 in values:  # past the interned values: each record's own
                starts, ends = rows[:, c].tolist(), rows[:, c + 1].tolist()
                for i, j in enumerate(reps):
                    if j < 0:
                        b = buf[starts[i]:ends[i]] if starts[i] >= 0 else None
                        reps[i] = texts[b]
                    else:
                        reps[i] = values[j]
                cols.append(reps)
            else:
                cols.append(list(map(values.__getitem__, reps)))
        c = F + W * 4
        cols.append([buf[s:e].decode("utf-8", "surrogateescape") if s >= 0 else None
                     for s, e in zip(rows[:, c].tolist(), rows[:, c + 1].tolist(), strict=True)])
        size = rows[:, 1].copy()
        for w, seg in ((5, _ENQ_SEG), (6, _DEQ_SEG)):
            s, e = rows[:, F + W * w], rows[:, F + W * w + 1]
            size -= np.where(s >= 0, e - s + seg, 0)
        cols.append(size.tolist())
        return tuple(cols)

    def _enqueue_many(self, phys: list[int], sizes: list[int], due: list[int], delete: list[bool],
                      reals: list[str | None], qid_texts: list[str | None], uniqs: list[str | None], srcs: list,
                      write: int) -> int:
        """`_enqueue_unit(..., wake=False)` for each unit in order, at once, from its TIMER_DEL_UNIQKEY's
        presence, REAL_TOPIC, REAL_QID and UNIQ_KEY texts and what its row needs (`srcs`: the re-put's size
        but the two dequeue properties, `DeliveryRows.of_plain`, or (properties, BODYLENGTH or None, SYSFLAG)
        for `DeliveryRows.of_props`): the slots and magics by
        `rules.timer.do_enqueue_many`, the TimerLog positions as a run (unit by unit where a file
        ends), each slot's chain linked in order, the units' columns written together
        (`TimerUnits.put_run`), the events by one `EventLog.record_batch`; the earliest slot is
        returned (the caller wakes the dequeue for it)."""
        n = len(phys)
        p = self.precision
        slot_a, magic_a = do_enqueue_many(np.array(due, np.int64), write, self.window, p, np.array(delete, bool))
        slot_of = slot_a.tolist()
        end, fs = self.end, self.file_size
        if end % fs + n * TIMERLOG_UNIT_SIZE + TIMERLOG_BLANK_SIZE <= fs:
            positions = list(range(end, end + n * TIMERLOG_UNIT_SIZE, TIMERLOG_UNIT_SIZE))
            self.end = end + n * TIMERLOG_UNIT_SIZE
        else:  # a file ends in the run: its filler as `_enqueue_unit` writes it
            positions = [self._next_unit_pos() for _ in range(n)]
        slots, queued, wheel = self.slots, self._queued, self.wheel
        prevs = []
        for t, pos, d in zip(slot_of, positions, delete, strict=True):
            s = slots.get(t)
            if s is None and wheel is not None:
                s = self._slot(t)
            if s is None:
                slots[t] = [pos, pos, -1 if d else 1]
                prevs.append(-1)
            else:
                prevs.append(s[1])
                s[1] = pos
                s[2] += -1 if d else 1
            if t not in queued:
                self._queue_slot(t)
        hashes = self._topic_hash
        for real in set(reals).difference(hashes):
            hashes[real] = java_string_hash(real)
        rows = np.empty((n, 7), np.int64)
        rows[:, 0] = prevs
        rows[:, 1] = magic_a
        rows[:, 2] = write
        rows[:, 3] = slot_a
        rows[:, 4] = phys
        rows[:, 5] = sizes
        rows[:, 6] = [hashes[real] for real in reals]
        if set(map(type, srcs)) == {int}:  # all plain strings (`_enqueue_base`): the rows by numpy
            extra = self.rows.of_plain_many(srcs, delete, magic_a, reals, qid_texts, uniqs)
        else:
            columns, cols = self.rows.of_props, self.rows.of_plain  # a ROLL unit's record is re-put whole: no row
            extra = np.fromiter(chain.from_iterable([
                NO_ROW if mg & MAGIC_ROLL or d else cols(src, real, q, uk) if src.__class__ is int
                else columns(*src) if src[1] is not None else NO_ROW
                for src, d, mg, real, q, uk in zip(srcs, delete, magic_a.tolist(), reals, qid_texts, uniqs,
                                                   strict=True)]),
                np.uint64, 3 * n).reshape(n, 3)
        if n and positions[-1] - positions[0] == (n - 1) * TIMERLOG_UNIT_SIZE:
            self.units.put_run(positions[0], rows, extra)
        else:
            for pos, unit, x in zip(positions, rows.tolist(), extra.tolist(), strict=True):
                self.units[pos] = unit
                if x[0]:
                    self.units.set_extra(pos, x)
        self.new_units.extend(positions)
        ctx = self.ctx
        log = ctx.log
        if log.keep:
            qids = {q: _int(q) for q in set(qid_texts)}
            events = list(zip(reals, map(qids.__getitem__, qid_texts), uniqs, phys, repeat(None, n), slot_of, due,
                              need_roll(magic_a).tolist(), delete, positions, strict=True))
            log.record_batch(ctx.engine._now, "timer", "enqueue", events, _ENQUEUE_KEYS)
        else:
            for _ in range(n):
                log.tally("enqueue")
        return min(slot_of)

    def _next_unit_pos(self) -> int:
        """The next unit's TimerLog position, taken: after a filler (`TimerLog.append`'s BLANK) where the
        unit and a blank would not fit in the rest of the file."""
        pos = next_in_file(self.end, TIMERLOG_UNIT_SIZE, self.file_size, TIMERLOG_BLANK_SIZE, self.fillers)
        self.end = pos + TIMERLOG_UNIT_SIZE
        return pos

    def _wake_dequeue(self, slot: int) -> None:
        """Wake the dequeue for a unit just put in `slot`, unless it wakes earlier (or is in a slot)."""
        deq = self.deq
        if deq is not None and deq.alive and not self._in_slot:
            ctx = self.ctx
            target = slot + self.precision - ctx.clock_offset
            if deq.wake_time is None or target < deq.wake_time:
                deq.wake_at(max(target, ctx.engine._now))

    def _enqueue_unit(self, offset_py: int, size_py: int, delayed: int, props: dict[str, str], write: int,
                      wake: bool = True) -> int:
        """`doEnqueue`: the slot and magic (`rules.timer.do_enqueue`), the 52-byte unit, the slot update;
        the slot is returned (`wake` False: the caller wakes the dequeue for it)."""
        ctx = self.ctx
        p = self.precision
        original = delayed
        delete = props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None
        delayed, magic = do_enqueue(delayed, write, self.window, p, delete)
        roll = need_roll(magic)
        pos = self._next_unit_pos()
        s = self._slot(delayed)
        prev = s[1] if s is not None else -1
        real = props.get(PROPERTY_REAL_TOPIC)
        h = self._topic_hash.get(real)
        if h is None:
            h = self._topic_hash[real] = java_string_hash(real)
        self.units[pos] = (prev, magic, write, delayed, offset_py, size_py, h)
        self.new_units.append(pos)
        if s is None:
            self.slots[delayed] = [pos, pos, -1 if delete else 1]
        else:
            s[1] = pos
            s[2] += -1 if delete else 1
        if delayed not in self._queued:
            self._queue_slot(delayed)
        now = ctx.engine._now
        log = ctx.log
        if log.keep:
            log.record(now, "timer", "enqueue", real, _int(props.get(PROPERTY_REAL_QUEUE_ID)),
                       props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), offset_py, None,
                       {"slot": delayed, "timer_out_ms": original, "roll": roll, "cancel": delete,
                        "timerlog_pos": pos}, True)
        else:
            log.tally("enqueue")
        if wake:
            deq = self.deq
            if deq is not None and deq.alive and not self._in_slot:
                target = delayed + p - ctx.clock_offset
                if deq.wake_time is None or target < deq.wake_time:
                    deq.wake_at(max(target, now))
        return delayed

    # ----- dequeue -----
    def on_clock_jump(self) -> None:
        if self.deq is not None and self.deq.alive and not self._in_slot:
            self.deq.wake(0)

    def _dequeue_loop(self):
        ctx = self.ctx
        p = self.precision
        heap = self._heap
        engine = ctx.engine
        # the slots' deliveries and rolls not written yet (`_flush_events`): kept from slot to slot while
        # `advance` goes on without the engine, written before every yield (no other event comes between)
        pend = self._pend = [None, []]
        while True:
            heap = self._heap  # replaced by a restart's recovery
            w = (engine._now + ctx.clock_offset) // p * p
            if not heap:
                self.curr_read = max(self.curr_read, w)
                self._flush_events(pend)
                yield None
                continue
            slot_time = heap[0]
            if slot_time >= w:
                self.curr_read = max(self.curr_read, w)
                delay = max(0, slot_time + p - ctx.clock())
                if not self.deq.advance(delay):  # the next slot at once when nothing else runs first
                    self._flush_events(pend)
                    yield delay
                continue
            heapq.heappop(heap)
            self._queued.discard(slot_time)
            self.curr_read = slot_time
            self._in_slot = True
            waiting = self._dequeue_slot(slot_time)
            if waiting is not None:
                self._flush_events(pend)
                yield from waiting
            self._in_slot = False
            self.curr_read = slot_time + p

    def _chain(self, slot_time: int, rows: bool = False) -> list[tuple]:
        """The slot's units newest first: from the wheel's lastPos back along prevPos (`walk_chain`), as
        (pos, unit, the delivery's row kept beside it or None: `DeliveryRows`; always None unless `rows`)."""
        s = self._slot(slot_time)
        if s is None:
            return []
        fast = self.units.chain(s[1], rows)  # units all held here, prevPos always back: the usual slot
        if fast is not None:
            return fast if rows else [(pos, u, None) for pos, u in fast]
        w = walk_chain(s[1], self._unit, _prev_pos)
        if w.broken:
            self.broken_chains += 1
            ctx = self.ctx
            self._flush_events(self._pend)  # the slots' events before this one (`_dequeue_loop`)
            ctx.log.emit(ctx.engine.now, "timer", "skip", None, None, None, None, slot=slot_time,
                         timerlog_pos=w.stop_pos, read=len(w.units),
                         reason="broken TimerLog chain: prevPos loops" if w.stop == LOOP
                         else "broken TimerLog chain: prevPos points at no unit")
        extra = self.units.extra if rows else _no_row
        return [(pos, u, extra(pos)) for pos, u in w.units]

    def _dequeue_slot(self, slot_time: int):
        """One slot; None when done, else a generator that finishes it (a put is being retried).

        The deliveries `_deliver` makes and the rolls `_roll` makes are written by one
        `EventLog.record_rows` for each run of one kind (`self._pend`: the kind and its rows, each with
        its time), flushed before any other event and before the dequeue yields (`_dequeue_loop`), so the
        log's order is the per-unit one."""
        ctx, m = self.ctx, self.ctx.model
        fast = m.put_filter is None and self.batch  # a re-put read back may be delivered lightly too
        chain = self._chain(slot_time, fast)  # (pos, unit, its delivery's row or None), newest first
        if fast and self._dequeue_rows(chain, slot_time):
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
        light = self._light_reader()
        # a roll's re-put wakes no one but this service's enqueue (no event of its own)
        fast_roll = fast and len(m._listeners.get((TIMER_TOPIC, 0), ())) == 1
        pend = self._pend
        # a plain unit enqueued with its delivery's row (`DeliveryRows`) is delivered from it, unread: a
        # store's record as `_deliver_light` delivers one, a re-put kept in the overlay or the spool so too
        rows = fast and not deletes
        if rows:
            msgs, lru = m._msgs, getattr(m.base, "_lru", {})
            spooled = m.spool._where if m.spool is not None else {}
            row_target = self._row_target
        # a roll slot's store records are read batch-wise, `ROLL_CHUNK` units at a time, not built (`_roll_plain`)
        roll_read = fast_roll and len(normal_units) >= ROLL_READ and not deletes and m.spool is not None
        sources, sources_end = None, 0
        for i, (_pos, u, x) in enumerate(normal_units):
            plain = not u[1] & MAGIC_ROLL  # not `need_roll`
            if roll_read and not plain:
                if i >= sources_end:
                    sources_end = i + ROLL_CHUNK
                    sources = self._roll_sources(normal_units, i, sources_end)
                rec = sources.get(i) if sources else None
                if rec is not None and self._roll_plain(u, rec, slot_time, pend):
                    continue
            if rows and plain and u[2] != -1:
                if x is not None:
                    target = row_target(x)
                    if target is not None:
                        ph = u[4]
                        if ph in msgs or ph in spooled or ph in lru:
                            self._deliver_row(u, x, target, slot_time, pend)
                        else:
                            self._deliver_light(u, x, target, deletes, slot_time, pend)
                        continue
            if light is not None and plain:
                rec = light(u[4])
                if rec is not None:
                    target = self._light_target(rec[0])
                    if target is not None:
                        self._deliver_light(u, rec, target, deletes, slot_time, pend)
                        continue
            msg = message(u[4])
            if msg is None:
                continue
            if fast and plain:
                target = self._light_target(msg.props)
                if target is not None:  # what `_put` and `_put_done` would do, without the record
                    self._deliver(u, (msg.props, msg.body_len, msg.sys_flag), target, deletes, slot_time, pend,
                                  msg.phys)
                    continue
            if deletes:
                uk = msg.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if is_deleted(uk, msg.props.get(PROPERTY_REAL_TOPIC), deletes):
                    self._flush_events(pend)
                    self.cancelled += 1
                    ctx.log.emit_plain(ctx.engine.now, "timer", "cancel", msg.props.get(PROPERTY_REAL_TOPIC),
                                 _int(msg.props.get(PROPERTY_REAL_QUEUE_ID)), uk, msg.phys, slot=slot_time)
                    continue
            if fast_roll and not plain:
                self._roll(msg, u, slot_time, pend)
                continue
            self._flush_events(pend)
            retry = self._put(msg, u[2], u[1], slot_time, False)
            if retry is not None:
                return self._finish_slot(retry, [r[1] for r in normal_units[i + 1:]], deletes, slot_time)
        if m.releasing:  # the slot's records are read for the last time (a rolled one is re-put anew)
            release = m.release
            for r in chain:
                release(r[1][4])
        return None

    def _dequeue_rows(self, chain: list[tuple], slot_time: int) -> bool:
        """The usual slot, where no fault can refuse a put: every unit plain with its delivery's row and a
        queue `_deliver_row` may put to (so no cancel request either). Each is delivered from its row,
        oldest first, and the slot's records released, as the per-unit walk of `_dequeue_slot` would;
        False (nothing done) for any other slot."""
        targets = []
        row_target = self._row_target
        for _pos, u, x in chain:
            if x is None or u[2] == -1:
                return False
            target = row_target(x)
            if target is None:
                return False
            targets.append(target)
        pend = self._pend
        m = self.ctx.model
        msgs, lru = m._msgs, getattr(m.base, "_lru", {})
        spooled = m.spool._where if m.spool is not None else {}
        for k in range(len(chain) - 1, -1, -1):  # oldest first (`dequeue_order`)
            _pos, u, x = chain[k]
            ph = u[4]
            if ph in msgs or ph in spooled or ph in lru:  # a re-put read back: `_deliver_row`
                self._deliver_row(u, x, targets[k], slot_time, pend)
            else:  # a store's record (`_deliver_light` of its row)
                self._deliver_light(u, x, targets[k], _NO_DELETES, slot_time, pend)
        if m.releasing:
            release = m.release
            for r in chain:
                release(r[1][4])
        return True

    def _flush_events(self, pend: list) -> None:
        """The events waiting in `pend` ([kind, rows]: a run of `_deliver`s or `_roll`s, each row with its
        time), in order."""
        rows = pend[1]
        if rows:
            self.ctx.log.record_rows("timer", pend[0], rows, _EVENT_KEYS[pend[0]])
            rows.clear()

    def _add_event(self, pend: list, kind: str, row: tuple) -> None:
        """`row` joins the events waiting in `pend`, after those of another kind are written."""
        if pend[0] != kind:
            self._flush_events(pend)
            pend[0] = kind
        rows = pend[1]
        rows.append(row)
        if len(rows) >= PENDING_EVENTS:
            self._flush_events(pend)

    def _delivered(self, units: list, bmax: int) -> int | None:
        """Count a delivery `StoreModel.append` would not keep: its queue offset, or None when the log
        only counts (the event's details are not computed)."""
        queue_offset = bmax + len(units)
        units.append(None)  # as `append` counts a record it does not keep
        self.delivered += 1
        log = self.ctx.log
        if not log.keep:
            log.tally("deliver")
            return None
        return queue_offset

    def _roll(self, msg, u: tuple, slot_time: int, pend: list) -> None:
        """`_put` and `_put_done` of a ROLL unit where no fault refuses a put: the re-put to the timer
        topic with its roll count + 1 (`convert_properties`) goes through `StoreModel.append` (a store's
        record in a run that spools the timer topic: kept as a row, `_roll_row`); its event joins `pend`."""
        ctx = self.ctx
        if ctx.model.spool is not None and self._roll_row(msg, u, slot_time, pend):
            return
        src = msg.props
        now = ctx.engine._now + ctx.clock_offset
        props = convert_properties(src, u[2], True, now)
        times = roll_times(props)
        n = ctx.model.append(msg.derive(msg.topic, msg.queue_id, props), now, "timer").message
        self.rolled += 1
        log = ctx.log
        if not log.keep:
            log.tally("roll")
            return
        if ctx.model.releasing and len(self._rolled) < ROLLED_KEPT:
            self._rolled[n.phys] = (n.props, n.body_len, n.sys_flag)
        self._add_event(pend, "roll", (ctx.engine._now, src.get(PROPERTY_REAL_TOPIC),
                                       _int(src.get(PROPERTY_REAL_QUEUE_ID)),
                                       n.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), msg.phys, n.phys, slot_time,
                                       times))

    def _roll_sources(self, units: list[tuple], lo: int, hi: int) -> dict[int, tuple] | None:
        """`rollread.read_sources` of the store records the ROLL units among `units[lo:hi]` ((pos, unit, row))
        point at, by index (absent: read whole); None when the base is not read batch-wise."""
        m = self.ctx.model
        base = m.base
        if not batchable(base):
            return None
        msgs, spooled, lru = m._msgs, m.spool._where, base._lru
        at = [i for i in range(lo, min(hi, len(units))) if need_roll(units[i][1][1]) and units[i][1][2] != -1
              and not (units[i][1][4] in msgs or units[i][1][4] in spooled or units[i][1][4] in lru)]
        read = read_sources(base, [units[i][1][4] for i in at], [units[i][1][5] for i in at], _ROLL_WANTED)
        return {i: rec for i, rec in zip(at, read, strict=True) if rec is not None}

    def _roll_row(self, msg, u: tuple, slot_time: int, pend: list) -> bool:
        """`_roll` of a store's record (`msg`) in a run that spools the timer topic's re-puts, without the
        re-put (`_keep_roll`); False (nothing done) where the re-put goes through `append`: a re-put read
        back (kept whole), no enqueue time to set, a cancel marker, values a row cannot hold."""
        m = self.ctx.model
        ph = msg.phys
        if (u[2] == -1 or ph in m.spool._where or ph in m._msgs or msg.topic != TIMER_TOPIC or msg.queue_id != 0
                or m.put_filter is not None or m.keep_messages):
            return False
        src = msg.props
        if PROPERTY_TIMER_DEL_UNIQKEY in src:
            return False
        qid_text = src.get(PROPERTY_REAL_QUEUE_ID)
        try:
            due = int(src[PROPERTY_TIMER_OUT_MS])
        except (KeyError, ValueError):
            return False
        keys = (tuple(src), m.capacity)
        keys_part = _ROLL_KEYS.get(keys)
        olds = []
        try:
            if keys_part is None:
                _order(keys[0] + tuple(k for k in _ROLL_SET if k not in src), m.capacity)  # as `append` orders
                keys_part = _ROLL_KEYS[keys] = _order(keys[0], m.capacity)[1] + 2 * len(src)
            values = "".join(src.values())
            n = keys_part + (len(values) if values.isascii() else len(values.encode("utf-8", "surrogateescape")))
            for k in _ROLL_SET:
                old = src.get(k)
                olds.append(None if old is None else len(old) if old.isascii()
                            else len(old.encode("utf-8", "surrogateescape")))
        except UnicodeError:
            return False  # `append` meets the same error
        sys_flag = msg.sys_flag
        n += msg.body_len + hosts_size(sys_flag)
        times = next_roll_times(src.get(_ROLL_TIMES_KEY))
        tags = tags_code(src) if src.get(PROPERTY_TAGS) else 0
        return self._keep_roll(ph, n, olds, due, times, src.get(PROPERTY_REAL_TOPIC), qid_text,
                               src.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), tags, u, slot_time, pend)

    def _roll_plain(self, u: tuple, rec: tuple, slot_time: int, pend: list) -> bool:
        """`_roll_row` of a store's record read by `rollread.read_sources` (`rec`: topic, QUEUEID, the
        plain properties string's size and the `_ROLL_WANTED` values as bytes), without a map or record."""
        topic, qid, n, (out_b, del_b, real_b, qid_b, uniq_b, enq_b, times_b, deq_b, tags_b) = rec
        if topic != _TIMER_TOPIC_B or qid != 0 or del_b is not None or u[2] == -1:
            return False
        try:
            due = int(out_b)
        except (TypeError, ValueError):
            return False  # (absent, or not ASCII digits: the record is read whole)
        texts = _ROLL_TEXTS
        if len(texts) > FORMATS:
            texts.clear()  # a store has a few REAL_TOPIC/REAL_QID values
        real = texts[real_b]
        qid_text = texts[qid_b]
        times = next_roll_times(times_b)
        tags = tags_code({PROPERTY_TAGS: _text(tags_b)}) if tags_b is not None else 0
        return self._keep_roll(u[4], n, [None if v is None else len(v) for v in (enq_b, times_b, deq_b)], due,
                               times, real, qid_text, None if uniq_b is None else _text(uniq_b), tags, u,
                               slot_time, pend)

    def _keep_roll(self, ph: int, n: int, olds: list, due: int, times: int, real: str | None,
                   qid_text: str | None, uk: str | None, tags: int, u: tuple, slot_time: int, pend: list) -> bool:
        """The re-put `_roll` would make of the record at `ph`, kept as a row: its size is the source's
        (`n`: its properties string with the last separator, BODYLENGTH and hosts; `olds`: the UTF-8 lengths
        of its `CONVERT_SET` properties or None) with the three values set
        (`StoreModel.reput_size`'s arithmetic), `StoreModel.append_row` places it, and the spool keeps a row
        (`RecordSpool.put_row`): the source's offset, the re-put's size, queue offset, store time
        (= the dequeue time), enqueue time, roll count and tags code, from which `_rebuild_roll`
        rebuilds it, and its TIMER_OUT_MS and delivery row (`DeliveryRows`), which `_roll_enqueue` hands
        the enqueue. False (nothing done) where a row cannot hold it."""
        ctx, m = self.ctx, self.ctx.model
        qid = _int(qid_text)
        if qid is None or not 0 <= due <= _NP_MAX:
            return False
        now = ctx.engine._now + ctx.clock_offset
        enq_s = str(u[2])
        deq_s = str(now)
        n += convert_size_change(tuple(olds), (enq_s, times, deq_s))
        # the delivery's row: the re-put's size but its topic part and the two properties the dequeue sets
        x = self.rows.of_plain(n - len(enq_s) - _ENQ_SEG - len(deq_s) - _DEQ_SEG, real, qid_text, uk)
        if not x[0]:
            return False
        size = n + m.queue_info(TIMER_TOPIC, 0)[2]
        if not m.trailing_separator:
            size -= 1
        pos, queue_offset = m.append_row(TIMER_TOPIC, 0, size, tags)
        m.spool.put_row(pos, (ph, size, queue_offset, now, u[2], times, tags, due, x[0], _signed(x[1]),
                              _signed(x[2])), self._rebuild_roll)
        self._roll_rows += 1
        self.rolled += 1
        log = ctx.log
        if not log.keep:
            log.tally("roll")
            return True
        self._add_event(pend, "roll", (ctx.engine._now, real, qid, uk, ph, pos, slot_time, times))
        return True

    def _rebuild_roll(self, phys: int, row: tuple) -> SimMessage | None:
        """The roll re-put at `phys` a row stands for (`_roll_row`), as `_roll` would have put it: the
        source read again, its properties with the three values set (appended where new) in the stored
        order, placed where the row says."""
        m = self.ctx.model
        origin, size, queue_offset, store_ts, enqueue_ms, times, tags = row[:7]
        base = m.base
        once = getattr(base, "message_once", None)
        src = once(origin) if once is not None else base.message(origin)
        if src is None:
            return None
        props = dict(src.props)
        for key, value in zip(CONVERT_SET, (enqueue_ms, times, store_ts), strict=True):
            props[key] = str(value)  # `convert_properties` as `_roll` made it (the roll count kept in the row)
        order = _order(tuple(props), m.capacity)[0]
        n = src.derive(src.topic, src.queue_id, props if order is None else {k: props[k] for k in order})
        n.phys, n.size, n.queue_offset, n.store_ts, n.service, n.tags_code = phys, size, queue_offset, store_ts, \
            "timer", tags
        return n

    def _roll_enqueue(self, phys: int) -> tuple | None:
        """What the enqueue takes from a roll re-put kept as a row (`_roll_row`): (TIMER_OUT_MS, False (no
        TIMER_DEL_UNIQKEY), REAL_TOPIC, REAL_QID text, UNIQ_KEY, the re-put's size for `DeliveryRows.of_plain`),
        the values `_enqueue_base` takes from a plain string; None for any other record."""
        spool = self.ctx.model.spool
        r = spool.row(phys) if spool is not None else None
        if r is None:
            return None
        x = (r[8], r[9] & _U64, r[10] & _U64)
        topic, qid = self.rows.topic_qid(x[0])
        return r[7], False, topic, str(qid), self.rows.uniq_key(x), x[0] >> 34

    def _light_reader(self):
        """`read(phys)` -> (properties, BODYLENGTH, SYSFLAG) of a store's own record by the base's light
        read, None where `message_once` must read it; None when no fault can refuse a put and the base
        reads batch-wise (else every unit goes through `message_once` and `_put`)."""
        m = self.ctx.model
        base = m.base
        key = (m.put_filter, self.batch, base, m.spool, m._msgs)
        if self._light is not None and self._light[0] == key:  # the same objects: equal at once
            return self._light[1]
        self._light = (key, self._make_light_reader())
        return self._light[1]

    def _make_light_reader(self):
        m = self.ctx.model
        base = m.base
        if m.put_filter is not None or not self.batch or not batchable(base):
            return None
        msgs, lru, read = m._msgs, base._lru, base._read
        spooled = m.spool._where if m.spool is not None else {}

        def light(phys: int):
            if phys in msgs or phys in spooled or phys in lru:
                return None
            return read(phys, False, True)

        return light

    def _light_target(self, props: dict[str, str]):
        """(topic, queue id, queue info) a delivery of a record with these properties goes to, where
        `_deliver_light` may put it: a record that is not a cancel marker, has a REAL_TOPIC, and goes to
        a queue `append` has put to before, whose re-puts are neither kept nor watched; else None (`_put`
        decides)."""
        if props.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            return None
        topic = props.get(PROPERTY_REAL_TOPIC)
        if topic is None:
            return None
        qid = _int(props.get(PROPERTY_REAL_QUEUE_ID), 0)
        m = self.ctx.model
        info = m._queue_info.get((topic, qid))  # a queue's first re-put goes through `append`
        if info is None or info[3] or m._listeners.get((topic, qid)):
            return None
        return topic, qid, info

    def _deliver_light(self, u: tuple, rec: tuple, target: tuple, deletes: set[str], slot_time: int,
                       pend: list) -> None:
        """The per-message dequeue of a plain unit (the cancel check, `_put`, `_put_done`) for a delivery
        `StoreModel.append` would not keep, of a store's record not built: read lightly (`_light_reader`,
        `rec` its (properties, BODYLENGTH, SYSFLAG): `_deliver`) or not read at all (`rec` the row kept
        beside the unit, `DeliveryRows`, with no cancel in the slot: `_deliver_row`)."""
        if type(rec[0]) is int:
            self._deliver_row(u, rec, target, slot_time, pend)
        else:
            self._deliver(u, rec, target, deletes, slot_time, pend, u[4])

    def _row_target(self, x: tuple[int, int, int]):
        """`_light_target` of the record a unit's row (`DeliveryRows`) stands for: (topic, queue id, queue
        info), or None (the record is read and `_put` decides)."""
        topic, qid = self.rows.topic_qid(x[0])
        m = self.ctx.model
        info = m._queue_info.get((topic, qid))
        if info is None or info[3] or m._listeners.get((topic, qid)):
            return None
        return topic, qid, info

    def _deliver_row(self, u: tuple, x: tuple[int, int, int], target: tuple, slot_time: int, pend: list) -> None:
        """`_deliver` of a plain unit (`u[2]` not -1, no cancel in its slot) from the row kept beside it
        (`DeliveryRows`): the re-put's size is the row's plus the topic's fixed part and the two properties
        the dequeue sets (enqueue time `u[2]`, dequeue time now); the due time is the slot
        (a plain unit's slot is its TIMER_OUT_MS)."""
        ctx, m = self.ctx, self.ctx.model
        topic, qid, (units, bmax, fixed, _keep) = target
        meta = x[0]
        size = row_reput_size(meta, fixed, u[2], ctx.engine._now + ctx.clock_offset, m.trailing_separator)
        pos = m.place(size)
        queue_offset = self._delivered(units, bmax)
        if queue_offset is None:
            return
        uk = self.rows.uniq_key(x)
        self._add_event(pend, "deliver", (ctx.engine._now, topic, qid, uk, u[4], pos, slot_time, u[3], False,
                                          queue_offset))

    def _deliver(self, u: tuple, rec: tuple, target: tuple, deletes: set[str], slot_time: int, pend: list,
                 phys: int) -> None:
        """The per-message dequeue of a plain unit (the cancel check, `_put`, `_put_done`) for a delivery
        `StoreModel.append` would not keep: the re-put's size and offset computed as `append` computes
        them (`reput_size`, `place`), without building the record; `rec` is (properties, BODYLENGTH,
        SYSFLAG) of the record at `phys`. Its event joins `pend` (`_flush_events`)."""
        ctx, m = self.ctx, self.ctx.model
        props, body_len, sys_flag = rec
        if deletes:
            uk = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if is_deleted(uk, props.get(PROPERTY_REAL_TOPIC), deletes):
                self._flush_events(pend)
                self.cancelled += 1
                ctx.log.emit_plain(ctx.engine.now, "timer", "cancel", props.get(PROPERTY_REAL_TOPIC),
                                   _int(props.get(PROPERTY_REAL_QUEUE_ID)), uk, phys, slot=slot_time)
                return
        topic, qid, (units, bmax, fixed, _keep) = target
        new = convert_properties(props, u[2], False, ctx.engine._now + ctx.clock_offset)
        pos = m.place(m.reput_size(new, fixed, sys_flag, body_len))
        queue_offset = self._delivered(units, bmax)
        if queue_offset is None:
            return
        self._add_event(pend, "deliver", (ctx.engine._now, topic, qid, new.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                                          phys, pos, slot_time, _int(props.get(PROPERTY_TIMER_OUT_MS)), False,
                                          queue_offset))

    def _finish_slot(self, retry, rest, deletes, slot_time):
        yield from retry
        for u in rest:
            msg = self.ctx.model.message_once(u[4])
            if msg is None:
                continue
            uk = msg.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if is_deleted(uk, msg.props.get(PROPERTY_REAL_TOPIC), deletes):
                self.cancelled += 1
                self.ctx.log.emit_plain(self.ctx.engine.now, "timer", "cancel", msg.props.get(PROPERTY_REAL_TOPIC),
                                  _int(msg.props.get(PROPERTY_REAL_QUEUE_ID)), uk, msg.phys, slot=slot_time)
                continue
            again = self._put(msg, u[2], u[1], slot_time, direct=False)
            if again is not None:
                yield from again

    def _put(self, msg, enqueue_time: int, magic: int, slot_time: int, direct: bool):
        """`convert` + the first try of `doPut`; None when done, else a generator of the retries
        (they take virtual time)."""
        ctx = self.ctx
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
            qid = _int(props.get(PROPERTY_REAL_QUEUE_ID), 0)
        res = ctx.model.append(msg.derive(topic, qid, props), now, "timer")
        if res.ok:
            self._put_done(msg, res.message, roll, slot_time, direct)
            return None
        return self._put_retries(msg, topic, qid, props, res, roll, slot_time, direct)

    def _put_retries(self, msg, topic, qid, props, res, roll, slot_time, direct):
        """doPut's retries: SERVICE_NOT_AVAILABLE every 500 × precision / 1000 ms until it works, any
        other failure 3 more times 50 ms apart."""
        ctx = self.ctx
        attempts = 0
        while not res.ok:
            attempts += 1
            retry = res.status == "SERVICE_NOT_AVAILABLE"
            give_up = not retry and attempts > 3
            ctx.log.emit(ctx.engine.now, "timer", "put_failed", topic, qid, msg.uniq_key, msg.phys,
                         status=res.status, attempt=attempts, given_up=give_up)
            if give_up:
                return
            yield (500 * self.precision // 1000) if retry else 50
            res = ctx.put(msg.derive(topic, qid, dict(props)), "timer")
        self._put_done(msg, res.message, roll, slot_time, direct)

    def _put_done(self, msg, n, roll: bool, slot_time: int, direct: bool) -> None:
        ctx = self.ctx
        src = msg.props
        if not ctx.log.keep:
            if roll:
                self.rolled += 1
                ctx.log.tally("roll")
            else:
                self.delivered += 1
                ctx.log.tally("deliver")
            return
        if roll:
            self.rolled += 1
            if ctx.model.releasing and self.batch and len(self._rolled) < ROLLED_KEPT:
                self._rolled[n.phys] = (n.props, n.body_len, n.sys_flag)
            ctx.log.record(ctx.engine._now, "timer", "roll", src.get(PROPERTY_REAL_TOPIC),
                           _int(src.get(PROPERTY_REAL_QUEUE_ID)), n.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                           msg.phys, n.phys,
                           {"slot": slot_time, "roll_times": roll_times(n.props)}, True)
        else:
            self.delivered += 1
            ctx.log.record(ctx.engine._now, "timer", "deliver", n.topic, n.queue_id,
                           n.props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), msg.phys, n.phys,
                           {"slot": slot_time, "due": _int(src.get(PROPERTY_TIMER_OUT_MS)), "direct": direct,
                            "queue_offset": n.queue_offset}, True)

    # ----- summary -----
    def pending(self) -> int:
        """Timer messages still in the wheel, in slots not yet dequeued, that will be delivered: no cancel unit
        (rolled or not), no message a cancel waiting in the slot it ends in drops (`rules.timer.cancels_in_slot`:
        a roll unit ends in the slot of its TIMER_OUT_MS), as `inspect timer` counts them."""
        units = []
        for t in self._queued:
            s = self._slot(t)
            if s is not None:
                units += [u for _, u in walk_chain(s[1], self._unit, _prev_pos).units]
        if not any(need_delete(u[1]) for u in units):
            return len(units)  # (no record is read)
        cancels: dict[int, set[str]] = {}  # the slot a cancel ends in -> its TIMER_DEL_UNIQKEY values
        for u in units:
            if need_delete(u[1]):
                props = self._props_rec(u[4])[0] or {}
                key, end = props.get(PROPERTY_TIMER_DEL_UNIQKEY), self._end_slot(u, props)
                if key is not None and end is not None:
                    cancels.setdefault(end, set()).add(key)
        n = 0
        for u in units:
            if need_delete(u[1]):
                continue
            props = self._props_rec(u[4])[0] or {}
            end = self._end_slot(u, props)
            n += not is_deleted(props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), props.get(PROPERTY_REAL_TOPIC),
                                cancels.get(end, _NO_DELETES))
        return n

    def _end_slot(self, u: tuple, props: dict[str, str]) -> int | None:
        """The slot a unit's message ends in: its own, or for a ROLL unit the one of its TIMER_OUT_MS."""
        if not need_roll(u[1]):
            return u[3]
        out = _int(props.get(PROPERTY_TIMER_OUT_MS))
        return None if out is None else format_time_ms(out, self.precision)


def _text(value: bytes | None) -> str | None:
    """A value `read_plain` gives as bytes, as the properties map holds it."""
    return None if value is None else value.decode("utf-8", "surrogateescape")


def _signed(v: int) -> int:
    """A uint64 as the int64 of the same bits (a spool row holds int64)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _no_row(_pos: int) -> None:
    return None


def _prev_pos(u: tuple) -> int:
    return u[0]


def _magic(u: tuple) -> int:
    return u[1]


def _int(v, default=None):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default
