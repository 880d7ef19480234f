"""Column scans for the views that aggregate: no Python object per CommitLog record.

`CommitLog.scan_columns` (the extension's walk, through `mqtool.store.fastscan`) yields numpy columns per
chunk with the same findings and file ends as `iter_records`; this module adds, per chunk and with
numpy only,

- a topic id per record (`TopicIds.of_chunk`: topic bytes gathered into a padded 2-D array, hashed
  per row, `np.unique` on the hashes, every row checked against its group's first row), and
- `CommitLogSummary`: records, bytes per topic, records per (topic, queue id), the store-time range
  and the end of the last record, which is all `overview` needs from the CommitLog;
- `ColumnChunk.records(rows)`: `MessageRecord`s for the few rows a view wants in full (the
  transaction topics, for example), equal to the ones `iter_records` builds.

Topics are decoded like the record path does (UTF-8, `surrogateescape`), so the names and the
JSON output are the same whichever path produced them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqtool.formats.message import MessageRecord
from mqtool.inspect.records import Progress
from mqtool.store import fastscan
from mqtool.store.commitlog import CommitLog
from mqtool.store.fastscan import C_POS, C_QUEUE_ID, C_STORE_TS, C_TOPIC_LEN, C_TOPIC_POS, C_TOTAL
from mqtool.store.mapped_files import MappedFile
from mqtool.store.store import Store

if TYPE_CHECKING:  # imported where the arrays are made: `messages` walks its columns without numpy
    import numpy as np

TOPIC_INLINE_MAX = 256
"""Topics up to this many bytes are compared as padded rows (RocketMQ caps topics at 127 characters);
longer ones (only in damaged or exotic stores) are looked up one by one."""

_MIX = 0x9E3779B97F4A7C15  # the row hash's constants (as numpy.uint64)
_MUL = 0xC2B2AE3D27D4EB4F


def _word_masks(words: int) -> np.ndarray:
    """(8*words + 1, words) uint64: row n keeps the first n bytes of a row of `words` little words."""
    import numpy as np

    width = 8 * words
    keep = np.arange(width)[None, :] < np.arange(width + 1)[:, None]
    return np.where(keep, np.uint8(0xFF), np.uint8(0)).view(np.uint64)


@dataclass
class TopicIds:
    """Topic names by id; each record's id comes from the extension's walk (`fastscan.numbered_topics`:
    ids in order of first appearance), or, without the extension, from `of_chunk`."""

    names: list[str] = field(default_factory=list)
    _ids: dict[bytes, int] = field(default_factory=dict)
    _masks: dict[int, np.ndarray] = field(default_factory=dict)
    _seen: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    table: object | None = None  # the walk's `TopicTable`, whose numbers these ids are

    def numbering(self) -> object | None:
        """The table the extension's walk numbers the topics in (None without the extension, or once ids
        were given by `of_chunk`: those stay the ids)."""
        kernels = fastscan.compiled_kernels()
        if self.table is None and not self.names and kernels.native:
            self.table = kernels.topic_table()
        return self.table

    def sync(self) -> None:
        """Name the topics the walk has numbered since the last call (ids stay the walk's numbers)."""
        for raw in self.table.names[len(self.names) :]:
            self.id(raw)

    def id(self, raw: bytes) -> int:
        i = self._ids.get(raw)
        if i is None:
            i = self._ids[raw] = len(self.names)
            self.names.append(raw.decode("utf-8", "surrogateescape"))  # as `iter_records` decodes it
        return i

    def get(self, name: str) -> int:
        """The id of a topic seen so far, -1 when none of the records had it."""
        return self._ids.get(name.encode("utf-8", "surrogateescape"), -1)

    def of_chunk(self, a: np.ndarray, pos: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """The topic id of every row: `a[pos[i] : pos[i] + lens[i]]` is row i's topic."""
        import numpy as np

        out = np.empty(len(pos), np.int64)
        if not len(pos):
            return out
        longest = int(lens.max())
        words = max(1, (min(longest, TOPIC_INLINE_MAX) + 7) // 8)
        width = 8 * words
        inline = (lens <= TOPIC_INLINE_MAX) & (pos <= len(a) - width)
        every = bool(inline.all())
        rows_at = np.arange(len(pos)) if every else np.flatnonzero(inline)
        if len(rows_at):
            p, n = (pos, lens) if every else (pos[rows_at], lens[rows_at])
            out[rows_at] = self._padded(a, p, n, words)
        for i in ([] if every else np.flatnonzero(~inline).tolist()):
            s = int(pos[i])
            out[i] = self.id(bytes(a[s : s + int(lens[i])]))
        return out

    def _padded(self, a: np.ndarray, pos: np.ndarray, lens: np.ndarray, words: int) -> np.ndarray:
        import numpy as np

        w = _topic_words(a, pos, lens, words)
        if w is None:
            w = _row_words(a, pos, words)  # (n, words): the topic and what follows
            masks = self._masks.get(words)
            if masks is None:
                masks = self._masks[words] = _word_masks(words)
            w &= masks[lens]  # zero past each topic's end
        h = lens.astype(np.uint64) * np.uint64(_MIX)
        for k in range(words):
            h ^= w[:, k]
            h *= np.uint64(_MUL)
        known = self._known_ids(h, w, lens, words)
        if known is not None:
            return known
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        if not ((w == w[first][inverse]).all() and (lens == lens[first][inverse]).all()):
            # a hash collision (never seen): group by the bytes and the length themselves
            keyed = np.concatenate([lens.astype(np.uint64)[:, None], w], axis=1)
            _, first, inverse = np.unique(np.ascontiguousarray(keyed).view(np.dtype((np.void, keyed.shape[1] * 8)))
                                          .ravel(), return_index=True, return_inverse=True)
            return self._lut(a, pos, lens, first)[inverse.ravel()]
        lut = self._lut(a, pos, lens, first)
        self._remember(words, h[first], w[first], lens[first], lut)
        return lut[inverse]

    def _lut(self, a: np.ndarray, pos: np.ndarray, lens: np.ndarray, first: np.ndarray) -> np.ndarray:
        """The topic id of each group, its first row's bytes named in the order of `first` (new names get
        ids in this order)."""
        import numpy as np

        return np.array([self.id(bytes(a[int(pos[r]) : int(pos[r]) + int(lens[r])])) for r in first.tolist()],
                        np.int64)

    def _remember(self, words: int, h: np.ndarray, w: np.ndarray, lens: np.ndarray, ids: np.ndarray) -> None:
        """Keep a chunk's groups (hashes unique, bytes checked) for `_known_ids`, sorted by hash."""
        import numpy as np

        old = self._seen.get(words)
        if old is not None:
            fresh = ~np.isin(h, old[0])
            h, w, lens, ids = (np.concatenate([o, x[fresh]]) for o, x in zip(old, (h, w, lens, ids), strict=True))
        order = np.argsort(h, kind="stable")
        self._seen[words] = (h[order], w[order], lens[order], ids[order])

    def _known_ids(self, h: np.ndarray, w: np.ndarray, lens: np.ndarray, words: int) -> np.ndarray | None:
        """Each row's id when every row is a topic seen in an earlier chunk of the same width (same hash,
        same bytes, same length), else None. Such a chunk names no new topic, so the grouping by hash
        would give the same ids; most chunks of a store are such chunks, and this spares their sort."""
        import numpy as np

        seen = self._seen.get(words)
        if seen is None:
            return None
        sh, sw, sl, sid = seen
        at = np.searchsorted(sh, h)
        np.minimum(at, len(sh) - 1, out=at)
        if not ((sh[at] == h).all() and (sl[at] == lens).all() and (sw[at] == w).all()):
            return None
        return sid[at]


def _topic_words(a: np.ndarray, pos: np.ndarray, lens: np.ndarray, words: int) -> np.ndarray | None:
    """(n, words) uint64: row i is `a[pos[i] : pos[i] + lens[i]]` zero-padded (every `lens[i] <= 8 * words`),
    copied by the extension's `gather` (a memcpy a row); None without the extension."""
    import numpy as np

    kernels = fastscan.compiled_kernels()
    if not kernels.native:
        return None
    width = 8 * words
    out = np.zeros(len(pos) * width, np.uint8)
    kernels.gather(a, pos, lens, np.arange(0, len(pos) * width, width, dtype=np.int32), out)
    return out.view(np.uint64).reshape(len(pos), words)


def _row_words(a: np.ndarray, pos: np.ndarray, words: int) -> np.ndarray:
    """(n, words) uint64: the little-endian words at `pos[i]`, `pos[i] + 8`, ... (all within `a`): one
    8-byte load per word (a gather of byte rows copies byte by byte)."""
    import numpy as np

    u64 = np.ndarray((len(a) - 7,), np.dtype("<u8"), buffer=a, strides=(1,))
    if words == 1:
        return u64[pos][:, None]
    w = np.empty((len(pos), words), np.uint64)
    for k in range(words):
        w[:, k] = u64[pos + 8 * k]
    return w


@dataclass
class ColumnChunk:
    """One chunk of `scan_chunks`: the kernel's columns, the file's mapping and each row's topic id."""

    file: MappedFile
    rel: str
    buf: object
    chunk: fastscan.ScanChunk
    topic_ids: np.ndarray | None

    @property
    def cols(self) -> np.ndarray:
        return self.chunk.cols

    def __len__(self) -> int:
        return len(self.chunk)

    def records(self, rows: np.ndarray | range) -> Iterator[MessageRecord]:
        """`MessageRecord`s of the given rows (ascending), as `CommitLog.iter_records` builds them."""
        c = self.chunk
        if isinstance(rows, range) and rows.step == 1 and isinstance(c.columns, fastscan.Columns):
            cols = c.columns.rows(rows.start, rows.stop)  # consecutive rows: no numpy
        else:
            cols = c.cols[:, rows]
        sub = fastscan.ScanChunk(c.base_offset, cols, c.end, c.stop, c.detail, c.crc_checked,
                                 c.file_size, None if c.dledger is None else c.dledger[:, rows])
        return fastscan.records_from_chunk(self.buf, sub, self.rel)


def topic_rows(buf, pos: np.ndarray, lens: np.ndarray, raw: bytes) -> np.ndarray:
    """Indices of the rows whose topic (`buf[pos[i] : pos[i] + lens[i]]`) is exactly `raw`."""
    import numpy as np

    rows = np.flatnonzero(lens == len(raw))
    if not len(rows) or not raw:
        return rows
    a = fastscan.as_array(buf)
    try:
        got = a[pos[rows][:, None] + np.arange(len(raw))]  # (n, len(raw)): a copy, not a view
    finally:
        del a  # no export of the mapping may outlive the call (it is closed file by file)
    return rows[(got == np.frombuffer(raw, np.uint8)).all(axis=1)]


def scan_chunks(store: Store, topics: TopicIds | None, start: int | None = None, verify_crc: bool = True,
                progress: Progress | None = None, chunk_records: int = fastscan.DEFAULT_CHUNK
                ) -> Iterator[ColumnChunk]:
    """`CommitLog.scan_columns` of the store with a topic id per row, reporting progress once per chunk."""
    yield from commitlog_chunks(store.commitlog, topics, start, verify_crc, progress, chunk_records)


def commitlog_chunks(cl: CommitLog, topics: TopicIds | None, start: int | None = None, verify_crc: bool = True,
                     progress: Progress | None = None, chunk_records: int = fastscan.DEFAULT_CHUNK
                     ) -> Iterator[ColumnChunk]:
    """`cl.scan_columns` as `ColumnChunk`s (topic ids only with `topics`; otherwise `topic_ids` is None).

    Findings and file ends land in `cl` exactly as with `iter_records`. Topics (and the rows a caller
    asks for) are read through the scan's own mapping (`CommitLog.scan_mapped`), whose pages the
    scan drops chunk by chunk, so the resident size stays small.
    """
    total = sum(f.length for f in cl.files)
    base = cl.min_offset
    current = a = None
    table = None if topics is None else topics.numbering()
    try:
        for f, buf, chunk in _numbered(cl.scan_mapped(start, verify_crc, chunk_records), table):
            if topics is None:
                ids = None
            elif chunk.topic_ids is not None:
                ids = chunk.topic_ids
                topics.sync()
            else:
                if buf is not current:
                    current, a = buf, None
                    a = fastscan.as_array(buf)
                ids = topics.of_chunk(a, chunk.cols[C_TOPIC_POS], chunk.cols[C_TOPIC_LEN])
            yield ColumnChunk(f, cl.rel(f), buf, chunk, ids)
            if progress:
                progress(min(f.start + chunk.end - base, total), total)
            if chunk.finished:  # the scan unmaps the file next: no view of it may remain
                a = current = None
    finally:
        a = current = None
    if progress:
        progress(total, total)


def _numbered(chunks: Iterator, table) -> Iterator:
    """`chunks`, each step taken inside `fastscan.numbered_topics(table)` (when a table is given): a walk
    started there numbers the topics, and the setting does not outlive the step (a context variable set
    around a `yield` would stay set in the caller)."""
    if table is None:
        yield from chunks
        return
    try:
        while True:
            with fastscan.numbered_topics(table):
                item = next(chunks, None)
            if item is None:
                return
            yield item
    finally:
        chunks.close()


_QUEUE_BIAS = 1 << 31  # queue ids are signed 32-bit: (topic id, queue id) as one non-negative int64


_DENSE_QUEUES = 1 << 16  # (topic, queue) cells counted with one bincount when the chunk's grid is at most this


def _queue_counts(ids: np.ndarray, queue_ids: np.ndarray, topics: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunk's distinct `(topic id << 32) + (queue id + 2**31)` keys, ascending, with their counts.

    Topic ids are below `topics` and queue ids mostly small: the (topic, queue) grid is then counted with
    `np.bincount`, linear where `np.unique` sorts; else (negative or very large queue ids) `np.unique`."""
    import numpy as np

    lo, hi = int(queue_ids.min()), int(queue_ids.max())
    width = hi - lo + 1
    if lo < 0 or topics * width > _DENSE_QUEUES:
        return np.unique((ids << 32) + (queue_ids + _QUEUE_BIAS), return_counts=True)
    counts = np.bincount(ids * width + (queue_ids - lo), minlength=topics * width)
    cells = np.flatnonzero(counts)
    return ((cells // width) << 32) + (cells % width + lo + _QUEUE_BIAS), counts[cells]


@dataclass
class CommitLogSummary:
    """What `overview` needs from a CommitLog scan: counts and ranges per topic and queue."""

    records: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    end_offset: int | None = None
    per_queue: Counter = field(default_factory=Counter)
    per_topic_bytes: Counter = field(default_factory=Counter)


def summarise(store: Store, verify_crc: bool = True, progress: Progress | None = None,
              each: Callable[[ColumnChunk, TopicIds], None] | None = None,
              chunk_records: int = fastscan.DEFAULT_CHUNK,
              feeder: Callable[[], Callable[[ColumnChunk, TopicIds], None]] | None = None) -> CommitLogSummary:
    """One column scan of the whole CommitLog; `each(chunk, topics)` sees every chunk on the way (or the callable
    `feeder()` returns, called once the walk has started: what it imports is imported while the walk runs)."""
    topics = TopicIds()
    s = CommitLogSummary()
    queue_keys: Counter = Counter()
    with fastscan.walk_ahead():  # the next chunk is walked (without the GIL) while this loop handles one
        chunks = scan_chunks(store, topics, verify_crc=verify_crc, progress=progress, chunk_records=chunk_records)
        try:
            first = next(chunks, None)  # the walk starts on its own thread (no numpy): numpy is imported meanwhile
            import numpy as np

            if feeder is not None:
                each = feeder()
            topic_bytes = np.zeros(0, np.int64)
            for cc in () if first is None else itertools.chain((first,), chunks):
                n = len(cc)
                if each is not None:
                    each(cc, topics)
                if not n:
                    continue
                c, ids = cc.cols, cc.topic_ids
                s.records += n
                ts = c[C_STORE_TS]
                lo, hi = int(ts.min()), int(ts.max())
                first_ts, last_ts = s.first_store_timestamp, s.last_store_timestamp
                s.first_store_timestamp = lo if first_ts is None else min(first_ts, lo)
                s.last_store_timestamp = hi if last_ts is None else max(last_ts, hi)
                s.end_offset = cc.file.start + int(c[C_POS, -1]) + int(c[C_TOTAL, -1])
                keys, counts = _queue_counts(ids, c[C_QUEUE_ID], len(topics.names))
                queue_keys.update(dict(zip(keys.tolist(), counts.tolist(), strict=True)))
                if len(topics.names) > len(topic_bytes):
                    more = np.zeros(len(topics.names) - len(topic_bytes), np.int64)
                    topic_bytes = np.concatenate([topic_bytes, more])
                # float64 sums are exact here: a chunk's bytes stay far below 2**53
                sums = np.bincount(ids, weights=c[C_TOTAL], minlength=len(topic_bytes))
                topic_bytes += np.rint(sums).astype(np.int64)
        finally:
            chunks.close()  # the walk stops before the mapping closes, whatever happened here
    names = topics.names
    for key, count in queue_keys.items():
        s.per_queue[(names[key >> 32], (key & 0xFFFFFFFF) - _QUEUE_BIAS)] = count
    for i, b in enumerate(topic_bytes.tolist()):
        if b:
            s.per_topic_bytes[names[i]] = b
    return s
