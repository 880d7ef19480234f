"""Broker config kept in RocksDB (spec §14; rocketmq-all-5.3.1 `broker/RocksDBConfigManager`,
`common/config/ConfigRocksDBStorage`, `broker/offset/RocksDBConsumerOffsetManager`,
`broker/topic/RocksDBTopicConfigManager`, `broker/subscription/RocksDBSubscriptionGroupManager`).

With the RocksDB config managers each table is its own database under `STORE/config/`:
`consumerOffsets/`, `topics/`, `subscriptionGroups/`. Each has three column families (`ConfigRocksDBStorage`):
`default` (key: UTF-8 name, value: fastjson JSON of one entry), `kvDataVersion` (one key
`kvDataVersionKey`, value: DataVersion JSON) and `forbidden` (subscription groups only).
- consumerOffsets: key `TOPIC@GROUP`, value `RocksDBOffsetSerializeWrapper` `{"offsetTable":{0:5,1:7}}`.
- topics: key topic name, value `TopicConfig` JSON (as one entry of topics.json's topicConfigTable).
- subscriptionGroups: key group name, value `SubscriptionGroupConfig` JSON; `forbidden`: key group, value
  JSON map topic -> forbidden bits.
5.3.2+ adds a v2 layout (`config/rdb`, configManagerVersion=v2) that is not read here.
Values are parsed with the lenient fastjson reader of `offsets_json` (bare integer keys).
"""

from __future__ import annotations

from mqtool.formats.config_json import GroupConfig, TopicConfig, _group, _topic
from mqtool.formats.offsets_json import (
    INT_MAX,
    INT_MIN,
    DataVersion,
    _data_version,
    _fields,
    _int_map,
    _integer,
    _present,
    _Reader,
)

CONSUMER_OFFSETS_DIR = "consumerOffsets"  # RocksDBConsumerOffsetManager.rocksdbConfigFilePath
TOPICS_DIR = "topics"  # RocksDBTopicConfigManager.rocksdbConfigFilePath
SUBSCRIPTION_GROUPS_DIR = "subscriptionGroups"  # RocksDBSubscriptionGroupManager.rocksdbConfigFilePath
V2_DIR = "rdb"  # 5.3.2+ ConfigStorage (configManagerVersion=v2): detected, not read
DEFAULT_COLUMN_FAMILY = "default"
KV_DATA_VERSION_COLUMN_FAMILY = "kvDataVersion"  # ConfigRocksDBStorage.KV_DATA_VERSION_COLUMN_FAMILY_NAME
KV_DATA_VERSION_KEY = b"kvDataVersionKey"  # ConfigRocksDBStorage.KV_DATA_VERSION_KEY
FORBIDDEN_COLUMN_FAMILY = "forbidden"  # ConfigRocksDBStorage.FORBIDDEN_COLUMN_FAMILY_NAME


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def parse_offset_value(value: bytes) -> dict[int, int]:
    """`RocksDBOffsetSerializeWrapper`: queue id -> committed offset (`ConfigFileError` when unreadable)."""
    top = _fields(_Reader(_text(value)).document(), "the offset value")
    table = _present(top.get("offsetTable"))
    return {} if table is None else _int_map(table, "offsetTable")


def dump_offset_value(table: dict[int, int]) -> bytes:
    """`JSON.toJSONBytes(wrapper, BrowserCompatible)` of a small table: bare integer keys, as fastjson writes
    a `Map<Integer, Long>` (key order: ascending, which `ConcurrentHashMap` gives for small ids)."""
    return ('{"offsetTable":{' + ",".join(f"{k}:{v}" for k, v in sorted(table.items())) + "}}").encode()


def parse_topic_value(name: str, value: bytes) -> TopicConfig:
    """One `TopicConfig` as `decodeTopicConfig` reads it."""
    return _topic(name, _Reader(_text(value)).document())


def parse_group_value(name: str, value: bytes) -> GroupConfig:
    """One `SubscriptionGroupConfig` as `decodeSubscriptionGroup` reads it."""
    return _group(name, _Reader(_text(value)).document())


def parse_forbidden_value(group: str, value: bytes) -> dict[str, int]:
    """A group's forbidden table: topic -> bits."""
    return {t: _integer(v, f"forbidden[{group!r}][{t!r}]", INT_MIN, INT_MAX)
            for t, v in _fields(_Reader(_text(value)).document(), f"forbidden[{group!r}]").items()}


def parse_data_version(value: bytes) -> DataVersion | None:
    """The `kvDataVersion` entry (`RocksDBConfigManager.loadDataVersion`); None for a blank value."""
    text = _text(value)
    return _data_version(_Reader(text).document()) if text.strip() else None
