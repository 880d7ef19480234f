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

from typing import TYPE_CHECKING, NamedTuple

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
from mqtool.rules.transaction import (
    CHECK,
    DISCARD,
    DONE,
    PUT_BACK,
    READ_MORE,
    SKIP,
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
SLEEP_WHILE_NO_OP = 1000
BUSY_RETRY_49 = 1  # virtual ms a 4.9.8 retry of the same half takes when no op record came
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
OP_MSG_MAX_SIZE = 4096  # transactionOpMsgMaxSize
PUT_BACK_RETRY_MS = 100
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_MASK = 0xC
NO_NEW_MSG, FOUND, OFFSET_ILLEGAL = "NO_NEW_MSG", "FOUND", "OFFSET_ILLEGAL"
MISSING, REFUSED = "missing", "refused"  # where `_check_batch` stops: no half to read, a refused put-back
_DISCARD_KEYS = ("check_times", "queue_offset")  # the detail of a discard's or skip's event; of the others:
_DETAIL_KEYS = {CHECK: ("producer_group", *_DISCARD_KEYS, "answer"), PUT_BACK: ("reason", *_DISCARD_KEYS)}


class _CopyFacts(NamedTuple):
    """What every put-back of a half shares (they differ only in TRANSACTION_CHECK_TIMES): `_copy_facts`."""

    source: SimMessage  # a copy they derive from, holding neither the source's map nor its string
    props: dict[str, str]  # the first copy's map
    real_topic: str | None
    real_qid: int | None
    uniq: str | None
    group: str | None  # PGROUP
    born: int
    immunity: str | None  # CHECK_IMMUNITY_TIME_IN_SECONDS
    prepared: str | None  # TRAN_PREPARED_QUEUE_OFFSET
    keys: list[str] | None  # KEYS as `answer_for` takes them
    size: int  # the size but for the count's text
    tags: int


class _Deferred:
    """A put-back placed without a `SimMessage` (`StoreModel.lazy`): `build(phys, self)` makes it when read."""

    __slots__ = ("build", "facts", "times_text", "store_ts", "size", "queue_offset", "source_phys")

    def __init__(
        self, build, facts: _CopyFacts, times_text: str, store_ts: int, size: int, queue_offset: int, source_phys: int
    ) -> None:
        self.build, self.facts, self.times_text, self.store_ts = build, facts, times_text, store_ts
        self.size, self.queue_offset, self.source_phys = size, queue_offset, source_phys


class _Walk:
    """One half queue's walk in a check round: `check`'s removeMap, opMsgMap and doneOpOffset, its last op pull."""

    __slots__ = tuple(
        "qid start mini remove_map op_msg_map done_op pull_status next_op newest_op_born lazy run".split()
    )

    def __init__(self, qid: int, start: int, mini: int) -> None:
        self.qid, self.start, self.mini = qid, start, mini
        self.remove_map: dict[int, int] = {}  # half offset -> the op record's offset
        self.op_msg_map: dict[int, set[int]] = {}  # 5.x: op record -> the half offsets it still waits for
        self.done_op: list[int] = []
        self.pull_status, self.next_op = FOUND, 0  # the last pull's (`getOpMsg`) and where the next one reads
        self.newest_op_born: int | None = None  # the born time of the last op record it read: `isNeedCheck`'s
        self.lazy: dict | None = None  # `StoreModel.lazy` where a put-back is placed without a `SimMessage`
        self.run: _Run | None = None

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


class _Half:
    """A half a visit does more than put back (`_visit`): a record with its `SimMessage`, or a put-back not yet
    built (`deferred`), with the values `check_visit` read of it (`_visit_values`)."""

    __slots__ = tuple(
        "phys msg deferred props check_times born store_ts immunity prepared real_topic real_qid uniq".split()
    )

    def __init__(self, phys: int, msg: SimMessage | None, deferred: _Deferred | None, visit: tuple) -> None:
        self.phys, self.msg, self.deferred = phys, msg, deferred
        self.check_times, self.born, self.store_ts, self.immunity, self.prepared = visit
        self.props = None if msg is None else msg.props
        f = deferred.facts if msg is None else None
        self.real_topic, self.real_qid, self.uniq = (f.real_topic, f.real_qid, f.uniq) if f else _real_names(self.props)

    def build(self, m) -> None:
        """A deferred put-back's `SimMessage`, built now (`StoreModel.materialise`) for a step that needs it."""
        if self.msg is None:
            msg = m.materialise(self.phys)
            self.__init__(self.phys, msg, None, _visit_values(msg))


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
        times = ctx.scenario.check_at
        if times is not None:
            for t in times:
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
        if w.pull_status == FOUND:
            return 0, spun_at
        if not self.ctx.v4:
            return SLEEP_WHILE_NO_OP, i
        # 4.9.8 retries at once; a second empty read for the same half means it
        # spins, burning real time until the half is old enough: 1 ms per turn
        return (BUSY_RETRY_49 if spun_at == i else 0), i

    def _fill_op_remove_map(self, w: _Walk, op_offset: int) -> None:
        """`fillOpRemoveMap` over the op records `getOpMsg` pulls from `op_offset` (up to 32): the half offsets
        they name (at or past the walk's start) go in removeMap; an op record naming none is done at once."""
        m, qid, v4 = self.ctx.model, w.qid, self.ctx.v4
        lo, hi = m.cq_min(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid), m.cq_max(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)
        w.newest_op_born = None
        if op_offset >= hi or op_offset < lo:
            w.pull_status, w.next_op = (NO_NEW_MSG, op_offset) if op_offset >= hi else (OFFSET_ILLEGAL, lo)
            if op_offset < lo:
                self.offsets[(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)] = lo
            return
        w.pull_status, w.next_op = FOUND, min(hi, op_offset + OP_MSG_PULL_NUMS)
        for off in range(op_offset, w.next_op):
            unit = m.cq_unit(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, off)
            op = m.message(unit[0]) if unit else None
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
        """The visits of `check` from half `i` (`check_visit` each): passed over when done by an op record,
        re-put when immune (`_put_immunity`), discarded or skipped (`_resolve_discard`), put back for a check
        (`_put_back_half_msg_queue`), until a half it cannot go on from: (its offset, why: READ_MORE, FRESH,
        NEW_ARRIVED, REFUSED when its put-back failed, MISSING when there is none). The events are the same
        rows, in order, written a run of one kind at a time (`_Run`).

        The units are read up to the queue's max as a pass starts: the put-backs go to the same queue, after
        it, and are visited by the next pass (discarded at transactionCheckMax, else "fresh stored"). Halves
        to check in a row are put back together, before the next step that is not one."""
        ctx, cfg = self.ctx, self.ctx.config
        m, qid, remove_map, v4 = ctx.model, w.qid, w.remove_map, ctx.v4
        message, msgs = m.message_once, m.messages  # an original is read once: not cached
        # the put-backs are placed without a `SimMessage` (`StoreModel.lazy`, built by `_build_copy` when read)
        # where no one needs one at once: nothing keeps the appended records for `--out`, nothing watches the
        # queue and it is kept; no fault can refuse them, so the halves to check in a row are put back together
        q = m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        w.lazy = m.lazy if m.put_filter is None and q.kept and not m.keep_messages and not q.listeners else None
        deferred = w.lazy if w.lazy is not None else {}
        w.run = _Run(ctx.log, ctx.engine.now, ctx.clock())
        rules = (remove_map, w.run.clock, w.start, w.newest_op_born, cfg.transaction_timeout)
        rules += (cfg.transaction_check_max, cfg.file_reserved_time)
        checks: list[tuple] = []  # (phys, deferred put-back, message, count) of the halves to check not put back
        try:
            moved = True
            while moved:
                moved = False
                if i in remove_map:
                    w.remove(i, v4)
                    i += 1
                    moved = True
                    continue
                if i < m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid):
                    break
                hi = m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, qid)
                for off, (ph, _size, _tags) in m.cq_units(RMQ_SYS_TRANS_HALF_TOPIC, qid, i, hi):
                    moved = True
                    if off in remove_map:
                        w.remove(off, v4)
                        i = off + 1
                        continue
                    e = deferred.get(ph)  # a put-back of an earlier batch, not yet built
                    msg = None if e is not None else (msgs.get(ph) or message(ph))
                    if e is not None:
                        f = e.facts
                        visit = e.times_text, f.born, e.store_ts, f.immunity, f.prepared
                    elif msg is None:
                        return off, MISSING
                    else:
                        visit = _visit_values(msg)
                    why, times = check_visit(*visit, *rules)
                    if why == CHECK and w.lazy is not None:
                        checks.append((ph, e, msg, times))
                    else:
                        if checks:
                            self._put_back_half_msg_queue(w, checks)
                            checks = []
                        stop = self._visit(w, _Half(ph, msg, e, visit), why, times)
                        if stop is not None:
                            return off, stop
                    i = off + 1
                if checks:  # put back before the next pass reads the queue's max
                    self._put_back_half_msg_queue(w, checks)
                    checks = []
            return i, MISSING
        finally:  # the put-backs and rows before where it stops
            if checks:
                self._put_back_half_msg_queue(w, checks)
            w.run.flush()

    def _visit(self, w: _Walk, h: _Half, why: str, times: int | None) -> str | None:
        """What a visit of `check` (`check_visit`'s `why`) does; None to go on, else why the walk stops at `h`."""
        timeout = self.ctx.config.transaction_timeout
        if why == DONE:  # `checkPrepareQueueOffset`: the op of the original was read
            w.done_op.append(w.remove_map.pop(get_long(h.prepared)))
            return None
        if why == PUT_BACK:
            h.build(self.ctx.model)
            if self._put_immunity(h, times, w):
                return None
            # the immunity put failed: `checkPrepareQueueOffset` returns false, `isNeedCheck` decides
            imm = check_immunity_time(h.immunity, timeout)
            need = is_need_check(w.run.clock - h.born, imm, w.newest_op_born, w.start, timeout)
            why = CHECK if need else READ_MORE
        if why == DISCARD or why == SKIP:
            self._resolve_discard(h, why, times, w)
            return None
        if why != CHECK:
            return why
        return None if self._put_back_half_msg_queue(w, [(h.phys, h.deferred, h.msg, times)]) else REFUSED

    # ----- puts -----
    def _resolve_discard(self, h: _Half, why: str, times: int | None, w: _Walk) -> None:
        """`resolveDiscardMsg`: a copy to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC queue 0 (TCMT_QUEUE_NUMS = 1); a
        discarded half's map is not changed, a skipped one's has the incremented count. A failed put drops
        the half. A deferred put-back is discarded without being built where the queue keeps nothing: its
        size is the put-back's but for the topic's fixed part (and a skip's count)."""
        m = self.ctx.model
        self.resolved[h.uniq or str(h.phys)] = why
        row_times = times if why == SKIP else get_long(h.check_times)
        cmt = m.queue_info(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0)
        if h.msg is None and not cmt.kept and not cmt.listeners:
            e = h.deferred
            size = e.size - m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, w.qid).fixed + cmt.fixed
            if why == SKIP:
                size += len(str(times)) - len(e.times_text)
            pos, copy_qo = m.append_unit(cmt, size, None)
        else:
            h.build(m)
            props = put_check_times(h.props, times) if why == SKIP else h.props
            res = m.append(h.msg.derive(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, props), w.run.clock, "transaction")
            if not res.ok:
                w.run.flush()
                why_failed = f"{why} (the half message is dropped)"
                self._put_failed(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, h.uniq, h.phys, res.status, why_failed)
                return
            pos, copy_qo = res.message.phys, res.message.queue_offset
        w.run.add(why, (h.real_topic, h.real_qid, h.uniq, h.phys, pos, row_times, copy_qo))

    def _put_back_half_msg_queue(self, w: _Walk, halves: list[tuple]) -> bool:
        """`putBackHalfMsgQueue` of `renewHalfMessageInner` with the incremented count, then the check request
        (the scenario's answer, the end-transaction it schedules), for halves in order: (phys, put-back not yet
        built or None, message or None, count) each. Into `w.lazy` (`StoreModel.lazy`) the copies are placed
        without a `SimMessage`; else each is put by `StoreModel.append`, one half at a time: False when it failed."""
        ctx, m, run, qid, lazy = self.ctx, self.ctx.model, w.run, w.qid, w.lazy
        scenario, clock = ctx.scenario, run.clock
        default, delay = scenario.default_answer, scenario.answer_delay_ms
        q = m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        if run.kind != CHECK:
            run.flush()
            run.kind = CHECK
        rows = run.rows
        for ph, e, msg, times in halves:
            times_text = str(times)
            facts = e.facts if e is not None else self._copy_facts(msg, qid, times_text)
            if lazy is not None:
                size = facts.size + len(times_text)
                pos, copy_qo = m.append_unit(q, size, facts.tags)
                lazy[pos] = _Deferred(self._build_copy, facts, times_text, clock, size, copy_qo, ph)
            else:
                res = m.append(_renew(msg, put_check_times(msg.props, times_text)), clock, "transaction")
                if not res.ok:
                    run.flush()
                    self._put_failed(RMQ_SYS_TRANS_HALF_TOPIC, qid, facts.uniq, ph, res.status, "check put-back")
                    return False
                pos, copy_qo = res.message.phys, res.message.queue_offset
            group, uniq = facts.group, facts.uniq
            answer = scenario.answer_for(group, uniq, facts.keys, ctx.rng) if scenario.answers else default
            rows.append((facts.real_topic, facts.real_qid, uniq, ph, pos, group, times, copy_qo, answer))
            if answer in ("commit", "rollback"):
                ctx.engine.schedule(lambda p=pos, a=answer: self.end_transaction(p, a), PRODUCER, delay)
        return True

    def _copy_facts(self, msg: SimMessage, qid: int, times_text: str) -> _CopyFacts:
        """What every later put-back of half `msg` shares (`_CopyFacts`). The size is `StoreModel.append`'s for the
        first copy; the map is put in the stored order only when a copy is built (`_build_copy`)."""
        m = self.ctx.model
        props = put_check_times(msg.props, times_text)
        size = m.reput_size(props, m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, qid).fixed, msg.sys_flag, msg.body_len)
        keys = _keys(props) if self.ctx.scenario.answers else None
        src, group = msg.derive(msg.topic, msg.queue_id, props), props.get(PROPERTY_PRODUCER_GROUP)
        _times, born, _store_ts, immunity, prepared = _visit_values(msg)
        n, tags = size - len(times_text), tags_code(props)
        return _CopyFacts(src, props, *_real_names(props), group, born, immunity, prepared, keys, n, tags)

    def _put_failed(self, topic: str, qid: int, uniq: str | None, phys: int, status: str, reason: str) -> None:
        self.ctx.log.emit(
            self.ctx.engine.now, "transaction", "put_failed", topic, qid, uniq, phys, status=status, reason=reason
        )

    def _build_copy(self, phys: int, e: _Deferred) -> SimMessage:
        """The `SimMessage` of a put-back placed without one (`StoreModel.materialise`): `_renew`'s copy of its
        source as `StoreModel.append` leaves it (its map in the stored order: the first copy's, which a later
        copy, with the same keys, keeps)."""
        facts = e.facts
        props = put_check_times(facts.props, e.times_text)
        order = key_order(tuple(props), self.ctx.model.capacity).order
        if order is not None:
            props = {k: props[k] for k in order}
        new = _renew(facts.source, props)
        new.phys, new.size, new.store_ts, new.queue_offset = phys, e.size, e.store_ts, e.queue_offset
        new.service = "transaction"
        new.tags_code = facts.tags
        new.source_phys = e.source_phys
        return new

    def _put_immunity(self, h: _Half, times: int | None, w: _Walk) -> bool:
        """`putImmunityMsgBackToHalfQueue`: a copy with the incremented count and TRAN_PREPARED_QUEUE_OFFSET (the
        original's queue offset, kept by later copies), no check request."""
        msg = h.msg
        # setWaitStoreMsgOK(false) before this path rebuilds the string
        props = {**put_check_times(h.props, times), PROPERTY_WAIT_STORE_MSG_OK: "false"}
        props.setdefault(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        res = self.ctx.model.append(_renew(msg, props), w.run.clock, "transaction")
        if not res.ok:
            w.run.flush()
            self._put_failed(RMQ_SYS_TRANS_HALF_TOPIC, w.qid, h.uniq, h.phys, res.status, "immunity put-back")
            return False
        n = res.message
        w.run.add(PUT_BACK, (h.real_topic, h.real_qid, h.uniq, h.phys, n.phys, "immunity", times, n.queue_offset))
        return True

    # ----- end transaction -----
    def end_transaction(self, phys: int, answer: str) -> None:
        """`EndTransactionProcessor` for a check answer: commit or rollback the half copy at `phys`."""
        ctx = self.ctx
        if not ctx.running:
            return
        half = ctx.model.message(phys)
        if half is None:
            return
        new_phys = None
        real_topic, real_qid, uniq = _real_names(half.props)
        if answer == "commit":
            final = half.derive(real_topic or "", real_qid or 0, dict(half.props))
            final.sys_flag = (half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE
            final.prepared_tx_offset = half.phys
            final.reconsume_times = half.reconsume_times
            res = ctx.put(final, "transaction")
            if not res.ok:
                self._put_failed(final.topic, final.queue_id, uniq, half.phys, res.status, "commit")
                return
            new_phys = res.message.phys
        self.resolved[uniq or str(phys)] = answer
        now = ctx.engine.now
        ctx.log.batch(
            now, "transaction", answer, real_topic, real_qid, uniq, phys, new_phys, queue_offset=half.queue_offset
        )
        if answer == "commit":
            n = res.message
            row = n.topic, n.queue_id, n.uniq_key, half.phys, new_phys
            ctx.log.batch(now, "transaction", "deliver", *row, queue_offset=n.queue_offset, reason="commit")
        self._delete_prepare(half)

    def _delete_prepare(self, half: SimMessage) -> None:
        if self.ctx.v4:
            self._write_op(half.queue_id, str(half.queue_offset))
            return
        q = self.op_pending.setdefault(half.queue_id, [])
        if not q and half.queue_id not in self.op_last_write:
            self.op_last_write[half.queue_id] = self.ctx.clock()
        q.append(f"{half.queue_offset},")
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
                size = sum(len(s) for s in q)
                at = self.op_last_write.get(qid, ctx.clock()) + interval
                if size >= OP_MSG_MAX_SIZE or at <= ctx.clock():
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
                u = m.cq_unit(RMQ_SYS_TRANS_HALF_TOPIC, qid, off)
                msg = m.message(u[0]) if u else None
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


def _keys(props: dict[str, str]) -> list[str]:
    """KEYS as `Scenario.answer_for` takes them."""
    return [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k]


def _visit_values(msg: SimMessage) -> tuple:
    """What `check_visit` reads of a half: TRANSACTION_CHECK_TIMES, born and store times,
    CHECK_IMMUNITY_TIME_IN_SECONDS, TRAN_PREPARED_QUEUE_OFFSET."""
    props = msg.props
    immunity, prepared = PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
    return check_times_of(props), msg.born_ts, msg.store_ts, props.get(immunity), props.get(prepared)


def _real_names(props: dict[str, str]) -> tuple[str | None, int | None, str | None]:
    """REAL_TOPIC, REAL_QID (`_qid`) and UNIQ_KEY of a half: the names its events carry."""
    return props.get(PROPERTY_REAL_TOPIC), _qid(props), props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


def _qid(props: dict[str, str]) -> int | None:
    """REAL_QID as `EndTransactionProcessor` reads it (`Integer.parseInt`); None where it would throw."""
    v = get_int(props.get(PROPERTY_REAL_QUEUE_ID))
    return None if v == -1 else v
