"""The broker's put paths: the records a real broker writes for each kind of send (spec §2.6, §4, §6, §7).

Each function mirrors one RocketMQ 5.3.1 code path (4.9.8 where it differs) and appends through a
`StoreWriter`, returning the written `MessageRecord`:

- `put_message`: `SendMessageProcessor.sendMessage` (plain), `put_batch`: `MessageExtEncoder.encode(batch)`
- `put_delay_message`: `HookUtils.transformDelayLevelMessage` (4.x: `CommitLog.asyncPutMessage`)
- `put_timer_message` / `enqueue_timer`: `HookUtils.transformTimerMessage`, `TimerMessageStore.doEnqueue`
- `put_half_message`: `TransactionalMessageBridge.parseHalfMessageInner`
- `commit_half`: `EndTransactionProcessor.endMessageTransaction`; `put_op_message`: `getOpMessage` +
  `makeOpMessageInner` (5.x batched body "0,1,"; 4.x one op per end, body "0")
- `put_back_half` / `discard_half`: `renewHalfMessageInner` / `toMessageExtBrokerInner`
- `send_back`: `AbstractSendMessageProcessor.consumerSendMsgBack` (retry via the schedule topic, or DLQ)
- `deliver_delayed`: `ScheduleMessageService.messageTimeUp`; `deliver_timer`: `TimerMessageStore.convert`

`properties` is the broker's `HashMap` contents in insertion order (a client's wire order, as
`string2messageProperties` reads it). Broker-built strings are serialised in `HashMap` iteration order:
capacity 128 on 5.x, 16 on 4.x (`capacity=` overrides; op messages are always 16, a `new Message`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict, Unpack

from mqtool.builder.writer import (
    DEFAULT_STORE_HOST,
    Properties,
    StoreWriter,
    to_properties_string,
)
from mqtool.formats.javahash import java_string_hash
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    REMOVE_TAG,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TIMER_TOPIC,
)
from mqtool.formats.opbody import build_op_body
from mqtool.formats.properties import broker_properties, build_properties, parse_pairs
from mqtool.formats.sysflag import (
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
)
from mqtool.rules.schedule import delay_level_2_queue_id, transform_delay_level_message
from mqtool.rules.timer import LONG_MAX, convert_properties, do_enqueue, put_at_once, timer_out_ms
from mqtool.rules.transaction import put_check_times

TIMER_PROPS = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)


class PutRejected(ValueError):
    """The broker would refuse this put; `status` is the `PutMessageStatus` it answers."""

    def __init__(self, status: str, reason: str):
        super().__init__(f"{status}: {reason}")
        self.status = status


class RecordFields(TypedDict, total=False):
    """Record fields a caller may set on a client put (see `StoreWriter.append_message`)."""

    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_host: str
    reconsume_times: int


# --------------------------------------------------------------------- property maps


def props_map(properties: Properties | dict[str, str]) -> dict[str, str]:
    """`string2messageProperties`: insertion order; a repeated name keeps its first place, last value."""
    if isinstance(properties, dict):
        return dict(properties)
    pairs = parse_pairs(properties) if isinstance(properties, str) else properties
    out: dict[str, str] = {}
    for k, v in pairs:
        out[k] = v
    return out


def capacity_for(w: StoreWriter, capacity: int | None = None) -> int:
    """Initial capacity of the broker's property maps: 128 on 5.x, 16 on 4.x."""
    if capacity is not None:
        return capacity
    return 128 if w.v5 else 16


def serialise(w: StoreWriter, props: dict[str, str] | Sequence[tuple[str, str]],
              capacity: int | None = None) -> str:
    """`messageProperties2String` of a broker `HashMap`; 4.x drops the last separator (5.x keeps it)."""
    raw = broker_properties(props, capacity_for(w, capacity))
    return raw if w.v5 else raw.removesuffix("\x02")


def _record_copy(rec: MessageRecord) -> RecordFields:
    """Fields most re-puts copy from the record they read back."""
    return RecordFields(flag=rec.flag, sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
                        born_host=rec.born_host, store_host=rec.store_host, reconsume_times=rec.reconsume_times)


# --------------------------------------------------------------------- client puts


def put_message(w: StoreWriter, topic: str, queue_id: int, body: bytes = b"", properties: Properties = (), *,
                store_timestamp: int, client_order: bool = False, capacity: int | None = None,
                **fields: Unpack[RecordFields]) -> MessageRecord:
    """A plain send. The broker re-serialises the client's map (`SendMessageProcessor`), so the stored
    order is HashMap order; `client_order=True` writes the pairs exactly as given instead."""
    raw = to_properties_string(properties) if client_order else serialise(w, props_map(properties), capacity)
    return w.append_message(topic, queue_id, body, raw, store_timestamp=store_timestamp, **fields)


def put_batch(w: StoreWriter, topic: str, queue_id: int, messages: Sequence[tuple[bytes, Properties]],
              batch_properties: Properties = (), *, store_timestamp: int, capacity: int | None = None,
              **fields: Unpack[RecordFields]) -> list[MessageRecord]:
    """A client batch: each record keeps its own client string, then the batch's broker-ordered map.

    `MessageExtEncoder.encode(MessageExtBatch)` appends the batch properties (CLUSTER, the batch's
    UNIQ_KEY/WAIT...) after each message's, so names can appear twice. All records share one file.
    """
    batch = serialise(w, props_map(batch_properties), capacity) if batch_properties else ""
    items = []
    for body, props in messages:
        own = props if isinstance(props, str) else build_properties(props)
        sep = "\x02" if own and batch and not own.endswith("\x02") else ""
        items.append((body, own + sep + batch))
    return w.append_batch(topic, queue_id, items, store_timestamp=store_timestamp, **fields)


def _to_schedule(w: StoreWriter, topic: str, queue_id: int, props: dict[str, str],
                 capacity: int | None) -> tuple[str, int, str]:
    """`transformDelayLevelMessage`: (SCHEDULE_TOPIC_XXXX, level - 1, rebuilt properties)."""
    props, level = transform_delay_level_message(props, topic, queue_id, len(w.config.delay_levels_ms()), w.v5)
    return RMQ_SYS_SCHEDULE_TOPIC, delay_level_2_queue_id(level), serialise(w, props, capacity)


def put_delay_message(w: StoreWriter, topic: str, queue_id: int, body: bytes = b"", properties: Properties = (),
                      *, store_timestamp: int, level: int | None = None, capacity: int | None = None,
                      **fields: Unpack[RecordFields]) -> MessageRecord:
    """A delay-level send: stored on `SCHEDULE_TOPIC_XXXX` queue level-1 with REAL_TOPIC/REAL_QID.

    `level` sets DELAY like `Message.setDelayTimeLevel`; otherwise the DELAY property decides.
    """
    props = props_map(properties)
    if level is not None:
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    if int(props.get(PROPERTY_DELAY_TIME_LEVEL, "0")) <= 0:
        raise ValueError("a delay-level put needs DELAY > 0")
    if fields.get("sys_flag", 0) & TRANSACTION_MASK in (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK):
        raise ValueError("prepared/rollback records are not delayed (HookUtils.handleScheduleMessage)")
    new_topic, qid, raw = _to_schedule(w, topic, queue_id, props, capacity)
    return w.append_message(new_topic, qid, body, raw, store_timestamp=store_timestamp, **fields)


def timer_deliver_ms(props: dict[str, str], now_ms: int) -> int:
    """`transformTimerMessage`: TIMER_DELAY_SEC, then TIMER_DELAY_MS, then TIMER_DELIVER_MS."""
    try:
        if PROPERTY_TIMER_DELAY_SEC in props:
            return now_ms + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        if PROPERTY_TIMER_DELAY_MS in props:
            return now_ms + int(props[PROPERTY_TIMER_DELAY_MS])
        return int(props[PROPERTY_TIMER_DELIVER_MS])
    except (KeyError, ValueError) as e:
        raise PutRejected("WHEEL_TIMER_MSG_ILLEGAL", f"unparsable timer property ({e})") from e


def put_timer_message(w: StoreWriter, topic: str, queue_id: int, body: bytes = b"", properties: Properties = (),
                      *, store_timestamp: int, now_ms: int | None = None, write_time_ms: int | None = None,
                      enqueue: bool = True, capacity: int | None = None,
                      **fields: Unpack[RecordFields]) -> MessageRecord:
    """A timer send (5.x): stored on `rmq_sys_wheel_timer` queue 0 with TIMER_OUT_MS, then enqueued.

    `now_ms` is the broker clock at the hook (default: the store timestamp); `write_time_ms` the
    enqueue service's write time (default: the store timestamp, floored to the precision).
    A DELAY level wins (delay path); a due time not in the future stores a plain message.
    `record.extra["timerlog_pos"]` holds the TimerLog unit's offset when one was written.
    """
    if not w.v5:
        raise ValueError("4.x has no timer wheel: TIMER_* properties are ignored there")
    props = props_map(properties)
    if int(props.get(PROPERTY_DELAY_TIME_LEVEL, "0") or 0) > 0:
        return put_delay_message(w, topic, queue_id, body, props, store_timestamp=store_timestamp,
                                 capacity=capacity, **fields)
    if not any(name in props for name in TIMER_PROPS) or PROPERTY_TIMER_OUT_MS in props or topic == TIMER_TOPIC:
        raise ValueError("not a timer message (HookUtils.checkIfTimerMessage)")
    now = store_timestamp if now_ms is None else now_ms
    deliver = timer_deliver_ms(props, now)
    if deliver <= now:
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            raise PutRejected("WHEEL_TIMER_MSG_ILLEGAL", "a cancel for a time already due")
        return put_message(w, topic, queue_id, body, props, store_timestamp=store_timestamp,
                           capacity=capacity, **fields)
    if deliver - now > w.config.timer_max_delay_sec * 1000:
        raise PutRejected("WHEEL_TIMER_MSG_ILLEGAL", f"due in {deliver - now} ms, beyond timerMaxDelaySec")
    props[PROPERTY_TIMER_OUT_MS] = str(timer_out_ms(deliver, w.wheel.precision_ms))
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    rec = w.append_message(TIMER_TOPIC, 0, body, serialise(w, props, capacity),
                           store_timestamp=store_timestamp, **fields)
    if enqueue:
        enqueue_timer(w, rec, store_timestamp if write_time_ms is None else write_time_ms)
    return rec


def put_timer_cancel(w: StoreWriter, target: MessageRecord, properties: Properties = (), *, store_timestamp: int,
                     body: bytes = b"cancel", now_ms: int | None = None, write_time_ms: int | None = None,
                     capacity: int | None = None, **fields: Unpack[RecordFields]) -> MessageRecord:
    """A cancel for a stored timer message: TIMER_DEL_UNIQKEY = the target's UNIQ_KEY, same deliver time.

    The 5.3.1 dequeue compares the key with the target's bare UNIQ_KEY (`MessageClientIDSetter.getUniqID`).
    Without a timer property of its own the cancel aims at the target's TIMER_OUT_MS slot.
    """
    target_props = target.properties
    props = {PROPERTY_TIMER_DEL_UNIQKEY: target_props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX], **props_map(properties)}
    if not any(name in props for name in TIMER_PROPS):
        # OUT + 1 rounds back down to OUT (OUT itself, an exact multiple, would move one slot earlier)
        props[PROPERTY_TIMER_DELIVER_MS] = str(int(target_props[PROPERTY_TIMER_OUT_MS]) + 1)
    return put_timer_message(w, target_props[PROPERTY_REAL_TOPIC], int(target_props[PROPERTY_REAL_QUEUE_ID]),
                             body, props,
                             store_timestamp=store_timestamp, now_ms=now_ms, write_time_ms=write_time_ms,
                             capacity=capacity, **fields)


def enqueue_timer(w: StoreWriter, rec: MessageRecord, write_time_ms: int) -> int | None:
    """`TimerMessageStore.doEnqueue`: the TimerLog unit and slot for a timer-topic record.

    Returns the unit's TimerLog offset, or None when the record was already due at the write time
    (it goes straight to delivery). A time beyond the roll window is parked at +window (or +window/2
    when it would then be due within a third of a window) with magic ROLL; a cancel adds DELETE and
    decrements the slot's num.
    """
    precision = w.wheel.precision_ms
    write = write_time_ms // precision * precision
    props = rec.properties
    delayed = int(props[PROPERTY_TIMER_OUT_MS])
    if put_at_once(delayed, write):
        return None
    is_delete = PROPERTY_TIMER_DEL_UNIQKEY in props
    delayed, magic = do_enqueue(delayed, write, w.config.timer_roll_window_slots(), precision, is_delete)
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    slot = w.wheel.get_slot(delayed)
    pos = w.append_timerlog_unit(slot.last_pos, magic, write, delayed - write, rec.physical_offset,
                                 rec.total_size, java_string_hash(real_topic) if real_topic is not None else 0)
    w.wheel.put_slot(delayed, pos if slot.first_pos == -1 else slot.first_pos, pos,
               slot.num - 1 if is_delete else slot.num + 1, slot.magic)
    rec.extra["timerlog_pos"] = pos
    return pos


# --------------------------------------------------------------------- transactions


def put_half_message(w: StoreWriter, topic: str, queue_id: int, body: bytes = b"", properties: Properties = (),
                     *, store_timestamp: int, producer_group: str | None = None, capacity: int | None = None,
                     **fields: Unpack[RecordFields]) -> MessageRecord:
    """A transactional prepare: stored on the half topic queue 0 as NOT_TYPE with REAL_TOPIC/REAL_QID.

    5.x adds `__transactionId__` = UNIQ_KEY; TRAN_MSG (and PGROUP when given) are the client's.
    """
    props = props_map(properties)
    props.setdefault(PROPERTY_TRANSACTION_PREPARED, "true")
    if producer_group is not None:
        props.setdefault(PROPERTY_PRODUCER_GROUP, producer_group)
    if w.v5 and props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
        props[PROPERTY_TRANSACTION_ID] = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    fields = RecordFields(**fields)
    fields["sys_flag"] = fields.get("sys_flag", TRANSACTION_PREPARED) & ~TRANSACTION_MASK | TRANSACTION_NOT_TYPE
    return w.append_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, body, serialise(w, props, capacity),
                            store_timestamp=store_timestamp, **fields)


def commit_half(w: StoreWriter, half: MessageRecord, *, store_timestamp: int,
                capacity: int | None = None) -> MessageRecord:
    """The committed record: REAL_TOPIC/REAL_QID, sysFlag COMMIT, PREPARED TRANSACTION OFFSET = the half's.

    The string is built before REAL_TOPIC, REAL_QID and TRAN_MSG leave the map, so all stay in the bytes.
    """
    props = props_map(half.properties_raw)
    fields = _record_copy(half)
    fields["sys_flag"] = half.sys_flag & ~TRANSACTION_MASK | TRANSACTION_COMMIT
    return w.append_message(props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID]), half.body,
                            serialise(w, props, capacity),
                            store_timestamp=store_timestamp, prepared_transaction_offset=half.physical_offset,
                            **fields)


def op_body(w: StoreWriter, half_queue_offsets: Sequence[int]) -> bytes:
    """5.x: every offset followed by ','; 4.x: one offset per op message, no separator."""
    return build_op_body(half_queue_offsets, w.v5)


def put_op_message(w: StoreWriter, half_queue_offsets: Sequence[int], *, store_timestamp: int,
                   half_queue_id: int = 0, born_timestamp: int | None = None,
                   broker_host: str = DEFAULT_STORE_HOST) -> MessageRecord:
    """The op (remove) record for ended halves: tag `d`, born and stored by the broker itself.

    It is a `new Message(opTopic, "d", body)`: a 16-bucket map (TAGS, WAIT) on 5.x too; the UNIQ_KEY
    set afterwards never reaches the stored string.
    """
    raw = serialise(w, [(PROPERTY_TAGS, REMOVE_TAG), (PROPERTY_WAIT_STORE_MSG_OK, "true")], 16)
    return w.append_message(RMQ_SYS_TRANS_OP_HALF_TOPIC, half_queue_id, op_body(w, half_queue_offsets), raw,
                            store_timestamp=store_timestamp, born_host=broker_host, store_host=broker_host,
                            born_timestamp=store_timestamp if born_timestamp is None else born_timestamp)


def put_back_half(w: StoreWriter, half: MessageRecord, *, store_timestamp: int, check_times: int,
                  immunity: bool = False, capacity: int | None = None) -> MessageRecord:
    """A check round's copy of a half at the end of the half queue (`renewHalfMessageInner`).

    TRANSACTION_CHECK_TIMES is already updated in the map; flag and reconsume times are not copied.
    `immunity=True` is `renewImmunityHalfMessageInner`: WAIT=false and TRAN_PREPARED_QUEUE_OFFSET.
    """
    props = put_check_times(props_map(half.properties_raw), check_times)
    if immunity:
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        props[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
                                                                      str(half.queue_offset))
    return w.append_message(half.topic, half.queue_id, half.body, serialise(w, props, capacity),
                            store_timestamp=store_timestamp, sys_flag=half.sys_flag,
                            born_timestamp=half.born_timestamp, born_host=half.born_host,
                            store_host=half.store_host)


def discard_half(w: StoreWriter, half: MessageRecord, *, store_timestamp: int, check_times: int | None = None,
                 capacity: int | None = None) -> MessageRecord:
    """A half checked too often (or too old) moved to `RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC` queue 0.

    `check_times` is the TRANSACTION_CHECK_TIMES the check put in the map first (None: unchanged,
    as when the count had reached `transactionCheckMax`).
    """
    props = props_map(half.properties_raw)
    if check_times is not None:
        props = put_check_times(props, check_times)
    return w.append_message(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, half.body, serialise(w, props, capacity),
                            store_timestamp=store_timestamp, **_record_copy(half))


# --------------------------------------------------------------------- retry and DLQ


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def send_back(w: StoreWriter, original: MessageRecord, group: str, *, store_timestamp: int, delay_level: int = 0,
              max_reconsume_times: int = 16, queue_id: int = 0, store_host: str | None = None,
              capacity: int | None = None) -> MessageRecord:
    """A consumer's send-back of a failed message (`consumerSendMsgBack`).

    Retry: DELAY = `delay_level` or 3 + reconsumeTimes, then the delay rewrite, so the record lands on
    `SCHEDULE_TOPIC_XXXX` with REAL_TOPIC `%RETRY%group` (it becomes a `%RETRY%` record on delivery).
    DLQ (reconsumeTimes >= max or delay_level < 0): `%DLQ%group` at once, with DELAY=0 in the map.
    Both add RETRY_TOPIC (if absent) and ORIGIN_MESSAGE_ID; reconsume times + 1.
    """
    props = props_map(original.properties_raw)
    props.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    to_dlq = original.reconsume_times >= max_reconsume_times or delay_level < 0
    if to_dlq:
        topic = dlq_topic(group)
        props[PROPERTY_DELAY_TIME_LEVEL] = "0"
    else:
        topic = retry_topic(group)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level or 3 + original.reconsume_times)
    props[PROPERTY_ORIGIN_MESSAGE_ID] = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or original.msg_id
    fields = _record_copy(original)
    fields["store_host"] = store_host or original.store_host
    fields["reconsume_times"] = original.reconsume_times + 1
    if to_dlq:
        if len(topic.encode()) > 127:
            raise PutRejected("MESSAGE_ILLEGAL", "a non-retry topic longer than 127 bytes")
        return w.append_message(topic, queue_id, original.body, serialise(w, props, capacity),
                                store_timestamp=store_timestamp, **fields)
    new_topic, qid, raw = _to_schedule(w, topic, queue_id, props, capacity)
    return w.append_message(new_topic, qid, original.body, raw, store_timestamp=store_timestamp, **fields)


# --------------------------------------------------------------------- deliveries


def deliver_delayed(w: StoreWriter, scheduled: MessageRecord, *, store_timestamp: int,
                    capacity: int | None = None) -> MessageRecord:
    """`messageTimeUp`: back to REAL_TOPIC/REAL_QID; DELAY, REAL_TOPIC, REAL_QID stay in the bytes."""
    props = props_map(scheduled.properties_raw)
    raw = serialise(w, props, capacity)  # built before DELAY / TIMER_* are cleared from the map
    return w.append_message(props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID]), scheduled.body, raw,
                            store_timestamp=store_timestamp, **_record_copy(scheduled))


def deliver_timer(w: StoreWriter, timer_rec: MessageRecord, *, enqueue_ms: int, store_timestamp: int,
                  dequeue_ms: int | None = None, roll: bool = False, capacity: int | None = None) -> MessageRecord:
    """`TimerMessageStore.convert` (`rules.timer.convert_properties`): `enqueue_ms` is the unit's write time
    (`LONG_MAX` for a record due on arrival, -1 for none); a roll stays on the timer topic.
    """
    props = props_map(timer_rec.properties_raw)
    if PROPERTY_TIMER_DEL_UNIQKEY in props and not roll:
        raise ValueError("a cancel record is never delivered (doPut returns PUT_NO_RETRY)")
    props = convert_properties(props, enqueue_ms, roll, store_timestamp if dequeue_ms is None else dequeue_ms)
    raw = serialise(w, props, capacity)
    topic, qid = ((timer_rec.topic, timer_rec.queue_id) if roll
                  else (props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID])))
    return w.append_message(topic, qid, timer_rec.body, raw, store_timestamp=store_timestamp,
                            **_record_copy(timer_rec))


__all__ = [
    "LONG_MAX", "PutRejected", "RecordFields",
    "capacity_for", "commit_half", "deliver_delayed", "deliver_timer",
    "discard_half", "dlq_topic", "enqueue_timer", "op_body", "props_map", "put_back_half",
    "put_batch", "put_delay_message", "put_half_message", "put_message", "put_op_message", "put_timer_cancel",
    "put_timer_message", "retry_topic", "send_back", "serialise", "timer_deliver_ms",
]
