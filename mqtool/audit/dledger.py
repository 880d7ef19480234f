"""DLedger CommitLog audit (spec §12) as tasks and a driver, so Spark runs it where the data lies.

The checks are `DLedgerCommitLog`'s (the walk of `DLedgerMmapFileStore.recover`), cut into slices:

- planning: a data file larger than `split_bytes` is cut at entry starts found in the DLedger index
  file (binary search on the units' `pos`), each checked against the data (magic, pos field). A
  cut is the entry's body start (pos + 48), the same cut the CommitLog slices use (`plan.py`);
- task (`check_dledger_slice`): walks the entries of one slice (magic, size, pos, index and term
  continuity inside the slice) and compares each with its index unit (index file vs data);
- driver (`check_dledger`): continuity between slices and files, index units past the last entry,
  `checkpoint`'s committedIndex against the data's end, and the `dledger` part of the summary.

Findings and messages are those of `DLedgerCommitLog.audit`, the serial walk (tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqtool.audit.records import FileSlice
from mqtool.audit.results import DLedgerSliceResult
from mqtool.formats import layout
from mqtool.formats.dledger import BODY_OFFSET, ENTRY_MAGIC, INDEX_UNIT_SIZE, entry_header, index_unit
from mqtool.store.dledger import (
    _STOPS,
    CHECK,
    INDEX_CHECK,
    INDEX_DTYPE,
    DLedgerCommitLog,
    DLedgerEntry,
    find_dledger_dirs,
)
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import MappedFile, map_file

_HEAD = layout.struct_format(entry_header)
_UNIT = layout.struct_format(index_unit)


@dataclass(frozen=True)
class DLedgerSliceTask(FileSlice):
    """Entries starting in [begin, end) of one DLedger data file (`begin`/`end`: entry starts or the file's end)."""

    file_no: int  # position of the file among the data files
    last_file: bool


def open_dledger(root: Path | str) -> DLedgerCommitLog | None:
    root = Path(root)
    return DLedgerCommitLog.open(root) if find_dledger_dirs(root) else None


# ------------------------------------------------------------------ planning
def is_data_file(dl: DLedgerCommitLog | None, f: MappedFile) -> bool:
    return dl is not None and f.path.parent == dl.data.directory


def dledger_cuts(dl: DLedgerCommitLog, f: MappedFile, split: int) -> list[int]:
    """Body starts (entry pos + 48, file positions) about `split` bytes apart, from the index file.

    For each target the first indexed entry at or after it is taken, if it lies before the next
    target and the data holds that entry there (magic, pos field); otherwise the file is not cut there.
    """
    targets = list(range(split, f.length, split))
    cuts: list[int] = []
    with map_file(f.path) as buf:
        for t, nxt in zip(targets, targets[1:] + [f.length], strict=True):
            pos = _first_entry_at_or_after(dl, f.start + t)
            if pos is None or not f.start + t <= pos < f.start + nxt:
                continue
            p = pos - f.start
            if p + BODY_OFFSET <= len(buf):
                magic, _size, _index, _term, at = _HEAD.unpack_from(buf, p)[:5]
                if magic == ENTRY_MAGIC and at == pos and (not cuts or p + BODY_OFFSET > cuts[-1]):
                    cuts.append(p + BODY_OFFSET)
    return cuts


def _first_entry_at_or_after(dl: DLedgerCommitLog, target: int) -> int | None:
    """The smallest indexed entry pos >= target: a binary search over the written units (they grow with
    the index; an unwritten unit, magic 0, counts as the end)."""
    for f in dl.index.files:
        with map_file(f.path) as buf:
            n = len(buf) // INDEX_UNIT_SIZE
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) // 2
                magic, pos = _UNIT.unpack_from(buf, mid * INDEX_UNIT_SIZE)[:2]
                if magic == 0 or pos >= target:
                    hi = mid
                else:
                    lo = mid + 1
            if lo < n:
                magic, pos = _UNIT.unpack_from(buf, lo * INDEX_UNIT_SIZE)[:2]
                return int(pos) if magic != 0 else None
    return None


def plan_dledger_tasks(root: Path, slices: list, first_index: int) -> list[DLedgerSliceTask]:
    """One task per CommitLog slice of a DLedger data file, over the same ranges (body-start cuts
    become entry starts)."""
    dl = open_dledger(root)
    if dl is None:
        return []
    files = {str(f.path): n for n, f in enumerate(dl.data.files)}
    out: list[DLedgerSliceTask] = []
    for s in slices:
        n = files.get(s.path)
        if n is None:
            continue
        begin = s.begin - BODY_OFFSET if s.begin else 0
        end = s.end if s.last_of_file else s.end - BODY_OFFSET
        out.append(
            DLedgerSliceTask(
                first_index + len(out), s.root, s.path, s.rel, s.file_start, begin, end, n, n + 1 == len(dl.data.files)
            )
        )
    return out


# ------------------------------------------------------------------ task
def check_dledger_slice(task: DLedgerSliceTask) -> DLedgerSliceResult:
    """Walk the slice's entries with the serial walk's checks (headers, and each body as a CommitLog record:
    TOTALSIZE, PHYSICALOFFSET, CRC) and compare each entry with its index unit."""
    from mqtool.audit.records import open_store

    dl = open_store(task.root).dledger
    f = next(x for x in dl.data.files if str(x.path) == task.path)
    fs = Findings()
    stop: list[int] = []
    entries: list[DLedgerEntry] = []
    with map_file(f.path) as buf:
        upto = task.end if task.end < len(buf) else None
        for e in dl._scan_file(f, task.rel, buf, fs, True, None, stop, task.begin, upto):
            e.record = None  # checked; the driver needs only the entry
            entries.append(e)
    reached = entries[-1].position + entries[-1].size if entries else task.begin
    complete = upto is None or (not stop and reached >= upto)
    _check_index_units(dl, entries, fs)
    first, last = (entries[0], entries[-1]) if entries else (None, None)
    return DLedgerSliceResult(
        index=task.index,
        file=task.rel,
        file_no=task.file_no,
        begin=task.begin,
        entries=len(entries),
        first=(first.index, first.term, first.position) if first else None,
        last=(last.index, last.term, last.offset, last.size) if last else None,
        stopped=stop[0] if stop else None,
        complete=complete,
        entry_findings=fs,
    )


def _units(dl: DLedgerCommitLog, lo: int, count: int) -> np.ndarray:
    """Index units lo .. lo+count-1 as far as the index files hold them."""
    parts, k = [], lo
    while k < lo + count:
        f = dl.index.file_for(k * INDEX_UNIT_SIZE)
        if f is None:
            break
        at = k * INDEX_UNIT_SIZE - f.start
        n = min(lo + count - k, (f.length - at) // INDEX_UNIT_SIZE)
        if n <= 0:
            break
        parts.append(np.fromfile(f.path, INDEX_DTYPE, count=n, offset=at))
        k += n
    return np.concatenate(parts) if parts else np.zeros(0, INDEX_DTYPE)


def _check_index_units(dl: DLedgerCommitLog, entries: list[DLedgerEntry], findings: Findings) -> None:
    """`DLedgerCommitLog.check_index`'s per-entry part: the unit at index * 32 describes the entry."""
    if not entries:
        return
    first = dl.index.files[0].start // INDEX_UNIT_SIZE if dl.index.files else 0
    lo = max(first, min(e.index for e in entries))
    hi = max(e.index for e in entries)
    units = _units(dl, lo, hi - lo + 1) if hi - lo < 4 * len(entries) + 1024 else None
    for e in entries:
        if units is None:
            u = _units(dl, e.index, 1) if e.index >= first else np.zeros(0, INDEX_DTYPE)
        else:
            u = units[e.index - lo : e.index - lo + 1] if e.index >= lo else np.zeros(0, INDEX_DTYPE)
        if not len(u) or int(u["magic"][0]) == 0:
            findings.add(
                e.file,
                e.position,
                INDEX_CHECK,
                "error",
                f"entry {e.index} has no index unit; the broker's recovery rewrites the index from here",
            )
            continue
        got = tuple(int(u[k][0]) for k in ("magic", "pos", "size", "index", "term"))
        want = (e.magic, e.offset, e.size, e.index, e.term)
        if got != want:
            findings.add(
                dl._index_file(e.index),
                (e.index * INDEX_UNIT_SIZE) % max(dl.index.file_size, 1),
                INDEX_CHECK,
                "error",
                f"index unit {e.index} says (magic, pos, size, index, term) "
                f"{got}, the entry at {e.file}:{e.position} is {want}",
            )


# ------------------------------------------------------------------ driver
def check_dledger(dl: DLedgerCommitLog, results: list[DLedgerSliceResult], findings: Findings) -> dict:
    """Join the slices as the serial walk goes (`DLedgerCommitLog.iter_entries`): continuity across
    slices and files, a data file after the end of the data, index units past the last entry, the
    checkpoint. Returns the summary `DLedgerCommitLog.audit` returns."""
    findings.extend(dl.file_findings)
    last: tuple[int, int, int, int] | None = None
    first_entry: tuple[int, int, int] | None = None
    count = 0
    ended_at: tuple[str, int] | None = None
    n_files = len(dl.data.files)
    by_file: dict[int, list[DLedgerSliceResult]] = {}
    for r in sorted(results, key=lambda r: r.index):
        by_file.setdefault(r.file_no, []).append(r)
    for no in sorted(by_file):
        slices = by_file[no]
        if ended_at is not None:
            findings.add(
                slices[0].file,
                0,
                CHECK,
                "error",
                f"data file after the end of the data at "
                f"{ended_at[0]}:{ended_at[1]}: the broker's recovery truncates it",
            )
        stop = None
        for r in slices:
            findings.extend(r.entry_findings)
            if r.first is not None and last is not None:
                _follows(r, last, findings)
            if r.entries:
                first_entry = first_entry or r.first
                last, count = r.last, count + r.entries
            if r.stopped is not None:
                stop = r.stopped
            if not r.complete:
                break  # the serial walk ends this file here; later slices are never reached
        if stop is not None and ended_at is None and no + 1 != n_files:
            ended_at = (slices[0].file, stop)
    _check_index_tail(dl, last[0] if last else None, findings)
    last_entry = _entry_of(last) if last else None
    dl.check_checkpoint([last_entry] if last_entry else [], findings)
    return {
        "home": str(dl.home.relative_to(dl.root)),
        "entries": count,
        "begin_index": first_entry[0] if first_entry else -1,
        "end_index": last[0] if last else -1,
        "end_term": last[1] if last else -1,
        "committed_index": (dl.checkpoint or {}).get("committed_index"),
        "committed_pos": _committed_pos(dl, last),
        "divided_commitlog_offset": dl.divided_offset,
        "curr_term": (dl.currterm or {}).get("curr_term"),
        "vote_leader": (dl.currterm or {}).get("vote_leader"),
    }


def _follows(r: DLedgerSliceResult, last: tuple[int, int, int, int], findings: Findings) -> None:
    """`_entry`'s continuity checks for a slice's first entry against the previous slice's last."""
    index, term, position = r.first
    if index != last[0] + 1:
        findings.add(r.file, position, CHECK, "error", f"entry index {index} does not follow {last[0]}" + _STOPS)
    if term < last[1]:
        findings.add(r.file, position, CHECK, "error", f"entry term {term} is below the previous {last[1]}" + _STOPS)


def _entry_of(last: tuple[int, int, int, int]) -> DLedgerEntry:
    index, term, offset, size = last
    return DLedgerEntry(offset, "", 0, ENTRY_MAGIC, size, index, term, offset, 0, 0, 0, size - BODY_OFFSET)


def _committed_pos(dl: DLedgerCommitLog, last: tuple[int, int, int, int] | None) -> int | None:
    """committedPos: the end of the committed entry (the last entry's, or its index unit's)."""
    c = (dl.checkpoint or {}).get("committed_index")
    if c is None or last is None:
        return None
    if c >= last[0]:
        return last[2] + last[3]
    u = _units(dl, c, 1)
    return int(u["pos"][0]) + int(u["size"][0]) if len(u) and int(u["magic"][0]) != 0 else None


def _check_index_tail(dl: DLedgerCommitLog, last: int | None, findings: Findings) -> None:
    """The index files' geometry, and written units past the last entry (the serial `check_index`'s
    end; each entry's own unit is checked by its slice's task)."""
    first = dl.index.files[0].start // INDEX_UNIT_SIZE if dl.index.files else 0
    for f in dl.index.files:
        if f.start % INDEX_UNIT_SIZE or f.length % INDEX_UNIT_SIZE:
            findings.add(
                dl.rel(f),
                None,
                INDEX_CHECK,
                "error",
                f"index file start {f.start} / length {f.length} not a multiple of {INDEX_UNIT_SIZE}",
            )
    k = first if last is None else last + 1
    extra = 0
    while True:
        f = dl.index.file_for(k * INDEX_UNIT_SIZE)
        if f is None:
            break
        at = k * INDEX_UNIT_SIZE - f.start
        units = np.fromfile(f.path, INDEX_DTYPE, count=max(0, (f.length - at) // INDEX_UNIT_SIZE), offset=at)
        zero = units["magic"] == 0
        if zero.any():
            z = int(np.argmax(zero))
            extra += z
            if units[z:].view(np.uint8).any():
                findings.add(
                    dl.rel(f),
                    at + z * INDEX_UNIT_SIZE,
                    INDEX_CHECK,
                    "warning",
                    "index units after an unwritten one (ignored)",
                )
            break
        extra += len(units)
        if not len(units):
            break
        k += len(units)
    if extra:
        findings.add(
            dl._index_file(first if last is None else last + 1),
            None,
            INDEX_CHECK,
            "warning",
            f"{extra} index unit(s) past the last entry {last}: the broker's recovery truncates them",
        )
