"""RocksDB consume queue keys and values (spec §14; rocketmq-all-5.3.1 `store/queue/RocksDBConsumeQueueTable`,
`RocksDBConsumeQueueOffsetTable`, `RocksDBConsumeQueueStore`, `store/rocksdb/ConsumeQueueRocksDBStorage`).

With `storeType=defaultRocksDB` the ConsumeQueues are one RocksDB database in `STORE/consumequeue/`
(CURRENT, MANIFEST-*, OPTIONS-*, *.sst, *.log) with two column families:
- `default` (`CQ_COLUMN_FAMILY`): one entry per message, key `cq_key`, value `cq_value` (28 bytes).
- `offset` (`OFFSET_COLUMN_FAMILY`): per queue a `max` and a `min` entry, key `offset_key`, value
  `offset_value` (the CommitLog offset and the queue offset of the last / first unit; the queue's
  max offset is that cq_offset + 1, `getMaxOffsetInQueue`). The pseudo-topic `CHECKPOINT_TOPIC`,
  key `offset_key(CHECKPOINT_TOPIC, "max", 0)`, holds an 8-byte `checkpoint_value`: the highest
  CommitLog offset dispatched into the queues.
Keys are big-endian, fields separated by CTRL_1 (0x01); RocksDB's bytewise order therefore sorts a
queue's entries by topic length, topic, queue id, then queue offset (non-negative offsets).
"""

from construct import Bytes, Const, Int32sb, Int64sb, Rebuild, Struct, this

from mqtool.formats.names import RMQ_SYS_ROCKSDB_OFFSET_TOPIC
from mqtool.formats.text import JavaUtf8, utf8

CTRL_0, CTRL_1, CTRL_2 = b"\x00", b"\x01", b"\x02"  # RocksDBConsumeQueueStore.CTRL_0/1/2
CQ_COLUMN_FAMILY = "default"  # RocksDB.DEFAULT_COLUMN_FAMILY
OFFSET_COLUMN_FAMILY = "offset"  # ConsumeQueueRocksDBStorage: "offset".getBytes(UTF_8)
MAX, MIN = "max", "min"  # RocksDBConsumeQueueOffsetTable.MAX_BYTES / MIN_BYTES
MAX_KEY_LEN = 300  # RocksDBConsumeQueueStore.MAX_KEY_LEN


def _topic_length(ctx) -> int:
    return len(utf8(ctx.topic))


cq_key = Struct(
    "topic_length" / Rebuild(Int32sb, _topic_length),
    Const(CTRL_1),
    "topic" / JavaUtf8(Bytes(this.topic_length)),
    Const(CTRL_1),
    "queue_id" / Int32sb,
    Const(CTRL_1),
    "cq_offset" / Int64sb,  # the logical queue offset
)

cq_value = Struct(
    "phy_offset" / Int64sb,  # PHY_OFFSET_OFFSET 0: CommitLog offset
    "size" / Int32sb,  # PHY_MSG_LEN_OFFSET 8
    "tags_code" / Int64sb,  # MSG_TAG_HASHCODE_OFFSET 12
    "store_time" / Int64sb,  # MSG_STORE_TIME_SIZE_OFFSET 20
)
CQ_VALUE_SIZE = cq_value.sizeof()  # RocksDBConsumeQueueTable.CQ_UNIT_SIZE = 28

offset_key = Struct(
    "topic_length" / Rebuild(Int32sb, _topic_length),
    Const(CTRL_1),
    "topic" / JavaUtf8(Bytes(this.topic_length)),
    Const(CTRL_1),
    "kind" / JavaUtf8(Bytes(3)),  # "max" or "min"
    Const(CTRL_1),
    "queue_id" / Int32sb,
)

offset_value = Struct(
    "phy_offset" / Int64sb,  # OFFSET_PHY_OFFSET 0
    "cq_offset" / Int64sb,  # OFFSET_CQ_OFFSET 8
)
OFFSET_VALUE_SIZE = offset_value.sizeof()  # 16

checkpoint_value = Struct(
    "max_phy_offset" / Int64sb,  # appendMaxPhyOffset: an 8-byte value under the CHECKPOINT_TOPIC key
)


def build_cq_key(topic: str, queue_id: int, cq_offset: int) -> bytes:
    """`RocksDBConsumeQueueTable.buildCQKeyByteBuffer0`."""
    return cq_key.build({"topic": topic, "queue_id": queue_id, "cq_offset": cq_offset})


def queue_prefix(topic: str, queue_id: int) -> bytes:
    """The key bytes every entry of one queue starts with (a `cq_key` without its offset): for a seek."""
    t = utf8(topic)
    return len(t).to_bytes(4, "big") + CTRL_1 + t + CTRL_1 + queue_id.to_bytes(4, "big", signed=True) + CTRL_1


def build_offset_key(topic: str, queue_id: int, kind: str = MAX) -> bytes:
    """`RocksDBConsumeQueueOffsetTable.buildOffsetKeyByteBuffer0`."""
    return offset_key.build({"topic": topic, "kind": kind, "queue_id": queue_id})


def build_checkpoint_key() -> bytes:
    """The offset-table key of the max dispatched CommitLog offset (`MAX_PHYSICAL_OFFSET_CHECKPOINT_KEY`)."""
    return build_offset_key(RMQ_SYS_ROCKSDB_OFFSET_TOPIC, 0, MAX)
