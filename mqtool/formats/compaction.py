"""Compaction topics (spec §16; rocketmq-all-5.3.1 `store/kv/CompactionStore`, `CompactionLog`,
`CompactionPositionMgr`, `store/queue/SparseConsumeQueue`).

What `STORE/compaction/` holds, for a topic whose attribute `cleanup.policy` is `COMPACTION`:
- `compactionLog/TOPIC/QID/`: mapped files of ordinary CommitLog records (`commitlog.commitlog_record`;
  PHYSICALOFFSET rewritten to the record's compaction-log offset, QUEUEOFFSET kept). A compaction run
  deletes the files it compacted and writes the kept records into one file named after the first,
  so file names have gaps. A file closed on full ends with a BLANK record; a compacted file does not
  (`CompactionAppendEndMsgCallback` never writes its end marker: zeros follow its last record).
- `compactionCq/TOPIC/QID/`: `batchcq.batchcq_unit` units (46 bytes, batchSize 1, compactedOffset -1),
  one file per compaction-log file and named like it (not by CQ byte offset). A CQ file closed with its
  log file ends with `END_UNIT`.
- `compacting/`, `replicating/` under a queue's log directory: transient `TopicPartitionLog`s of a
  run or of a slave's pull; present only while one is under way (or after a crash during it).
- `position-checkpoint`: `CompactionPositionMgr` as fastjson JSON,
  `{"empty":false,"queueOffsetMap":{"TOPIC_QID":offset}}`: the queue offset up to which each queue
  has been compacted (`isCompaction`: offsets below it are served from the compaction log).
"""

from __future__ import annotations

import json

from mqtool.formats.batchcq import BCQ_UNIT_SIZE, batchcq_unit
from mqtool.formats.offsets_json import ConfigFileError, _fields, _integer, _present, _Reader

COMPACTION_DIR = "compaction"  # CompactionStore.COMPACTION_DIR
COMPACTION_LOG_DIR = "compactionLog"  # CompactionStore.COMPACTION_LOG_DIR
COMPACTION_CQ_DIR = "compactionCq"  # CompactionStore.COMPACTION_CQ_DIR
COMPACTING_SUB_FOLDER = "compacting"  # CompactionLog.COMPACTING_SUB_FOLDER
REPLICATING_SUB_FOLDER = "replicating"  # CompactionLog.REPLICATING_SUB_FOLDER
CHECKPOINT_FILE = "position-checkpoint"  # CompactionPositionMgr.CHECKPOINT_FILE
CLEANUP_POLICY = "cleanup.policy"  # TopicAttributes.CLEAN_UP_POLICY_ATTRIBUTE (the topic attribute's key)
CLEANUP_POLICY_COMPACTION = "COMPACTION"  # CleanupPolicy.COMPACTION
DEFAULT_LOG_FILE_SIZE = 100 * 1024 * 1024  # MessageStoreConfig.compactionMappedFileSize
DEFAULT_CQ_FILE_SIZE = 10 * 1024 * 1024  # MessageStoreConfig.compactionCqMappedFileSize
END_UNIT = {  # SparseConsumeQueue: the unit that closes a CQ file when its log file is full
    "commitlog_offset": -1, "size": 0, "tags_code": 0, "store_time": 0, "msg_base_offset": 0, "batch_size": 0,
    "compacted_offset": -1, "reserved": 0,
}
END_UNIT_BYTES = batchcq_unit.build(END_UNIT)
assert len(END_UNIT_BYTES) == BCQ_UNIT_SIZE


def get_compaction_log_size(log_size: int, cq_size: int) -> int:
    """`CompactionLog.getCompactionLogSize`: a log file holds whole CQ files' worth of bytes.

    `cq_size` is rounded down to 46-byte units first (as `CompactionLog` does); then at least 5 CQ
    sizes, rounded down when the remainder is under half a CQ size, else up (an exact multiple
    also gets one more: Java tests `m > 0 && m < cq/2`)."""
    cq = cq_size // BCQ_UNIT_SIZE * BCQ_UNIT_SIZE
    n, m = divmod(log_size, cq)
    if n < 5:
        return cq * 5
    return n * cq if 0 < m < (cq >> 1) else (n + 1) * cq


def queue_key(topic: str, queue_id: int) -> str:
    """`CompactionPositionMgr.setOffset`'s map key: topic + "_" + queueId."""
    return f"{topic}_{queue_id}"


def split_queue_key(key: str) -> tuple[str, int] | None:
    """(topic, queue id) of a map key; None when it does not end in `_<int>` (topics may hold `_`)."""
    topic, sep, qid = key.rpartition("_")
    if not sep or not topic or not qid.lstrip("-").isdigit():
        return None
    return topic, int(qid)


def parse_position_checkpoint(text: str) -> dict[tuple[str, int], int]:
    """`CompactionPositionMgr.decode`: (topic, queue id) -> compacted-up-to queue offset.

    Raises `ConfigFileError` for text that is not the fastjson object (an empty file decodes as no map,
    as `ConfigManager.load` treats it)."""
    if not text.strip():
        return {}
    top = _fields(_Reader(text).document(), "the document")
    table = _present(top.get("queueOffsetMap"))
    out: dict[tuple[str, int], int] = {}
    if table is None:
        return out
    for key, value in _fields(table, "queueOffsetMap").items():
        tq = split_queue_key(key)
        if tq is None:
            raise ConfigFileError(f"queueOffsetMap key {key!r} is not TOPIC_QUEUEID")
        out[tq] = _integer(value, f"queueOffsetMap[{key!r}]")
    return out


def dump_position_checkpoint(offsets: dict[tuple[str, int], int]) -> str:
    """The file's text as `RemotingSerializable.toJson(positionMgr, false)` writes it (fields sorted:
    `empty` from `isEmpty()`, then `queueOffsetMap`; the map's order is not Java's hash order)."""
    table = {queue_key(t, q): off for (t, q), off in offsets.items()}
    return json.dumps({"empty": not table, "queueOffsetMap": table}, separators=(",", ":"))
