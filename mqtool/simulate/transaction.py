"""Transaction check rounds, op messages and end-transactions (spec §7.4-7.6).

Mirrors `TransactionalMessageServiceImpl.check` (5.3.1 and 4.9.8), `TransactionalMessageBridge`,
`DefaultTransactionalMessageCheckListener`, `TransactionalOpBatchService` and the effect of
`EndTransactionProcessor`. Each visit's decision is `mqtool.rules.transaction.check_visit`'s; here are the
walk around it and its effects:

- per half queue, `halfOffset`/`opOffset` come from consumerOffset.json (group CID_RMQ_SYS_TRANS; the
  queue's min offset when absent); up to 32 op records fill `removeMap`, more when a half is not yet due
  (READ_MORE) — and when none come, 5.3.1 sleeps 1 s (`SLEEP_WHILE_NO_OP`) before retrying the same half
  (4.9.8 retries at once; when that spins, 1 ms per further turn here);
- a discard or skip is a copy to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, a check a copy at the end of the half
  queue (visited again in the same round: discarded at the max, else "fresh stored" ends the walk) and a
  request to the producer group; a round gives up after 60 s; the offsets are written back at its end;
- answers (from the scenario) end the **checked copy**: commit writes the final record to
  REAL_TOPIC/REAL_QID (sysFlag COMMIT, preparedTransactionOffset = the copy) and an op entry,
  rollback only the op entry. 5.3.1 batches op entries ("3,5,") per queue and writes them every
  `transactionOpBatchInterval` (or past 4096 bytes); 4.9.8 writes one op record per end ("3").
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from mqtool.formats.names import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    REMOVE_TAG,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from mqtool.formats.properties import key_order
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK
from mqtool.rules.transaction import (
    CHECK,
    DISCARD,
    DONE,
    PUT_BACK,
    READ_MORE,
    SKIP,
    SLEEP_WHILE_NO_OP,
    calculate_op_offset,
    check_immunity_time,
    check_times_of,
    check_visit,
    get_int,
    get_long,
    is_need_check,
    op_body_offsets,
    put_check_times,
)
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import PRODUCER, TRANSACTION, Process
from mqtool.simulate.model import SimMessage, tags_code
from mqtool.simulate.service import FIRST_PERSIST_MS, PersistedOffsets, consumer_offset_rows

if TYPE_CHECKING:
    from mqtool.formats.offsets_json import ConsumerOffsets

MAX_PROCESS_TIME_LIMIT = 60000
OP_MSG_PULL_NUMS = 32
BUSY_RETRY_49 = 1  # virtual ms a 4.9.8 retry of the same half takes when no op record came
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
OP_MSG_MAX_SIZE = 4096  # transactionOpMsgMaxSize
PUT_BACK_RETRY_MS = 100
MISSING, REFUSED = "missing", "refused"  # where `_check_batch` stops: no half to read, a refused put-back
PUT_FAILED = "put_failed"
_DISCARD_KEYS = ("check_times", "queue_offset")  # the detail of a discard's or skip's event; of the others:
_DETAIL_KEYS = {
    CHECK: ("producer_group", *_DISCARD_KEYS, "answer"),
    PUT_BACK: ("reason", *_DISCARD_KEYS),
    PUT_FAILED: ("status", "reason"),
}


class _Deferred:
    """A put-back placed without a `SimMessage` (`StoreModel.lazy`): its half's first copy (`source`, `_source`) but
    for its count, place and store time, so `build` makes it only when a reader asks for it (`materialise`)."""

    __slots__ = ("source", "times_text", "store_ts", "queue_offset", "source_phys")

    def __init__(self, source: SimMessage, times_text: str, store_ts: int, queue_offset: int, source_phys: int) -> None:
        self.source, self.times_text, self.store_ts = source, times_text, store_ts
        self.queue_offset, self.source_phys = queue_offset, source_phys

    def build(self, phys: int) -> SimMessage:
        src = self.source
        new = _renew(src, put_check_times(src.props, self.times_text))  # the first copy's order, which it keeps
        new.phys, new.size, new.store_ts = phys, src.size + len(self.times_text), self.store_ts
        new.queue_offset, new.source_phys = self.queue_offset, self.source_phys
        new.service, new.tags_code = "transaction", src.tags_code
        return new


class _Walk:
    """One half queue's walk in a check round: `check`'s removeMap, opMsgMap and doneOpOffset, its last op pull."""

    __slots__ = tuple(
        "qid start mini remove_map op_msg_map done_op found next_op newest_op_born lazy run rules".split()
    )

    def __init__(self, qid: int, start: int, mini: int) -> None:
        self.qid, self.start, self.mini = qid, start, mini
        self.remove_map: dict[int, int] = {}  # half offset -> the op record's offset
        self.op_msg_map: dict[int, set[int]] = {}  # 5.x: op record -> the half offsets it still waits for
        self.done_op: list[int] = []
        self.found, self.next_op = True, 0  # whether the last pull (`getOpMsg`) found any, where the next reads
        self.newest_op_born: int | None = None  # the born time of the last op record it read: `isNeedCheck`'s
        self.lazy: dict | None = None  # `StoreModel.lazy` where a put-back is placed without a `SimMessage`
        self.run: _Run | None = None  # the batch's events (`_check_batch`)
        self.rules: tuple = ()  # the batch's `check_visit` arguments after the half's own

    def remove(self, i: int, v4: bool) -> None:
        """Half `i` is done by an op record: that op record is done once every half it names is passed."""
        op_off = self.remove_map.pop(i)
        if v4:
            self.done_op.append(op_off)
            return
        s = self.op_msg_map.get(op_off)
        if s is not None:
            s.discard(i)
            if not s:
                del self.op_msg_map[op_off]
                self.done_op.append(op_off)


class _Run:
    """A batch's events: the rows of a run of one kind, written by one `EventLog.batch` when the kind changes."""

    __slots__ = ("log", "now", "clock", "kind", "rows")

    def __init__(self, log, now: int, clock: int) -> None:
        self.log, self.now, self.clock, self.kind, self.rows = log, now, clock, "", []

    def add(self, kind: str, row: tuple) -> None:
        """A row of `kind`, after the rows before (a run of another kind written first)."""
        if kind != self.kind:
            self.flush()
            self.kind = kind
        self.rows.append(row)

    def flush(self) -> None:
        if self.rows:
            topic, queue_id, uniq_key, phys, new_phys, *detail = zip(*self.rows, strict=True)
            detail = dict(zip(_DETAIL_KEYS.get(self.kind, _DISCARD_KEYS), detail, strict=True))
            self.log.batch(self.now, "transaction", self.kind, topic, queue_id, uniq_key, phys, new_phys, **detail)
        self.rows, self.kind = [], ""


class TransactionService(PersistedOffsets[tuple[str, int]]):
    """The check service, the op batch service and the producers' answers of one broker; `offsets` are the
    CID_RMQ_SYS_TRANS rows of consumerOffset.json."""

    def __init__(self, ctx: SimContext, consumer_offsets: ConsumerOffsets | None = None) -> None:
        ours = (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC)
        rows = consumer_offset_rows(consumer_offsets).items()
        stored = {(t, qid): off for (g, t, qid), off in rows if g == CID_SYS_RMQ_TRANS and t in ours}
        interval = ctx.config.flush_consumer_offset_interval
        super().__init__(ctx, stored, interval, FIRST_PERSIST_MS, "consumer-offset-persist")
        self.op_pending: dict[int, list[str]] = {}
        self.op_last_write: dict[int, int] = {}
        self.checker: Process | None = None
        self.op_batcher: Process | None = None
        self.rounds = 0
        self.resolved: dict[str, str] = {}  # uniq key -> commit | rollback | discard | skip
        self._uid = 0

    # ----- life cycle -----
    def start(self) -> None:
        e = self.ctx.engine
        self.checker = e.process(self._check_loop(), TRANSACTION, 0, "transaction-check")
        if not self.ctx.v4:
            self.op_batcher = e.process(self._op_batch_loop(), TRANSACTION, 0, "transaction-op-batch")
        if any(f.kind == "crash" for f in self.ctx.scenario.faults):
            self.start_persister()

    def stop(self, clean: bool) -> None:
        for p in (self.checker, self.op_batcher):
            if p is not None:
                p.stop()
        if clean:
            self.flush_ops()
        else:
            self.op_pending.clear()
        self.stop_persister(clean)

    def _check_loop(self):
        ctx = self.ctx
        if ctx.scenario.check_at is not None:
            for t in ctx.scenario.check_at:
                if t < ctx.engine.now:
                    continue  # before the start, or while the broker was down
                if t > ctx.engine.now:
                    yield t - ctx.engine.now
                yield from self._round()
            return
        while True:
            yield ctx.config.transaction_check_interval
            yield from self._round()

    # ----- reading -----
    def _offset(self, topic: str, qid: int) -> int:
        off = self.offsets.get((topic, qid))
        return off if off is not None else self.ctx.model.cq_min(topic, qid)

    def _read_more(self, w, i: int, spun_at: int) -> tuple[int, int]:
        """The check loop's READ_MORE step for the half at `i`: read the next op messages; where none came, the
        time it waits (0: none) and the half it last spun on."""
        self._fill_op_remove_map(w, w.next_op)
        if w.found:
            return 0, spun_at
        if not self.ctx.v4:
            return SLEEP_WHILE_NO_OP, i
        return (BUSY_RETRY_49 if spun_at == i else 0), i  # a second empty read of the same half: it spins

    def _fill_op_remove_map(self, w: _Walk, op_offset: int) -> None:
        """`fillOpRemoveMap` over the op records `getOpMsg` pulls from `op_offset` (up to 32): the half offsets
        they name (at or past the walk's start) go in removeMap; an op record naming none is done at once."""
        m, qid, v4 = self.ctx.model, w.qid, self.ctx.v4
        lo, hi = m.cq_min(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid), m.cq_max(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)
        w.newest_op_born = None
        if op_offset >= hi or op_offset < lo:
            w.found, w.next_op = False, op_offset if op_offset >= hi else lo
            if op_offset < lo:
                self.offsets[(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)] = lo
            return
        w.found, w.next_op = True, min(hi, op_offset + OP_MSG_PULL_NUMS)
        for off in range(op_offset, w.next_op):
            op = m.cq_message(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, off)
            if op is None:
                continue
            w.newest_op_born = op.born_ts
            if op.props.get(PROPERTY_TAGS) != REMOVE_TAG:
                if not v4:
                    w.done_op.append(op.queue_offset)  # "Found a illegal tag in opMessageExt": no offsets, done
                continue  # 4.9.8 logs it and leaves it out of doneOpOffset
            offsets = [v for v in op_body_offsets((op.body or b"").decode("utf-8", "replace"), v4) if v >= w.mini]
            for v in offsets:
                w.remove_map[v] = op.queue_offset
            if not offsets:
                w.done_op.append(op.queue_offset)
            elif not v4:
                w.op_msg_map[op.queue_offset] = set(offsets)

    # ----- one round -----
    def _round(self):
        """`TransactionalMessageServiceImpl.check`: each half queue walked from its offset, the offsets moved."""
        ctx, m = self.ctx, self.ctx.model
        start = ctx.clock()
        self.rounds += 1
        for qid in m.queue_ids(RMQ_SYS_TRANS_HALF_TOPIC):
            half_offset = self._offset(RMQ_SYS_TRANS_HALF_TOPIC, qid)
            op_offset = self._offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)
            if half_offset < 0 or op_offset < 0:
                continue
            w = _Walk(qid, start, half_offset)
            self._fill_op_remove_map(w, op_offset)
            new_offset = yield from self._walk(w)
            if new_offset != half_offset:
                self.offsets[(RMQ_SYS_TRANS_HALF_TOPIC, qid)] = new_offset
            new_op = calculate_op_offset(w.done_op, op_offset)
            if new_op != op_offset:
                self.offsets[(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)] = new_op
            m.release_below(RMQ_SYS_TRANS_HALF_TOPIC, qid, new_offset)
            m.release_below(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, new_op)

    def _walk(self, w: _Walk):
        """The loop of `check` over one half queue: `_check_batch` visits the halves; here what it stops at
        and the waits (a refused put-back, no further op record); the half offset it ends at."""
        ctx, m = self.ctx, self.ctx.model
        null_count = 1
        spun_at = -1
        i = w.mini
        while ctx.clock() - w.start <= MAX_PROCESS_TIME_LIMIT:
            i, stop = self._check_batch(w, i)
            if stop == REFUSED:
                yield PUT_BACK_RETRY_MS  # the same half again: its immunity put-back, if any, first
            elif stop == READ_MORE:
                delay, spun_at = self._read_more(w, i, spun_at)
                if delay:
                    yield delay
            elif stop == MISSING:  # `getHalfMsg` found no half at i: the end, an illegal offset, unreadable
                null_count += 1
                if null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL or i >= m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, w.qid):
                    break
                i = max(i + 1, m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, w.qid))
            else:
                break  # "Fresh stored" / "New arrived": check it in a later round
        return i

    def _check_batch(self, w: _Walk, i: int) -> tuple[int, str]:
        """The visits of `check` from half `i` (`_visit` each), passing over the halves done by an op record, until
        a half it cannot go on from: (its offset, why: READ_MORE, FRESH, NEW_ARRIVED, REFUSED when its put-back
        failed, MISSING when there is none). The events are written a run of one kind at a time (`_Run`).

        The units are read up to the queue's max as a pass starts: the put-backs, after it, are the next pass's."""
        ctx, cfg = self.ctx, self.ctx.config
        m, qid, remove_map, v4 = ctx.model, w.qid, w.remove_map, ctx.v4
        message, msgs = m.message_once, m.messages  # an original is read once: not cached
        # the put-backs are placed without a `SimMessage` (`StoreModel.lazy`, `_Deferred`) where no one needs one
        # at once: nothing keeps the appended records for `--out`, nothing watches the queue and it is kept
        q = m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        w.lazy = m.lazy if m.put_filter is None and q.kept and not m.keep_messages and not q.listeners else None
        deferred = w.lazy if w.lazy is not None else {}
        w.run = _Run(ctx.log, ctx.engine.now, ctx.clock())
        w.rules = (remove_map, w.run.clock, w.start, w.newest_op_born, cfg.transaction_timeout)
        w.rules += (cfg.transaction_check_max, cfg.file_reserved_time)
        try:
            while True:
                if i in remove_map:
                    w.remove(i, v4)
                    i += 1
                    continue
                if i < m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid):
                    return i, MISSING
                first, hi = i, m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, qid)
                for off, (ph, _size, _tags) in m.cq_units(RMQ_SYS_TRANS_HALF_TOPIC, qid, i, hi):
                    if off in remove_map:
                        w.remove(off, v4)
                    else:
                        e = deferred.get(ph)  # a put-back of an earlier batch, not yet built
                        msg = None if e is not None else (msgs.get(ph) or message(ph))
                        stop = MISSING if e is None and msg is None else self._visit(w, ph, e, msg)
                        if stop is not None:
                            return off, stop
                    i = off + 1
                if i == first:
                    return i, MISSING
        finally:
            w.run.flush()

    def _visit(self, w: _Walk, ph: int, e: _Deferred | None, msg: SimMessage | None) -> str | None:
        """What a visit of `check` (`check_visit`) does with the half at `ph`, a put-back not yet built (`e`) or
        a message; None to go on, else why the walk stops there."""
        src = msg if e is None else e.source
        props = src.props
        times_text, store_ts = (check_times_of(props), msg.store_ts) if e is None else (e.times_text, e.store_ts)
        immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        prepared = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        why, times = check_visit(times_text, src.born_ts, store_ts, immunity, prepared, *w.rules)
        if why == PUT_BACK:
            if msg is None:
                msg, e = self.ctx.model.materialise(ph), None
            if self._put_immunity(w, ph, msg, times):
                return None
            # the immunity put failed: `checkPrepareQueueOffset` returns false, `isNeedCheck` decides
            timeout = self.ctx.config.transaction_timeout
            imm = check_immunity_time(immunity, timeout)
            need = is_need_check(w.run.clock - src.born_ts, imm, w.newest_op_born, w.start, timeout)
            why = CHECK if need else READ_MORE
        if why == CHECK:
            return None if self._put_back_half_msg_queue(w, ph, e, msg, times) else REFUSED
        if why == DISCARD or why == SKIP:
            self._resolve_discard(w, ph, e, msg, why, times if why == SKIP else get_long(times_text))
        elif why == DONE:  # `checkPrepareQueueOffset`: the op of the original was read
            w.done_op.append(w.remove_map.pop(get_long(prepared)))
        else:
            return why
        return None

    # ----- puts -----
    def _resolve_discard(
        self, w: _Walk, ph: int, e: _Deferred | None, msg: SimMessage | None, why: str, times: int
    ) -> None:
        """`resolveDiscardMsg`: a copy to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC queue 0 (TCMT_QUEUE_NUMS = 1) with the
        count `times`: a discarded half's as stored, a skipped one's incremented. A failed put drops the half. A
        put-back not yet built is discarded without being built where the queue keeps nothing: its size is its
        source's but for the topic's fixed part and the count."""
        m = self.ctx.model
        props = msg.props if e is None else e.source.props
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        self.resolved[uniq or str(ph)] = why
        cmt = m.queue_info(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0)
        if e is not None and not cmt.kept and not cmt.listeners:
            size = e.source.size + len(str(times) if why == SKIP else e.times_text)
            size += cmt.fixed - m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, w.qid).fixed
            pos, copy_qo = m.append_unit(cmt, size, None)
        else:
            msg = msg if msg is not None else m.materialise(ph)
            props = put_check_times(msg.props, times) if why == SKIP else msg.props
            res = m.append(msg.derive(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, props), w.run.clock, "transaction")
            if not res.ok:
                reason = f"{why} (the half message is dropped)"
                w.run.add(PUT_FAILED, (RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, uniq, ph, None, res.status, reason))
                return
            pos, copy_qo = res.message.phys, res.message.queue_offset
        w.run.add(why, (*_real_names(props), ph, pos, times, copy_qo))

    def _put_back_half_msg_queue(
        self, w: _Walk, ph: int, e: _Deferred | None, msg: SimMessage | None, times: int
    ) -> bool:
        """`putBackHalfMsgQueue` of `renewHalfMessageInner` with the incremented count, then the check request (the
        scenario's answer, the end-transaction it schedules). Into `w.lazy` the copy is placed without a
        `SimMessage` (`_Deferred`); else it is put by `StoreModel.append`: False when that failed."""
        ctx, m, run, times_text = self.ctx, self.ctx.model, w.run, str(times)
        if w.lazy is not None:
            src = e.source if e is not None else self._source(msg, times_text)
            half = m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, w.qid)
            pos, copy_qo = m.append_unit(half, src.size + len(times_text), src.tags_code)
            w.lazy[pos] = _Deferred(src, times_text, run.clock, copy_qo, ph)
        else:
            src = msg
            res = m.append(_renew(msg, put_check_times(msg.props, times_text)), run.clock, "transaction")
            if not res.ok:
                row = RMQ_SYS_TRANS_HALF_TOPIC, w.qid, msg.uniq_key, ph, None, res.status, "check put-back"
                run.add(PUT_FAILED, row)
                return False
            pos, copy_qo = res.message.phys, res.message.queue_offset
        props, scenario = src.props, ctx.scenario
        group, (real_topic, real_qid, uniq) = props.get(PROPERTY_PRODUCER_GROUP), _real_names(props)
        keys = [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k] if scenario.answers else None
        answer = scenario.answer_for(group, uniq, keys, ctx.rng) if keys is not None else scenario.default_answer
        run.add(CHECK, (real_topic, real_qid, uniq, ph, pos, group, times, copy_qo, answer))
        if answer in ("commit", "rollback"):
            ctx.engine.schedule(lambda: self.end_transaction(pos, answer), PRODUCER, scenario.answer_delay_ms)
        return True

    def _source(self, msg: SimMessage, times_text: str) -> SimMessage:
        """The first put-back of half `msg`, which every later one is but for its count (`_Deferred`): its map in
        the stored order (`StoreModel.append`'s), its size without the count's text."""
        m = self.ctx.model
        props = put_check_times(msg.props, times_text)
        order = key_order(tuple(props), m.capacity).order
        src = msg.derive(msg.topic, msg.queue_id, props if order is None else {k: props[k] for k in order})
        fixed = m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, msg.queue_id).fixed
        src.size = m.reput_size(props, fixed, msg.sys_flag, msg.body_len) - len(times_text)
        src.tags_code = tags_code(props)
        return src

    def _put_immunity(self, w: _Walk, ph: int, msg: SimMessage, times: int) -> bool:
        """`putImmunityMsgBackToHalfQueue`: a copy with the incremented count and TRAN_PREPARED_QUEUE_OFFSET (the
        original's queue offset, kept by later copies), no check request."""
        # setWaitStoreMsgOK(false) before this path rebuilds the string
        props = {**put_check_times(msg.props, times), PROPERTY_WAIT_STORE_MSG_OK: "false"}
        props.setdefault(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        res = self.ctx.model.append(_renew(msg, props), w.run.clock, "transaction")
        if not res.ok:
            row = RMQ_SYS_TRANS_HALF_TOPIC, w.qid, msg.uniq_key, ph, None, res.status, "immunity put-back"
            w.run.add(PUT_FAILED, row)
            return False
        n = res.message
        w.run.add(PUT_BACK, (*_real_names(msg.props), ph, n.phys, "immunity", times, n.queue_offset))
        return True

    # ----- end transaction -----
    def end_transaction(self, phys: int, answer: str) -> None:
        """`EndTransactionProcessor` for a check answer: commit or rollback the half copy at `phys`."""
        ctx, now = self.ctx, self.ctx.engine.now
        half = ctx.model.message(phys) if ctx.running else None
        if half is None:
            return
        real_topic, real_qid, uniq = _real_names(half.props)
        final = None
        if answer == "commit":
            final = half.derive(real_topic or "", real_qid or 0, dict(half.props))
            final.sys_flag = (half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT
            final.prepared_tx_offset = phys
            final.reconsume_times = half.reconsume_times
            res = ctx.put(final, "transaction")
            if not res.ok:
                row = final.topic, final.queue_id, uniq, phys
                ctx.log.emit(now, "transaction", PUT_FAILED, *row, status=res.status, reason="commit")
                return
        self.resolved[uniq or str(phys)] = answer
        new_phys = None if final is None else final.phys
        row = real_topic, real_qid, uniq, phys, new_phys
        ctx.log.batch(now, "transaction", answer, *row, queue_offset=half.queue_offset)
        if final is not None:
            row = final.topic, final.queue_id, final.uniq_key, phys, new_phys
            ctx.log.batch(now, "transaction", "deliver", *row, queue_offset=final.queue_offset, reason="commit")
        self._delete_prepare(half)

    def _delete_prepare(self, half: SimMessage) -> None:
        if self.ctx.v4:
            self._write_op(half.queue_id, str(half.queue_offset))
            return
        self.op_last_write.setdefault(half.queue_id, self.ctx.clock())  # a queue's first entry: never written
        self.op_pending.setdefault(half.queue_id, []).append(f"{half.queue_offset},")
        if self.op_batcher is not None and self.op_batcher.wake_time is None:
            self.op_batcher.wake(0)

    def _write_op(self, qid: int, body: str) -> None:
        ctx = self.ctx
        self._uid += 1
        uid = f"{ctx.rng.getrandbits(64):016X}{self._uid:016X}"
        props = {
            PROPERTY_TAGS: REMOVE_TAG,
            PROPERTY_WAIT_STORE_MSG_OK: "true",
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uid,
        }
        op = SimMessage(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, props, body=body.encode(), born_ts=ctx.clock())
        ctx.put(op, "transaction")

    def flush_ops(self) -> None:
        for qid in sorted(self.op_pending):
            q = self.op_pending[qid]
            while q:
                self._write_op(qid, _op_body(q))
            self.op_last_write[qid] = self.ctx.clock()

    def _op_batch_loop(self):
        """TransactionalOpBatchService: a queue's entries go out `interval` after its last write."""
        ctx = self.ctx
        interval = ctx.config.transaction_op_batch_interval
        while True:
            due = None
            for qid in sorted(self.op_pending):
                q = self.op_pending[qid]
                if not q:
                    continue
                at = self.op_last_write[qid] + interval
                if sum(map(len, q)) >= OP_MSG_MAX_SIZE or at <= ctx.clock():
                    self._write_op(qid, _op_body(q))
                    self.op_last_write[qid] = ctx.clock()
                    at = ctx.clock() + interval if q else None
                if at is not None:
                    due = at if due is None else min(due, at)
            yield None if due is None else max(0, due - ctx.clock())

    # ----- summary -----
    def pending_halves(self) -> list[dict]:
        """Half messages not resolved at the end: from each queue's offset to its max, latest copy per key."""
        m = self.ctx.model
        out: dict[str, dict] = {}
        for qid in m.queue_ids(RMQ_SYS_TRANS_HALF_TOPIC):
            start = self._offset(RMQ_SYS_TRANS_HALF_TOPIC, qid)
            for off in range(start, m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, qid)):
                msg = m.cq_message(RMQ_SYS_TRANS_HALF_TOPIC, qid, off)
                if msg is None:
                    continue
                k = msg.uniq_key or str(msg.phys)
                if k in self.resolved:
                    continue
                out[k] = {
                    "uniq_key": msg.uniq_key,
                    "queue_offset": off,
                    "physical_offset": msg.phys,
                    "check_times": get_long(check_times_of(msg.props) or "0"),
                    "reason": "waiting for a check round or a producer answer",
                }
        return list(out.values())


def _renew(msg: SimMessage, props: dict[str, str]) -> SimMessage:
    """`renewHalfMessageInner`: flag and reconsume times are not copied."""
    new = msg.derive(msg.topic, msg.queue_id, props)
    new.flag = 0
    new.reconsume_times = 0
    return new


def _op_body(q: list[str]) -> str:
    """The body of the next op record of a queue's pending entries: up to OP_MSG_MAX_SIZE bytes of them."""
    body = ""
    while q and len(body) < OP_MSG_MAX_SIZE:
        body += q.pop(0)
    return body


def _real_names(props: dict[str, str]) -> tuple[str | None, int | None, str | None]:
    """REAL_TOPIC, REAL_QID (`_qid`) and UNIQ_KEY of a half: the names its events carry."""
    real_qid = _qid(props.get(PROPERTY_REAL_QUEUE_ID))
    return props.get(PROPERTY_REAL_TOPIC), real_qid, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


@lru_cache(maxsize=1024)
def _qid(text: str | None) -> int | None:
    """REAL_QID as `EndTransactionProcessor` reads it (`Integer.parseInt`); None where it would throw."""
    v = get_int(text)
    return None if v == -1 else v
