"""POP consumption: checkpoint and ack records, the revive test and the revived record (spec §15).

Mirrors rocketmq-all-5.3.1 `PopMessageProcessor` (`buildCkMsg`, `genCkUniqueId`), `AckMessageProcessor`
(`appendAck`, `genAckUniqueId`), `PopReviveService` (`mergeAndRevive`, `reviveRetry`), `KeyBuilder`
and `PopAckConstants`. 4.9.8 has no POP. Bodies are fastjson `JSON.toJSONString` of PopCheckPoint /
AckMsg; their layout has one definition, in `formats/pop.py`.
"""

from __future__ import annotations

from mqtool.formats.names import (
    ACK_TAG,
    CK_TAG,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_TAGS,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_TOPIC,
)

ACK_TIME_INTERVAL = 1000  # PopAckConstants.ackTimeInterval
SECOND = 1000  # PopAckConstants.SECOND
SPLIT = "@"  # PopAckConstants.SPLIT


def build_cluster_revive_topic(cluster: str) -> str:
    """`PopAckConstants.buildClusterReviveTopic`."""
    return REVIVE_TOPIC + cluster


def build_pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """`KeyBuilder.buildPopRetryTopic`: %RETRY%group_topic (V1) or %RETRY%group+topic (V2)."""
    return RETRY_GROUP_TOPIC_PREFIX + group + ("+" if v2 else "_") + topic


def gen_ck_unique_id(topic: str, queue_id: int, start_offset: int, group: str, pop_time: int, broker_name: str) -> str:
    """`PopMessageProcessor.genCkUniqueId`: the UNIQ_KEY of a checkpoint record."""
    return SPLIT.join([topic, str(queue_id), str(start_offset), group, str(pop_time), broker_name, CK_TAG])


def gen_ack_unique_id(topic: str, queue_id: int, ack_offset: int, group: str, pop_time: int, broker_name: str) -> str:
    """`PopMessageProcessor.genAckUniqueId`: the UNIQ_KEY of an ack record."""
    return SPLIT.join([topic, str(queue_id), str(ack_offset), group, str(pop_time), broker_name, ACK_TAG])


def ck_deliver_time(pop_time: int, invisible_time: int) -> int:
    """`buildCkMsg`: a checkpoint reaches the revive topic one ackTimeInterval before its revive time."""
    return pop_time + invisible_time - ACK_TIME_INTERVAL


def ack_deliver_time(pop_time: int, invisible_time: int) -> int:
    """`appendAck`: an ack reaches the revive topic at popTime + invisibleTime."""
    return pop_time + invisible_time


def may_revive(end_time: int, revive_time: int) -> bool:
    """`mergeAndRevive`: a checkpoint is handled once the scan's endTime is past its revive time by more
    than ackTimeInterval + 1 s (earlier ones stop the pass: checkpoints are taken in revive-offset order)."""
    return end_time - revive_time > ACK_TIME_INTERVAL + SECOND


NO_MSG_SLEEP_MS = 100  # consumeReviveMessage's sleep when it finds nothing new


def revive_scan_end_time(end_time: int, now: int) -> int:
    """`consumeReviveMessage` finding nothing new: the scan's endTime (the latest deliver time it read) moves to
    now once it is more than 3 s old and the timer is caught up (`getDequeueBehind() <= 0`, `getEnqueueBehind()
    <= 0`: so between the simulator's rounds)."""
    return now if end_time and now - end_time > 3 * SECOND else end_time


def revive_scan_gives_up(no_msg_count: int) -> bool:
    """`consumeReviveMessage`: the scan ends after more than 4 s of finding nothing new, 100 ms a try."""
    return no_msg_count * NO_MSG_SLEEP_MS > 4 * SECOND


def revive_retry_topic(ck_topic: str, group: str, v2: bool = False) -> str:
    """`reviveRetry`'s topic: a message popped from a retry topic revives into it, any other into the pop retry
    topic of its topic and group."""
    return ck_topic if ck_topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else build_pop_retry_topic(ck_topic, group, v2)


def revive_retry_properties(props: dict[str, str], reconsume_times: int, pop_time: int) -> dict[str, str]:
    """`reviveRetry`'s map: TAGS first (`setTags`, when set), every property of the message, and 1ST_POP_TIME =
    the checkpoint's pop time on the first revive (or when absent)."""
    out: dict[str, str] = {}
    if (tags := props.get(PROPERTY_TAGS)) is not None:
        out[PROPERTY_TAGS] = tags
    out.update(props)
    if reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in out:
        out[PROPERTY_FIRST_POP_TIME] = str(pop_time)
    return out


RETRY_QUEUE_NUM = 1  # PopAckConstants.retryQueueNum: queues of a pop retry topic (addRetryTopicIfNotExist)


def revive_queue_id(ck_message_number: int, revive_queue_num: int) -> int:
    """`PopMessageProcessor.processRequest`: the revive queue of a request's checkpoints and acks is its
    request counter `ckMessageNumber` (every request advances it, empty ones too) modulo reviveQueueNum."""
    return abs(ck_message_number % revive_queue_num)


def need_retry(random_q: int, pop_from_retry_probability: int) -> bool:
    """`processRequest`: with the request's draw `randomQ` (0-99) below the probability the pop retry topic is
    read first; otherwise it is read after the topic, only when the batch is not full."""
    return random_q < pop_from_retry_probability


def pop_queue_ids(random_q: int, read_queue_nums: int) -> list[int]:
    """`popMsgFromTopic`: the queues of a topic in the order one request reads them, from `randomQ`."""
    return [(random_q + i) % read_queue_nums for i in range(read_queue_nums)]


def ck_diffs(start_offset: int, queue_offsets: list[int]) -> list[int]:
    """`appendCheckPoint`: one checkpoint per request and queue; `d` holds each popped offset - the start."""
    return [o - start_offset for o in queue_offsets]


def filter_message(reconsume_times: int, retry_max_times: int) -> str:
    """The 5.3.1 proxy's `PopMessageResultFilterImpl.filterMessage` (tag matched): TO_DLQ once reconsumeTimes
    reaches maxAttempts = the group's retryMaxTimes + 1 (`GrpcClientSettingsManager`), else MATCH. A TO_DLQ
    message is forwarded with delayLevel -1 (`forwardMessageToDeadLetterQueue`) and then acked."""
    return "TO_DLQ" if reconsume_times >= retry_max_times + 1 else "MATCH"


def process_pop_result_drops(reconsume_times: int, max_reconsume_times: int) -> bool:
    """A remoting client's `DefaultMQPushConsumerImpl.processPopResult`: a popped message whose reconsumeTimes
    is above the client's maxReconsumeTimes is not consumed but acked (it never reaches a DLQ)."""
    return reconsume_times > max_reconsume_times


POP_DELAY_LEVEL = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)  # s; client's


def change_pop_invisible_time(reconsume_times: int, delay_level: int = 0) -> int:
    """A remoting client's `ConsumeMessagePopConcurrentlyService.changePopInvisibleTime` after a failed
    consumption: the new invisible time in ms, `popDelayLevel[delayLevel]` (delayLevel 0 = reconsumeTimes,
    the last level past the table). The broker (`ChangeInvisibleTimeProcessor`) writes a checkpoint of the one
    message (popTime now) into the old checkpoint's revive queue and acks the old one."""
    level = reconsume_times if delay_level == 0 else delay_level
    return 1000 * POP_DELAY_LEVEL[min(max(level, 0), len(POP_DELAY_LEVEL) - 1)]


def check_need_ack_or_delay(age_ms: int) -> int:
    """`checkNeedAckOrDelay`, for a failed message at the client's maxReconsumeTimes, by its age (now -
    bornTimestamp): -1 = ack it (older than twice the last level); else the invisible time in ms of the level
    after the highest one its age reached; 0 = none reached: the client's table lookup at index -1 throws,
    nothing is sent and the message is revived after its invisible time."""
    if age_ms > POP_DELAY_LEVEL[-1] * 1000 * 2:
        return -1
    level = next((i + 1 for i in range(len(POP_DELAY_LEVEL) - 1, -1, -1) if age_ms >= POP_DELAY_LEVEL[i] * 1000), 0)
    return change_pop_invisible_time(0, level) if level else 0


def process_consume_result(reconsume_times: int, max_reconsume_times: int, age_ms: int) -> int:
    """A remoting client's failed POP message (`ConsumeMessagePopConcurrentlyService.processConsumeResult`): the new
    invisible time by its popDelayLevel (`changePopInvisibleTime`), or at its maxReconsumeTimes
    `checkNeedAckOrDelay`'s answer by the message's age (-1: ack it; 0: nothing is sent)."""
    if reconsume_times >= max_reconsume_times:
        return check_need_ack_or_delay(age_ms)
    return change_pop_invisible_time(reconsume_times)
