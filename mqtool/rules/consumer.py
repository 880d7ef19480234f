"""Consumer progress: which queues a group has offsets on, and how far behind it is (spec §5).

Mirrors what `mqadmin consumerProgress` asks the broker (rocketmq-all-5.3.1, same in 4.9.8):
`AdminBrokerProcessor.getConsumeStats` over `ConsumerOffsetManager.whichTopicByConsumer` and
`queryOffset`, summed by `ConsumeStats.computeTotalDiff`; `MixAll.isSysConsumerGroup` tells the
broker's own groups (transaction check, POP revive) from the users'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mqtool.formats.names import CID_RMQ_SYS_PREFIX

TOPIC_GROUP_SEPARATOR = "@"  # ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR


def is_sys_consumer_group(group: str) -> bool:
    """`MixAll.isSysConsumerGroup`: a group named `CID_RMQ_SYS_...` (CID_RMQ_SYS_TRANS, ..._REVIVE_GROUP)."""
    return group.startswith(CID_RMQ_SYS_PREFIX)


def split_topic_at_group(key: str) -> tuple[str, str] | None:
    """(topic, group) of an offset table key "TOPIC@GROUP"; None for a key `whichTopicByConsumer` skips.

    Java's `split("@")` drops trailing empty strings and the broker keeps only keys of exactly two parts.
    """
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return (parts[0], parts[1]) if len(parts) == 2 else None


def which_topic_by_consumer(offset_table: Mapping[str, object], group: str) -> set[str]:
    """`ConsumerOffsetManager.whichTopicByConsumer`: the topics `group` has an offset entry for."""
    return {tg[0] for key in offset_table if (tg := split_topic_at_group(key)) is not None and tg[1] == group}


def consumer_groups(offset_table: Mapping[str, object]) -> set[str]:
    """Every group of the offset table (`whichTopicByConsumer` answers for each of them)."""
    return {tg[1] for key in offset_table if (tg := split_topic_at_group(key)) is not None}


def query_consumer_offset(offset_table: Mapping[str, Mapping[int, int]], group: str, topic: str, queue_id: int) -> int:
    """`ConsumerOffsetManager.queryOffset`: the committed offset, -1 when the group has none for the queue
    (`useServerSideResetOffset`'s reset table lives in memory only: offline there is none)."""
    offset = offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}).get(queue_id)
    return -1 if offset is None else offset


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """`OffsetWrapper` as `getConsumeStats` fills it for a (dynamic, not static) topic's queue."""

    broker_offset: int
    consumer_offset: int

    @property
    def diff(self) -> int:
        """One queue's term of `ConsumeStats.computeTotalDiff` (negative when the committed offset is past
        the queue's end)."""
        return self.broker_offset - self.consumer_offset


def get_consume_stats_queue(max_offset_in_queue: int, committed: int) -> OffsetWrapper:
    """`getConsumeStats`' per-queue values: `getMaxOffsetInQueue` and `queryOffset`, each clamped at 0."""
    return OffsetWrapper(max(max_offset_in_queue, 0), max(committed, 0))


def compute_total_diff(queues: Iterable[OffsetWrapper]) -> int:
    """`ConsumeStats.computeTotalDiff`: the group's "Diff Total" in mqadmin's consumerProgress."""
    return sum(q.diff for q in queues)
