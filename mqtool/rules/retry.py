"""Consumer send-back: where a failed message goes next (spec §17, §4.10).

Mirrors `AbstractSendMessageProcessor.consumerSendMsgBack` (rocketmq-all-5.3.1) and
`SendMessageProcessor.consumerSendMsgBack` (4.9.8), which decide the same way; the only stored
difference is the record's store host (5.3.1: the broker's own address, 4.9.8: the original's).
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.formats.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    RETRY_GROUP_TOPIC_PREFIX,
)

DEFAULT_RETRY_MAX_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes
DEFAULT_RETRY_QUEUE_NUMS = 1  # SubscriptionGroupConfig.retryQueueNums
DLQ_NUMS_PER_GROUP = 1  # MixAll.DLQ_NUMS_PER_GROUP
DEFAULT_CLIENT_MAX_RECONSUME_TIMES = 16  # DefaultMQPushConsumerImpl.getMaxReconsumeTimes when left at -1
VERSION_V3_4_9 = 121  # MQVersion.Version.V3_4_9.ordinal(): requests from here on carry maxReconsumeTimes
CLIENT_VERSION_5_3_1 = 475  # MQVersion.CURRENT_VERSION of a 5.3.1 client (V5_3_1.ordinal())


@dataclass(frozen=True, slots=True)
class SendBack:
    """The decision: `action` is "retry" (via `level`), "dlq" or "drop"; `topic` the target."""

    action: str
    topic: str | None
    level: int = 0


def get_retry_topic(group: str) -> str:
    """`MixAll.getRetryTopic`."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def get_dlq_topic(group: str) -> str:
    """`MixAll.getDLQTopic`."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def get_max_reconsume_times(client_max: int | None) -> int:
    """`DefaultMQPushConsumerImpl.getMaxReconsumeTimes` (5.3.1 client): a client left at -1 (None here) sends 16."""
    return DEFAULT_CLIENT_MAX_RECONSUME_TIMES if client_max is None or client_max == -1 else client_max


def send_back_max_reconsume_times(
    retry_max_times: int, request_max: int | None, request_version: int = CLIENT_VERSION_5_3_1
) -> int:
    """The limit `consumerSendMsgBack` applies: the group's retryMaxTimes, overridden by the request's
    maxReconsumeTimes when the request is of V3_4_9 or later and carries one (every 5.3.1 client sends it,
    so the group's setting only binds old clients and requests without the field)."""
    if request_version >= VERSION_V3_4_9 and request_max is not None:
        return request_max
    return retry_max_times


def consumer_send_msg_back(
    group: str,
    reconsume_times: int,
    max_reconsume_times: int = DEFAULT_RETRY_MAX_TIMES,
    retry_queue_nums: int = DEFAULT_RETRY_QUEUE_NUMS,
    delay_level: int = 0,
) -> SendBack:
    """`consumerSendMsgBack`'s decision for a message read back with `reconsume_times`.

    retryQueueNums <= 0 answers SUCCESS without writing (the message is gone); reconsumeTimes >=
    max or a negative level goes to the DLQ; otherwise level 3 + reconsumeTimes unless the client
    asked for one. The level is not clamped here: the delay rewrite clamps it to the highest level.
    """
    if retry_queue_nums <= 0:
        return SendBack("drop", None)
    if reconsume_times >= max_reconsume_times or delay_level < 0:
        return SendBack("dlq", get_dlq_topic(group))
    return SendBack("retry", get_retry_topic(group), delay_level or 3 + reconsume_times)


def send_back_properties(props: dict[str, str], topic: str, msg_id: str, decision: SendBack) -> dict[str, str]:
    """The map `consumerSendMsgBack` writes, in the order it puts the keys.

    RETRY_TOPIC = the original topic when absent, WAIT = false (`setWaitStoreMsgOK(false)`), DELAY
    = the level (0 for the DLQ), ORIGIN_MESSAGE_ID = the existing one or the record's offset msgId.
    """
    out = dict(props)
    out.setdefault(PROPERTY_RETRY_TOPIC, topic)
    out[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    out[PROPERTY_DELAY_TIME_LEVEL] = str(decision.level if decision.action == "retry" else 0)
    out[PROPERTY_ORIGIN_MESSAGE_ID] = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or msg_id
    return out
