"""The CommitLog as a read-only sequence of records across its mapped files (spec §2.7).

A file is scanned from its start until the BLANK filler, an unwritten (zero) tail, or the first
invalid record (a torn tail: the broker's recovery truncates there). Everything unusual becomes a
`Finding`; nothing in the data raises.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.formats.message import MessageRecord, RecordError, decode_message, peek_magic
from mqtool.store.findings import Finding
from mqtool.store.mapped_files import MappedFile, MappedFileQueue, map_file, open_queue, read_at

CHECK = "commitlog.integrity"


@dataclass
class FileScan:
    """How a scan of one file ended: valid bytes, why it stopped, bytes left after the stop."""

    file: str
    start: int
    valid_bytes: int = 0
    stop_reason: str = "end of file"
    trailing_bytes: int = 0
    records: int = 0


@dataclass
class CommitLog:
    """Read-only CommitLog: `iter_records` walks every file; `read` decodes one record by offset."""

    root: Path
    queue: MappedFileQueue
    findings: list[Finding] = field(default_factory=list)
    scans: dict[str, FileScan] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path, configured_size: int | None = None) -> "CommitLog":
        return cls(root, open_queue(root / "commitlog", configured_size, "commitlog", root))

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    def rel(self, f: MappedFile) -> str:
        return str(f.path.relative_to(self.root))

    def iter_records(self, start: int | None = None, verify_crc: bool = True) -> Iterator[MessageRecord]:
        """Every record from `start` (a record boundary; default the first), across files.

        Findings from the walk are appended to `self.findings` and each file's end to `self.scans`.
        """
        self.findings = []
        for f in self.files:
            if start is not None and f.start + f.length <= start:
                continue
            first = start - f.start if start is not None and start > f.start else 0
            yield from self._scan_file(f, first, verify_crc)

    def _scan_file(self, f: MappedFile, pos: int, verify_crc: bool) -> Iterator[MessageRecord]:
        scan = FileScan(self.rel(f), f.start)
        self.scans[scan.file] = scan
        with map_file(f.path) as buf:
            pos = yield from self._walk(buf, f, pos, scan, verify_crc)
            scan.valid_bytes = pos
            scan.trailing_bytes = _nonzero_tail(buf, pos) if scan.stop_reason.startswith("invalid") else 0

    def _walk(self, buf, f: MappedFile, pos: int, scan: FileScan, verify_crc: bool):
        rel = scan.file
        while True:
            head = peek_magic(buf, pos)
            if head is None:
                # fewer than 8 bytes left: a full file ends here without a filler
                scan.stop_reason = "end of file"
                return pos
            total, magic = head
            if magic == BLANK_MAGIC_CODE:
                scan.stop_reason = "blank filler"
                if total != len(buf) - pos:
                    self._add(rel, f.start + pos, "warning",
                              f"BLANK filler declares {total} bytes, {len(buf) - pos} remain in the file")
                return pos
            if total == 0 and magic == 0:
                # pre-allocated, never written: the end of the data in this file
                scan.stop_reason = "unwritten (zero) tail"
                return pos
            try:
                rec = decode_message(buf, pos, f.start)
            except RecordError as e:
                scan.stop_reason = f"invalid record: {e.reason}"
                self._add(rel, f.start + pos, "error", f"{e.reason}; the broker's recovery treats this as "
                          "the end of valid data (torn tail)")
                return pos
            if rec.total_size != rec.computed_size or rec.total_size <= 0:
                scan.stop_reason = "invalid record: size mismatch"
                self._add(rel, f.start + pos, "error", f"TOTALSIZE {rec.total_size} != computed length "
                          f"{rec.computed_size}; the broker's recovery treats this as the end of valid data")
                return pos
            rec.file, rec.position = rel, pos
            self._check(rec, verify_crc)
            scan.records += 1
            yield rec
            pos += rec.total_size

    def _check(self, rec: MessageRecord, verify_crc: bool) -> None:
        if rec.physical_offset_field != rec.physical_offset:
            self._add(rec.file, rec.physical_offset, "error",
                      f"PHYSICALOFFSET field {rec.physical_offset_field} != position {rec.physical_offset}")
        if verify_crc and not rec.crc_ok:
            self._add(rec.file, rec.physical_offset, "error",
                      f"body CRC mismatch (stored {rec.body_crc}); recovery with checkCRCOnRecover stops here")

    def _add(self, file: str, offset: int, severity: str, message: str) -> None:
        self.findings.append(Finding(file, offset, CHECK, severity, message))

    def read(self, offset: int) -> MessageRecord:
        """The record at a physical offset; RecordError when none starts there."""
        f = self.queue.file_for(offset)
        if f is None:
            raise RecordError(f"offset {offset} is in no CommitLog file")
        pos = offset - f.start
        head = read_at(f.path, pos, 8)
        if len(head) < 8:
            raise RecordError(f"offset {offset} is past the end of {f.name}")
        total = int.from_bytes(head[:4], "big", signed=True)
        if total <= 0 or total > (1 << 30):
            raise RecordError(f"no record at {offset} (TOTALSIZE {total})")
        data = read_at(f.path, pos, total)
        rec = decode_message(data, 0, offset)
        rec.file, rec.position = self.rel(f), pos
        return rec

    def max_offset(self) -> int:
        """End of valid data: the last file's scan end (scans the last file once)."""
        if not self.files:
            return 0
        last = self.files[-1]
        scan = self.scans.get(self.rel(last))
        if scan is None:
            for _ in self._scan_file(last, 0, verify_crc=False):
                pass
            scan = self.scans[self.rel(last)]
        return last.start + scan.valid_bytes


def _nonzero_tail(buf, pos: int) -> int:
    """Bytes from pos to the last non-zero byte: what a torn tail leaves unread."""
    end = len(buf)
    tail = bytes(buf[pos:end]).rstrip(b"\x00")
    return len(tail)
