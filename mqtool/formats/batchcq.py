"""BatchConsumeQueue unit (spec §13; `BatchConsumeQueue.putBatchMessagePositionInfo`): 46 bytes.

One unit per CommitLog record of a `queue.type=BatchCQ` topic; a record with sysFlag INNER_BATCH and
INNER_NUM / INNER_BASE stands for `batch_size` logical offsets from `msg_base_offset`
(`CommitLog.setBatchSizeIfNeeded`); any other record is a batch of 1 at its QUEUEOFFSET.
Files are named by byte offset like every mapped-file queue (300,000 units per file by default).
"""

from construct import Int16sb, Int32sb, Int64sb, Struct

BCQ_UNIT_SIZE = 46  # CQ_STORE_UNIT_SIZE
INVALID_POS = -1  # compactedOffset until compaction sets it
DEFAULT_FILE_SIZE = 300000 * BCQ_UNIT_SIZE  # MessageStoreConfig.mapperFileSizeBatchConsumeQueue

batchcq_unit = Struct(
    "commitlog_offset" / Int64sb,  # CommitLog physical offset
    "size" / Int32sb,  # the record's TOTALSIZE
    "tags_code" / Int64sb,  # MSG_TAG_OFFSET_INDEX 12
    "store_time" / Int64sb,  # MSG_STORE_TIME_OFFSET_INDEX 20
    "msg_base_offset" / Int64sb,  # MSG_BASE_OFFSET_INDEX 28: first logical offset of the batch
    "batch_size" / Int16sb,  # MSG_BATCH_SIZE_INDEX 36: logical offsets the record stands for
    "compacted_offset" / Int32sb,  # MSG_COMPACT_OFFSET_INDEX 38
    "reserved" / Int32sb,  # 0
)


def is_valid_unit(commitlog_offset: int, size: int, msg_base_offset: int, batch_size: int) -> bool:
    """`BatchConsumeQueue.recover`'s test: a unit failing it ends the queue's data."""
    return commitlog_offset >= 0 and size > 0 and msg_base_offset >= 0 and batch_size > 0

