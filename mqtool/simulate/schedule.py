"""ScheduleMessageService: delay-level delivery (spec §4.4-4.8, §4.11).

Mirrors `org.apache.rocketmq.broker.schedule.ScheduleMessageService` (5.3.1) and
`org.apache.rocketmq.store.schedule.ScheduleMessageService` (4.9.8), read at those tags:

- one task per level, first run `FIRST_DELAY_TIME` = 1000 ms after start, from the level's offset in
  delayOffset.json (0 when absent; both clamp it into the queue's [min, max], `correctDelayOffset`);
- a task walks the level's ConsumeQueue; `deliver = correctDeliverTimestamp(now, tagsCode)`; a unit
  not yet due ends the task and the next one runs 100 ms later at that unit (5.3 also records the
  unit as the level's offset); a due unit is re-put to REAL_TOPIC/REAL_QID (`messageTimeUp`: the
  properties string is built before DELAY/TIMER_DELIVER_MS/TIMER_DELAY_SEC are cleared, so they stay
  in the bytes);
- sync delivery: success sets the offset to unit + 1; a failed put ends the task and the next task
  starts 100 ms later at **unit + 1 in 5.3.1** (the failed message is skipped for good once a later
  unit moves the offset) and **at the same unit in 4.9.8**;
- async delivery (`enableScheduleAsyncDeliver`): puts do not wait; a pending queue per level moves the
  offset as its head completes; a failed put is resent after `resendCount * 100` ms (at most 60 s);
  a head resent more than 3 times blocks the level (refused deliveries end the task as above);
- offsets are persisted every `flushDelayOffsetInterval` (first after 10 s) and at shutdown.

Between polls nothing changes, so instead of ticking every 100 ms a level sleeps straight to the
first poll of its 100 ms grid at which its head unit is due, or idles until a unit is appended.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
)
from mqtool.rules.java import parse_int
from mqtool.rules.schedule import (
    DELAY_FOR_A_WHILE,
    FIRST_DELAY_TIME,
    correct_delay_offset,
    correct_deliver_timestamps,
    delay_level_2_queue_id,
    is_level_started,
    offset_after_failed_put,
    queue_id_2_delay_level,
)
from mqtool.simulate.batchread import batchable, read_plain
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import SCHEDULE, Process
from mqtool.simulate.model import PutResult, QueueInfo, SimMessage
from mqtool.simulate.service import FIRST_PERSIST_MS, PersistedOffsets

MAX_RESEND_TO_BLOCK = 3  # scheduleAsyncDeliverMaxResendNum2Blocked
MAX_RESEND_TO_SKIP = 6  # a message that cannot be read is skipped after this many resends
DELIVER_BATCH = 1024  # units of a level looked at together by `_deliver_due` (levels interleave: a wide span)
BATCH_READ = 4  # from this many records on, `_deliver_due` reads them by one `batchread.read_plain`
_UNIQ = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_WANTED = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, _UNIQ)


_DISCARD = object()  # `_target` of a unit the walk discards
# `messageTimeUp` threw (REAL_QID absent or not an int): `executeOnTimeUp` catches it and ends the task as a
# failed put does (`offset_after_failed_put`)
NOT_AN_INT = PutResult(False, "NumberFormatException")


class _Target(NamedTuple):
    """The queue a row re-put goes to (`ScheduleService._target`)."""

    real_topic: str
    real_qid: int
    queue: QueueInfo


def _due_prefix(clock: int, tags, written, delay: int) -> tuple[list[int], int | None]:
    """The deliver times of the due prefix of units (`correct_deliver_timestamps`, a few units at a time
    first: a poll usually finds one or two, more while they are all due) and the deliver time of a written
    unit not yet due that ends it (None: an unwritten unit or the end did)."""
    deliver: list[int] = []
    i, step, n = 0, 16, len(tags)
    while i < n:
        j = min(n, i + step)
        w = written[i:j]
        for d, ok in zip(
            correct_deliver_timestamps(clock, tags[i:j], delay).tolist(),
            w if isinstance(w, list) else w.tolist(),
            strict=True,
        ):
            if not ok:
                return deliver, None
            if d > clock:
                return deliver, d
            deliver.append(d)
        i, step = j, step * 8
    return deliver, None


@dataclass(slots=True)
class _Pending:
    """An async re-put awaiting its result (`HandlePutResultTask`)."""

    offset: int
    phys: int
    status: str
    resend: int = 0


class ScheduleService(PersistedOffsets[int]):
    """All delay levels of one broker; `offsets` is the offsetTable, `persisted` delayOffset.json."""

    def __init__(self, ctx: SimContext, stored_offsets: dict[int, int] | None) -> None:
        interval = ctx.config.flush_delay_offset_interval
        super().__init__(ctx, dict(stored_offsets or {}), interval, FIRST_PERSIST_MS, "schedule-persist")
        levels = ctx.config.delay_levels_ms()  # delayLevelTable: only these levels get a task (`start`)
        self.delays = {lv: d for lv, d in enumerate(levels, 1) if is_level_started(lv, levels)}
        self.procs: dict[int, Process] = {}
        self.handlers: dict[int, Process] = {}
        self.pending: dict[int, deque[_Pending]] = {}
        self.grid: dict[int, int] = {}  # level -> time of its last poll (polls are 100 ms apart)
        self._targets: dict[tuple, tuple | object | None] = {}  # `_deliver_due`'s `_target` answers
        self._targets_for = -1  # `StoreModel.watchers` when `_targets` was filled
        self._floor: int | None = None  # the base's CommitLog end, where the overlay begins
        for level in self.delays:
            qid = delay_level_2_queue_id(level)
            ctx.model.on_append(RMQ_SYS_SCHEDULE_TOPIC, qid, lambda lv=level: self._on_append(lv))

    # ----- life cycle -----
    def start(self) -> None:
        e, m = self.ctx.engine, self.ctx.model
        for level in self.delays:
            if level in self.offsets:  # `correctDelayOffset`: a stored offset clamped into its queue's [min, max]
                qid = delay_level_2_queue_id(level)
                lo, hi = m.cq_min(RMQ_SYS_SCHEDULE_TOPIC, qid), m.cq_max(RMQ_SYS_SCHEDULE_TOPIC, qid)
                self.offsets[level] = correct_delay_offset(self.offsets[level], lo, hi)
            self.pending[level] = deque()
            walk = self._level(level, self.offsets.get(level, 0))
            self.procs[level] = e.process(walk, SCHEDULE, FIRST_DELAY_TIME, f"schedule-{level}")
            if self.ctx.config.enable_schedule_async_deliver:
                self.handlers[level] = e.process(
                    self._handle(level), SCHEDULE, FIRST_DELAY_TIME, f"schedule-handle-{level}"
                )
        self.start_persister()

    def stop(self, clean: bool) -> None:
        for p in [*self.procs.values(), *self.handlers.values()]:
            p.stop()
        self.stop_persister(clean)

    def persist(self) -> None:
        """delayOffset.json written, and logged as the `persist` event."""
        super().persist()
        named = {str(level): offset for level, offset in sorted(self.offsets.items())}
        self.ctx.log.batch(self.ctx.engine.now, "schedule", "persist", RMQ_SYS_SCHEDULE_TOPIC, offsets=named)

    # ----- waking -----
    def _next_poll(self, level: int, not_before: int) -> int:
        """The first poll of the level's 100 ms grid at or after `not_before` (engine time)."""
        base = self.grid.get(level, self.ctx.engine.now)
        return base + max(1, -(-(not_before - base) // DELAY_FOR_A_WHILE)) * DELAY_FOR_A_WHILE  # polls to wait, >= 1

    def _on_append(self, level: int) -> None:
        p = self.procs.get(level)
        if p is not None and p.alive and p.wake_time is None:
            p.wake_at(self._next_poll(level, self.ctx.engine.now))

    def on_clock_jump(self) -> None:
        """A clock jump changes which units are due: every sleeping level polls again on its grid."""
        for level, p in self.procs.items():
            if p.alive:
                p.wake_at(self._next_poll(level, self.ctx.engine.now))

    # ----- one level -----
    def _level(self, level: int, offset: int):
        """`DeliverDelayedMessageTimerTask`: each poll delivers the level's due prefix, batch after batch
        (`_deliver_due`), then sleeps to the poll at which the unit that ended it is due."""
        ctx, m = self.ctx, self.ctx.model
        qid = delay_level_2_queue_id(level)
        delay = self.delays[level]
        while True:
            now = ctx.engine.now
            self.grid[level] = now
            lo, hi = m.cq_min(RMQ_SYS_SCHEDULE_TOPIC, qid), m.cq_max(RMQ_SYS_SCHEDULE_TOPIC, qid)
            offset = correct_delay_offset(offset, lo, hi)  # "schedule CQ offset invalid": reset into the queue
            if offset >= hi:
                yield None  # idle until a unit is appended (the 100 ms re-polls change nothing)
                continue
            # System.currentTimeMillis(): virtual time plus any clock jump (neither moves during the walk)
            clock = ctx.clock()
            later, more = None, True
            while more and offset < hi:
                offset, later, more = self._deliver_due(level, qid, offset, hi, clock, delay)
            if later is None:
                yield DELAY_FOR_A_WHILE
                continue
            if not ctx.v4:
                self.offsets[level] = offset  # 5.3 records the unit not yet due as the level's offset
            yield self._next_poll(level, later - ctx.clock_offset) - now

    def _units(self, qid: int, offset: int, hi: int) -> tuple:
        """(CommitLog offsets, sizes, tagsCodes, written flags, from the base's columns?) of up to DELIVER_BATCH units
        of the level's queue from `offset`: the base's own units from its columns where it has them, else
        as `StoreModel.cq_units` reads them (up to the first one that cannot be read)."""
        m = self.ctx.model
        base = m.base
        if batchable(base):
            u = base.units(RMQ_SYS_SCHEDULE_TOPIC, qid)
            bmax = base.cq_max(RMQ_SYS_SCHEDULE_TOPIC, qid)
            if u is not None and u.first <= offset < bmax:
                a = offset - u.first
                b = min(min(hi, bmax) - u.first, a + DELIVER_BATCH)
                return u.offset[a:b], u.size[a:b], u.tags[a:b], u.ok[a:b], True
        units = [unit for _o, unit in m.cq_units(RMQ_SYS_SCHEDULE_TOPIC, qid, offset, min(hi, offset + DELIVER_BATCH))]
        ok = [True] * len(units)
        if len(units) < min(hi, offset + DELIVER_BATCH) - offset:
            ok.append(False)  # a unit that cannot be read ends the walk
            units.append((0, 0, 0))
        return [phys for phys, _size, _tags in units], None, [tags for _phys, _size, tags in units], ok, False

    def _deliver_due(self, level: int, qid: int, offset: int, hi: int, clock: int, delay: int) -> tuple:
        """The walk of a level over a batch of units from `offset`: the due prefix over the tags column, each due
        unit's record read (the base's by `batchread.read_plain`'s match or one light read, else `message_once`)
        and re-put to REAL_TOPIC/REAL_QID, or discarded without REAL_TOPIC or with the half topic.

        A re-put nobody keeps, watches or may refuse is placed as `StoreModel.append` places it without
        building it (`_target`), its event one row of a batch; any other goes through `_deliver` (a put
        failure ends the walk, the rows before it written first). Returns (the next unit, the deliver time of a
        unit not yet due that ended the batch or None, whether the batch was all due: more may follow)."""
        ctx, m = self.ctx, self.ctx.model
        base = m.base
        phys, sizes, tags, written, columns = self._units(qid, offset, hi)
        deliver, later = _due_prefix(clock, tags, written, delay)
        k = len(deliver)
        if k < 1:
            return offset, later, False
        phys = phys[:k].tolist() if columns else phys
        if columns:  # one `pread` each below BATCH_READ records: cheaper than the batch's set-up
            records = read_plain(base, phys, sizes[:k].tolist(), _WANTED) if k >= BATCH_READ else [None] * k
            light, lru = base.read, base.cache
            floor = self._floor
            if floor is None:
                floor = self._floor = base.max_phys()
            # the overlay's records (and the spool's) lie past the base's end: a batch below it and outside the
            # read cache needs no look-up per record
            look = max(phys) >= floor or not lru.keys().isdisjoint(phys)
            msgs, spooled = m.messages, (m.spool if m.spool is not None else {})
        else:
            records, light, look = [None] * k, None, False
        message = m.message_once  # a delivered unit is not read again (the async resend reads it anew)
        append_unit, reput_size, plain_reput_size = m.append_unit, m.reput_size, m.plain_reput_size
        async_deliver = ctx.config.enable_schedule_async_deliver
        rows: list[tuple] = []
        # (REAL_TOPIC, REAL_QID) -> `_target`, by the values' text or bytes (`read_plain`). Kept from batch to
        # batch while no queue gains a watcher (`on_append`): nothing else changes them
        if self._targets_for != m.watchers:
            self._targets_for, self._targets = m.watchers, {}
        targets = self._targets
        delivered = -1  # the last unit put by a row
        for i in range(k):
            ph = phys[i]
            msg = rec = None
            if light is not None and not (look and (ph in msgs or ph in spooled or ph in lru)):
                rec = records[i] or light(ph, False, True)
            if rec is None:
                msg = message(ph)
                if msg is None:
                    continue
                rec = (msg.props, msg.body_len, msg.sys_flag)
            plain = len(rec) == 2  # a plain properties string (`read_plain`): its own length is the re-put's
            if plain:
                plain_len, (topic, qid_text, uniq) = rec
            else:
                props, body_len, sys_flag = rec
                topic, qid_text, uniq = map(props.get, _WANTED)
            target = targets.get((topic, qid_text), False)
            if target is False:
                target = targets[(topic, qid_text)] = self._target(_text(topic), _text(qid_text))
            if target is _DISCARD:
                continue  # "[BUG] the real topic of schedule msg is ..., discard the msg"
            if target is not None:
                fixed = target.queue.fixed
                size = plain_reput_size(plain_len, fixed) if plain else reput_size(props, fixed, sys_flag, body_len)
                pos, queue_offset = append_unit(target.queue, size, None)  # a unit not kept, as `append` counts it
                if plain and uniq is not None:
                    uniq = uniq.decode("utf-8", "surrogateescape")
                row = target.real_topic, target.real_qid, uniq, ph, pos, level, deliver[i], queue_offset
            else:  # kept, watched, refusable or async: a `SimMessage` through `StoreModel.append`
                msg = msg or message(ph)
                if msg is None:
                    continue
                new = _time_up(msg, msg.props)
                res = NOT_AN_INT if new is None else None if async_deliver else m.append(new, clock, "schedule")
                if res is None or not res.ok:  # an async put, or a failed one: its events after the rows
                    self._flush(level, rows, delivered)
                    rows, delivered = [], -1
                    if not self._deliver(level, offset + i, msg, new, res, deliver[i]):
                        return offset_after_failed_put(offset + i, ctx.v4), None, False
                    continue
                n = res.message
                row = n.topic, n.queue_id, n.uniq_key, ph, n.phys, level, deliver[i], n.queue_offset
            delivered = offset + i
            rows.append(row)
        self._flush(level, rows, delivered)
        return offset + k, later, k == len(tags)

    def _flush(self, level: int, rows: list, delivered: int) -> None:
        """The events of a run of row re-puts, in order; the level's offset past the last of them."""
        if rows:
            self.offsets[level] = delivered + 1
            self._record(rows)

    def _record(self, rows: list) -> None:
        """The deliver events of re-puts, one row each."""
        topic, qid, uniq, ph, pos, level, due, offset = zip(*rows, strict=True)
        log, now = self.ctx.log, self.ctx.engine.now
        log.batch(now, "schedule", "deliver", topic, qid, uniq, ph, pos, level=level, due=due, queue_offset=offset)

    def _target(self, real_topic: str | None, real_qid_text: str | None) -> tuple | object | None:
        """(REAL_TOPIC, REAL_QID, `QueueInfo`) of the queue a row re-put goes to; `_DISCARD` without REAL_TOPIC or
        with the half topic; None where `_deliver` must put a `SimMessage` (or `messageTimeUp` throws first: a
        REAL_QID `Integer.parseInt` refuses), a queue whose re-puts are kept or watched, a fault that may refuse
        the put, async delivery."""
        real_qid = parse_int(real_qid_text)
        if real_qid is None:
            return None
        if real_topic is None or real_topic == RMQ_SYS_TRANS_HALF_TOPIC:
            return _DISCARD
        m = self.ctx.model
        if m.put_filter is not None or self.ctx.config.enable_schedule_async_deliver:
            return None
        q = m.queue_info(real_topic, real_qid)
        return None if q.kept or q.listeners else _Target(real_topic, real_qid, q)

    def _deliver(self, level: int, off: int, msg, new, res, due: int) -> bool:
        """A re-put the sync walk failed to put (`res`), or an async one (`res` None): put now, its result handled
        by `_handle` (the level blocked or flow-controlled: refused). False: the walk ends at unit `off`."""
        ctx = self.ctx
        if res is not None:
            nxt = "retry same unit" if ctx.v4 else "skip to next unit"
            self._put_failed(level, msg, status=res.status, queue_offset=off, next=nxt)
            return False
        q = self.pending[level]
        if len(q) > ctx.config.schedule_async_deliver_max_pending_limit or (q and q[0].resend > MAX_RESEND_TO_BLOCK):
            self._put_failed(level, msg, reason="async deliver blocked or flow-controlled", queue_offset=off)
            return False
        res = ctx.put(new, "schedule")
        self._emit_result(level, off, msg, res, due)
        q.append(_Pending(off, msg.phys, "SUCCESS" if res.ok else "EXCEPTION"))
        h = self.handlers.get(level)
        if h is not None and h.wake_time is None:
            h.wake(10)
        return True

    def _emit_result(self, level: int, off: int, msg, res, due: int) -> None:
        """The event of an async put (`_deliver`, `_handle`)."""
        if not res.ok:
            self._put_failed(level, msg, status=res.status, queue_offset=off, next="retry same unit")
            return
        n = res.message
        self._record([(n.topic, n.queue_id, n.uniq_key, msg.phys, n.phys, level, due, n.queue_offset)])

    def _put_failed(self, level: int, msg, **detail) -> None:
        now, row = self.ctx.engine.now, (*_real_queue(msg.props), msg.uniq_key, msg.phys)
        self.ctx.log.emit(now, "schedule", "put_failed", *row, level=level, **detail)

    def _handle(self, level: int):
        """HandlePutResultTask: advance the offset over completed puts, resend the failed head."""
        ctx, m = self.ctx, self.ctx.model
        while True:
            q = self.pending[level]
            while q and q[0].status in ("SUCCESS", "SKIP"):
                p = q.popleft()
                if p.status == "SUCCESS":
                    self.offsets[level] = p.offset + 1
            if not q:
                yield None
                continue
            head = q[0]
            head.resend += 1
            yield min(head.resend * 100, 60_000)
            msg = m.message(head.phys)
            if msg is None:
                head.status = "SKIP" if head.resend > MAX_RESEND_TO_SKIP else "EXCEPTION"
                continue
            new = _time_up(msg, dict(msg.props))
            res = ctx.put(new, "schedule")
            self._emit_result(level, head.offset, msg, res, 0)
            head.status = "SUCCESS" if res.ok else "EXCEPTION"

    # ----- summary -----
    def backlog(self) -> dict[int, int]:
        """Units not yet delivered per level (offset to the queue's max), levels without a task included."""
        m, done = self.ctx.model, self.offsets
        levels = sorted({*self.delays, *map(queue_id_2_delay_level, m.queue_ids(RMQ_SYS_SCHEDULE_TOPIC))})
        left = {lv: m.cq_max(RMQ_SYS_SCHEDULE_TOPIC, delay_level_2_queue_id(lv)) - done.get(lv, 0) for lv in levels}
        return {level: n for level, n in left.items() if n > 0}


def _real_queue(props: dict[str, str]) -> tuple[str | None, int | None]:
    """REAL_TOPIC and REAL_QID (`Integer.parseInt`; None where it throws) of a delayed message."""
    real_topic, real_qid_text, _uniq = map(props.get, _WANTED)
    return real_topic, parse_int(real_qid_text)


def _time_up(msg: SimMessage, props: dict[str, str]) -> SimMessage | None:
    """`messageTimeUp`'s re-put to REAL_TOPIC/REAL_QID, keeping every property (DELAY, REAL_TOPIC, REAL_QID stay
    in the bytes); None where its `Integer.parseInt(REAL_QID)` throws (`NOT_AN_INT`)."""
    real_topic, real_qid = _real_queue(props)
    return None if real_qid is None else msg.derive(real_topic, real_qid, props)


def _text(value: str | bytes | None) -> str | None:
    """A property value as text: `read_plain` gives bytes."""
    return value.decode("utf-8", "surrogateescape") if value.__class__ is bytes else value
