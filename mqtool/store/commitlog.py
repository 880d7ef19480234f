"""The CommitLog as a read-only sequence of records across its mapped files (spec §2.7).

A file is scanned from its start until the BLANK filler, an unwritten (zero) tail, or the first
invalid record (a torn tail: the broker's recovery truncates there). Everything unusual becomes a
`Finding` added to the `Findings` accumulator the walk is given; nothing in the data raises.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.formats.message import MessageRecord, RecordError, decode_message
from mqtool.store import fastscan
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import MappedFile, MappedFileQueue, map_file, open_queue, read_at

CHECK = "commitlog.integrity"
RECHECKED_FILES = 3  # CommitLog#recoverNormally walks the last three files again at every start


@dataclass
class FileScan:
    """How a scan of one file ended: valid bytes, why it stopped, bytes left after the stop."""

    file: str
    start: int
    valid_bytes: int = 0
    stop_reason: str = "end of file"
    trailing_bytes: int = 0
    records: int = 0
    finished: bool = False  # the walk reached the file's end of data (a walk cut short leaves it False)


@dataclass
class CommitLog:
    """Read-only CommitLog: `iter_records` walks every file; `read` decodes one record by offset.

    Each walk adds its findings to the `Findings` accumulator it is given (a new one by default);
    `findings` is the accumulator of the latest walk, so `cl.findings` after a walk is what it found.
    """

    root: Path
    queue: MappedFileQueue
    findings: Findings = field(default_factory=Findings)
    scans: dict[str, FileScan] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path, configured_size: int | None = None, findings: Findings | None = None,
             expected_size: int | None = None) -> "CommitLog":
        """`findings` receives what listing the files finds (also kept as `queue.findings`); `expected_size`:
        broker.conf's mappedFileSizeCommitLog when it sets one (every file must have that length)."""
        return cls(root, open_queue(root / "commitlog", configured_size, "commitlog", root, findings, expected_size))

    def _walk_findings(self, findings: Findings | None) -> Findings:
        """The accumulator a walk adds to; it becomes `self.findings` (the latest walk's)."""
        self.findings = Findings() if findings is None else findings
        return self.findings

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    def rel(self, f: MappedFile) -> str:
        return str(f.path.relative_to(self.root))

    def iter_records(self, start: int | None = None, verify_crc: bool = True,
                     findings: Findings | None = None) -> Iterator[MessageRecord]:
        """Every record from `start` (a record boundary; default the first), across files.

        Findings from the walk are added to `findings` and each file's end to `self.scans`.
        """
        acc = self._walk_findings(findings)
        for f in self.files:
            if start is not None and f.start + f.length <= start:
                continue
            first = start - f.start if start is not None and start > f.start else 0
            yield from self._scan_file(f, first, verify_crc, acc)

    def _scan_file(self, f: MappedFile, pos: int, verify_crc: bool, acc: Findings) -> Iterator[MessageRecord]:
        scan = FileScan(self.rel(f), f.start)
        self.scans[scan.file] = scan
        with map_file(f.path) as buf:
            for chunk in self._chunks(buf, f, pos, scan, verify_crc, acc):
                findings = {}
                for row, message in fastscan.record_findings(chunk):
                    findings.setdefault(row, []).append(message)
                for row, rec in enumerate(fastscan.records_from_chunk(buf, chunk, scan.file)):
                    for message in findings.get(row, ()):
                        acc.add(scan.file, rec.physical_offset, CHECK, "error", message)
                    scan.records += 1
                    yield rec

    def _chunks(self, buf, f: MappedFile, pos: int, scan: FileScan, verify_crc: bool, acc: Findings,
                chunk_records: int = fastscan.DEFAULT_CHUNK) -> Iterator[fastscan.ScanChunk]:
        """The fast scan of one file; records the file's end in `scan` and the stop finding."""
        ahead = sum(g.length for g in self.files if g.start > f.start)  # lets the scan choose its engine
        for chunk in fastscan.iter_commitlog_chunks(buf, f.start, pos, verify_crc, chunk_records, ahead=ahead):
            yield chunk
            if chunk.finished:
                scan.finished = True
                scan.valid_bytes = chunk.end
                scan.stop_reason = fastscan.stop_reason(chunk.stop, chunk.detail)
                stop = fastscan.stop_finding(buf, chunk.stop, chunk.detail, chunk.end)
                if stop is not None:
                    acc.add(scan.file, f.start + chunk.end, CHECK, *stop)
                scan.trailing_bytes = (_nonzero_tail(buf, chunk.end)
                                       if scan.stop_reason.startswith("invalid") else 0)

    def scan_columns(self, start: int | None = None, verify_crc: bool = True,
                     chunk_records: int = fastscan.DEFAULT_CHUNK,
                     findings: Findings | None = None) -> Iterator[tuple[MappedFile, fastscan.ScanChunk]]:
        """The same walk as `iter_records`, as column chunks (no Python object per record).

        Yields (file, chunk) with numpy columns (`fastscan.COLUMNS`; positions index the file). The
        mapping is open only while a chunk is being handled: use the columns then, or copy what
        must outlive it (`fastscan.chunk_to_arrow(buf, chunk)` needs the buffer: use `map_file`).
        Per-record findings (PHYSICALOFFSET, CRC) and stop findings go to `findings`, file ends to
        `self.scans`, exactly as with `iter_records`.
        """
        for f, _buf, chunk in self._mapped_chunks(start, verify_crc, chunk_records, findings):
            yield f, chunk

    def scan_mapped(self, start: int | None = None, verify_crc: bool = True,
                    chunk_records: int = fastscan.DEFAULT_CHUNK, findings: Findings | None = None
                    ) -> Iterator[tuple[MappedFile, object, fastscan.ScanChunk]]:
        """`scan_columns` with the file's open mapping: (file, mapping, chunk). Read the chunk's bytes
        (topics, bodies) through this mapping while handling the chunk: its pages are the ones the
        scan just faulted in (a second mapping would fault every page again). The mapping is closed
        when the scan moves to the next file."""
        yield from self._mapped_chunks(start, verify_crc, chunk_records, findings)

    def iter_batches(self, start: int | None = None, verify_crc: bool = True,
                     chunk_records: int = fastscan.DEFAULT_CHUNK, findings: Findings | None = None):
        """The records as `pyarrow.RecordBatch`es (`fastscan.chunk_to_arrow`: every field, body,
        topic, properties as a map), with the same findings and file ends as `iter_records`."""
        for f, buf, chunk in self._mapped_chunks(start, verify_crc, chunk_records, findings):
            if len(chunk):
                yield fastscan.chunk_to_arrow(buf, chunk, self.rel(f))

    def _mapped_chunks(self, start: int | None, verify_crc: bool, chunk_records: int, findings: Findings | None):
        """(file, open mapping, chunk) for every chunk from `start`, recording findings and file ends."""
        acc = self._walk_findings(findings)
        for f in self.files:
            if start is not None and f.start + f.length <= start:
                continue
            first = start - f.start if start is not None and start > f.start else 0
            scan = FileScan(self.rel(f), f.start)
            self.scans[scan.file] = scan
            with map_file(f.path) as buf:
                for chunk in self._chunks(buf, f, first, scan, verify_crc, acc, chunk_records):
                    for row, message in fastscan.record_findings(chunk):
                        acc.add(scan.file, int(chunk.cols[fastscan.C_POS, row]) + f.start, CHECK, "error", message)
                    scan.records += len(chunk)
                    yield f, buf, chunk

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

    def max_offset(self, findings: Findings | None = None) -> int:
        """End of valid data: `MappedFileQueue.getMaxOffset` once a restart's recovery has set the wrote positions.

        The walk of the last `RECHECKED_FILES` files goes on into the next file only past a BLANK filler; an
        unwritten tail or an invalid record ends the data in its file, so a pre-allocated empty file (or data)
        after it adds nothing: recovery deletes it. Structural only: the CRC check of `checkCRCOnRecover` is
        `rules.recovery`'s (`store.recovery.log_end`). Scans each of those files not yet scanned once, adding
        what it finds to `findings`, by default the latest walk's accumulator."""
        files = self.files[-RECHECKED_FILES:]
        for f in files:
            scan = self._file_scan(f, findings)
            if f is files[-1] or scan.stop_reason != "blank filler":
                return f.start + scan.valid_bytes
        return 0

    def _file_scan(self, f: MappedFile, findings: Findings | None) -> FileScan:
        """The file's scan, from the latest walk or scanned now (the walk of `_scan_file`, no record objects)."""
        scan = self.scans.get(self.rel(f))
        if scan is not None and scan.finished:  # a walk cut short (a --limit) says nothing of the file's end
            return scan
        acc = self.findings if findings is None else findings
        scan = self.scans[self.rel(f)] = FileScan(self.rel(f), f.start)
        with map_file(f.path) as buf:
            for chunk in self._chunks(buf, f, 0, scan, False, acc):
                found: dict[int, list[str]] = {}
                for row, message in fastscan.record_findings(chunk):
                    found.setdefault(row, []).append(message)
                for row in sorted(found):
                    for message in found[row]:
                        acc.add(scan.file, int(chunk.cols[fastscan.C_POS, row]) + f.start, CHECK, "error", message)
                scan.records += len(chunk)
        return scan


def _nonzero_tail(buf, pos: int) -> int:
    """Bytes from pos to the last non-zero byte: what a torn tail leaves unread."""
    end = len(buf)
    tail = bytes(buf[pos:end]).rstrip(b"\x00")
    return len(tail)
