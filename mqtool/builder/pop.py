"""POP checkpoint and ack records into the revive topic (spec §15), bodies from `formats.pop`.

Mirrors rocketmq-all-5.3.1 `PopMessageProcessor.buildCkMsg` / `appendCheckPoint` (tag `ck`, UNIQ_KEY
`genCkUniqueId`, TIMER_DELIVER_MS = revive time - ackTimeInterval) and `AckMessageProcessor.appendAck`
(tag `ack` or `bAck`, UNIQ_KEY `genAckUniqueId`, TIMER_DELIVER_MS = popTime + invisibleTime). Both are put
as timer messages (`builder.broker.put_timer_message`: the `rmq_sys_wheel_timer` copy, stage "timer"),
or straight into the revive queue when already due; `builder.broker.deliver_timer` makes the delivered
copy. Property maps are `new MessageExtBrokerInner`'s HashMap(16).
"""

from __future__ import annotations

from mqtool.builder.broker import put_message, put_timer_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from mqtool.formats.pop import ack_body, batch_ack_body, ck_body
from mqtool.rules.pop import ack_deliver_time, ck_deliver_time, gen_ack_unique_id, gen_ck_unique_id

MAP_CAPACITY = 16  # a new MessageExtBrokerInner's property map


def put_revive_record(w: StoreWriter, revive_topic: str, revive_queue_id: int, tag: str, body: bytes, uniq_key: str,
                      deliver_ms: int, *, store_timestamp: int, store_host: str = "127.0.0.1:10911") -> MessageRecord:
    """`putMessageToSpecificQueue` of a ck/ack message: through the timer hook unless due at `store_timestamp`."""
    props = {PROPERTY_TAGS: tag, PROPERTY_TIMER_DELIVER_MS: str(deliver_ms),
             PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key}
    fields = dict(born_timestamp=store_timestamp, born_host=store_host, store_host=store_host)
    if deliver_ms > store_timestamp:
        return put_timer_message(w, revive_topic, revive_queue_id, body, props, store_timestamp=store_timestamp,
                                 capacity=MAP_CAPACITY, **fields)
    return put_message(w, revive_topic, revive_queue_id, body, props, store_timestamp=store_timestamp,
                       capacity=MAP_CAPACITY, **fields)


def put_checkpoint(w: StoreWriter, revive_topic: str, revive_queue_id: int, topic: str, group: str, queue_id: int,
                   start_offset: int, diffs: list[int], pop_time: int, invisible_time: int, broker_name: str, *,
                   store_timestamp: int, bit_map: int = 0, revive_offset: int = 0) -> MessageRecord:
    """A pop's checkpoint (`buildCkMsg`): `diffs` are the popped offsets minus `start_offset`."""
    body = ck_body(topic, group, queue_id, start_offset, diffs, pop_time, invisible_time, broker_name, bit_map,
                   revive_offset)
    uniq = gen_ck_unique_id(topic, queue_id, start_offset, group, pop_time, broker_name)
    return put_revive_record(w, revive_topic, revive_queue_id, CK_TAG, body, uniq,
                             ck_deliver_time(pop_time, invisible_time), store_timestamp=store_timestamp)


def put_ack(w: StoreWriter, revive_topic: str, revive_queue_id: int, topic: str, group: str, queue_id: int,
            start_offset: int, ack_offsets: list[int], pop_time: int, invisible_time: int, broker_name: str, *,
            store_timestamp: int) -> MessageRecord:
    """An ack (`appendAck`): tag `ack` for one offset, `bAck` (BatchAckMsg) for several."""
    if len(ack_offsets) == 1:
        tag, body = ACK_TAG, ack_body(topic, group, queue_id, start_offset, ack_offsets[0], pop_time, broker_name)
    else:
        tag, body = BATCH_ACK_TAG, batch_ack_body(topic, group, queue_id, start_offset, ack_offsets, pop_time,
                                                  broker_name)
    uniq = gen_ack_unique_id(topic, queue_id, ack_offsets[0], group, pop_time, broker_name)
    return put_revive_record(w, revive_topic, revive_queue_id, tag, body, uniq,
                             ack_deliver_time(pop_time, invisible_time), store_timestamp=store_timestamp)
