"""Compaction store (spec §16): `compaction/compactionLog`, `compactionCq` and `position-checkpoint`, read-only.

Each compaction topic queue has a log of ordinary CommitLog records (read with the CommitLog's own
scanner: `store/commitlog.py` over this queue's files) and a sparse queue of 46-byte BatchCQ units, one
CQ file per log file and named like it. File names have gaps after a compaction run (the compacted
files are gone), so gaps are no finding here; a compacted file ends in zeros without a BLANK record
(5.3.1's `CompactionAppendEndMsgCallback` never writes it), which is no finding either.
Problems go to the `Findings` accumulator each call receives, under `CHECK`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mqtool.formats import layout
from mqtool.formats.batchcq import BCQ_UNIT_SIZE
from mqtool.formats.commitlog import BLANK_MAGIC_CODE, HEADER
from mqtool.formats.compaction import (
    CHECKPOINT_FILE,
    COMPACTING_SUB_FOLDER,
    COMPACTION_CQ_DIR,
    COMPACTION_DIR,
    COMPACTION_LOG_DIR,
    END_UNIT_BYTES,
    REPLICATING_SUB_FOLDER,
    parse_position_checkpoint,
)
from mqtool.formats.message import MessageRecord
from mqtool.formats.offsets_json import ConfigFileError
from mqtool.store.batchcq import BCQ_DTYPE, BcqUnit
from mqtool.store.commitlog import CommitLog
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import _NAME, MappedFile, MappedFileQueue, map_file, read_at

CHECK = "compaction.integrity"
_LEAD = layout.struct_format(HEADER[:2])  # TOTALSIZE, MAGICCODE of a record or the BLANK filler


class FileEnd(NamedTuple):
    """Where a compaction-log file's records end: `kind` is "blank" (a BLANK record of `size` bytes at
    `position`), "zeros" (unwritten or compacted tail), "end of file" or "invalid" (a finding says why)."""

    file: str
    start: int  # the file's first global offset (its name)
    position: int
    kind: str
    size: int = 0


def _list_files(directory: Path, root: Path, findings: Findings, topic: str, queue_id: int) -> list[MappedFile]:
    """Files named by 20-digit offsets, in offset order; subdirectories (compacting/, replicating/)
    are not files of the queue; any other name is an info finding."""
    files = []
    if directory.is_dir():
        for p in sorted(directory.iterdir()):
            if p.is_dir():
                continue
            if not _NAME.match(p.name):
                findings.add(str(p.relative_to(root)), None, CHECK, "info", f"ignoring unknown file {p.name}",
                             topic, queue_id)
                continue
            files.append(MappedFile(p, int(p.name), p.stat().st_size))
    return files


def _usual_size(files: list[MappedFile]) -> int:
    """The files' allocated size: the largest (every file is preallocated to the same size)."""
    return max((f.length for f in files), default=0)


@dataclass
class CompactionQueue:
    """One compaction topic queue: its log files and CQ files (both in name order)."""

    root: Path
    topic: str
    queue_id: int
    log_files: list[MappedFile]
    cq_files: list[MappedFile]
    ends: dict[str, FileEnd] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path, topic: str, queue_id: int, findings: Findings) -> CompactionQueue:
        base = root / COMPACTION_DIR
        log_dir = base / COMPACTION_LOG_DIR / topic / str(queue_id)
        cq_dir = base / COMPACTION_CQ_DIR / topic / str(queue_id)
        q = cls(root, topic, queue_id, _list_files(log_dir, root, findings, topic, queue_id),
                _list_files(cq_dir, root, findings, topic, queue_id))
        q._check_names(findings)
        return q

    @property
    def log_dir(self) -> Path:
        return self.root / COMPACTION_DIR / COMPACTION_LOG_DIR / self.topic / str(self.queue_id)

    @property
    def log_file_size(self) -> int:
        return _usual_size(self.log_files)

    @property
    def transient(self) -> list[str]:
        """The `compacting/` and `replicating/` folders present: a run (or a slave's pull) under way or
        cut short; the broker's `CompactionLog.load` deletes or merges them at start."""
        return [d for d in (COMPACTING_SUB_FOLDER, REPLICATING_SUB_FOLDER) if (self.log_dir / d).is_dir()]

    def _add(self, findings: Findings, file: str, offset: int | None, severity: str, message: str) -> None:
        findings.add(file, offset, CHECK, severity, message, self.topic, self.queue_id)

    def _check_names(self, findings: Findings) -> None:
        """A CQ file is named after the log file it describes: each needs the other."""
        logs, cqs = {f.name for f in self.log_files}, {f.name for f in self.cq_files}
        for f in self.cq_files:
            if f.name not in logs:
                self._add(findings, self.rel(f), None, "error", "compaction CQ file has no compaction-log file "
                          "of the same name")
        for f in self.log_files:
            if f.name not in cqs:
                self._add(findings, self.rel(f), None, "warning", "compaction-log file has no compaction CQ file "
                          "of the same name (its records are not served)")
        size = self.log_file_size
        for prev, cur in zip(self.log_files, self.log_files[1:], strict=False):
            if cur.start < prev.start + size:
                self._add(findings, self.rel(cur), None, "error",
                          f"file starts at {cur.start}, inside the previous file ({prev.start} + {size})")

    def rel(self, f: MappedFile) -> str:
        return str(f.path.relative_to(self.root))

    # ----- the compaction log -----
    def _commitlog(self) -> CommitLog:
        return CommitLog(self.root, MappedFileQueue(self.log_dir, self.log_files, self.log_file_size, Findings()))

    def iter_records(self, findings: Findings, verify_crc: bool = True) -> Iterator[MessageRecord]:
        """Every message of the compaction log, file by file, with `file` and `position` set; each file's
        end goes to `self.ends`. CRC and PHYSICALOFFSET mismatches and torn records become findings."""
        log = self._commitlog()
        scratch = Findings()
        for f in self.log_files:
            start = len(scratch)
            for rec in log._scan_file(f, 0, verify_crc, scratch):
                rec.position = rec.physical_offset - f.start
                yield rec
            scan = log.scans[self.rel(f)]
            self.ends[scan.file] = self._end(f, scan.valid_bytes, scan.stop_reason)
            for x in scratch[start:]:
                self._add(findings, x.file, x.offset, x.severity, x.message)

    def _end(self, f: MappedFile, pos: int, reason: str) -> FileEnd:
        if reason == "blank filler":
            head = read_at(f.path, pos, _LEAD.size)
            total, magic = _LEAD.unpack(head) if len(head) == _LEAD.size else (0, 0)
            if magic == BLANK_MAGIC_CODE:
                return FileEnd(self.rel(f), f.start, pos, "blank", total)
        kind = {"unwritten (zero) tail": "zeros", "end of file": "end of file"}.get(reason, "invalid")
        return FileEnd(self.rel(f), f.start, pos, kind)

    # ----- the compaction CQ -----
    def iter_units(self, findings: Findings) -> Iterator[BcqUnit]:
        """Every unit of every CQ file until the file's end unit or unwritten zeros.

        A unit that is neither valid, nor the end unit, nor zeros ends its file with an error;
        msgBaseOffsets that do not grow and batch sizes other than 1 are findings."""
        prev_base: int | None = None
        for f in self.cq_files:
            file = self.rel(f)
            with map_file(f.path) as buf:
                n = len(buf) // BCQ_UNIT_SIZE
                units = np.frombuffer(buf, BCQ_DTYPE, count=n) if n else np.zeros(0, BCQ_DTYPE)
                valid = ((units["commitlog_offset"] >= 0) & (units["size"] > 0)
                         & (units["msg_base_offset"] >= 0) & (units["batch_size"] > 0))
                count = n if valid.all() else int(np.argmin(valid))
                rows = [tuple(int(v) for v in u) for u in units[:count].tolist()]
                tail = bytes(buf[count * BCQ_UNIT_SIZE:])
                del units, valid
            self._check_tail(findings, file, count * BCQ_UNIT_SIZE, tail)
            for i, (phys, size, tags, store_time, base, batch, compacted, _reserved) in enumerate(rows):
                pos = i * BCQ_UNIT_SIZE
                if prev_base is not None and base <= prev_base:
                    self._add(findings, file, pos, "error", f"msgBaseOffset {base} is not after {prev_base}")
                if batch != 1:
                    self._add(findings, file, pos, "warning", f"batch size {batch} (a compaction CQ unit is 1)")
                if not f.start <= phys < f.start + max(self.log_file_size, 1):
                    self._add(findings, file, pos, "error", f"offset {phys} is outside the log file {f.name}")
                prev_base = base
                yield BcqUnit(base, phys, size, tags, store_time, batch, compacted, file, pos)

    def _check_tail(self, findings: Findings, file: str, pos: int, tail: bytes) -> None:
        """After the units: nothing, zeros, or the end unit followed by zeros."""
        rest = tail[BCQ_UNIT_SIZE:] if tail.startswith(END_UNIT_BYTES) else tail
        if any(rest):
            at = pos + (len(tail) - len(rest))
            self._add(findings, file, at, "error", "invalid unit; the broker's recovery ends the file here")

    # ----- both together -----
    def check(self, findings: Findings, verify_crc: bool = True) -> tuple[list[MessageRecord], list[BcqUnit]]:
        """Read both and check each unit against the record at its offset (topic, queue, size, queue offset,
        store time) and each record for a unit. Returns (records, units)."""
        records = list(self.iter_records(findings, verify_crc))
        units = list(self.iter_units(findings))
        by_offset = {r.physical_offset: r for r in records}
        served = set()
        for u in units:
            r = by_offset.get(u.commitlog_offset)
            if r is None:
                self._add(findings, u.file, u.position, "error", f"no compaction-log record at {u.commitlog_offset}")
                continue
            served.add(r.physical_offset)
            wrong = [f"{name} {mine} != record's {theirs}" for name, mine, theirs in (
                ("topic", self.topic, r.topic), ("queue", self.queue_id, r.queue_id), ("size", u.size, r.total_size),
                ("queue offset", u.queue_offset, r.queue_offset), ("store time", u.store_time, r.store_timestamp))
                if mine != theirs]
            if wrong:
                self._add(findings, u.file, u.position, "error", "unit disagrees with its record: " + "; ".join(wrong))
        for r in records:
            if r.physical_offset not in served:
                self._add(findings, r.file, r.physical_offset, "warning",
                          f"record at queue offset {r.queue_offset} has no compaction CQ unit (not served)")
        return records, units


def discover_compaction_queues(root: Path) -> list[tuple[str, int]]:
    """(topic, queue id) of every queue directory under compaction/compactionLog/ or compactionCq/."""
    found: set[tuple[str, int]] = set()
    for sub in (COMPACTION_LOG_DIR, COMPACTION_CQ_DIR):
        base = root / COMPACTION_DIR / sub
        if base.is_dir():
            for t in base.iterdir():
                if t.is_dir():
                    found |= {(t.name, int(q.name)) for q in t.iterdir() if q.is_dir() and q.name.lstrip("-").isdigit()}
    return sorted(found)


def read_position_checkpoint(root: Path, findings: Findings) -> dict[tuple[str, int], int] | None:
    """`compaction/position-checkpoint` (or its `.bak`, as `ConfigManager.load` falls back); None when
    neither exists. An unreadable file is a finding."""
    for name in (CHECKPOINT_FILE, CHECKPOINT_FILE + ".bak"):
        p = root / COMPACTION_DIR / name
        if not p.is_file():
            continue
        try:
            return parse_position_checkpoint(p.read_bytes().decode("utf-8", "replace"))
        except ConfigFileError as e:
            findings.add(str(p.relative_to(root)), None, CHECK, "error", f"unreadable position checkpoint: {e}")
    return None


def has_compaction(root: Path) -> bool:
    """Detection: the store has a compaction/ directory with a log or CQ directory."""
    return any((root / COMPACTION_DIR / d).is_dir() for d in (COMPACTION_LOG_DIR, COMPACTION_CQ_DIR))


def compaction_summary(root: Path, findings: Findings,
                       commitlog_counts: dict[tuple[str, int], int] | None = None) -> list[dict]:
    """Per compaction queue: files, records kept, units, queue offsets, the compacted-up-to offset and
    (given `commitlog_counts`, messages of that queue in its ordinary ConsumeQueue) what was in the CommitLog."""
    positions = read_position_checkpoint(root, findings) or {}
    rows = []
    for topic, qid in discover_compaction_queues(root):
        q = CompactionQueue.open(root, topic, qid, findings)
        records, units = q.check(findings)
        offsets = [u.queue_offset for u in units]
        rows.append({
            "topic": topic, "queue_id": qid, "log_files": len(q.log_files), "cq_files": len(q.cq_files),
            "records": len(records), "units": len(units),
            "min_queue_offset": min(offsets, default=None), "max_queue_offset": max(offsets, default=None),
            "compacted_to": positions.get((topic, qid)), "transient": q.transient,
            "in_commitlog": (commitlog_counts or {}).get((topic, qid)),
        })
    return rows
