"""BatchConsumeQueue writing (spec §13) through `formats.batchcq.batchcq_unit`.

Mirrors rocketmq-all-5.3.1: `BatchConsumeQueue.assignQueueOffset` (an INNER_BATCH record gets
INNER_BASE = its queue offset, and the whole property map is re-serialised), `increaseQueueOffset`
(the queue advances by the record's batch size), `putBatchMessagePositionInfo` (one 46-byte unit per
record, files named by byte offset, preallocated with zeros). Records go to the CommitLog through a
`StoreWriter` without a ConsumeQueue unit; the IndexFile is built as for any record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from mqtool.builder.broker import props_map
from mqtool.builder.writer import MappedFiles, Properties, StoreWriter
from mqtool.formats.batchcq import BCQ_UNIT_SIZE, DEFAULT_FILE_SIZE, INVALID_POS, batchcq_unit
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import PROPERTY_INNER_BASE
from mqtool.formats.properties import broker_properties
from mqtool.formats.sysflag import INNER_BATCH
from mqtool.store.batchcq import BCQ_DIR, set_batch_size_if_needed


class BatchConsumeQueueWriter:
    """One queue's `batchconsumequeue/TOPIC/QID/` files; units appended in order."""

    def __init__(self, root: Path | str, topic: str, queue_id: int, file_size: int = DEFAULT_FILE_SIZE):
        if file_size % BCQ_UNIT_SIZE:
            raise ValueError(f"a BatchConsumeQueue file holds whole {BCQ_UNIT_SIZE}-byte units, not {file_size} bytes")
        self.files = MappedFiles(Path(root) / BCQ_DIR / topic / str(queue_id), file_size)
        self.end = 0  # write position (bytes)

    def put(self, commitlog_offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int,
            batch_size: int, compacted_offset: int = INVALID_POS) -> int:
        """`putBatchMessagePositionInfo`: one unit; returns its byte position in the queue."""
        pos = self.end
        self.files.write(pos, batchcq_unit.build({
            "commitlog_offset": commitlog_offset, "size": size, "tags_code": tags_code, "store_time": store_time,
            "msg_base_offset": msg_base_offset, "batch_size": batch_size, "compacted_offset": compacted_offset,
            "reserved": 0}))
        self.end = pos + BCQ_UNIT_SIZE
        return pos

    def close(self) -> None:
        self.files.close()


class BatchTopics:
    """The `queue.type=BatchCQ` topics of a store written by `w`: their records get BatchCQ units."""

    def __init__(self, w: StoreWriter, topics: Iterable[str], file_size: int = DEFAULT_FILE_SIZE):
        self.w = w
        self.topics = set(topics)
        self.file_size = file_size
        self.queues: dict[tuple[str, int], BatchConsumeQueueWriter] = {}

    def queue(self, topic: str, queue_id: int) -> BatchConsumeQueueWriter:
        key = (topic, queue_id)
        if key not in self.queues:
            self.queues[key] = BatchConsumeQueueWriter(self.w.root, topic, queue_id, self.file_size)
        return self.queues[key]

    def put(self, topic: str, queue_id: int, body: bytes = b"", properties: Properties | dict[str, str] = (), *,
            sys_flag: int = 0, store_timestamp: int, capacity: int = 128, **fields) -> MessageRecord:
        """A put to a BatchCQ topic: an INNER_BATCH record gets INNER_BASE and its map re-serialised in
        HashMap order (`capacity`: 128 for a map the broker's processor built, 16 for a client's)."""
        props = props_map(properties)
        qoff = self.w.next_queue_offset(topic, queue_id)
        if sys_flag & INNER_BATCH:
            props[PROPERTY_INNER_BASE] = str(qoff)
        raw = broker_properties(props, capacity)
        rec = self.w.make_record(topic, queue_id, body, raw, sys_flag=sys_flag, store_timestamp=store_timestamp,
                                 **fields)
        return self.put_record(rec, qoff)

    def put_record(self, rec: MessageRecord, queue_offset: int | None = None) -> MessageRecord:
        """Append a record as it is (QUEUEOFFSET `queue_offset`, default the queue's next), then its unit."""
        w = self.w
        key = (rec.topic, rec.queue_id)
        qoff = w.next_queue_offset(*key) if queue_offset is None else queue_offset
        if rec.topic not in self.topics:
            return w.append_records([rec], [qoff])[0]
        placed = w.append_records([replace(rec, extra={**rec.extra})], [qoff], dispatch=False)[0]
        base, num = set_batch_size_if_needed(placed.properties, qoff)
        code = w.tags_code(placed)
        self.queue(*key).put(placed.physical_offset, placed.total_size, code, placed.store_timestamp, base, num)
        placed.extra["tags_code"] = code
        w.index.build(placed)
        w._next_qoff[key] = qoff + num  # increaseQueueOffset: by the batch size
        return placed

    def close(self) -> None:
        for q in self.queues.values():
            q.close()
