"""The reference model of the transaction check: the per-message walk of `TransactionalMessageServiceImpl.check`,
one half at a time, every put-back and discard a `SimMessage` through `StoreModel.append` (`_put_back`,
`_discard`). The library's `_check_batch` must write the same event log, byte for byte (`test_batch_check.py`,
`test_transaction_reference.py`)."""

from mqtool.formats.names import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_WAIT_STORE_MSG_OK,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
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
    put_check_times,
)
from mqtool.simulate.engine import PRODUCER
from mqtool.simulate.model import SimMessage
from mqtool.simulate.transaction import (
    MAX_PROCESS_TIME_LIMIT,
    MAX_RETRY_COUNT_WHEN_HALF_NULL,
    PUT_BACK_RETRY_MS,
    TransactionService,
    _real_names,
    _renew,
    _Walk,
)

NO_NEW_MSG, FOUND, OFFSET_ILLEGAL = "NO_NEW_MSG", "FOUND", "OFFSET_ILLEGAL"  # `getHalfMsg`'s statuses


class ReferenceTransaction(TransactionService):
    """`TransactionService` with each check round walked half by half."""

    def _walk(self, w: _Walk):
        """The loop of `check` over one half queue, one half at a time; the half offset it ends at (the library's
        `_round` around it reads the offsets and writes them back)."""
        ctx, qid, start = self.ctx, w.qid, w.start
        remove_map, done_op = w.remove_map, w.done_op
        null_count = 1
        spun_at = -1
        new_offset = i = w.mini
        while True:
            if ctx.clock() - start > MAX_PROCESS_TIME_LIMIT:
                break
            if i in remove_map:
                w.remove(i, ctx.v4)
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
            newest_op_born = w.newest_op_born
            prepared = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
            decision, times = check_visit(
                check_times_of(props),
                msg.born_ts,
                msg.store_ts,
                props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS),
                prepared,
                remove_map,
                ctx.clock(),
                start,
                newest_op_born,
                ctx.config.transaction_timeout,
                ctx.config.transaction_check_max,
                ctx.config.file_reserved_time,
            )
            props = dict(props) if decision == DISCARD else put_check_times(props, times)
            if decision == DISCARD or decision == SKIP:
                self._discard(msg, props, decision)
                new_offset = i = i + 1
                continue
            if decision in STOPS_ROUND:
                break  # "Fresh stored" / "New arrived": check it in a later round
            if decision == DONE:  # `checkPrepareQueueOffset`: the op of the original was read
                done_op.append(remove_map.pop(get_long(prepared)))
                new_offset = i = i + 1
                continue
            if decision == PUT_BACK:
                if self._put_immunity_one(msg, props):
                    new_offset = i = i + 1
                    continue
                # the immunity put failed: `checkPrepareQueueOffset` returns false, `isNeedCheck` decides
                age = ctx.clock() - msg.born_ts
                timeout = ctx.config.transaction_timeout
                imm = check_immunity_time(props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), timeout)
                decision = CHECK if is_need_check(age, imm, newest_op_born, start, timeout) else READ_MORE
            if decision == CHECK:
                if not self._put_back(msg, props):
                    yield PUT_BACK_RETRY_MS
                    continue
            else:
                delay, spun_at = self._read_more(w, i, spun_at)
                if delay:
                    yield delay
                continue
            new_offset = i = i + 1
        return new_offset

    def _get_one(self, qid: int, offset: int) -> tuple[str, SimMessage | None, int]:
        """`getHalfMsg`: (status, the half at `offset` or None, the next offset)."""
        m = self.ctx.model
        if offset >= m.cq_max(RMQ_SYS_TRANS_HALF_TOPIC, qid):
            return NO_NEW_MSG, None, offset
        if offset < m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid):
            return OFFSET_ILLEGAL, None, m.cq_min(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        return FOUND, m.cq_message(RMQ_SYS_TRANS_HALF_TOPIC, qid, offset), offset + 1

    def _put_immunity_one(self, msg: SimMessage, props: dict[str, str]) -> bool:
        """`putImmunityMsgBackToHalfQueue`: a copy with TRAN_PREPARED_QUEUE_OFFSET, no check request."""
        ctx = self.ctx
        p = dict(props)
        p[PROPERTY_WAIT_STORE_MSG_OK] = "false"  # setWaitStoreMsgOK(false) before this path rebuilds the string
        if PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET not in p:
            p[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(msg.queue_offset)
        res = ctx.put(_renew(msg, p), "transaction")
        if res.ok:
            n = res.message
            ctx.log.batch(
                ctx.engine.now,
                "transaction",
                "put_back",
                *_real_names(props),
                msg.phys,
                n.phys,
                reason="immunity",
                check_times=get_long(check_times_of(props)),
                queue_offset=n.queue_offset,
            )
        else:
            _put_failed(ctx, msg, res.status, "immunity put-back")
        return res.ok

    def _put_back(self, msg: SimMessage, props: dict[str, str]) -> bool:
        ctx = self.ctx
        res = ctx.put(_renew(msg, props), "transaction")
        if not res.ok:
            _put_failed(ctx, msg, res.status, "check put-back")
            return False
        copy = res.message
        group = props.get(PROPERTY_PRODUCER_GROUP)
        scenario = ctx.scenario
        if scenario.answers:
            keys = [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k]
            answer = scenario.answer_for(group, msg.uniq_key, keys, ctx.rng)
        else:
            answer = scenario.default_answer
        if not ctx.log.keep:
            ctx.log.tally("check")
        else:
            ctx.log.batch(
                ctx.engine.now,
                "transaction",
                "check",
                *_real_names(props),
                msg.phys,
                copy.phys,
                producer_group=group,
                check_times=get_long(check_times_of(props)),
                queue_offset=copy.queue_offset,
                answer=answer,
            )
        if answer in ("commit", "rollback"):
            ctx.engine.schedule(lambda: self.end_transaction(copy.phys, answer), PRODUCER, ctx.scenario.answer_delay_ms)
        return True

    def _discard(self, msg: SimMessage, props: dict[str, str], why: str) -> None:
        """`resolveDiscardMsg`: a copy to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC queue 0 (TCMT_QUEUE_NUMS = 1)."""
        ctx = self.ctx
        new = msg.derive(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(props))
        res = ctx.put(new, "transaction")
        self.resolved[msg.uniq_key or str(msg.phys)] = why
        if res.ok:
            ctx.log.batch(
                ctx.engine.now,
                "transaction",
                why,
                *_real_names(props),
                msg.phys,
                res.message.phys,
                check_times=get_long(check_times_of(props)),
                queue_offset=res.message.queue_offset,
            )
        else:
            ctx.log.emit(
                ctx.engine.now,
                "transaction",
                "put_failed",
                RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
                0,
                msg.uniq_key,
                msg.phys,
                status=res.status,
                reason=f"{why} (the half message is dropped)",
            )


def _put_failed(ctx, msg: SimMessage, status, reason: str) -> None:
    ctx.log.emit(
        ctx.engine.now,
        "transaction",
        "put_failed",
        RMQ_SYS_TRANS_HALF_TOPIC,
        msg.queue_id,
        msg.uniq_key,
        msg.phys,
        status=status,
        reason=reason,
    )
