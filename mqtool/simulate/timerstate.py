"""`TimerState`: what the timer's enqueue, dequeue and rolls share (`TimerMessageStore`'s fields)."""

from __future__ import annotations

import heapq
from array import array
from functools import lru_cache
from operator import attrgetter

from mqtool.formats.timerlog import TIMERLOG_BLANK_SIZE, TIMERLOG_UNIT_SIZE
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import Process
from mqtool.simulate.model import next_in_file
from mqtool.simulate.timerrows import FORMATS, DeliveryRows
from mqtool.simulate.timerunits import TimerUnits

PENDING_EVENTS = 4096  # a slot's events waiting for one `EventLog.batch` (a roll slot holds a third of a run)
# `TimerUnits.UNIT_FIELDS` of a unit `store.timer.TimerLog.read_unit` reads
_STORED_UNIT = attrgetter(
    "prev_pos", "magic", "curr_write_time_ms", "delayed_time_ms", "offset_py", "size_py", "real_topic_hash"
)
_EVENT_KEYS = {"deliver": ("slot", "due", "direct", "queue_offset"), "roll": ("slot", "roll_times")}


class TimerState:
    """The timer's shared fields; its methods are the wheel's and the TimerLog's bookkeeping."""

    def __init__(self, ctx: SimContext, file_size: int, wheel, timerlog) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.precision = cfg.timer_precision_ms
        self.window = cfg.timer_roll_window_slots()
        self.file_size = file_size
        self.wheel = wheel  # mqtool.store.timer.TimerWheel, or None: slots rebuilt from `units`
        self.timerlog = timerlog  # mqtool.store.timer.TimerLog: units not held in `units`
        self.units = TimerUnits(file_size)  # pos -> unit, in compact columns
        self.read_row = self.units.reader(self.unit)  # pos -> unit and delivery row, `walk_chain`'s reader
        self.new_units = array("q")  # positions appended during the run, in order
        # delayed time -> its slot's lastPos: where the dequeue's walk starts and the enqueue links its unit; read
        # from the store's `timerwheel` on first use, updated by every enqueue, never cleared by a dequeue, as on disk
        self.slots: dict[int, int] = {}
        self.heap: list[int] = []
        self.queued: set[int] = set()  # the times in heap
        self.end = 0
        self.curr_read = 0
        self.curr_queue_offset = 0
        self.should_start = 0  # `shouldStartTime`: the dequeue waits until then (`TimerService.start`)
        self.enq: Process | None = None
        self.deq: Process | None = None
        self.in_slot = False
        self.topic_hash: dict[str | None, int] = {None: 0}
        self.delivered = 0
        self.cancelled = 0
        self.rolled = 0
        self.rows = DeliveryRows(lambda: ctx.model.capacity)  # a plain delivery's row beside its unit
        self.pend_kind: str | None = None  # the deliveries or rolls waiting for `EventLog.batch`: their kind,
        self.pend_rows: list[tuple] = []  # and their rows

    def last_pos(self, t: int) -> int | None:
        """`TimerWheel.getSlot(t).lastPos`, None when the slot is empty."""
        last = self.slots.get(t)
        if last is None and self.wheel is not None:
            ws = self.wheel.get_slot(t)
            if ws.time_ms == -1:
                return None
            last = self.slots[t] = ws.last_pos
        return last

    def unit(self, pos: int):
        """The unit at a TimerLog position: appended here, read at the start, or read from the store."""
        u = self.units.get(pos)
        if u is None and self.timerlog is not None and pos >= 0:
            r = self.timerlog.read_unit(pos)
            if r is not None and r.magic != 0:
                u = _STORED_UNIT(r)
        return u

    def queue_slot(self, t: int) -> None:
        if t not in self.queued:
            self.queued.add(t)
            heapq.heappush(self.heap, t)

    def next_unit_pos(self) -> int:
        """The next unit's TimerLog position, taken: after a filler (`TimerLog.append`'s BLANK) where the
        unit and a blank would not fit in the rest of the file."""
        pos = next_in_file(self.end, TIMERLOG_UNIT_SIZE, self.file_size, TIMERLOG_BLANK_SIZE)
        self.end = pos + TIMERLOG_UNIT_SIZE
        return pos

    def wake_dequeue(self, slot: int) -> None:
        """Wake the dequeue for a unit just put in `slot`, unless it wakes earlier (or is in a slot)."""
        deq = self.deq
        if deq is not None and deq.alive and not self.in_slot:
            ctx = self.ctx
            target = slot + self.precision - ctx.clock_offset
            if deq.wake_time is None or target < deq.wake_time:
                deq.wake_at(max(target, ctx.engine.now))

    def props_rec(self, phys: int) -> tuple:
        """(properties, BODYLENGTH, SYSFLAG) of a re-put kept in the overlay or the spool; (properties,
        None, None) of any other record (`StoreModel.props`: the record is read whole when its slot comes)."""
        m = self.ctx.model
        msg = m.messages.get(phys)
        if msg is None and m.spool is not None:
            msg = m.spool.get(phys)
        if msg is not None:
            return msg.props, msg.body_len, msg.sys_flag
        return m.props(phys), None, None

    def flush_events(self) -> None:
        """The events waiting (a run of deliveries or rolls, each row with its time), in order."""
        rows = self.pend_rows
        if rows:
            kind = self.pend_kind
            t, topic, qid, uk, ph, new, *values = zip(*rows, strict=True)
            detail = dict(zip(_EVENT_KEYS[kind], values, strict=True))
            self.ctx.log.batch(t, "timer", kind, topic, qid, uk, ph, new, **detail)
            rows.clear()

    def add_event(self, kind: str, row: tuple) -> None:
        """`row` joins the events waiting, after those of another kind are written."""
        if self.pend_kind != kind:
            self.flush_events()
            self.pend_kind = kind
        rows = self.pend_rows
        rows.append(row)
        if len(rows) >= PENDING_EVENTS:
            self.flush_events()


def int_or(v, default=None):
    """`int(v)`, `default` where it is not a number."""
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def signed(v: int) -> int:
    """A uint64 as the int64 of the same bits (a spool row holds int64)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def text(value: bytes | None) -> str | None:
    """A value `read_plain` gives as bytes, as the properties map holds it."""
    return None if value is None else value.decode("utf-8", "surrogateescape")


cached_text = lru_cache(maxsize=FORMATS)(text)  # for REAL_TOPIC and REAL_QID: a store has a few values
