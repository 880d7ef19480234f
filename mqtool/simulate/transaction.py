"""Transaction check rounds, op messages and end-transactions (spec §7.4-7.6).

Mirrors `TransactionalMessageServiceImpl.check` (5.3.1 and 4.9.8), `TransactionalMessageBridge`,
`DefaultTransactionalMessageCheckListener`, `TransactionalOpBatchService` and the effect of
`EndTransactionProcessor`:

- per half queue, `halfOffset`/`opOffset` come from consumerOffset.json (group CID_RMQ_SYS_TRANS; the
  queue's min offset when absent); up to 32 op records fill `removeMap` (half offsets below
  `halfOffset` are done);
- walking i from `halfOffset`: resolved offsets are skipped; a missing half ends the walk
  (NO_NEW_MSG) or jumps (illegal offset); `needDiscard` runs **first** and increments
  TRANSACTION_CHECK_TIMES in memory (absent ⇒ 1; ≥ `transactionCheckMax` ⇒ discard), `needSkip`
  (born more than `fileReservedTime` h ago) ⇒ also discarded to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC; a record
  stored after the round started ends the walk; immunity (CHECK_IMMUNITY_TIME_IN_SECONDS × 1000, else
  `transactionTimeOut`): a young half with the property is re-put with TRAN_PREPARED_QUEUE_OFFSET
  (and its already incremented TRANSACTION_CHECK_TIMES) and skipped; without it the walk stops;
- `isNeedCheck` = (no op records and older than the immunity) or (newest op record born more than
  `transactionTimeOut` after the round start) or born in the future; then the half is put back
  (a copy at the end of the half queue) and a check request goes to the producer group; otherwise
  more op records are read — and when none come, 5.3.1 sleeps 1 s (`SLEEP_WHILE_NO_OP`) before
  retrying the same half (4.9.8 retries at once; when that spins, 1 ms per further turn here);
- a round gives up after 60 s; the offsets are written back at its end;
- each visit's decision (`needDiscard`, `needSkip`, the immunity, `checkPrepareQueueOffset`,
  `isNeedCheck`) is `mqtool.rules.transaction.check_visit`'s, in both walks; the count it puts is
  written by `put_check_times`, an op body read by `op_body_offsets`;
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
from mqtool.rules.transaction import (
    CHECK,
    DISCARD,
    DONE,
    PUT_BACK,
    READ_MORE,
    SKIP,
    STOPS_ROUND,
    check_immunity_time,
    check_times_of,
    check_visit,
    get_long,
    is_need_check,
    need_discard,
    op_body_offsets,
    put_check_times,
)
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import PERSIST, PRODUCER, TRANSACTION, Process
from mqtool.simulate.model import SimMessage, _order, tags_code

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
_CHECK_KEYS = ("producer_group", "check_times", "queue_offset", "answer")  # a check event's detail
_DISCARD_KEYS = ("check_times", "queue_offset")  # a discard's or skip's


def _long(s: str | None) -> int:
    try:
        return int(str(s).strip())
    except (TypeError, ValueError):
        return -1


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
    """A put-back placed without a `SimMessage` (`StoreModel._lazy`): `build(phys, self)` makes it when read."""

    __slots__ = ("build", "facts", "times_text", "store_ts", "size", "queue_offset", "source_phys")

    def __init__(self, build, facts: _CopyFacts, times_text: str, store_ts: int, size: int, queue_offset: int,
                 source_phys: int) -> None:
        self.build, self.facts, self.times_text, self.store_ts = build, facts, times_text, store_ts
        self.size, self.queue_offset, self.source_phys = size, queue_offset, source_phys


class _Pull:
    __slots__ = ("status", "msgs", "next_begin")

    def __init__(self, status: str, msgs: list[SimMessage] | None, next_begin: int) -> None:
        self.status, self.msgs, self.next_begin = status, msgs, next_begin


class TransactionService:
    """The check service, the op batch service and the producers' answers of one broker."""

    def __init__(self, ctx: SimContext, consumer_offsets: ConsumerOffsets | None = None) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.timeout = cfg.transaction_timeout
        self.check_max = cfg.transaction_check_max
        self.interval = cfg.transaction_check_interval
        self.op_interval = cfg.transaction_op_batch_interval
        self.file_reserved_h = cfg.file_reserved_time
        self.offsets: dict[tuple[str, int], int] = {}
        table = consumer_offsets.offset_table if consumer_offsets is not None else {}
        for topic in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC):
            for qid, off in (table.get(f"{topic}@{CID_SYS_RMQ_TRANS}") or {}).items():
                self.offsets[(topic, int(qid))] = int(off)
        self.persisted = dict(self.offsets)
        self.op_pending: dict[int, list[str]] = {}
        self.op_last_write: dict[int, int] = {}
        self.checker: Process | None = None
        self.op_batcher: Process | None = None
        self.persister: Process | None = None
        self.rounds: list[dict] = []
        self.resolved: dict[str, str] = {}  # uniq key -> commit | rollback | discard | skip
        self.checks = 0
        self._uid = 0
        self._verdicts: dict[str | None, tuple] = {}  # `_verdict` of a CHECK_TIMES text

    # ----- life cycle -----
    def start(self) -> None:
        e = self.ctx.engine
        self.checker = e.process(self._check_loop(), TRANSACTION, 0, "transaction-check")
        if not self.ctx.v4:
            self.op_batcher = e.process(self._op_batch_loop(), TRANSACTION, 0, "transaction-op-batch")
        if any(f.kind == "crash" for f in self.ctx.scenario.faults):
            self.persister = e.process(self._persist_loop(), PERSIST, 5000, "consumer-offset-persist")

    def stop(self, clean: bool) -> None:
        for p in (self.checker, self.op_batcher, self.persister):
            if p is not None:
                p.stop()
        if clean:
            self.flush_ops()
            self.persist()
        else:
            self.offsets = dict(self.persisted)
            self.op_pending.clear()

    def persist(self) -> None:
        """consumerOffset.json's CID_RMQ_SYS_TRANS offsets: the copy a crash falls back to."""
        self.persisted = dict(self.offsets)

    def _persist_loop(self):
        while True:
            self.persist()
            yield 5000

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
            yield self.interval
            yield from self._round()

    # ----- reading -----
    def _offset(self, topic: str, qid: int) -> int:
        off = self.offsets.get((topic, qid))
        return off if off is not None else self.ctx.model.cq_min(topic, qid)

    def _get(self, topic: str, qid: int, offset: int, n: int) -> _Pull:
        m = self.ctx.model
        lo, hi = m.cq_min(topic, qid), m.cq_max(topic, qid)
        if offset >= hi:
            return _Pull(NO_NEW_MSG, None, offset)
        if offset < lo:
            return _Pull(OFFSET_ILLEGAL, None, lo)
        msgs = []
        for off in range(offset, min(hi, offset + n)):
            u = m.cq_unit(topic, qid, off)
            msg = m.message(u[0]) if u else None
            if msg is not None:
                msgs.append(msg)
        return _Pull(FOUND, msgs or None, offset + n if offset + n < hi else hi)

    def _get_one(self, qid: int, offset: int) -> tuple[str, SimMessage | None, int]:
        """`_get(RMQ_SYS_TRANS_HALF_TOPIC, qid, offset, 1)` without the lists: (status, message, next offset)."""
        m = self.ctx.model
        if offset >= m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, qid):
            return NO_NEW_MSG, None, offset
        if offset < m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid):
            return OFFSET_ILLEGAL, None, m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        u = m.cq_unit(RMQ_SYS_TRANS_HALF_TOPIC, qid, offset)
        return FOUND, (m.message(u[0]) if u else None), offset + 1

    def _fill(self, remove_map, op_msg_map, done_op, qid, op_offset, mini) -> _Pull:
        pull = self._get(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, op_offset, OP_MSG_PULL_NUMS)
        if pull.status == OFFSET_ILLEGAL:
            self.offsets[(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)] = pull.next_begin
            return pull
        if pull.msgs is None:
            return pull
        for op in pull.msgs:
            if op.props.get(PROPERTY_TAGS) != REMOVE_TAG:
                if not self.ctx.v4:
                    done_op.append(op.queue_offset)  # "Found a illegal tag in opMessageExt": no offsets, done
                continue  # 4.9.8 logs it and leaves it out of doneOpOffset
            offsets = op_body_offsets((op.body or b"").decode("utf-8", "replace"), self.ctx.v4)
            if self.ctx.v4:
                if not offsets or offsets[0] < mini:
                    done_op.append(op.queue_offset)
                else:
                    remove_map[offsets[0]] = op.queue_offset
                continue
            found = set()
            for v in offsets:
                if v < mini:
                    continue
                remove_map[v] = op.queue_offset
                found.add(v)
            if found:
                op_msg_map[op.queue_offset] = found
            else:
                done_op.append(op.queue_offset)
        return pull

    # ----- one round -----
    def _round(self):
        ctx, m = self.ctx, self.ctx.model
        start = ctx.clock()
        record = {"time": ctx.engine.now, "checks": 0, "discards": 0}
        self.rounds.append(record)
        for qid in m.queue_ids(RMQ_SYS_TRANS_HALF_TOPIC):
            half_offset = self._offset(RMQ_SYS_TRANS_HALF_TOPIC, qid)
            op_offset = self._offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)
            if half_offset < 0 or op_offset < 0:
                continue
            remove_map: dict[int, int] = {}
            op_msg_map: dict[int, set[int]] = {}
            done_op: list[int] = []
            pull = self._fill(remove_map, op_msg_map, done_op, qid, op_offset, half_offset)
            null_count = 1
            spun_at = -1
            new_offset = i = half_offset
            next_op = pull.next_begin
            tried = -1  # the half `_check_batch` last stopped at: the decisions below take it
            while True:
                if ctx.clock() - start > MAX_PROCESS_TIME_LIMIT:
                    break
                if i != tried and i not in remove_map:
                    ops = pull.msgs if pull is not None else None
                    tried, refused = self._check_batch(qid, i, remove_map, start, ops[-1].born_ts if ops else None,
                                                       record)
                    if refused:  # the put-back of half `tried` failed: the same half again later
                        new_offset = i = tried
                        tried = -1
                        yield PUT_BACK_RETRY_MS
                        continue
                    if tried != i:  # again from there: it stopped at the queue's end as it started, or at a half
                        new_offset = i = tried  # the decisions below take (then `tried` is `i`)
                        tried = -1
                        continue
                if i in remove_map:
                    op_off = remove_map.pop(i)
                    if ctx.v4:
                        done_op.append(op_off)
                    else:
                        s = op_msg_map.get(op_off)
                        if s is not None:
                            s.discard(i)
                            if not s:
                                del op_msg_map[op_off]
                                done_op.append(op_off)
                    new_offset = i = i + 1
                    continue
                status, msg, next_begin = self._get_one(qid, i)
                if msg is None:
                    null_count += 1
                    if null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                        break
                    if status == NO_NEW_MSG:
                        break
                    i = new_offset = next_begin
                    continue
                props = msg.props
                ops = pull.msgs if pull is not None else None
                newest_op_born = ops[-1].born_ts if ops else None
                prepared = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
                decision, times = check_visit(check_times_of(props), msg.born_ts, msg.store_ts,
                                              props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), prepared,
                                              remove_map, ctx.clock(), start, newest_op_born, self.timeout,
                                              self.check_max, self.file_reserved_h)
                if decision == DISCARD or decision == SKIP:  # (time passed since `_check_batch` stopped here)
                    tried = -1
                    continue
                props = put_check_times(props, times)
                if decision in STOPS_ROUND:
                    break  # "Fresh stored" / "New arrived": check it in a later round
                if decision == DONE:  # `checkPrepareQueueOffset`: the op of the original was read
                    done_op.append(remove_map.pop(get_long(prepared)))
                    new_offset = i = i + 1
                    continue
                if decision == PUT_BACK:
                    if self._put_immunity(msg, props):
                        new_offset = i = i + 1
                        continue
                    # the immunity put failed: `checkPrepareQueueOffset` returns false, `isNeedCheck` decides
                    age = ctx.clock() - msg.born_ts
                    imm = check_immunity_time(props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), self.timeout)
                    decision = CHECK if is_need_check(age, imm, newest_op_born, start, self.timeout) else READ_MORE
                if decision == CHECK:  # `_check_batch` puts it back (and goes on from there)
                    done, refused = self._check_batch(qid, i, remove_map, start, newest_op_born, record, True)
                    # a refused put-back of this half: visited again, its immunity put-back first
                    tried = i if refused and done == i else -1
                    new_offset = i = done
                    if refused:
                        yield PUT_BACK_RETRY_MS
                    continue
                else:
                    next_op = pull.next_begin if pull is not None else next_op
                    pull = self._fill(remove_map, op_msg_map, done_op, qid, next_op, half_offset)
                    tried = -1  # more op records: `_check_batch` judges the half again
                    if pull.status != FOUND:
                        if not ctx.v4:
                            yield SLEEP_WHILE_NO_OP
                        elif spun_at == i:
                            # 4.9.8 retries at once; a second empty read for the same half means it
                            # spins, burning real time until the half is old enough: 1 ms per turn
                            yield BUSY_RETRY_49
                        spun_at = i
                    continue
                new_offset = i = i + 1
            if new_offset != half_offset:
                self.offsets[(RMQ_SYS_TRANS_HALF_TOPIC, qid)] = new_offset
            new_op = op_offset
            for d in sorted(done_op):
                if d == new_op:
                    new_op += 1
                elif d > new_op:
                    break
            if new_op != op_offset:
                self.offsets[(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)] = new_op
            m.release_below(RMQ_SYS_TRANS_HALF_TOPIC, qid, new_offset)
            m.release_below(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, new_op)
        record["end"] = ctx.engine.now

    def _check_batch(self, qid: int, i: int, remove_map: dict[int, int], start: int, newest_op_born: int | None,
                     record: dict, checked: bool = False) -> tuple[int, bool]:
        """The walk of `_round` from half `i` over the halves it discards, skips or puts back for a check:
        (the offset `_round`'s other decisions go on from, `i` when nothing was done; whether the put-back of
        the half there failed, to be tried again after PUT_BACK_RETRY_MS). A failed discard is dropped as
        `resolveDiscardMsg` drops it. `checked`: half `i` is put back for a check whatever `check_visit` says
        (its immunity put-back failed and `isNeedCheck` holds).

        The units are read up to the queue's max as the batch starts: the put-backs go to the same
        queue, after it, and the walk stops at the first of them (stored after the round started). The
        rules are `_round`'s, the puts `StoreModel.append`'s (or its size and place written out for a copy kept
        without a `SimMessage` until a reader asks for it) and the events the same rows, in order,
        written a run of one kind at a time (`EventLog.batch`). A half anything else applies
        to (done by an op record, unreadable, stored after the round started, immune, new, not yet
        due for a check) ends the batch before anything is done for it.
        """
        ctx = self.ctx
        m, log, clock = ctx.model, ctx.log, ctx.clock()
        append, message, msgs = m.append, m.message_once, m._msgs  # an original is read once: not cached
        qids: dict[str | None, int | None] = {}  # `_qid` of a REAL_QID text
        check_max, timeout, reserved_h = self.check_max, self.timeout, self.file_reserved_h
        scenario = ctx.scenario
        answers, default_answer, delay = scenario.answers, scenario.default_answer, scenario.answer_delay_ms
        verdicts = self._verdicts
        resolved = self.resolved
        if i < m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid):
            return i, False  # an illegal offset: `_round` jumps
        rows: list[tuple] = []
        kind = ""
        refused = False
        checks = dropped = 0
        done = i
        # the put-backs are placed without a `SimMessage` (`StoreModel._lazy`, built by `_build_copy` when read)
        # where no one needs one at once: nothing keeps the appended records for `--out`, nothing watches the
        # queue and it is kept
        units, bmax, fixed, kept = m.queue_info(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        free = m.put_filter is None  # no fault can refuse a put
        lazy = m._lazy if free and kept and not m.keep_messages \
            and not m._listeners.get((RMQ_SYS_TRANS_HALF_TOPIC, qid)) else None
        deferred = lazy if lazy is not None else {}
        cmt: tuple | None | bool = False  # a discard's queue (`queue_info`) once asked: None unless it keeps nothing
        build, place = self._build_copy, m.place
        for off, unit in m.cq_units(RMQ_SYS_TRANS_HALF_TOPIC, qid, i, m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, qid)):
            if off in remove_map:
                break
            ph = unit[0]  # (CommitLog offset, size, tagsCode)
            e = deferred.get(ph)  # a put-back of an earlier round's batch
            if e is not None:
                msg = None
                facts = e.facts
                text, store_ts = e.times_text, e.store_ts
                real_qid, born, imm_text, prepared = facts.real_qid, facts.born, facts.immunity, facts.prepared
            else:
                msg = msgs.get(ph)  # a put-back of an earlier round, else `message` reads it
                if msg is None:
                    msg = message(ph)
                    if msg is None:
                        break
                facts = None
                ph = msg.phys
                props = msg.props
                text = check_times_of(props)
                born, store_ts = msg.born_ts, msg.store_ts
                imm_text = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
                prepared = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
                qid_text = props.get(PROPERTY_REAL_QUEUE_ID)
                real_qid = qids.get(qid_text, False)
                if real_qid is False:
                    real_qid = qids[qid_text] = _qid(props)
            verdict = verdicts.get(text)
            if verdict is None:
                verdict = verdicts[text] = _verdict(text, check_max)
            _, times, times_text, row_times = verdict
            why, _ = check_visit(text, born, store_ts, imm_text, prepared, remove_map, clock, start, newest_op_born,
                                 timeout, check_max, reserved_h)
            if checked and off == i:
                why = CHECK
            if why == DISCARD or why == SKIP:
                skip = why == SKIP
                if msg is None and cmt is False:
                    cmt = m.queue_info(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0)
                    if cmt.kept or m._listeners.get((RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0)) or not free:
                        cmt = None
                if msg is None and cmt is not None:
                    # `_discard` of a deferred put-back to a queue that keeps nothing: `append`'s size and
                    # place of the copy (its map but for a skip's count, the topic's fixed part)
                    size = e.size - fixed + cmt.fixed
                    if skip:
                        size += len(times_text) - len(text)
                        row_times = times
                    pos = place(size)
                    copy_qo = cmt.base_count + len(cmt.units)
                    cmt.units.append(None)
                    real_topic, uniq = facts.real_topic, facts.uniq
                else:
                    if msg is None:
                        msg = m._materialise(ph)
                        props = msg.props
                    # `_discard`: a copy to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC queue 0; a discarded half's map is
                    # not changed (the re-put shares it), a skipped one's has the incremented count
                    if skip:
                        props = put_check_times(props, times_text)
                        row_times = times
                    res = append(msg.derive(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, props), clock, "transaction")
                    real_topic, uniq = props.get(PROPERTY_REAL_TOPIC), props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                    if not res.ok:
                        rows, kind = _flush(log, ctx.engine.now, kind, rows)
                        log.emit(ctx.engine.now, "transaction", "put_failed", RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0,
                                 uniq, ph, status=res.status, reason=f"{why} (the half message is dropped)")
                        dropped += 1
                        resolved[uniq or str(ph)] = why
                        done = off + 1
                        continue
                    pos, copy_qo = res.message.phys, res.message.queue_offset
                dropped += 1
                resolved[uniq or str(ph)] = why
                if kind != why:
                    rows, kind = _flush(log, ctx.engine.now, kind, rows)
                    kind = why
                rows.append((real_topic, real_qid, uniq, ph, pos, row_times, copy_qo))
                done = off + 1
                continue
            if why != CHECK:
                break  # done by an op, fresh, immune, new or more op records to read: `_round` decides
            # `_put_back` of `_renew(msg, props)` with the incremented count
            if lazy is not None:
                if facts is None:
                    facts = self._copy_facts(msg, real_qid, times_text, fixed)
                # `StoreModel.append` of the copy: its size is the first copy's but for the count's text
                size = facts.size + len(times_text)
                pos = place(size)
                copy_qo = bmax + len(units)
                units.append((pos, size, facts.tags))
                lazy[pos] = _Deferred(build, facts, times_text, clock, size, copy_qo, ph)
                real_topic, uniq, group = facts.real_topic, facts.uniq, facts.group
                if answers:
                    answer = scenario.answer_for(group, uniq, facts.keys, ctx.rng)
                else:
                    answer = default_answer
            else:
                props = put_check_times(props, times_text)
                new = msg.derive(msg.topic, msg.queue_id, props)
                new.flag = 0
                new.reconsume_times = 0
                res = append(new, clock, "transaction")
                if not res.ok:
                    rows, kind = _flush(log, ctx.engine.now, kind, rows)
                    log.emit(ctx.engine.now, "transaction", "put_failed", RMQ_SYS_TRANS_HALF_TOPIC, msg.queue_id,
                             msg.uniq_key, ph, status=res.status, reason="check put-back")
                    refused = True
                    break
                pos, copy_qo = res.message.phys, res.message.queue_offset
                real_topic = props.get(PROPERTY_REAL_TOPIC)
                group = props.get(PROPERTY_PRODUCER_GROUP)
                uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if answers:
                    keys = [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k]
                    answer = scenario.answer_for(group, uniq, keys, ctx.rng)
                else:
                    answer = default_answer
            checks += 1
            if kind != "check":
                rows, kind = _flush(log, ctx.engine.now, kind, rows)
                kind = "check"
            rows.append((real_topic, real_qid, uniq, ph, pos, group, times, copy_qo, answer))
            if answer in ("commit", "rollback"):
                ctx.engine.schedule(lambda p=pos, a=answer: self.end_transaction(p, a), PRODUCER, delay)
            done = off + 1
        _flush(log, ctx.engine.now, kind, rows)
        self.checks += checks
        record["checks"] += checks
        record["discards"] += dropped
        return done, refused

    def _copy_facts(self, msg: SimMessage, real_qid: int | None, times_text: str, fixed: int) -> _CopyFacts:
        """What every later put-back of `msg` shares (`_CopyFacts`). The size is `StoreModel.append`'s for the
        first copy; the map is put in the stored order only when a copy is built (`_build_copy`)."""
        m = self.ctx.model
        props = put_check_times(msg.props, times_text)
        size = m.reput_size(props, fixed, msg.sys_flag, msg.body_len)
        keys = [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k] if self.ctx.scenario.answers else None
        get = props.get
        return _CopyFacts(msg.derive(msg.topic, msg.queue_id, props), props, get(PROPERTY_REAL_TOPIC), real_qid,
                          get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), get(PROPERTY_PRODUCER_GROUP), msg.born_ts,
                          get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET),
                          keys, size - len(times_text), tags_code(props))

    def _build_copy(self, phys: int, e: _Deferred) -> SimMessage:
        """The `SimMessage` of a put-back placed by `_check_batch` (`StoreModel._materialise`): `_renew`'s
        copy of its source as `StoreModel.append` leaves it (its map in the stored order: the first copy's,
        which a later copy, with the same keys, keeps)."""
        facts, times_text = e.facts, e.times_text
        src = facts.source
        props = put_check_times(facts.props, times_text)
        order = _order(tuple(props), self.ctx.model.capacity).order
        if order is not None:
            props = {k: props[k] for k in order}
        new = src.derive(src.topic, src.queue_id, props)
        new.flag = 0
        new.reconsume_times = 0
        new.phys, new.size, new.store_ts, new.queue_offset = phys, e.size, e.store_ts, e.queue_offset
        new.service = "transaction"
        new.tags_code = facts.tags
        new.source_phys = e.source_phys
        return new

    # ----- puts -----
    def _renew(self, msg: SimMessage, props: dict[str, str]) -> SimMessage:
        """`renewHalfMessageInner`: flag and reconsume times are not copied."""
        new = msg.derive(msg.topic, msg.queue_id, props)
        new.flag = 0
        new.reconsume_times = 0
        return new

    def _put_immunity(self, msg: SimMessage, props: dict[str, str]) -> bool:
        ctx = self.ctx
        p = dict(props)
        p[PROPERTY_WAIT_STORE_MSG_OK] = "false"  # setWaitStoreMsgOK(false) before this path rebuilds the string
        if PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET not in p:
            p[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(msg.queue_offset)
        res = ctx.put(self._renew(msg, p), "transaction")
        if res.ok:
            n = res.message
            ctx.log.batch(ctx.engine.now, "transaction", "put_back", props.get(PROPERTY_REAL_TOPIC),
                          _qid(props), msg.uniq_key, msg.phys, n.phys, reason="immunity",
                          check_times=_long(check_times_of(props)), queue_offset=n.queue_offset)
        else:
            ctx.log.emit(ctx.engine.now, "transaction", "put_failed", RMQ_SYS_TRANS_HALF_TOPIC, msg.queue_id,
                         msg.uniq_key, msg.phys, status=res.status, reason="immunity put-back")
        return res.ok

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
        if answer == "commit":
            props = dict(half.props)
            final = half.derive(props.get(PROPERTY_REAL_TOPIC, ""), _qid(props) or 0, props)
            final.sys_flag = (half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE
            final.prepared_tx_offset = half.phys
            final.reconsume_times = half.reconsume_times
            res = ctx.put(final, "transaction")
            if not res.ok:
                ctx.log.emit(ctx.engine.now, "transaction", "put_failed", final.topic, final.queue_id,
                             half.uniq_key, half.phys, status=res.status, reason="commit")
                return
            new_phys = res.message.phys
        self.resolved[half.uniq_key or str(phys)] = answer
        ctx.log.batch(ctx.engine.now, "transaction", answer, half.props.get(PROPERTY_REAL_TOPIC), _qid(half.props),
                      half.uniq_key, half.phys, new_phys, queue_offset=half.queue_offset)
        if answer == "commit":
            n = res.message
            ctx.log.batch(ctx.engine.now, "transaction", "deliver", n.topic, n.queue_id, n.uniq_key, half.phys,
                          new_phys, queue_offset=n.queue_offset, reason="commit")
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
        props = {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "true",
                 PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uid}
        op = SimMessage(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, props, body=body.encode(), born_ts=ctx.clock())
        ctx.put(op, "transaction")

    def flush_ops(self) -> None:
        for qid in sorted(self.op_pending):
            q = self.op_pending[qid]
            while q:
                body = ""
                while q and len(body) < OP_MSG_MAX_SIZE:
                    body += q.pop(0)
                self._write_op(qid, body)
            self.op_last_write[qid] = self.ctx.clock()

    def _op_batch_loop(self):
        """TransactionalOpBatchService: a queue's entries go out `interval` after its last write."""
        ctx = self.ctx
        while True:
            due = None
            for qid in sorted(self.op_pending):
                q = self.op_pending[qid]
                if not q:
                    continue
                size = sum(len(s) for s in q)
                at = self.op_last_write.get(qid, ctx.clock()) + self.op_interval
                if size >= OP_MSG_MAX_SIZE or at <= ctx.clock():
                    body = ""
                    while q and len(body) < OP_MSG_MAX_SIZE:
                        body += q.pop(0)
                    self._write_op(qid, body)
                    self.op_last_write[qid] = ctx.clock()
                    at = ctx.clock() + self.op_interval if q else None
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
                out[k] = {"uniq_key": msg.uniq_key, "queue_offset": off, "physical_offset": msg.phys,
                          "check_times": _long(check_times_of(msg.props) or "0"),
                          "reason": "waiting for a check round or a producer answer"}
        return list(out.values())


def _flush(log, now: int, kind: str, rows: list) -> tuple[list, str]:
    """The events of a run of one kind (`EventLog.batch`); an empty run and no kind after it."""
    if rows:
        topic, queue_id, uniq_key, phys, new_phys, *detail = zip(*rows, strict=True)
        keys = _CHECK_KEYS if kind == "check" else _DISCARD_KEYS
        log.batch(now, "transaction", kind, topic, queue_id, uniq_key, phys, new_phys,
                  **dict(zip(keys, detail, strict=True)))
    return [], ""


def _verdict(text: str | None, check_max: int) -> tuple[bool, int | None, str | None, int | None]:
    """`need_discard(text, check_max)` and what a visit writes of it: (discard?, the count put in memory,
    its text, the count a discard's event shows: `_long` of the property left as it is)."""
    discard, times = need_discard(text, check_max)
    return discard, times, None if times is None else str(times), _long(text) if discard else None


def _qid(props: dict[str, str]) -> int | None:
    v = _long(props.get(PROPERTY_REAL_QUEUE_ID))
    return None if v == -1 else v
