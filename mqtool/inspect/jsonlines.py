"""`messages --json` lines made per chunk from the CommitLog columns, without a `MessageRecord` each.

The record path (`iter_messages` -> `record_dict` -> `output.write_jsonl`) costs ~30 us a record;
here the extension's line writer (`mqtool._native.json_lines`, `_kernels/jsonl.pxi`) writes a whole
chunk's lines straight from the mapped file and the scan's columns, byte for byte what the record path
prints (`tests/inspect/test_jsonlines.py` compares both on every store the tests know).

Which path writes what:

- **fast** (this module): `messages --json` with any of --from-offset, --to-offset, --topic,
  --queue-id, --since, --until, --limit, --verify, and --body none, hex or text. The filters are
  the column masks `iter_messages` already uses (`_candidate_rows`), exact for these options.
- **record path, per row** (the row's `record_dict`, written as `write_jsonl` writes it): a row whose
  topic or properties are not valid UTF-8 (shown with `surrogateescape`), whose body is not valid
  UTF-8 with --body text (shown with U+FFFD), or a compressed body with --decompress; also every
  row where the extension has no line writer (`store/extension.py`: built without a C compiler, it warns once).
- **record path, whole query**: --key, --uniq-key, --tag (the IndexFile lookup and the property
  filters of `MessageQuery.matches`), --body base64, and offsets or times past 64 bits.

Rows are yielded as `memoryview`s (runs of finished UTF-8 lines, each owning its memory) or `dict`s
(a row for the record path), in
CommitLog order; `output.write_jsonl_parts` writes both. Findings are those of `iter_messages`.
"""

from __future__ import annotations

import functools
import json
import mmap
import sys
import threading
from array import array
from collections.abc import Iterator
from queue import SimpleQueue
from typing import TYPE_CHECKING

from mqtool.formats import record_layout as cl
from mqtool.formats.names import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.sysflag import BORNHOST_V6, COMPRESSED, STOREHOST_V6, SysFlag
from mqtool.inspect.columns import ColumnChunk
from mqtool.inspect.messages import MessageQuery, RowWalk, _walked_to, row_list
from mqtool.inspect.records import Progress, record_dict
from mqtool.store import extension, fastscan
from mqtool.store.store import Store

if TYPE_CHECKING:  # a query's rows are an index array only where a filter picks them: all rows are a range
    import numpy as np

KERNEL_MIN_BYTES = 32 << 20
"""CommitLogs at least this big are written on two worker threads while the walk goes on (`_pipelined`)."""

PIPELINE_CHUNK = 8192
"""Records a chunk of a big CommitLog's walk (`_pipelined`): a quarter of the scan's default, so the
arrays a chunk needs (columns, lines) are reused while hot instead of faulted in and
zeroed (huge pages: a fifth less CPU in the kernel on the 256 MiB bench store), and the workers start
sooner after the first walk and finish sooner after the last."""

BODY_NONE, BODY_HEX, BODY_TEXT = 0, 1, 2
_BODY_MODES = {"none": BODY_NONE, "hex": BODY_HEX, "text": BODY_TEXT}
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def columns_answer(query: MessageQuery) -> bool:
    """Whether the scan's columns answer the query's filters (here and in `parquet.py`; the rest goes to the
    record path): no key, UNIQ_KEY or tag lookup, every number within int64."""
    if query.key is not None or query.uniq_key is not None or query.tag is not None:
        return False
    ints = (query.from_offset, query.to_offset, query.queue_id, query.since_ms, query.until_ms)
    return all(v is None or _I64_MIN <= v <= _I64_MAX for v in ints)


def fast_query(query: MessageQuery, body: str) -> bool:
    """Whether this module writes the query's lines (see the module docstring)."""
    return body in _BODY_MODES and columns_answer(query)


def message_lines(
    store: Store,
    query: MessageQuery,
    verify: bool = False,
    body: str = "text",
    decompress: bool = False,
    progress: Progress | None = None,
    threads: bool | None = None,
) -> Iterator[memoryview | dict]:
    """The `messages --json` output of `query` as runs of lines (`memoryview`) and record-path rows (`dict`).
    `threads`: write on two worker threads while the walk goes on (None: for a CommitLog of at least
    `KERNEL_MIN_BYTES`); the output is the same."""
    if not fast_query(query, body):
        from mqtool.inspect.messages import find_messages

        _, records = find_messages(store, query, verify, progress)
        yield from (record_dict(r, body, decompress) for r in records)
        return
    big = _big(store)
    chunks = limited_chunks(store, query, verify, progress, PIPELINE_CHUNK, plain_rows=True)
    buffers = _Buffers()
    try:
        if extension.kernel("json_lines") is None:
            for walk, cc, rows, _ in chunks:
                for row, rec in zip(row_list(rows), cc.records(rows), strict=True):
                    walk.last = row
                    yield record_dict(rec, body, decompress)
        elif big if threads is None else threads:
            yield from _pipelined(chunks, store, body, decompress, buffers)
        else:
            for walk, cc, rows, _ in _kept(chunks, buffers, keep_pages=False):
                for row, part in _chunk_parts(cc, rows, body, decompress, buffers):
                    walk.last = row
                    yield part
    finally:
        chunks.close()


def _big(store: Store) -> bool:
    """The CommitLog reaches `KERNEL_MIN_BYTES`."""
    return sum(f.length for f in store.commitlog.files) >= KERNEL_MIN_BYTES


def limited_chunks(
    store: Store,
    query: MessageQuery,
    verify: bool = False,
    progress: Progress | None = None,
    big_chunk: int | None = None,
    plain_rows: bool = False,
) -> Iterator[tuple[RowWalk, ColumnChunk, np.ndarray | range, bool]]:
    """(walk, chunk, rows, big) of `query`'s `RowWalk`, the rows cut at --limit: what both fast writers
    (JSON Lines here, Parquet) walk. `big`: the CommitLog reaches `KERNEL_MIN_BYTES`, so the scan's
    compiled walk is loaded first; it then walks `big_chunk` records a chunk (None: the scan's default).
    The rows are an index array, or with `plain_rows` a range where they are all of the chunk's (no numpy)."""
    if query.limit is not None and query.limit <= 0:
        return
    big = _big(store)
    if big:
        fastscan.compiled_walk()
    n = 0
    with RowWalk(store, query, verify, progress, big_chunk if big else None) as walk:
        for cc, rows in walk:
            if query.limit is not None:
                rows = rows[: query.limit - n]
            if isinstance(rows, range) and not plain_rows:
                import numpy as np

                rows = np.arange(rows.start, rows.stop)
            yield walk, cc, rows, big
            n += len(rows)
            if query.limit is not None and n >= query.limit:
                return


def _chunk_parts(
    cc: ColumnChunk, rows: np.ndarray | range, body: str, decompress: bool, buffers: _Buffers | None = None
) -> Iterator[tuple[int, memoryview | dict]]:
    """(last row covered, part) for the given rows of one chunk: lines from the writer, and a
    record-path dict for each row it leaves out."""
    job = _LinesJob(cc, rows, body, decompress, buffers=buffers)
    for i in range(len(job.pieces)):
        job.write(i)
    yield from job.parts()


class _Buffers:
    """The big buffers of a pass (lines, columns), each used again once nothing refers to it any more (no
    `memoryview` of it is kept by the reader, no job or chunk holds it). The kernel zeroes a fresh buffer's
    pages when they are first written: ~0.1 s of CPU for the 160 MB of lines of a 256 MiB store, paid once per
    buffer instead of once per chunk."""

    def __init__(self) -> None:
        self._free: list[mmap.mmap] = []
        self._lent: list[mmap.mmap] = []

    def take(self, nbytes: int) -> memoryview:
        """An uninitialised writable buffer of `nbytes` bytes."""
        lent = []
        for b in self._lent:  # referred to by this list, `b` and getrefcount's argument alone: free
            (self._free if sys.getrefcount(b) <= 3 else lent).append(b)
        self._lent = lent
        fits = [i for i, b in enumerate(self._free) if len(b) >= nbytes]
        if fits:
            b = self._free.pop(min(fits, key=lambda i: len(self._free[i])))
        else:  # a quarter more than asked (chunks differ a little), and the smallest free one let go
            if self._free:
                self._free.pop(min(range(len(self._free)), key=lambda i: len(self._free[i])))
            b = mmap.mmap(-1, max(nbytes + nbytes // 4, 1))  # anonymous: pages zeroed by the kernel as touched
        self._lent.append(b)
        return memoryview(b)[:nbytes]


class _LinesJob:
    """One chunk's lines in three steps: `__init__` (the columns, texts, hosts and sizes: plain buffers and
    `int64_stats`, numpy only for the rows a filter picked), `write(i)`
    (the extension's writer alone on piece i of the rows, GIL released: the step `_pipelined` hands to
    its worker threads) and `parts` (the lines as `memoryview`s, the
    left-out rows as record-path dicts). The job holds a view of the chunk's mapping until its parts
    are read: the scan cannot unmap it earlier."""

    def __init__(
        self,
        cc: ColumnChunk,
        rows: np.ndarray | range,
        body: str,
        decompress: bool,
        pieces: int = 1,
        buffers: _Buffers | None = None,
    ) -> None:
        self.cc, self.rows, self.body, self.decompress = cc, rows, body, decompress
        buffers = buffers or _Buffers()
        self.last = -1
        self.pieces: list[tuple] = []  # (lo, hi, out, ends, the writer's args)
        file_json = _json_text(cc.rel)
        if file_json is None:  # a file name only `json` writes (never in a real store): record rows
            return
        chunk = cc.chunk
        c = _whole_columns(chunk, rows)  # row i of the rows is column i of c (c may be wider)
        a = memoryview(cc.buf).cast("B")
        m = len(rows)
        col = _column_reader(c, m)
        stats = _int64_stats()
        _, flag_lo, flag_hi, flag_bits = stats(col(fastscan.C_SYS_FLAG))
        host_tab, host_at, born, store = _hosts(a, col, m, flag_bits)
        flag_tab, flag_at, flag_codes = _flags(col(fastscan.C_SYS_FLAG), flag_lo, flag_hi)
        dl = None if chunk.dledger is None else _dledger_rows(chunk.dledger, rows)
        longest_host = max((host_at[i + 1] - host_at[i] for i in range(len(host_at) - 1)), default=0)
        fixed = 1024 + len(file_json) + 2 * longest_host  # an upper bound of each line
        sized = (fastscan.C_TOPIC_LEN, 6), (fastscan.C_PROPS_LEN, 20), (fastscan.C_BODY_LEN, 0 if body == "none" else 6)
        crc_ok = _crc_ok(chunk, rows)  # all True while the CRC is still to check: the writer does
        lits, lit_at = _texts_table(file_json)
        keys = stats(col(fastscan.C_PROPS_LEN))[2] // 3 + 2  # pairs a row can have at most (a name, 0x01, a value)
        pieces = min(pieces, m)
        for i in range(pieces):
            lo, hi = m * i // pieces, m * (i + 1) // pieces
            per_rows = sum(weight * stats(col(k, lo, hi))[0] for k, weight in sized if weight)
            out = buffers.take(fixed * (hi - lo) + per_rows + _PAD)  # no pyarrow import
            ends = _int64s(hi - lo)
            args = [
                a,
                c,
                lo,
                hi,
                chunk.base_offset,
                _layout(),
                lits,
                lit_at,
                flag_tab,
                flag_at,
                flag_codes,
                host_tab,
                host_at,
                born,
                store,
                dl,
                crc_ok,
                not chunk.crc_checked,
                _BODY_MODES[body],
                decompress,
                _int64s(3 * keys).cast("B").cast("q", (3, keys)),
                out,
                ends,
            ]
            self.pieces.append((lo, hi, out, ends, args))

    def write(self, i: int = 0) -> None:
        """Run the writer on piece i (`ends`: see `_native.json_lines`); it releases the GIL, so the two
        worker threads of `_pipelined` run at once."""
        extension.kernel("json_lines")(*self.pieces[i][4])

    def parts(self) -> Iterator[tuple[int, memoryview | dict]]:
        """(last row covered, part) in row order, once every piece is written; `last` is the row of
        the part handed out last."""
        for row, part in self._parts():
            self.last = row
            yield row, part

    def _parts(self) -> Iterator[tuple[int, memoryview | dict]]:
        rows, cc, body, decompress = self.rows, self.cc, self.body, self.decompress
        if not self.pieces:
            for row, rec in zip(row_list(rows), cc.records(rows), strict=True):
                yield row, record_dict(rec, body, decompress)
            return
        pieces, self.pieces = self.pieces, []  # the mapping's view goes with the arguments
        stats = _int64_stats()
        for lo, _, out, ends, *_ in pieces:
            start = 0
            left_out = [i for i, e in enumerate(ends) if e < 0] if stats(ends)[1] < 0 else []
            for i in left_out:
                stop = -ends[i] - 1  # where the next written line starts
                if stop > start:
                    yield int(rows[lo + i - 1]), out[start:stop]
                start = stop
                rec = next(cc.records(rows[lo + i : lo + i + 1]))
                yield int(rows[lo + i]), record_dict(rec, body, decompress)
            total = ends[-1] if ends[-1] >= 0 else -ends[-1] - 1
            if total > start:
                yield int(rows[lo + len(ends) - 1]), out[start:total]


def _whole_columns(chunk: fastscan.ScanChunk, rows: np.ndarray | range):
    """A C-contiguous (NCOL, >= len(rows)) int64 buffer whose first columns are the chunk's `rows`: the walk's
    own buffer when the rows are the first ones of the chunk (a range: the writer reads only those), else a copy
    of the rows (the writer takes contiguous arrays)."""
    if isinstance(rows, range) and rows.start == 0 and isinstance(chunk.columns, fastscan.Columns):
        return chunk.columns.grid()
    import numpy as np

    cols = chunk.cols
    if len(rows) != cols.shape[1]:  # some rows (ascending, unique)
        return np.ascontiguousarray(cols[:, rows])
    if cols.flags.c_contiguous:
        return cols
    base = cols.base
    if (
        isinstance(base, np.ndarray)
        and base.ndim == 2
        and base.flags.c_contiguous
        and base.dtype == cols.dtype
        and base.shape[0] == cols.shape[0]
        and base.strides == cols.strides
        and base.ctypes.data == cols.ctypes.data
    ):
        return base
    return np.ascontiguousarray(cols)


def _column_reader(c, m: int):
    """`col(k, lo=0, hi=m)`: rows lo..hi-1 of column k of the (NCOL, width) int64 buffer `c`, as a memoryview."""
    width = c.shape[1]
    flat = memoryview(c).cast("B").cast("q")

    def col(k: int, lo: int = 0, hi: int = m) -> memoryview:
        return flat[k * width + lo : k * width + hi]

    return col


def _int64_stats():
    """`_native.int64_stats` (sum, min, max, or of an int64 buffer), or its plain reference (`store/kernels.py`)."""
    stats = extension.kernel("int64_stats")
    if stats is None:
        from mqtool.store.kernels import int64_stats as stats
    return stats


def _int64s(n: int) -> memoryview:
    """`n` zeroed int64s (the writer's scratch and line ends)."""
    return memoryview(bytearray(8 * n)).cast("q")


def _crc_ok(chunk: fastscan.ScanChunk, rows: np.ndarray | range):
    """A byte a row: the body CRC matches (all 1 while the CRC is still to check)."""
    if not chunk.crc_checked:
        return b"\x01" * len(rows)
    ok = bytearray(len(chunk))
    fastscan.row_checks(chunk, ok)
    if isinstance(rows, range):
        return ok[rows.start : rows.stop]
    import numpy as np

    return np.frombuffer(ok, np.uint8)[rows].copy()


def _dledger_rows(dledger, rows: np.ndarray | range):
    """The rows' DLedger index, term and pos ((3, len(rows)), contiguous)."""
    import numpy as np

    return np.ascontiguousarray(dledger[:, rows])


def _pipelined(
    chunks: Iterator, store: Store, body: str, decompress: bool, buffers: _Buffers | None = None
) -> Iterator[memoryview | dict]:
    """`message_lines` on two cores: while two worker threads write chunk k's lines (`_LinesJob.write`,
    native code without the GIL, one half of the rows each), this thread walks chunk k+1 and readies its
    columns, then hands chunk k's parts on in order. Worker errors are raised here (`_Writers.wait`).

    The walk is one chunk ahead of what the consumer has read. Findings and file ends stay those of
    the serial path: before the walk goes on, the CommitLog's walk state is kept (`_walk_state`); a
    consumer that stops inside chunk k (`close`, e.g. a closed stdout) gets it back and the rows after
    its last one dropped, as `RowWalk` does when the serial walk stops there."""
    cl = store.commitlog
    writers = _Writers()
    pending = None  # (chunk, job, the workers writing it, walk state) of the chunk whose lines the workers write
    try:
        buffers = buffers or _Buffers()
        for walk, cc, rows, _ in _kept(chunks, buffers, keep_pages=True):
            job = _LinesJob(cc, rows, body, decompress, 2, buffers)
            workers = writers.submit(job)
            if pending is not None:
                yield from _written(pending, writers)
            walk.last = int(rows[-1])  # as the serial path leaves it once the chunk's parts are read
            pending = (cc, job, workers, _walk_state(cl))
        if pending is not None:
            yield from _written(pending, writers)
            pending = None
    except GeneratorExit:
        writers.close()
        chunks.close()
        if pending is not None:  # stopped inside `pending`'s chunk: the serial walk would stop there
            _set_walk_state(cl, pending[3])
            _walked_to(cl, pending[0], pending[1].last)
        raise
    finally:
        writers.close()


class _Writers:
    """Two worker threads; worker i writes piece i of each job handed to it (`_LinesJob.write(i)`), in the
    order given. What a `concurrent.futures` pool did, without its import (it brings `logging`: ~10 ms of
    a command that takes half a second)."""

    def __init__(self, n: int = 2) -> None:
        self._todo: list[SimpleQueue] = [SimpleQueue() for _ in range(n)]
        self._done: list[SimpleQueue] = [SimpleQueue() for _ in range(n)]
        self._stop = False
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"mqtool-lines_{i}") for i in range(n)]
        for t in self._threads:
            t.start()

    def _run(self, i: int) -> None:
        todo, done = self._todo[i], self._done[i]
        while (job := todo.get()) is not None:
            try:
                if not self._stop:
                    job.write(i)
                done.put(None)
            except BaseException as e:  # raised in the reader's thread by `wait`
                done.put(e)

    def submit(self, job: _LinesJob) -> list[int]:
        """Hand each piece of `job` to its worker; the workers to `wait` for."""
        workers = list(range(len(job.pieces)))
        for i in workers:
            self._todo[i].put(job)
        return workers

    def wait(self, workers: list[int]) -> None:
        """Until `workers` have written the oldest job handed to them; a worker's error raised here."""
        for i in workers:
            e = self._done[i].get()
            if e is not None:
                raise e

    def close(self) -> None:
        """Stop the workers (jobs not started are dropped) and wait for them; again: nothing."""
        if not self._stop:
            self._stop = True
            for q in self._todo:
                q.put(None)
            for t in self._threads:
                t.join()


def _kept(chunks: Iterator, buffers: _Buffers, keep_pages: bool) -> Iterator:
    """`chunks`, the walk resumed with its columns in `buffers` (`fastscan.columns_from`: no numpy array made)
    and, with `keep_pages`, its pages kept (`fastscan.pages_kept`: the workers still read the previous chunk's
    bytes, which `_written` drops once they are written)."""
    while True:
        with fastscan.columns_from(buffers.take):
            if keep_pages:
                with fastscan.pages_kept():
                    item = next(chunks, None)
            else:
                item = next(chunks, None)
        if item is None:
            return
        yield item


def _written(pending: tuple, writers: _Writers) -> Iterator[memoryview | dict]:
    """A job's parts once its workers are done (their errors raised)."""
    cc, job, workers, _ = pending
    writers.wait(workers)
    if isinstance(cc.buf, mmap.mmap):  # the walk dropped these pages once; the writers read them again
        first = cc.chunk.column(fastscan.C_POS)[0]
        fastscan._release(cc.buf, first - first % mmap.PAGESIZE, cc.chunk.end)
    for _, part in job.parts():
        yield part


def _walk_state(cl) -> tuple[int, dict[str, dict]]:
    """What a CommitLog walk has left so far: its findings (their number) and its file ends."""
    return len(cl.findings), {name: dict(vars(scan)) for name, scan in cl.scans.items()}


def _set_walk_state(cl, state: tuple[int, dict[str, dict]]) -> None:
    n, scans = state
    del cl.findings[n:]
    for name in [name for name in cl.scans if name not in scans]:
        del cl.scans[name]
    for name, fields in scans.items():
        vars(cl.scans[name]).update(fields)


def _json_text(s: str) -> bytes | None:
    """`json.dumps(s, ensure_ascii=False)` as UTF-8, None when it cannot be encoded (a lone surrogate)."""
    try:
        return json.dumps(s, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return None


def _flag_json(sys_flag: int) -> bytes:
    f = SysFlag(sys_flag)
    return (
        f'"transaction": {json.dumps(f.transaction, ensure_ascii=False)}, '
        f'"compression": {json.dumps(f.compression, ensure_ascii=False)}'
    ).encode()


def _table(texts: list[bytes]) -> tuple[bytes, array]:
    """(bytes, starts) of texts for `_lit`; 64 bytes of padding let `_put` copy each in moves of a constant size."""
    at = array("q", [0])
    for t in texts:
        at.append(at[-1] + len(t))
    return b"".join(texts) + bytes(_PAD), at


_PAD = 64
_NO_HOSTS = _table([])
_chunk_texts: dict[bytes, tuple[bytes, array]] = {}


def _texts_table(file_json: bytes) -> tuple[bytes, array]:
    """`_table` of `_texts(file_json)` in the writer's order, made once a file."""
    t = _chunk_texts.get(file_json)
    if t is None:
        texts = _texts(file_json)
        t = _chunk_texts[file_json] = _table([texts[name] for name in extension.kernel("JSONL_TEXTS")])
    return t


def _hosts(a: memoryview, col, m: int, flag_bits: int) -> tuple[bytes, array, array, array]:
    """Every distinct IPv6 host of the rows formatted once (`fastscan.host_text`): a text table and
    each row's born and store host code into it; -1 for an IPv4 host, which the writer writes itself
    (`_host4`). `col` reads the rows' columns (`_column_reader`); `flag_bits`: their sys flags or-ed."""
    if not flag_bits & (BORNHOST_V6 | STOREHOST_V6):  # IPv4 only: one array of -1
        none = array("q", [-1]) * m
        return *_NO_HOSTS, none, none
    texts: dict[str, int] = {}
    codes = []
    sys_flag = col(fastscan.C_SYS_FLAG)
    for k, bit in ((fastscan.C_BORN_HOST, BORNHOST_V6), (fastscan.C_STORE_HOST, STOREHOST_V6)):
        pos = col(k)
        code = array("q", [-1]) * m
        for i in range(m):
            if sys_flag[i] & bit:
                t = fastscan.host_text(bytes(a[pos[i] : pos[i] + cl.HOST_SIZE_V6]))
                code[i] = texts.setdefault(t, len(texts))
        codes.append(code)
    tab, at = _table([json.dumps(t).encode() for t in texts])
    return tab, at, codes[0], codes[1]


def _flags(sys_flag: memoryview, lo: int, hi: int) -> tuple[bytes, array, array]:
    """Each distinct sys flag's text up to the born timestamp (`_flag_json`): a text table, and each row's
    code into it (ascending flags). A chunk of one sys flag (`lo == hi`, the common case) is told without
    sorting."""
    if lo == hi:
        flags, codes = [lo], array("q", bytes(8 * len(sys_flag)))
    else:
        flags = sorted(set(sys_flag))
        index = {f: i for i, f in enumerate(flags)}
        codes = array("q", [index[f] for f in sys_flag])
    return *_flag_table(tuple(flags)), codes


@functools.cache
def _flag_table(flags: tuple[int, ...]) -> tuple[bytes, array]:
    return _table([b", " + _flag_json(f) + b', "born_timestamp": ' for f in flags])


def _texts(file_json: bytes) -> dict[str, bytes]:
    """The constant texts of a line by their `_native.JSONL_TEXTS` names; `file_json` is the chunk's file."""
    return {
        "OPEN": b'{"physical_offset": ',
        "POSITION": b', "file": ' + file_json + b', "position": ',
        "TOTAL_SIZE": b', "total_size": ',
        "MAGIC_V2": b', "magic": "v2", "body_crc": ',
        "MAGIC_V1": b', "magic": "v1", "body_crc": ',
        "CRC_TRUE": b', "crc_ok": true, "queue_id": ',
        "CRC_FALSE": b', "crc_ok": false, "queue_id": ',
        "FLAG": b', "flag": ',
        "QUEUE_OFFSET": b', "queue_offset": ',
        "SYS_FLAG": b', "sys_flag": ',  # then the sys flag's text (`_flag_json`) up to the born timestamp
        "BORN_HOST": b', "born_host": ',
        "STORE_TIMESTAMP": b', "store_timestamp": ',
        "STORE_HOST": b', "store_host": ',
        "RECONSUME_TIMES": b', "reconsume_times": ',
        "PREPARED": b', "prepared_transaction_offset": ',
        "TOPIC": b', "topic": ',
        "PROPERTIES": b', "properties": {',
        "SEP": b", ",
        "COLON": b": ",
        "UNIQ_FIELD": b'}, "uniq_key": ',
        "MSG_ID": b', "msg_id": "',
        "NULL_MSG_ID": b'null, "msg_id": "',
        "BODY_LENGTH": b'", "body_length": ',
        "BODY": b', "body": ',
        "BODY_NULL_END": b', "body": null}\n',
        "BODY_NULL_DLEDGER": b', "body": null, "dledger": {"index": ',
        "DLEDGER": b', "dledger": {"index": ',
        "TERM": b', "term": ',
        "POS": b', "pos": ',
        "DLEDGER_END": b"}}\n",
        "END": b"}\n",
    }


@functools.cache
def _layout() -> array:
    """`_native.JSONL_LAYOUT`'s values: the scan's column indices (by name) and the constants the writer needs."""
    known = {name: i for i, name in enumerate(fastscan.COLUMNS)}
    known.update(
        COMPRESSED=COMPRESSED,
        STOREHOST_V6=STOREHOST_V6,
        MAGIC_V2=cl.MESSAGE_MAGIC_CODE_V2,
        HOST_V4=cl.HOST_SIZE_V4,
        HOST_V6=cl.HOST_SIZE_V6,
        UNIQ_LEN=len(_UNIQ),
        UNIQ8=_UNIQ8,
    )
    return array("q", [known[name] for name in extension.kernel("JSONL_LAYOUT")])


_UNIQ = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()
assert len(_UNIQ) <= 8  # the writer compares a name of up to 8 bytes as one integer
_UNIQ8 = int.from_bytes(_UNIQ, "little")
