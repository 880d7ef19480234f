"""A DLedger-mode CommitLog (spec §12), read-only: `dledger-<id>/data`, `index`, `checkpoint`, `currterm`.

Each entry's body is one ordinary CommitLog record (decoded by `formats.message.decode_message`) at
physical offset `entry pos + BODY_OFFSET`. The walk mirrors `DLedgerMmapFileStore.recover`: where the
broker's recovery would stop, the reader adds a finding (never raises) and goes on where it safely can.
A store converted from normal mode keeps offsets below dividedCommitlogOffset (the first data file's
name) in `commitlog/` (`DLedgerCommitLog.getData`); `iter_records` reads both as one CommitLog.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqtool.formats import layout
from mqtool.formats.dledger import (
    BLANK_MAGIC,
    BODY_OFFSET,
    CHECKPOINT_FILE,
    ENTRY_MAGIC,
    HEADER_SIZE,
    INDEX_UNIT_SIZE,
    TERM_FILE,
    entry_header,
    index_unit,
    parse_checkpoint,
    parse_currterm,
)
from mqtool.formats.message import MessageRecord, RecordError, decode_message
from mqtool.store import fastscan
from mqtool.store.commitlog import CommitLog, FileScan
from mqtool.store.dirs import find_dledger_dirs
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import MappedFile, MappedFileQueue, map_file, open_queue, read_at

CHECK = "dledger.integrity"
INDEX_CHECK = "dledger.index"
CHECKPOINT_CHECK = "dledger.checkpoint"
_HEADER = layout.struct_format(entry_header)
INDEX_DTYPE = layout.dtype(index_unit)
_ITEM_HEAD = layout.struct_format(layout.fields(entry_header)[:2])  # magic, size: an entry's or the filler's
_STOPS = "; the broker's recovery stops here and truncates what follows"


@dataclass
class DLedgerEntry:
    """One entry: where it lies (`offset`, global; `file`/`position`), its header, its decoded body."""

    offset: int
    file: str
    position: int
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_length: int
    record: MessageRecord | None = None

    @property
    def physical_offset(self) -> int:
        """Where the body (the CommitLog record) lies: what ConsumeQueues and msgIds use."""
        return self.offset + BODY_OFFSET

    def as_dict(self) -> dict:
        return {"index": self.index, "term": self.term, "pos": self.pos}


def _read_props(path: Path, parse, findings: Findings, rel: str) -> dict | None:
    if not path.is_file():
        return None
    try:
        return parse(path.read_text("utf-8", "replace"))
    except OSError as e:
        findings.add(rel, None, CHECKPOINT_CHECK, "warning", f"unreadable: {e}")
        return None


@dataclass
class DLedgerCommitLog:
    """The DLedger files of one node, plus the old `commitlog/` of a converted store."""

    root: Path
    home: Path
    data: MappedFileQueue
    index: MappedFileQueue
    checkpoint: dict | None
    currterm: dict | None
    old: MappedFileQueue | None
    file_findings: Findings = field(default_factory=Findings)

    @classmethod
    def open(cls, root: Path, self_id: str | None = None) -> "DLedgerCommitLog | None":
        """The store's DLedger CommitLog (`dledger-<self_id>`, or the only/first one); None in normal mode."""
        dirs = find_dledger_dirs(root)
        if self_id is not None:
            dirs = [d for d in dirs if d.name == f"dledger-{self_id}"]
        if not dirs:
            return None
        home = dirs[0]
        ff = Findings()
        for other in dirs[1:]:
            ff.add(str(other.relative_to(root)), None, CHECK, "info",
                   f"another DLedger node directory; reading {home.name}")
        data = open_queue(home / "data", None, "dledger.data", root)
        index = open_queue(home / "index", None, "dledger.index", root)
        rel = str(home.relative_to(root))
        cp = _read_props(home / CHECKPOINT_FILE, parse_checkpoint, ff, f"{rel}/{CHECKPOINT_FILE}")
        term = _read_props(home / TERM_FILE, parse_currterm, ff, f"{rel}/{TERM_FILE}")
        old = open_queue(root / "commitlog", None, "commitlog", root) if (root / "commitlog").is_dir() else None
        if old is not None and not old.files:
            old = None
        for q in (data, index) + ((old,) if old else ()):
            ff.extend(q.findings)
        return cls(root, home, data, index, cp, term, old, ff)

    @property
    def divided_offset(self) -> int:
        """dividedCommitlogOffset: the first data file's name; -1 before DLedger wrote any file."""
        return self.data.files[0].start if self.data.files else -1

    def rel(self, f: MappedFile) -> str:
        return str(f.path.relative_to(self.root))

    # ------------------------------------------------------------------ data files
    def iter_entries(self, findings: Findings, decode: bool = True) -> Iterator[DLedgerEntry]:
        """Every entry in data-file order, checked as `DLedgerMmapFileStore.recover` does.

        With `decode`, each body is decoded as a CommitLog record (`entry.record`, carrying
        `extra["dledger"]`) and checked (TOTALSIZE vs body length, PHYSICALOFFSET, body CRC).
        """
        findings.extend(self.file_findings)
        last: DLedgerEntry | None = None
        ended_at: tuple[str, int] | None = None  # where the broker's recovery would stop
        for f in self.data.files:
            file = self.rel(f)
            if ended_at is not None:
                findings.add(file, 0, CHECK, "error", f"data file after the end of the data at {ended_at[0]}:"
                             f"{ended_at[1]}: the broker's recovery truncates it")
            stop: list[int] = []
            with map_file(f.path) as buf:
                for e in self._scan_file(f, file, buf, findings, decode, last, stop):
                    last = e
                    yield e
            if stop and ended_at is None and f is not self.data.files[-1]:
                ended_at = (file, stop[0])

    def _scan_file(self, f: MappedFile, file: str, buf, findings: Findings, decode: bool,
                   last: DLedgerEntry | None, stop: list[int], start: int = 0,
                   upto: int | None = None) -> Iterator[DLedgerEntry]:
        """Entries of one file from position `start` (an entry start) to the first entry at or after
        `upto` (an audit slice); appends to `stop` where the data ended without a filler."""
        p, n = start, len(buf)
        while upto is None or p < upto:
            if n - p < 8:
                if n - p and any(bytes(buf[p:])):
                    findings.add(file, p, CHECK, "error", f"{n - p} stray bytes at the file's end" + _STOPS)
                if n - p:
                    stop.append(p)
                return
            magic, size = _ITEM_HEAD.unpack_from(buf, p)
            if magic == BLANK_MAGIC:
                if size != n - p:
                    findings.add(file, p, CHECK, "warning",
                                 f"end-of-file filler declares {size} bytes, {n - p} remain in the file")
                return
            if size == 0:  # recover(): "Recover data file to the end"
                tail = bytes(buf[p:]).rstrip(b"\x00")
                if tail:
                    findings.add(file, p, CHECK, "error", f"torn tail: {len(tail)} bytes after the end of the "
                                 "data (an entry with size 0)" + _STOPS)
                stop.append(p)
                return
            e = self._entry(f, file, buf, p, findings, last)
            if e is None:
                stop.append(p)
                return
            if decode:
                e.record = self._body(file, buf, f, e, findings)
            last = e
            yield e
            p += e.size

    def _entry(self, f: MappedFile, file: str, buf, p: int, findings: Findings,
               last: DLedgerEntry | None) -> DLedgerEntry | None:
        """The entry header at p, or None (with a finding) where recovery would stop."""
        offset = f.start + p
        if len(buf) - p < BODY_OFFSET:
            findings.add(file, p, CHECK, "error", f"torn entry: {len(buf) - p} bytes, a header needs "
                         f"{BODY_OFFSET}" + _STOPS)
            return None
        e = DLedgerEntry(offset, file, p, *_HEADER.unpack_from(buf, p))
        problem = None
        if e.magic != ENTRY_MAGIC:
            problem = f"unknown entry magic {e.magic}"
        elif e.pos != offset:
            problem = f"entry pos field {e.pos} != its offset {offset}"
        elif e.size <= HEADER_SIZE or e.body_length + BODY_OFFSET != e.size:
            problem = f"entry size {e.size} != {BODY_OFFSET} + body length {e.body_length}"
        elif p + e.size > len(buf):
            problem = f"torn entry: size {e.size} runs past the file's end ({len(buf) - p} bytes left)"
        if problem:
            findings.add(file, p, CHECK, "error", problem + _STOPS)
            return None
        if last is not None and e.index != last.index + 1:
            findings.add(file, p, CHECK, "error", f"entry index {e.index} does not follow {last.index}" + _STOPS)
        if last is not None and e.term < last.term:
            findings.add(file, p, CHECK, "error", f"entry term {e.term} is below the previous {last.term}" + _STOPS)
        return e

    def _body(self, file: str, buf, f: MappedFile, e: DLedgerEntry, findings: Findings) -> MessageRecord | None:
        """The CommitLog record in an entry's body, checked against the entry."""
        body = e.position + BODY_OFFSET
        try:
            rec = decode_message(memoryview(buf)[: e.position + e.size], body, f.start)
        except RecordError as err:
            findings.add(file, body, CHECK, "error", f"entry {e.index}: body is not a CommitLog record "
                         f"({err.reason})")
            return None
        rec.file, rec.position = file, body
        rec.extra["dledger"] = e.as_dict()
        if rec.total_size != e.body_length:
            findings.add(file, body, CHECK, "error",
                         f"entry {e.index}: record TOTALSIZE {rec.total_size} != body length {e.body_length}")
        if rec.physical_offset_field != rec.physical_offset:
            findings.add(file, body, CHECK, "error", f"entry {e.index}: PHYSICALOFFSET field "
                         f"{rec.physical_offset_field} != entry pos + {BODY_OFFSET} = {rec.physical_offset}")
        if not rec.crc_ok:
            findings.add(file, body, CHECK, "error", f"entry {e.index}: body CRC mismatch (stored {rec.body_crc})")
        return rec

    # ------------------------------------------------------------------ index files
    def index_units(self, findings: Findings) -> tuple[int, np.ndarray]:
        """(first unit number, written units) of the index files, up to the first unwritten (zero) unit."""
        parts: list[np.ndarray] = []
        first = self.index.files[0].start // INDEX_UNIT_SIZE if self.index.files else 0
        for f in self.index.files:
            file = self.rel(f)
            if f.start % INDEX_UNIT_SIZE or f.length % INDEX_UNIT_SIZE:
                findings.add(file, None, INDEX_CHECK, "error",
                             f"index file start {f.start} / length {f.length} not a multiple of {INDEX_UNIT_SIZE}")
            units = np.fromfile(f.path, INDEX_DTYPE, count=f.length // INDEX_UNIT_SIZE)
            zero = units["magic"] == 0
            if zero.any():
                k = int(np.argmax(zero))
                parts.append(units[:k])
                if units[k:].view(np.uint8).any():
                    findings.add(file, k * INDEX_UNIT_SIZE, INDEX_CHECK, "warning",
                                 "index units after an unwritten one (ignored)")
                break
            parts.append(units)
        return first, (np.concatenate(parts) if parts else np.zeros(0, INDEX_DTYPE))

    def check_index(self, entries: list[DLedgerEntry], findings: Findings) -> None:
        """Each entry's index unit (at index * 32) says its magic, pos, size, index and term; no extra units."""
        first, units = self.index_units(findings)
        for e in entries:
            k = e.index - first
            if not 0 <= k < len(units):
                findings.add(e.file, e.position, INDEX_CHECK, "error",
                             f"entry {e.index} has no index unit; the broker's recovery rewrites the index from here")
                continue
            u = units[k]
            got = (int(u["magic"]), int(u["pos"]), int(u["size"]), int(u["index"]), int(u["term"]))
            want = (e.magic, e.offset, e.size, e.index, e.term)
            if got != want:
                findings.add(self._index_file(e.index), (e.index * INDEX_UNIT_SIZE) % max(self.index.file_size, 1),
                             INDEX_CHECK, "error", f"index unit {e.index} says (magic, pos, size, index, term) "
                             f"{got}, the entry at {e.file}:{e.position} is {want}")
        end = (entries[-1].index + 1 - first) if entries else 0
        if len(units) > end:
            findings.add(self._index_file(first + end), None, INDEX_CHECK, "warning",
                         f"{len(units) - end} index unit(s) past the last entry "
                         f"{entries[-1].index if entries else None}: the broker's recovery truncates them")

    def _index_file(self, index: int) -> str:
        f = self.index.file_for(index * INDEX_UNIT_SIZE)
        return self.rel(f) if f else str(self.index.directory.relative_to(self.root))

    # ------------------------------------------------------------------ checkpoint
    def check_checkpoint(self, entries: list[DLedgerEntry], findings: Findings) -> None:
        """`checkpoint`'s committedIndex / endIndex against the entries on disk."""
        rel = str((self.home / CHECKPOINT_FILE).relative_to(self.root))
        last = entries[-1].index if entries else -1
        cp = self.checkpoint
        if cp is None:
            if entries:
                findings.add(rel, None, CHECKPOINT_CHECK, "warning", "no checkpoint: the broker starts with no "
                             "committed index and serves nothing until entries are committed again")
            return
        committed, end = cp["committed_index"], cp["end_index"]
        if committed is None:
            findings.add(rel, None, CHECKPOINT_CHECK, "warning", "checkpoint has no readable committedIndex")
        elif committed > last:
            findings.add(rel, None, CHECKPOINT_CHECK, "error", f"committedIndex {committed} is past the last "
                         f"entry on disk {last}: committed entries are missing")
        elif committed < last:
            findings.add(rel, None, CHECKPOINT_CHECK, "warning", f"entries {committed + 1}..{last} are past "
                         f"committedIndex {committed}: the broker serves CommitLog data only up to the committed entry")
        if end is not None and end != last:
            findings.add(rel, None, CHECKPOINT_CHECK, "info", f"checkpoint endIndex {end} != last entry {last} "
                         "(the checkpoint is written every few seconds)")

    def committed_pos(self, entries: list[DLedgerEntry]) -> int | None:
        """committedPos (`getCommittedPos`): the end of the committed entry, the broker's CommitLog max offset."""
        c = (self.checkpoint or {}).get("committed_index")
        if c is None:
            return None
        hit = [e for e in entries if e.index == min(c, entries[-1].index)] if entries else []
        return hit[0].offset + hit[0].size if hit else None

    # ------------------------------------------------------------------ one CommitLog
    def iter_records(self, findings: Findings) -> Iterator[MessageRecord]:
        """Every CommitLog record: the old `commitlog/` below dividedCommitlogOffset, then the entries' bodies."""
        divided = self.divided_offset
        if self.old is not None:
            yield from self._old_records(findings, divided)
        for e in self.iter_entries(findings):
            if e.record is not None:
                yield e.record

    def _old_records(self, findings: Findings, divided: int) -> Iterator[MessageRecord]:
        cl = CommitLog(self.root, self.old)
        for rec in cl.iter_records():
            if divided < 0 or rec.physical_offset < divided:
                yield rec
        findings.extend(cl.findings)
        last = self.old.files[-1]
        end = last.start + self.old.file_size
        if divided >= 0 and end != divided:
            findings.add(self.rel(last), None, CHECK, "warning", f"the old CommitLog's last file ends at {end}, "
                         f"DLedger data starts at dividedCommitlogOffset {divided}")

    def audit(self, findings: Findings) -> dict:
        """Walk everything once (data, index, checkpoint); a summary of what was found."""
        entries = list(self.iter_entries(findings))
        self.check_index(entries, findings)
        self.check_checkpoint(entries, findings)
        return {
            "home": str(self.home.relative_to(self.root)),
            "entries": len(entries),
            "begin_index": entries[0].index if entries else -1,
            "end_index": entries[-1].index if entries else -1,
            "end_term": entries[-1].term if entries else -1,
            "committed_index": (self.checkpoint or {}).get("committed_index"),
            "committed_pos": self.committed_pos(entries),
            "divided_commitlog_offset": self.divided_offset,
            "curr_term": (self.currterm or {}).get("curr_term"),
            "vote_leader": (self.currterm or {}).get("vote_leader"),
        }


@dataclass
class DLedgerCommitLogView(CommitLog):
    """A DLedger store's CommitLog as every view reads it, through `CommitLog`'s interface.

    `queue` lists the old `commitlog/` files below dividedCommitlogOffset (a converted store) and then
    the DLedger data files. A body's physical offset is entry pos + 48 = the data file's name + its
    position there, so `read(offset)`, ConsumeQueue lookups and the column positions work unchanged;
    only the walk differs: entries are walked as `DLedgerCommitLog._scan_file` does (its findings),
    and each body is decoded by the fast path's kernel (one call per entry). Records carry
    `extra["dledger"]` (index, term, pos); column chunks carry them as `ScanChunk.dledger`.
    """

    dl: DLedgerCommitLog | None = None
    _last: DLedgerEntry | None = field(default=None, repr=False)

    @classmethod
    def of(cls, dl: DLedgerCommitLog) -> "DLedgerCommitLogView":
        divided = dl.divided_offset
        old = [f for f in (dl.old.files if dl.old else []) if divided < 0 or f.start < divided]
        listing = Findings(dl.file_findings)
        queue = MappedFileQueue(dl.data.directory, old + dl.data.files, dl.data.file_size or
                                (dl.old.file_size if dl.old else 0), listing)
        return cls(dl.root, queue, dl=dl)

    def _is_data(self, f: MappedFile) -> bool:
        return f.path.parent == self.dl.data.directory

    def _chunks(self, buf, f: MappedFile, pos: int, scan: FileScan, verify_crc: bool, acc: Findings,
                chunk_records: int = fastscan.DEFAULT_CHUNK) -> Iterator[fastscan.ScanChunk]:
        if not self._is_data(f):
            divided = self.dl.divided_offset
            for chunk in super()._chunks(buf, f, pos, scan, verify_crc, acc, chunk_records):
                keep = chunk.cols[fastscan.C_POS] + f.start < divided if divided >= 0 else None
                if keep is not None and not keep.all():
                    chunk = fastscan.ScanChunk(chunk.base_offset, chunk.cols[:, keep], chunk.end, chunk.stop,
                                               chunk.detail, chunk.crc_checked, chunk.file_size)
                yield chunk
            return
        yield from self._entry_chunks(buf, f, pos, scan, verify_crc, acc, chunk_records)

    def slice_chunks(self, buf, path: str, begin: int, end: int, verify_crc: bool = True,
                     chunk_records: int = fastscan.DEFAULT_CHUNK) -> Iterator[fastscan.ScanChunk]:
        """The chunks of the records whose body starts in [begin, end) of one data file (an audit slice;
        cuts lie at body starts). Entry-level findings are left to `DLedgerCommitLog.audit`."""
        f = next(x for x in self.queue.files if str(x.path) == str(path))
        scan = FileScan(self.rel(f), f.start)
        yield from self._entry_chunks(buf, f, begin, scan, verify_crc, Findings(), chunk_records, end,
                                      max(0, begin - BODY_OFFSET))

    def is_data_file(self, path: str) -> bool:
        return any(str(f.path) == str(path) and self._is_data(f) for f in self.queue.files)

    def _entry_chunks(self, buf, f: MappedFile, pos: int, scan: FileScan, verify_crc: bool, acc: Findings,
                      chunk_records: int, upto: int | None = None,
                      first: int = 0) -> Iterator[fastscan.ScanChunk]:
        """Column chunks of the entry bodies of one data file, from position `pos` (to `upto`); the
        walk of entry headers begins at `first` (0, or the entry start of an audit slice's cut)."""
        file = self.rel(f)
        if f is self.dl.data.files[0]:
            self._last = None
        stop: list[int] = []
        rows: list[np.ndarray] = []
        ents: list[tuple[int, int, int]] = []
        end = 0
        a = fastscan.as_array(buf)

        def chunk(final: int, code: int) -> fastscan.ScanChunk:
            cols = np.stack(rows, axis=1) if rows else np.zeros((fastscan.NCOL, 0), np.int64)
            de = np.array(ents, np.int64).T if ents else np.zeros((3, 0), np.int64)
            return fastscan.ScanChunk(f.start, cols, final, code, 0, verify_crc, len(buf), de)

        try:
            for e in self.dl._scan_file(f, file, buf, acc, False, self._last, stop, first):
                self._last = e
                end = e.position + e.size
                body = e.position + BODY_OFFSET
                if body < pos:
                    continue
                if upto is not None and body >= upto:
                    end = e.position
                    break
                one = next(fastscan.iter_commitlog_chunks(a[:end], f.start, body, verify_crc, 1, release=False))
                if not len(one):
                    acc.add(file, body, CHECK, "error", f"entry {e.index}: body is not a CommitLog record "
                            f"({fastscan.stop_reason(one.stop, one.detail)})")
                    continue
                if int(one.cols[fastscan.C_TOTAL, 0]) != e.body_length:
                    acc.add(file, body, CHECK, "error", f"entry {e.index}: record TOTALSIZE "
                            f"{int(one.cols[fastscan.C_TOTAL, 0])} != body length {e.body_length}")
                rows.append(one.cols[:, 0])
                ents.append((e.index, e.term, e.pos))
                if len(rows) == chunk_records:
                    yield chunk(end, fastscan.STOP_MORE)
                    rows, ents = [], []
        finally:
            del a
        if upto is not None and end < len(buf) and end == upto - BODY_OFFSET:
            code, reason = fastscan.STOP_END_OF_FILE, "end of range"
        elif stop:
            zero = not any(bytes(buf[stop[0]:]))
            code, reason = ((fastscan.STOP_ZERO_TAIL, "unwritten (zero) tail") if zero
                            else (fastscan.BAD_HEADER, "invalid entry"))
        elif end < len(buf):
            code, reason = fastscan.STOP_END_OF_FILE, "blank filler"
        else:
            code, reason = fastscan.STOP_END_OF_FILE, "end of file"
        scan.valid_bytes, scan.stop_reason = end, reason
        scan.trailing_bytes = len(bytes(buf[end:]).rstrip(b"\x00")) if code == fastscan.BAD_HEADER else 0
        yield chunk(end, code)

    def read(self, offset: int) -> MessageRecord:
        """The record at a physical offset; in a data file with its entry's `extra["dledger"]`."""
        rec = super().read(offset)
        f = self.queue.file_for(offset)
        if f is not None and self._is_data(f) and rec.position >= BODY_OFFSET:
            head = read_at(f.path, rec.position - BODY_OFFSET, BODY_OFFSET)
            if len(head) == BODY_OFFSET:
                magic, _size, index, term, pos = _HEADER.unpack_from(head, 0)[:5]
                if magic == ENTRY_MAGIC and pos == offset - BODY_OFFSET:
                    rec.extra["dledger"] = {"index": index, "term": term, "pos": pos}
        return rec
