"""The optional trace lookup index: `mqtool index build STORE --out DIR` (SQLite, standard library).

Why SQLite and not Parquet: a trace asks a handful of point lookups ("which records carry this
UNIQ_KEY?"), which a B-tree index answers in well under a millisecond without reading the rest;
new records are appended with one transaction, so the index grows incrementally in place; and it
ships with Python (no pyarrow at trace time). Parquet is a columnar scan format: a lookup reads
whole row groups, and an update means writing new files and merging them later.

One table, `refs(kind, value, offset)`, maps what a record can be looked up by to its physical
offset (the same joins as `mqtool.trace.find`):

| kind | value |
|---|---|
| `u` | UNIQ_KEY (upper case) |
| `k` | each word of KEYS |
| `o` | ORIGIN_MESSAGE_ID / DLQ_ORIGIN_MESSAGE_ID (upper case) |
| `d` | the UNIQ_KEY a TIMER_DEL_UNIQKEY cancels |
| `p` | PREPARED TRANSACTION OFFSET of a COMMIT/ROLLBACK record |
| `h` | `queue_id:half_queue_offset` for each entry of an op record's body |

msgIds (offsetMsgId) need no rows: they encode the physical offset. The build reads the CommitLog
through the column scan (`CommitLog.iter_batches`: the extension's walk, Arrow batches with the properties
as a map) and derives the rows per batch with Arrow compute, without a Python object per record
(`batch_refs`; `record_refs` is the same per `MessageRecord`, the reference the tests compare with).
`meta` keeps where indexing
stopped (`indexed_end`, the offset after the last indexed record) and a fingerprint of that last
record (offset, body CRC, store time). On open the index compares itself with the store: a record
after `indexed_end` means the store grew (only the new records are indexed); a fingerprint that no
longer matches means the store was replaced or truncated (the index is rebuilt).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np

from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import (
    PROPERTY_KEYS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK, TRANSACTION_ROLLBACK
from mqtool.store.mapped_files import read_at
from mqtool.store.store import Store
from mqtool.trace.find import ORIGIN_PROPS, ScanFinder, UnionFinder, del_target, op_body_offsets, op_offsets
from mqtool.trace.model import TraceError

INDEX_FILE = "trace-index.sqlite"
SCHEMA_VERSION = 1
_IN_CHUNK = 500

Progress = Callable[[int, int], None]


@dataclass
class IndexStats:
    """What an update did: records and rows added, the CommitLog range covered, whether it rebuilt."""

    path: Path
    records: int
    rows: int
    start: int
    end: int
    rebuilt: bool
    total_records: int

    def as_dict(self) -> dict:
        return {"path": str(self.path), "records_added": self.records, "rows_added": self.rows,
                "from_offset": self.start, "indexed_end": self.end, "rebuilt": self.rebuilt,
                "total_records": self.total_records}


def record_refs(rec: MessageRecord) -> Iterator[tuple[str, str]]:
    """The (kind, value) rows of one record."""
    p = rec.properties
    uk = p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uk:
        yield "u", uk.upper()
    for k in rec.keys:
        yield "k", k
    for name in ORIGIN_PROPS:
        v = p.get(name)
        if v:
            yield "o", v.upper()
    target = del_target(p.get(PROPERTY_TIMER_DEL_UNIQKEY))
    if target:
        yield "d", target
    if rec.transaction in ("commit", "rollback"):
        yield "p", str(rec.prepared_transaction_offset)
    if rec.topic == RMQ_SYS_TRANS_OP_HALF_TOPIC:
        for o in op_offsets(rec):
            yield "h", f"{rec.queue_id}:{o}"


def batch_refs(batch) -> Iterator[tuple[str, list[str], list[int]]]:
    """The rows of a `CommitLog.iter_batches` batch, as (kind, values, physical offsets) per kind.

    The same rows as `record_refs` over the batch's records (in another order), computed on the
    Arrow columns: the properties map is flattened once and filtered by name.
    """
    import pyarrow.compute as pc

    n = batch.num_rows
    if n == 0:
        return
    phys = batch.column("physical_offset").to_numpy()
    props = batch.column("properties")
    offs = props.offsets.to_numpy()
    lo, hi = int(offs[0]), int(offs[-1])
    names = props.keys.slice(lo, hi - lo)
    values = props.items.slice(lo, hi - lo)
    parent = np.repeat(np.arange(n), np.diff(offs))

    def prop(name: str):
        idx = np.flatnonzero(pc.equal(names, name).to_numpy(zero_copy_only=False))
        return values.take(idx), phys[parent[idx]]

    vals, at = prop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if len(vals):
        yield "u", [v.upper() for v in vals.to_pylist()], at.tolist()
    vals, at = prop(PROPERTY_KEYS)
    if len(vals):
        words = pc.split_pattern(vals, " ")
        flat = words.flatten()
        keep = np.flatnonzero(pc.not_equal(flat, "").to_numpy(zero_copy_only=False))
        owner = pc.list_parent_indices(words).to_numpy()
        yield "k", flat.take(keep).to_pylist(), at[owner[keep]].tolist()
    for name in ORIGIN_PROPS:
        vals, at = prop(name)
        if len(vals):
            yield "o", [v.upper() for v in vals.to_pylist()], at.tolist()
    vals, at = prop(PROPERTY_TIMER_DEL_UNIQKEY)
    if len(vals):
        pairs = [(t, o) for v, o in zip(vals.to_pylist(), at.tolist(), strict=True) if (t := del_target(v))]
        if pairs:
            yield "d", [t for t, _ in pairs], [o for _, o in pairs]
    tx = batch.column("sys_flag").to_numpy() & TRANSACTION_MASK
    ends = np.flatnonzero((tx == TRANSACTION_COMMIT) | (tx == TRANSACTION_ROLLBACK))
    if len(ends):
        prepared = batch.column("prepared_transaction_offset").to_numpy()[ends]
        yield "p", [str(p) for p in prepared.tolist()], phys[ends].tolist()
    topics = batch.column("topic")
    dictionary = topics.dictionary.to_pylist()
    if RMQ_SYS_TRANS_OP_HALF_TOPIC in dictionary:
        rows = np.flatnonzero(topics.indices.to_numpy(zero_copy_only=False)
                              == dictionary.index(RMQ_SYS_TRANS_OP_HALF_TOPIC))
        body, qid = batch.column("body"), batch.column("queue_id")
        hv: list[str] = []
        ho: list[int] = []
        for r in rows.tolist():
            q = qid[r].as_py()
            for o in op_body_offsets(body[r].as_py()):
                hv.append(f"{q}:{o}")
                ho.append(int(phys[r]))
        if hv:
            yield "h", hv, ho


def _record_after(store: Store, end: int) -> bool:
    """Whether a valid record starts at `end` or in a later file: read by header, no scan.

    Like `iter_records(end)`: a BLANK filler, a zero tail or an invalid record ends a file, and
    the next file is tried from its start.
    """
    cl = store.commitlog
    size = cl.queue.file_size
    for f in cl.files:
        if f.start + max(f.length, size) <= end:
            continue
        pos = max(end, f.start)
        head = read_at(f.path, pos - f.start, 8)
        if len(head) < 8 or int.from_bytes(head[4:8], "big", signed=True) == BLANK_MAGIC_CODE:
            continue
        try:
            rec = cl.read(pos)
        except RecordError:
            continue
        if rec.total_size == rec.computed_size:
            return True
    return False


class TraceIndex:
    """An index file in a directory; `update(store)` keeps it in step with the store."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)
        self.path = self.directory / INDEX_FILE
        self.conn: sqlite3.Connection | None = None

    # ----------------------------------------------------------------- file and meta

    @classmethod
    def open(cls, directory: Path | str, create: bool = False) -> TraceIndex:
        ix = cls(directory)
        if not ix.path.is_file():
            if not create:
                raise TraceError(f"{ix.path}: no trace index here (build one with: mqtool index build STORE "
                                 f"--out {ix.directory})")
            ix.directory.mkdir(parents=True, exist_ok=True)
        try:
            ix.conn = sqlite3.connect(ix.path)
            ix.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            version = ix.get("schema_version")
        except sqlite3.DatabaseError as e:
            raise TraceError(f"{ix.path}: not a trace index ({e})") from None
        if version is not None and int(version) != SCHEMA_VERSION:
            raise TraceError(f"{ix.path}: index schema {version}, this mqtool reads {SCHEMA_VERSION}; rebuild it")
        return ix

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self) -> TraceIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set(self, **values: object) -> None:
        self.conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                              [(k, str(v)) for k, v in values.items()])

    @property
    def indexed_end(self) -> int | None:
        v = self.get("indexed_end")
        return int(v) if v is not None else None

    # ----------------------------------------------------------------- freshness

    def status(self, store: Store) -> str:
        """`empty` (never built), `stale` (another or a truncated store), `grown` or `current`."""
        end = self.indexed_end
        if end is None:
            return "empty"
        if self.get("commitlog_file_size") != str(store.commitlog.queue.file_size):
            return "stale"
        last = int(self.get("last_offset") or -1)
        if last >= 0:
            try:
                rec = store.commitlog.read(last)
            except RecordError:
                return "stale"
            if (str(rec.body_crc), str(rec.store_timestamp)) != (self.get("last_crc"), self.get("last_store_ts")):
                return "stale"
        return "grown" if _record_after(store, end) else "current"

    # ----------------------------------------------------------------- writing

    def _reset(self) -> None:
        self.conn.execute("DROP TABLE IF EXISTS refs")
        self.conn.execute("DELETE FROM meta")
        self.conn.execute("CREATE TABLE refs (kind TEXT NOT NULL, value TEXT NOT NULL, offset INTEGER NOT NULL)")

    def update(self, store: Store, progress: Progress | None = None) -> IndexStats:
        """Index the records the index does not have yet (all of them when empty or stale)."""
        state = self.status(store)
        rebuilt = state in ("empty", "stale")
        c = self.conn
        c.execute("PRAGMA synchronous = OFF")
        c.execute("PRAGMA journal_mode = MEMORY")
        if rebuilt:
            self._reset()
            start = store.commitlog.min_offset
        else:
            start = self.indexed_end
        n_recs = n_rows = 0
        last: tuple[int, int, int, int] | None = None  # offset, total size, body CRC, store time
        end = start
        total = sum(f.length for f in store.commitlog.files)
        base = store.commitlog.min_offset
        with c:
            if state != "current":
                for batch in store.commitlog.iter_batches(None if rebuilt else start, verify_crc=False):
                    for kind, values, offsets in batch_refs(batch):
                        c.executemany("INSERT INTO refs VALUES (?, ?, ?)", zip(repeat(kind), values, offsets))
                        n_rows += len(values)
                    n_recs += batch.num_rows
                    last = tuple(batch.column(name)[-1].as_py() for name in
                                 ("physical_offset", "total_size", "body_crc", "store_timestamp"))
                    if progress:
                        progress(min(last[0] + last[1] - base, total), total)
            c.execute("CREATE INDEX IF NOT EXISTS refs_lookup ON refs (kind, value)")
            if last is not None:
                end = last[0] + last[1]
                self._set(last_offset=last[0], last_crc=last[2], last_store_ts=last[3])
            prev_total = 0 if rebuilt else int(self.get("total_records") or 0)
            self._set(schema_version=SCHEMA_VERSION, store=str(store.root), indexed_end=end,
                      commitlog_file_size=store.commitlog.queue.file_size, total_records=prev_total + n_recs)
            if rebuilt and last is None:
                self._set(last_offset=-1)
        if progress:
            progress(total, total)
        return IndexStats(self.path, n_recs, n_rows, start, end, rebuilt, prev_total + n_recs)

    # ----------------------------------------------------------------- reading

    def lookup(self, kind: str | Iterable[str], values: Iterable[str]) -> list[int]:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        vals = sorted(set(values))
        out: set[int] = set()
        for i in range(0, len(vals), _IN_CHUNK):
            chunk = vals[i : i + _IN_CHUNK]
            sql = (f"SELECT DISTINCT offset FROM refs WHERE kind IN ({','.join('?' * len(kinds))}) "
                   f"AND value IN ({','.join('?' * len(chunk))})")
            out.update(r[0] for r in self.conn.execute(sql, (*kinds, *chunk)))
        return sorted(out)


def build_index(store: Store, directory: Path | str, progress: Progress | None = None) -> IndexStats:
    """Create the index in `directory`, or bring an existing one up to date (incrementally).

    A directory that cannot be created or written is a `TraceError` (sqlite3 reports an unwritable
    directory as OperationalError, not OSError).
    """
    try:
        with TraceIndex.open(directory, create=True) as ix:
            return ix.update(store, progress)
    except OSError as e:
        raise TraceError(f"{e.filename or directory}: {e.strerror or e}") from None
    except sqlite3.OperationalError as e:
        raise TraceError(f"{directory}: {e}") from None


class IndexFinder:
    """A `Finder` answering from the index; records are read by offset (pread of a few hundred bytes)."""

    def __init__(self, store: Store, index: TraceIndex):
        self.store = store
        self.index = index

    def _read(self, offsets: Iterable[int]) -> list[MessageRecord]:
        out = []
        for off in offsets:
            try:
                out.append(self.store.commitlog.read(off))
            except RecordError:
                continue  # the file holding it was deleted since (fileReservedTime)
        return out

    def related(self, uniq_keys: set[str], msg_ids: set[str]) -> list[MessageRecord]:
        return self._read(self.index.lookup(("u", "d", "o"), uniq_keys | msg_ids))

    def by_key(self, key: str, topic: str | None = None) -> list[MessageRecord]:
        return self._read(self.index.lookup("k", [key]))

    def by_prepared(self, offsets: set[int]) -> list[MessageRecord]:
        return self._read(self.index.lookup("p", [str(o) for o in offsets]))

    def op_records(self, halves: set[tuple[int, int]]) -> list[MessageRecord]:
        return self._read(self.index.lookup("h", [f"{q}:{o}" for q, o in halves]))


def index_finder(store: Store, directory: Path | str, update: bool = True) -> tuple[UnionFinder, list[str]]:
    """A finder for `trace --index DIR`, and notes on what it did.

    A grown store is indexed incrementally first; when the index cannot be written (read-only
    directory) the records after `indexed_end` are searched without it. A stale index is an error.
    """
    ix = TraceIndex.open(directory)
    notes: list[str] = []
    state = ix.status(store)
    if state in ("empty", "stale"):
        raise TraceError(f"{ix.path}: the index does not match this store ({state}); rebuild it with: "
                         f"mqtool index build {store.root} --out {ix.directory}")
    if state == "grown":
        if update:
            try:
                stats = ix.update(store)
                notes.append(f"index updated: {stats.records} new record(s) indexed")
            except sqlite3.OperationalError as e:
                notes.append(f"index not updated ({e}); the records after {ix.indexed_end} were searched directly")
        if ix.status(store) == "grown":
            return UnionFinder(IndexFinder(store, ix), ScanFinder(store, start=ix.indexed_end)), notes
    return UnionFinder(IndexFinder(store, ix)), notes
