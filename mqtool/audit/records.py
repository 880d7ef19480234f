"""CommitLog records by physical offset, decoded by the store's fast path (`mqtool.store.fastscan`).

The ConsumeQueue and TimerLog checks look up one record per unit. Each lookup runs the fast
path's kernel on one record (`iter_commitlog_chunks(..., chunk_records=1)`), so the checks
apply exactly the recovery rules of the CommitLog walk; there is no second header decoder here.
Files are mapped once per reader and unmapped by `close()`.
"""

import os
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from mqtool.store import fastscan
from mqtool.store.mapped_files import FileMaps, MappedFileQueue
from mqtool.store.store import Store


@dataclass(frozen=True)
class FileSlice:
    """Bytes [begin, end) of one store file: what a slice task reads (`index`: its place in the plan;
    `path` absolute, `rel` below `root`; `file_start`: the file's first offset, its name)."""

    index: int
    root: str
    path: str
    rel: str
    file_start: int
    begin: int
    end: int


def open_store(root: str) -> Store:
    """The store at `root`, opened once per process while its directories are unchanged (workers
    reuse it for every task; a file added or removed since gives a fresh listing)."""
    stamps = []
    for d in ("commitlog", "timerlog"):
        try:
            stamps.append(os.stat(os.path.join(root, d)).st_mtime_ns)
        except OSError:
            stamps.append(None)
    return _open_store(root, tuple(stamps))


@lru_cache(maxsize=8)
def _open_store(root: str, _stamps: tuple) -> Store:
    return Store.open(root)


def commitlog_queue(root: str) -> MappedFileQueue:
    """The CommitLog's files (listed once per process)."""
    return open_store(root).commitlog.queue


class Record(NamedTuple):
    """The fields of a record the cross-file checks compare (columns of one fast-path row)."""

    topic: str
    queue_id: int
    queue_offset: int
    total_size: int
    sys_flag: int
    store_timestamp: int
    properties_raw: str


def no_record_reason(stop: int, detail: int) -> str:
    """Why no valid record starts at a position (the fast path's stop code, in its words)."""
    if stop == fastscan.STOP_END_OF_FILE:
        return "past the end of its CommitLog file"
    if stop == fastscan.STOP_BLANK:
        return "no record there (BLANK filler)"
    if stop == fastscan.STOP_ZERO_TAIL:
        return "no record there (unwritten bytes)"
    return f"no record there ({fastscan.stop_reason(stop, detail)})"


class CommitLogRecords:
    """`get(offset)`: the record at a physical offset, or the reason none is there."""

    def __init__(self, root: str):
        self.queue = commitlog_queue(root)
        self.starts = [f.start for f in self.queue.files]
        self._maps = FileMaps()
        self._arrays: dict[int, np.ndarray] = {}
        self._topics: dict[bytes, str] = {}

    def close(self) -> None:
        self._arrays.clear()  # the array views must go before their mappings close
        self._maps.close()

    def __enter__(self) -> "CommitLogRecords":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _array(self, i: int) -> np.ndarray:
        a = self._arrays.get(i)
        if a is None:
            a = self._arrays[i] = fastscan.as_array(self._maps.get(self.queue.files[i].path))
        return a

    def get(self, offset: int) -> Record | str:
        i = bisect_right(self.starts, offset) - 1
        if i < 0:
            return "before the first CommitLog file"
        f = self.queue.files[i]
        pos = offset - f.start
        if pos >= f.length:
            return past_file_end(self.queue, i, pos)
        a = self._array(i)
        chunk = next(fastscan.iter_commitlog_chunks(a, f.start, pos, verify_crc=False, chunk_records=1,
                                                    release=False))
        if len(chunk) == 0:
            return no_record_reason(chunk.stop, chunk.detail)
        c = chunk.cols[:, 0].tolist()
        raw = a[c[fastscan.C_TOPIC_POS]:c[fastscan.C_TOPIC_POS] + c[fastscan.C_TOPIC_LEN]].tobytes()
        topic = self._topics.get(raw)
        if topic is None:
            topic = self._topics[raw] = raw.decode("utf-8", "surrogateescape")
        props = a[c[fastscan.C_PROPS_POS]:c[fastscan.C_PROPS_POS] + c[fastscan.C_PROPS_LEN]].tobytes()
        return Record(topic, c[fastscan.C_QUEUE_ID], c[fastscan.C_QUEUE_OFFSET], c[fastscan.C_TOTAL],
                      c[fastscan.C_SYS_FLAG], c[fastscan.C_STORE_TS], props.decode("utf-8", "surrogateescape"))


def past_file_end(queue: MappedFileQueue, i: int, pos: int) -> str:
    """Why position `pos` of file `i` holds no record when it lies past the bytes on disk: the file was cut
    (shorter than the queue's files), it is the last file, or the file that would hold it is missing."""
    f = queue.files[i]
    if f.length < queue.file_size and pos < queue.file_size:
        return f"past the end of its CommitLog file {f.name}, cut to {f.length} bytes (the queue's files are " \
               f"{queue.file_size})"
    if i == len(queue.files) - 1:
        return f"past the end of its CommitLog file {f.name} ({f.length} bytes, the last): cut short, or the " \
               "files after it are missing"
    return "in a missing CommitLog file"


def is_record_start(buf, file_start: int, pos: int) -> bool:
    """A valid record (by the recovery rules) starts at `pos` and its PHYSICALOFFSET names it."""
    chunk = next(fastscan.iter_commitlog_chunks(buf, file_start, pos, verify_crc=False, chunk_records=1,
                                                release=False))
    return len(chunk) == 1 and bool(chunk.physical_offset_ok[0])
