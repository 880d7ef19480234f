"""Compaction-store writing (spec §16) through `formats.commitlog` and `formats.batchcq` definitions.

Mirrors rocketmq-all-5.3.1 `CompactionLog` for one topic queue: `asyncPutMessage` appends a record to the
compaction log (PHYSICALOFFSET rewritten to its compaction-log offset, QUEUEOFFSET kept) and a
`SparseConsumeQueue` unit (batch 1, compactedOffset -1) to the CQ file named like the log file. A log
file is closed when the record and an 8-byte BLANK do not fit (the BLANK is written) or when its CQ file
has no room for the unit and the end unit; the CQ file then gets `END_UNIT`. A compaction run's output
file (`write_compacted`) holds the kept records from its start with neither a BLANK nor an end unit,
as 5.3.1 leaves it; `next_compaction` says which records that run keeps (`mqtool.rules.compaction`, the
rule `CompactionLog.shouldRetainMsg` applies to the files written so far).
`position-checkpoint` is written as `MixAll.string2File` does (`.bak` of the old).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from mqtool.builder.dledger import place_record, string2file
from mqtool.builder.writer import MappedFiles, name20, tags_code_of
from mqtool.formats.batchcq import BCQ_UNIT_SIZE, INVALID_POS, batchcq_unit
from mqtool.formats.commitlog import BLANK_MAGIC_CODE, BLANK_SIZE, commitlog_record
from mqtool.formats.compaction import (
    CHECKPOINT_FILE,
    COMPACTION_CQ_DIR,
    COMPACTION_DIR,
    COMPACTION_LOG_DIR,
    DEFAULT_CQ_FILE_SIZE,
    DEFAULT_LOG_FILE_SIZE,
    END_UNIT,
    dump_position_checkpoint,
    get_compaction_log_size,
)
from mqtool.formats.message import MessageRecord
from mqtool.rules.compaction import NO_POSITION, compaction


class CompactionLogWriter:
    """`compaction/compactionLog/TOPIC/QID/` and `compactionCq/TOPIC/QID/` of one queue.

    `log_file_size` is the configured `compactionMappedFileSize` (rounded as `getCompactionLogSize`
    does), `cq_file_size` the `compactionCqMappedFileSize` (rounded down to whole units); appends start
    at `start` (a multiple of the log file size: after a compacted file, the first uncompacted one).
    """

    def __init__(self, root: Path | str, topic: str, queue_id: int, log_file_size: int = DEFAULT_LOG_FILE_SIZE,
                 cq_file_size: int = DEFAULT_CQ_FILE_SIZE, *, start: int = 0):
        base = Path(root) / COMPACTION_DIR
        self.cq_size = cq_file_size // BCQ_UNIT_SIZE * BCQ_UNIT_SIZE
        self.log = MappedFiles(base / COMPACTION_LOG_DIR / topic / str(queue_id),
                               get_compaction_log_size(log_file_size, cq_file_size))
        self.cq_dir = base / COMPACTION_CQ_DIR / topic / str(queue_id)
        self._cqs: dict[int, bytearray] = {}  # log file start -> its CQ file (preallocated, zeros)
        if start % self.log.file_size:
            raise ValueError("start must be a multiple of the compaction-log file size")
        self.end = start
        self.cq_pos = 0  # write position in the CQ file of the current log file
        self.files: dict[int, list[MessageRecord]] = {}  # log file start -> the records written into it

    def _put_unit(self, log_start: int, pos: int, unit: dict) -> None:
        """Into the CQ file of a log file: one file, named like the log file (not by CQ byte offset)."""
        buf = self._cqs.setdefault(log_start, bytearray(self.cq_size))
        buf[pos : pos + BCQ_UNIT_SIZE] = batchcq_unit.build(unit)

    def _roll(self) -> None:
        """Close the current files: a BLANK over the log file's rest, the end unit in its CQ file."""
        start, remaining = self.log.start_of(self.end), self.log.remaining(self.end)
        self.log.write(self.end, commitlog_record.build({"total_size": remaining, "magic_code": BLANK_MAGIC_CODE,
                                                         "message": None}))
        self._put_unit(start, self.cq_pos, END_UNIT)
        self.end, self.cq_pos = start + self.log.file_size, 0

    def append(self, rec: MessageRecord, tags_code: int | None = None) -> MessageRecord:
        """Append a record (its QUEUEOFFSET kept) and its CQ unit; returns it placed."""
        if rec.total_size + BLANK_SIZE > self.log.file_size:
            raise ValueError(f"a {rec.total_size}-byte record never fits a {self.log.file_size}-byte log file")
        if (self.end % self.log.file_size and rec.total_size + BLANK_SIZE > self.log.remaining(self.end)
                or self.cq_pos + 2 * BCQ_UNIT_SIZE > self.cq_size):
            self._roll()
        placed = self._write(rec, self.end)
        self.files.setdefault(self.log.start_of(placed.physical_offset), []).append(placed)
        self._put_unit(self.log.start_of(placed.physical_offset), self.cq_pos, self._unit(placed, tags_code))
        self.cq_pos += BCQ_UNIT_SIZE
        self.end = placed.physical_offset + placed.total_size
        return placed

    def write_compacted(self, start: int, kept: Iterable[MessageRecord]) -> list[MessageRecord]:
        """A compaction run's output: the kept records from `start` (the first compacted file's name), no
        BLANK after them and no end unit in the CQ file (`CompactionAppendEndMsgCallback` writes none)."""
        out, pos, cq = [], start, 0
        for rec in kept:
            if pos + rec.total_size > start + self.log.file_size:
                raise ValueError("the kept records do not fit one compaction-log file")
            placed = self._write(rec, pos)
            self._put_unit(start, cq, self._unit(placed, None))
            out.append(placed)
            pos, cq = pos + rec.total_size, cq + BCQ_UNIT_SIZE
        self.log.ensure(start)
        self._cqs.setdefault(start, bytearray(self.cq_size))
        self.files[start] = out
        return out

    def next_compaction(self, position: int = NO_POSITION) -> list[MessageRecord] | None:
        """The records the next `CompactionLog.doCompaction` keeps from the files written so far (every
        file but the last; `position` is the queue's saved compaction position), or None when it would not
        run; pass them to `write_compacted`."""
        return compaction([recs for _, recs in sorted(self.files.items())], position)

    def _write(self, rec: MessageRecord, pos: int) -> MessageRecord:
        self.log.ensure(pos)
        placed, data = place_record(rec, pos, self.log.start_of(pos))
        self.log.write(pos, data)
        return placed

    @staticmethod
    def _unit(rec: MessageRecord, tags_code: int | None) -> dict:
        return {"commitlog_offset": rec.physical_offset, "size": rec.total_size,
                "tags_code": tags_code_of(rec.properties) if tags_code is None else tags_code,
                "store_time": rec.store_timestamp, "msg_base_offset": rec.queue_offset, "batch_size": 1,
                "compacted_offset": INVALID_POS, "reserved": 0}

    def close(self) -> None:
        """Flush the log files and write the CQ files."""
        self.log.close()
        self.cq_dir.mkdir(parents=True, exist_ok=True)
        for start, buf in sorted(self._cqs.items()):
            (self.cq_dir / name20(start)).write_bytes(bytes(buf))

    def __enter__(self) -> CompactionLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_position_checkpoint(root: Path | str, offsets: dict[tuple[str, int], int]) -> None:
    """`compaction/position-checkpoint`: `CompactionPositionMgr.persist` (through `MixAll.string2File`)."""
    string2file(Path(root) / COMPACTION_DIR / CHECKPOINT_FILE, dump_position_checkpoint(offsets))
