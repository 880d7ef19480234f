"""The RocksDB consume queue's rules (spec §14), rocketmq-all-5.3.1: which queues the broker's periodic
`RocksDBConsumeQueueStore.cleanDirty` destroys.

`cleanDirty` runs on the store's scheduler 10 minutes after start, then `cleanRocksDBDirtyCQIntervalMin`
(default 60) minutes after each run ends; it passes the broker's topic table (`getTopicConfigs().keySet()`:
topics.json, or `config/topics/` with a RocksDB config, plus the topics `TopicConfigManager.init` puts there)
and destroys every queue `iterateOffsetTable2FindDirty` names (entries and offset table entries).
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from mqtool.formats.names import SYSTEM_TOPIC_PREFIX, SYSTEM_TOPIC_SET

CLEAN_ROCKSDB_DIRTY_CQ_INTERVAL_MIN = 60  # MessageStoreConfig.cleanRocksDBDirtyCQIntervalMin
CLEAN_DIRTY_INITIAL_DELAY_MIN = 10  # scheduleWithFixedDelay(cleanDirty, 10, interval, MINUTES)


def is_system_topic(topic: str) -> bool:
    """`TopicValidator.isSystemTopic`: in the static SYSTEM_TOPIC_SET or named `rmq_sys_...`. The names
    `TopicConfigManager.init` adds at run time (cluster, broker, reply topic) are also in the broker's topic
    table, so they never count as dirty either way."""
    return topic in SYSTEM_TOPIC_SET or topic.startswith(SYSTEM_TOPIC_PREFIX)


def iterate_offset_table_2_find_dirty(queues: Iterable[tuple[str, int]],
                                      exist_topics: Container[str]) -> dict[str, set[int]]:
    """`RocksDBConsumeQueueOffsetTable.iterateOffsetTable2FindDirty`: per topic, the queue ids of the offset
    table's (max or min) entries whose topic is not a system topic and not in `exist_topics`. `queues` are
    the (topic, queue id) of the offset table's well-formed entries (16-byte values; an empty topic's key is
    too short and skipped); queues with entries but no offset table entry are not seen."""
    dirty: dict[str, set[int]] = {}
    for topic, queue_id in queues:
        if topic and not is_system_topic(topic) and topic not in exist_topics:
            dirty.setdefault(topic, set()).add(queue_id)
    return dirty


def clean_dirty_message(config_file: str) -> str:
    """The finding for a queue `iterate_offset_table_2_find_dirty` names (audit and overview say the same)."""
    return (f"queue will be destroyed by cleanDirty at the next run; topic not in {config_file} (cleanDirty runs "
            f"{CLEAN_DIRTY_INITIAL_DELAY_MIN} min after start, then every cleanRocksDBDirtyCQIntervalMin, "
            f"{CLEAN_ROCKSDB_DIRTY_CQ_INTERVAL_MIN} min by default)")
