"""Mapped-file queues (spec §1): equal-size files named by their first global offset.

Used for the CommitLog, each ConsumeQueue and the TimerLog. The file size is inferred from the
files themselves (real stores use 1 GiB / 6,000,000 B / 100 MiB; tests use tiny ones).
"""

import mmap
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mqtool.store.findings import Findings

_NAME = re.compile(r"^\d{20}$")


@dataclass(frozen=True)
class MappedFile:
    """One file of a queue: `start` is its first global offset, `length` its bytes on disk."""

    path: Path
    start: int
    length: int

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class MappedFileQueue:
    """The files of one queue in offset order, the inferred file size, and what is wrong with them."""

    directory: Path
    files: list[MappedFile]
    file_size: int
    findings: Findings  # what listing the files found (the accumulator `open_queue` was given)

    def file_for(self, offset: int) -> MappedFile | None:
        """The file holding a global offset, or None (before the first, in a gap, past the last)."""
        for f in self.files:
            if f.start <= offset < f.start + max(f.length, self.file_size):
                return f
        return None

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0


def _infer_size(files: list[MappedFile], configured: int | None) -> int:
    """The usual length of the files but the last (which may be damaged); one file: its own length.

    A configured size (broker.conf) only decides when the files cannot: no files at all.
    """
    if not files:
        return configured or 0
    if len(files) == 1:
        return files[0].length
    return Counter(f.length for f in files[:-1]).most_common(1)[0][0]


def open_queue(directory: Path, configured_size: int | None, kind: str, rel_to: Path,
               findings: Findings | None = None, expected_size: int | None = None) -> MappedFileQueue:
    """List a queue's files; a missing middle file, a stray name or a short file becomes a finding,
    added to `findings` (a new accumulator when none is given).

    `expected_size`: the length the broker maps every file of this queue with, when known (broker.conf,
    or the store's other queues): `MappedFileQueue.load` refuses any other length (5.x deletes an empty
    last file first), so the broker does not start; each such file is an error."""
    findings = Findings() if findings is None else findings
    files: list[MappedFile] = []
    if directory.is_dir():
        for p in sorted(directory.iterdir()):
            rel = str(p.relative_to(rel_to))
            if not p.is_file():
                continue
            if not _NAME.match(p.name):
                findings.add(rel, None, f"{kind}.files", "info", f"ignoring unknown file {p.name}")
                continue
            files.append(MappedFile(p, int(p.name), p.stat().st_size))
    if expected_size and files:
        return _check_expected(MappedFileQueue(directory, files, expected_size, findings), kind, rel_to)
    size = _infer_size(files, configured_size)
    for prev, cur in zip(files, files[1:], strict=False):
        rel = str(prev.path.relative_to(rel_to))
        if prev.length != size:
            findings.add(rel, None, f"{kind}.files", "error",
                         f"file is {prev.length} bytes, the queue's files are {size}")
        if cur.start != prev.start + size:
            missing = (cur.start - prev.start - size) // size if size else 0
            findings.add(rel, None, f"{kind}.files", "error", f"gap: next file should start at "
                         f"{prev.start + size:020d}, found {cur.name} ({missing} file(s) missing)")
    if files and files[-1].length < size:  # the broker pre-allocates every file: a short one was cut
        last = files[-1]
        refused = ("empty: 5.x deletes it when it loads, 4.9's MappedFileQueue.load refuses it" if not last.length
                   else f"{last.length} bytes, shorter than the queue's {size}: MappedFileQueue.load refuses it, "
                   "the broker does not start")
        findings.add(str(last.path.relative_to(rel_to)), last.length, f"{kind}.files",
                     "warning" if not last.length else "error", f"last file is {refused}")
    return MappedFileQueue(directory, files, size, findings)


def _check_expected(queue: MappedFileQueue, kind: str, rel_to: Path) -> MappedFileQueue:
    """Every file of the wrong length (an empty last one aside, which 5.x deletes), and gaps, as errors."""
    size, files = queue.file_size, queue.files
    for i, f in enumerate(files):
        rel = str(f.path.relative_to(rel_to))
        if f.length != size and not (f.length == 0 and i == len(files) - 1):
            queue.findings.add(rel, min(f.length, size), f"{kind}.files", "error", f"file is {f.length} bytes, not "
                               f"{size}: MappedFileQueue.load refuses a file of another length, the broker does not "
                               "start")
        if i + 1 < len(files) and files[i + 1].start != f.start + size:
            missing = (files[i + 1].start - f.start - size) // size
            queue.findings.add(rel, None, f"{kind}.files", "error", f"gap: next file should start at "
                               f"{f.start + size:020d}, found {files[i + 1].name} ({missing} file(s) missing)")
    return queue


@contextmanager
def map_file(path: Path) -> Iterator[memoryview | bytes]:
    """A read-only view of a file: a memory map, or empty bytes for an empty file."""
    with open(path, "rb") as fh:
        if fh.seek(0, 2) == 0:
            yield b""
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            try:
                mm.close()
            except BufferError:
                # a numpy/Arrow view of the mapping still lives in the caller (a batch being written,
                # a generator closed mid-chunk): the map is released with the last view instead
                pass


class FileMaps:
    """Read-only mappings opened on first use and kept until `close`: for random access across a
    queue's files (a timer chain walk, CommitLog lookups by offset) without reopening a file per read."""

    def __init__(self) -> None:
        self._open: dict[str, tuple] = {}

    def get(self, path: Path | str) -> mmap.mmap | bytes:
        """The mapping of a file (empty bytes for an empty file)."""
        key = str(path)
        entry = self._open.get(key)
        if entry is None:
            cm = map_file(Path(path))
            entry = self._open[key] = (cm, cm.__enter__())
        return entry[1]

    def close(self) -> None:
        for cm, _buf in self._open.values():
            cm.__exit__(None, None, None)
        self._open.clear()

    def __enter__(self) -> "FileMaps":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_at(path: Path, pos: int, n: int) -> bytes:
    """n bytes of a file from pos (fewer at its end), read without mapping the whole file."""
    with open(path, "rb") as fh:
        fh.seek(pos)
        return fh.read(n)
