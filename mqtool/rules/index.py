"""The broker's IndexFile rules: which keys a record adds (`IndexService.buildIndex`) and how a key
lookup walks the files (`IndexService.queryOffset`, `IndexFile.selectPhyOffset`, `isTimeMatched`).

Pure functions over anything shaped like an index file (`IndexFileLike`); the store reader and the
writer in formats/indexfile.py both fit. Same rules in rocketmq-all-5.3.1 and 4.9.8.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from mqtool.formats.indexfile import INVALID_INDEX, IndexFileWriter, build_key, index_key_hash
from mqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK

LONG_MAX = (1 << 63) - 1
MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: queryOffset caps maxNum at this


class IndexFileLike(Protocol):
    """What the lookup reads of one file: header fields, slots and entries by number."""

    hash_slot_num: int
    begin_timestamp: int
    end_timestamp: int
    end_phy_offset: int
    index_count: int

    def slot(self, n: int) -> int | None: ...  # None: beyond the file (the broker's read would throw)

    def entry(self, n: int) -> tuple[int, int, int, int] | None: ...  # keyHash, phyOffset, timeDiff, prevIndex


@dataclass(frozen=True)
class DispatchRequest:
    """The fields of a `DispatchRequest` that `buildIndex` reads (keys/uniqKey from the properties)."""

    topic: str
    commit_log_offset: int
    store_timestamp: int
    sys_flag: int
    keys: str | None
    uniq_key: str | None


def index_keys(req: DispatchRequest) -> list[str]:
    """The `topic#key` strings `buildIndex` puts for a record, in order: UNIQ_KEY, then each KEYS value
    (split on single spaces, empty pieces skipped). A rollback record (TRANSACTION_ROLLBACK) has none;
    prepared and commit records are indexed like any other."""
    if req.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK:
        return []
    out = [build_key(req.topic, req.uniq_key)] if req.uniq_key is not None else []
    if req.keys:
        out += [build_key(req.topic, k) for k in req.keys.split(" ") if k]
    return out


@dataclass
class IndexService:
    """The list of files `IndexService` keeps while building; `files[-1]` is the one being written."""

    hash_slot_num: int
    index_num: int
    files: list[IndexFileWriter] = field(default_factory=list)

    def get_and_create_last_index_file(self) -> IndexFileWriter:
        """`getAndCreateLastIndexFile`: the last file, or a new one seeded with the full one's ends."""
        if self.files and not self.files[-1].is_write_full():
            return self.files[-1]
        prev = self.files[-1] if self.files else None
        f = IndexFileWriter(self.hash_slot_num, self.index_num,
                            prev.end_phy_offset if prev else 0, prev.end_timestamp if prev else 0)
        self.files.append(f)
        return f

    def build_index(self, req: DispatchRequest) -> None:
        """`IndexService.buildIndex`: a record below the last file's endPhyOffset was indexed already
        (re-dispatch after a restart) and is skipped; an offset equal to it is indexed again."""
        f = self.get_and_create_last_index_file()
        if req.commit_log_offset < f.end_phy_offset:
            return
        for key in index_keys(req):
            while not f.put_key(key, req.commit_log_offset, req.store_timestamp):
                f = self.get_and_create_last_index_file()


def build_index_files(requests: Iterable[DispatchRequest], hash_slot_num: int, index_num: int) -> list[bytes]:
    """Every IndexFile the broker writes for these dispatches, in file order (bytes as flushed)."""
    service = IndexService(hash_slot_num, index_num)
    for req in requests:
        service.build_index(req)
    return [f.to_bytes() for f in service.files]


def is_time_matched(f: IndexFileLike, begin: int, end: int) -> bool:
    """`IndexFile.isTimeMatched`: [begin, end] covers, or has an end inside, the file's time range."""
    b, e = f.begin_timestamp, f.end_timestamp
    return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)


def select_phy_offset(f: IndexFileLike, phy_offsets: list[int], key: str, max_num: int,
                      begin: int, end: int, on_match: Callable[[int, int], None] | None = None,
                      max_steps: int | None = None) -> None:
    """`IndexFile.selectPhyOffset`: walk the slot's chain newest first, appending offsets whose hash
    matches and whose time (begin + timeDiff s) lies in [begin, end]. Stops at maxNum, a negative
    timeDiff, a prevIndex <= 0, > indexCount or equal to itself, or an entry older than begin.
    `on_match(entry_number, phy_offset)` is told of each kept entry (not a broker concept).
    A chain that loops through entries of other keys never ends in the broker (it counts matches
    only); `max_steps` (not a broker concept) ends such a walk after that many entries."""
    key_hash = index_key_hash(key)
    slot_value = f.slot(key_hash % f.hash_slot_num)
    if slot_value is None or slot_value <= INVALID_INDEX or slot_value > f.index_count or f.index_count <= 1:
        return
    current = slot_value
    steps = 0
    while len(phy_offsets) < max_num and (max_steps is None or steps < max_steps):
        steps += 1
        entry = f.entry(current)
        if entry is None:  # the broker's read throws; the exception is logged and the walk ends
            return
        hash_read, phy_read, time_diff, prev = entry
        if time_diff < 0:
            return
        time_read = f.begin_timestamp + time_diff * 1000
        if hash_read == key_hash and begin <= time_read <= end:
            phy_offsets.append(phy_read)
            if on_match is not None:
                on_match(current, phy_read)
        if prev <= INVALID_INDEX or prev > f.index_count or prev == current or time_read < begin:
            return
        current = prev


@dataclass(frozen=True)
class QueryOffsetResult:
    """`QueryOffsetResult`: offsets newest first, and the last file's end time and offset."""

    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


def query_offset(files: list[IndexFileLike], topic: str, key: str, max_num: int, begin: int, end: int,
                 max_msgs_num_batch: int = MAX_MSGS_NUM_BATCH,
                 on_match: Callable[[int, int, int], None] | None = None,
                 max_steps: int | None = None) -> QueryOffsetResult:
    """`IndexService.queryOffset`: files newest first; a file is walked when its time range overlaps
    [begin, end]; stop after a file that begins before `begin` or once maxNum offsets are found.
    maxNum is capped at `maxMsgsNumBatch` (64); pass a larger cap for an exhaustive walk.
    `on_match(file_index, entry_number, phy_offset)` is told of each kept entry; `max_steps` bounds
    each file's walk (see `select_phy_offset`)."""
    max_num = min(max_num, max_msgs_num_batch)
    offsets: list[int] = []
    last_ts = last_phy = 0
    full_key = build_key(topic, key)
    for i in range(len(files) - 1, -1, -1):
        f = files[i]
        if i == len(files) - 1:
            last_ts, last_phy = f.end_timestamp, f.end_phy_offset
        if is_time_matched(f, begin, end):
            hook = None if on_match is None else (lambda n, phy, i=i: on_match(i, n, phy))
            select_phy_offset(f, offsets, full_key, max_num, begin, end, hook, max_steps)
        if f.begin_timestamp < begin or len(offsets) >= max_num:
            break
    return QueryOffsetResult(offsets, last_ts, last_phy)
