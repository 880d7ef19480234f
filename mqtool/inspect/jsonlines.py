"""`messages --json` lines made per chunk from the CommitLog columns, without a `MessageRecord` each.

The record path (`iter_messages` -> `record_dict` -> `output.write_jsonl`) costs ~30 us a record;
here one compiled loop (`_lines`, numba, imported lazily) writes a whole chunk's lines straight from
the mapped file and the scan's columns, byte for byte what the record path prints
(`tests/inspect/test_jsonlines.py` compares both on every store the tests know).

Which path writes what:

- **fast** (this module): `messages --json` with any of --from-offset, --to-offset, --topic,
  --queue-id, --since, --until, --limit, --verify, and --body none, hex or text. The filters are
  the column masks `iter_messages` already uses (`_candidate_rows`), exact for these options.
- **record path, per row** (the row's `record_dict`, written as `write_jsonl` writes it): a row whose
  topic or properties are not valid UTF-8 (shown with `surrogateescape`), whose body is not valid
  UTF-8 with --body text (shown with U+FFFD), or a compressed body with --decompress; also every
  row of a chunk in a process that has not loaded numba yet and reads a small store
  (`KERNEL_MIN_BYTES`), so small commands stay free of numba's start-up.
- **record path, whole query**: --key, --uniq-key, --tag (the IndexFile lookup and the property
  filters of `MessageQuery.matches`), --body base64, and offsets or times past 64 bits.

Rows are yielded as `memoryview`s (runs of finished UTF-8 lines, each owning its memory) or `dict`s
(a row for the record path), in
CommitLog order; `output.write_jsonl_parts` writes both. Findings are those of `iter_messages`.
"""

from __future__ import annotations

import json
import mmap
import sys
from collections.abc import Iterator
from types import FunctionType

import numpy as np

from mqtool.formats import commitlog as cl
from mqtool.formats.names import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.sysflag import BORNHOST_V6, COMPRESSED, STOREHOST_V6, SysFlag
from mqtool.inspect.columns import ColumnChunk
from mqtool.inspect.messages import MessageQuery, RowWalk, _walked_to
from mqtool.inspect.records import Progress, record_dict
from mqtool.store import fastscan
from mqtool.store.store import Store

KERNEL_MIN_BYTES = 32 << 20
"""CommitLogs at least this big use the compiled writer from the first chunk (numba's start-up, ~1 s,
is then paid anyway by the scan); smaller ones only once the scan has loaded numba."""

PIPELINE_CHUNK = 8192
"""Records a chunk of a big CommitLog's walk (`_pipelined`): a quarter of the scan's default, so the
arrays a chunk needs (columns, lines, property pairs) are reused while hot instead of faulted in and
zeroed (huge pages: a fifth less CPU in the kernel on the 256 MiB bench store), and the workers start
sooner after the first walk and finish sooner after the last."""

BODY_NONE, BODY_HEX, BODY_TEXT = 0, 1, 2
_BODY_MODES = {"none": BODY_NONE, "hex": BODY_HEX, "text": BODY_TEXT}
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def fast_query(query: MessageQuery, body: str) -> bool:
    """Whether this module writes the query's lines (see the module docstring)."""
    if query.key is not None or query.uniq_key is not None or query.tag is not None or body not in _BODY_MODES:
        return False
    ints = (query.from_offset, query.to_offset, query.queue_id, query.since_ms, query.until_ms)
    return all(v is None or _I64_MIN <= v <= _I64_MAX for v in ints)


def message_lines(store: Store, query: MessageQuery, verify: bool = False, body: str = "text",
                  decompress: bool = False, progress: Progress | None = None) -> Iterator[memoryview | dict]:
    """The `messages --json` output of `query` as runs of lines (`memoryview`) and record-path rows (`dict`)."""
    if not fast_query(query, body):
        from mqtool.inspect.messages import find_messages

        _, records = find_messages(store, query, verify, progress)
        yield from (record_dict(r, body, decompress) for r in records)
        return
    chunks = limited_chunks(store, query, verify, progress, PIPELINE_CHUNK)
    buffers = _Buffers()
    try:
        if _use_threads(_big(store)):
            yield from _pipelined(chunks, store, body, decompress, buffers)
            return
        for walk, cc, rows, big in chunks:
            if _use_kernel(big):
                for row, part in _chunk_parts(cc, rows, body, decompress, buffers):
                    walk.last = row
                    yield part
            else:
                for row, rec in zip(rows.tolist(), cc.records(rows), strict=True):
                    walk.last = row
                    yield record_dict(rec, body, decompress)
    finally:
        chunks.close()


def _big(store: Store) -> bool:
    """The CommitLog reaches `KERNEL_MIN_BYTES`."""
    return sum(f.length for f in store.commitlog.files) >= KERNEL_MIN_BYTES


def limited_chunks(store: Store, query: MessageQuery, verify: bool = False, progress: Progress | None = None,
                   big_chunk: int | None = None) -> Iterator[tuple[RowWalk, ColumnChunk, np.ndarray, bool]]:
    """(walk, chunk, rows, big) of `query`'s `RowWalk`, the rows cut at --limit: what both fast writers
    (JSON Lines here, Parquet) walk. `big`: the CommitLog reaches `KERNEL_MIN_BYTES`, so numba is loaded
    first and the scan walks every record with it, not the first 20k with CPython; it then walks
    `big_chunk` records a chunk (None: the scan's default)."""
    if query.limit is not None and query.limit <= 0:
        return
    big = _big(store)
    if big:  # load the compiled walk now: it then walks every record, not the first 20k with CPython
        fastscan.compiled_walk()
    n = 0
    with RowWalk(store, query, verify, progress, big_chunk if big else None) as walk:
        for cc, rows in walk:
            if query.limit is not None:
                rows = rows[: query.limit - n]
            yield walk, cc, rows, big
            n += len(rows)
            if query.limit is not None and n >= query.limit:
                return


def _use_kernel(big: bool) -> bool:
    """The compiled writer for a big CommitLog, or once the scan has loaded a compiled walk anyway."""
    return big or fastscan.compiled_loaded()


def _use_threads(big: bool) -> bool:
    """Two threads (`_pipelined`) where the compiled path runs from the first chunk: a big CommitLog."""
    return big


def _chunk_parts(cc: ColumnChunk, rows: np.ndarray, body: str, decompress: bool,
                 buffers: _Buffers | None = None) -> Iterator[tuple[int, memoryview | dict]]:
    """(last row covered, part) for the given rows of one chunk: lines from `_lines`, and a
    record-path dict for each row it leaves out."""
    job = _LinesJob(cc, rows, body, decompress, buffers=buffers)
    for i in range(len(job.pieces)):
        job.write(i)
    yield from job.parts()


class _Buffers:
    """The big arrays of a pass (lines, property pairs, column copies), each used again once nothing
    refers to it any more (no `memoryview` of its lines is kept by the reader, no job holds it). The
    kernel zeroes a fresh array's pages when they are first written: ~0.1 s of CPU for the 160 MB of
    lines of a 256 MiB store, paid once per buffer instead of once per chunk."""

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._lent: list[np.ndarray] = []

    def take(self, nbytes: int, dtype=np.uint8, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """An uninitialised array of `nbytes` bytes (as `dtype` of `shape`, else flat)."""
        lent = []
        for b in self._lent:  # referred to by this list, `b` and getrefcount's argument alone: free
            (self._free if sys.getrefcount(b) <= 3 else lent).append(b)
        self._lent = lent
        fits = [i for i, b in enumerate(self._free) if b.nbytes >= nbytes]
        if fits:
            b = self._free.pop(min(fits, key=lambda i: self._free[i].nbytes))
        else:  # a quarter more than asked (chunks differ a little), and the smallest free one let go
            if self._free:
                self._free.pop(min(range(len(self._free)), key=lambda i: self._free[i].nbytes))
            b = np.empty(max(nbytes + nbytes // 4, 1), np.uint8)
        self._lent.append(b)
        a = b[:nbytes].view(dtype)
        return a if shape is None else a.reshape(shape)


class _LinesJob:
    """One chunk's lines in three steps: `__init__` (the columns, property pairs and hosts: numpy and
    the scan kernels), `write(i)` (the compiled writer alone on piece i of the rows, GIL released: the
    step `_pipelined` hands to its worker threads) and `parts` (the lines as `memoryview`s, the
    left-out rows as record-path dicts). The job holds a view of the chunk's mapping until its parts
    are read: the scan cannot unmap it earlier."""

    def __init__(self, cc: ColumnChunk, rows: np.ndarray, body: str, decompress: bool, pieces: int = 1,
                 buffers: _Buffers | None = None) -> None:
        self.cc, self.rows, self.body, self.decompress = cc, rows, body, decompress
        buffers = buffers or _Buffers()
        self.last = -1
        self.pieces: list[tuple] = []  # (lo, hi, out, ends, the writer's args, the pairs' first arrays)
        file_json = _json_text(cc.rel)
        if file_json is None:  # a file name only `json` writes (never in a real store): record rows
            return
        self.k = fastscan.compiled_kernels()
        chunk = cc.chunk
        c = _whole_columns(chunk.cols, rows)  # row i of the rows is column i of c (c may be wider)
        a = fastscan.as_array(cc.buf)
        m = len(rows)
        v = c[:, :m]
        props_len = v[fastscan.C_PROPS_LEN]
        host_tab, host_at, born, store = _hosts(a, v)
        flags, flag_codes = np.unique(v[fastscan.C_SYS_FLAG], return_inverse=True)
        flag_tab, flag_at = _table([_flag_json(int(f)) for f in flags.tolist()])
        flag_codes = flag_codes.ravel().astype(np.int64)
        dl = (np.ascontiguousarray(chunk.dledger[:, rows]) if chunk.dledger is not None
              else np.zeros((3, 0), np.int64))
        fixed = 1024 + len(file_json) + 2 * int(np.diff(host_at).max(initial=0))  # an upper bound of each line
        per_row = 6 * v[fastscan.C_TOPIC_LEN] + 20 * props_len + (0 if body == "none" else 6 * v[fastscan.C_BODY_LEN])
        crc_ok = chunk.crc_ok[rows]  # all True while the CRC is still to check: `_lines` computes it
        self.writer = _writer()
        pieces = min(pieces, m)
        for i in range(pieces):
            lo, hi = m * i // pieces, m * (i + 1) // pieces
            out = buffers.take(max(1, fixed * (hi - lo) + int(per_row[lo:hi].sum())))  # no pyarrow import
            ends = np.empty(hi - lo, np.int64)
            pairs = buffers.take(4 * 8 * (hi - lo) * 8, np.int64, (4, 8 * (hi - lo)))  # 8 a row; `write` splits
            args = [a, c, lo, hi, chunk.base_offset,
                    np.frombuffer(file_json, np.uint8), None, None, None, None, None,  # `write`: the pairs
                    np.frombuffer(_UNIQ, np.uint8), host_tab, host_at, born, store, flag_tab, flag_at,
                    flag_codes, dl, crc_ok, not chunk.crc_checked, _BODY_MODES[body], decompress, _LITS, _LIT_AT,
                    out, ends]
            self.pieces.append((lo, hi, out, ends, args, pairs))

    def write(self, i: int = 0) -> None:
        """Split piece i's properties into pairs, then run the compiled writer on it (`ends`: see
        `_lines`): both native, so a worker thread runs them without the GIL."""
        lo, hi, _, _, args, pairs = self.pieces[i]
        c = args[1]
        args[6:11] = _property_pairs(self.k, args[0], c[fastscan.C_PROPS_POS, lo:hi], c[fastscan.C_PROPS_LEN, lo:hi],
                                     pairs)
        self.writer(*args)

    def parts(self) -> Iterator[tuple[int, memoryview | dict]]:
        """(last row covered, part) in row order, once every piece is written; `last` is the row of
        the part handed out last."""
        for row, part in self._parts():
            self.last = row
            yield row, part

    def _parts(self) -> Iterator[tuple[int, memoryview | dict]]:
        rows, cc, body, decompress = self.rows, self.cc, self.body, self.decompress
        if not self.pieces:
            for row, rec in zip(rows.tolist(), cc.records(rows), strict=True):
                yield row, record_dict(rec, body, decompress)
            return
        pieces, self.pieces = self.pieces, []  # the mapping's view goes with the arguments
        row_list = rows.tolist()
        for lo, _, out, ends, *_ in pieces:
            back = np.flatnonzero(ends < 0)
            start = 0
            for i in back.tolist():
                stop = int(-ends[i] - 1)  # where the next written line starts
                if stop > start:
                    yield row_list[lo + i - 1], memoryview(out[start:stop])
                start = stop
                rec = next(cc.records(rows[lo + i : lo + i + 1]))
                yield row_list[lo + i], record_dict(rec, body, decompress)
            total = int(ends[-1]) if ends[-1] >= 0 else int(-ends[-1] - 1)
            if total > start:
                yield row_list[lo + len(ends) - 1], memoryview(out[start:total])


def _whole_columns(cols: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A C-contiguous (NCOL, >= len(rows)) array whose first columns are the chunk's `rows`: the
    walk's own array when the rows are all of it (`cols` is then its first columns, a view), else a
    copy of the rows (the compiled calls take contiguous arrays: a strided view would be copied)."""
    if len(rows) != cols.shape[1]:  # some rows (ascending, unique)
        return np.ascontiguousarray(cols[:, rows])
    if cols.flags.c_contiguous:
        return cols
    base = cols.base
    if (isinstance(base, np.ndarray) and base.ndim == 2 and base.flags.c_contiguous and base.dtype == cols.dtype
            and base.shape[0] == cols.shape[0] and base.strides == cols.strides
            and base.ctypes.data == cols.ctypes.data):
        return base
    return np.ascontiguousarray(cols)


PIECE_ROWS = 4096
"""`_pipelined` splits a chunk's rows into two pieces, one per worker thread, from this many rows on."""


def _pipelined(chunks: Iterator, store: Store, body: str, decompress: bool,
               buffers: _Buffers | None = None) -> Iterator[memoryview | dict]:
    """`message_lines` on two cores: while two worker threads write chunk k's lines (`_LinesJob.write`,
    native code without the GIL, one half of the rows each), this thread walks chunk k+1 and readies its
    columns, then hands chunk k's parts on in order. Worker errors are raised here (`Future.result`).

    The walk is one chunk ahead of what the consumer has read. Findings and file ends stay those of
    the serial path: before the walk goes on, the CommitLog's walk state is kept (`_walk_state`); a
    consumer that stops inside chunk k (`close`, e.g. a closed stdout) gets it back and the rows after
    its last one dropped, as `RowWalk` does when the serial walk stops there."""
    from concurrent.futures import ThreadPoolExecutor

    cl = store.commitlog
    pool = ThreadPoolExecutor(2, thread_name_prefix="mqtool-lines")
    pending = None  # (chunk, job, futures, walk state) of the chunk whose lines the workers write
    try:
        buffers = buffers or _Buffers()
        for walk, cc, rows, _ in _kept(chunks, buffers):
            job = _LinesJob(cc, rows, body, decompress, 2 if len(rows) >= PIECE_ROWS else 1, buffers)
            futures = [pool.submit(job.write, i) for i in range(len(job.pieces))]
            if pending is not None:
                yield from _written(pending)
            walk.last = int(rows[-1])  # as the serial path leaves it once the chunk's parts are read
            pending = (cc, job, futures, _walk_state(cl))
        if pending is not None:
            yield from _written(pending)
            pending = None
    except GeneratorExit:
        pool.shutdown(wait=True)
        chunks.close()
        if pending is not None:  # stopped inside `pending`'s chunk: the serial walk would stop there
            _set_walk_state(cl, pending[3])
            _walked_to(cl, pending[0], pending[1].last)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kept(chunks: Iterator, buffers: _Buffers) -> Iterator:
    """`chunks`, the walk resumed with its pages kept (`fastscan.pages_kept`: the workers still read
    the previous chunk's bytes, which `_written` drops once they are written) and its columns in
    `buffers` (`fastscan.columns_from`)."""
    while True:
        with fastscan.pages_kept(), fastscan.columns_from(buffers.take):
            item = next(chunks, None)
        if item is None:
            return
        yield item


def _written(pending: tuple) -> Iterator[memoryview | dict]:
    """A job's parts once its workers are done (their errors raised)."""
    cc, job, futures, _ = pending
    for f in futures:
        f.result()
    if isinstance(cc.buf, mmap.mmap):  # the walk dropped these pages once; the writers read them again
        first = int(cc.cols[fastscan.C_POS, 0])
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


_UNIQ = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()
_V2 = cl.MESSAGE_MAGIC_CODE_V2
_HOST_V4, _HOST_V6 = cl.HOST_SIZE_V4, cl.HOST_SIZE_V6


def _json_text(s: str) -> bytes | None:
    """`json.dumps(s, ensure_ascii=False)` as UTF-8, None when it cannot be encoded (a lone surrogate)."""
    try:
        return json.dumps(s, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return None


def _flag_json(sys_flag: int) -> bytes:
    f = SysFlag(sys_flag)
    return (f'"transaction": {json.dumps(f.transaction, ensure_ascii=False)}, '
            f'"compression": {json.dumps(f.compression, ensure_ascii=False)}').encode()


def _table(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    at = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=at[1:])
    return np.frombuffer(b"".join(texts), np.uint8) if texts else np.zeros(0, np.uint8), at


def _property_pairs(k, a: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray,
                    first: np.ndarray) -> tuple[np.ndarray, ...]:
    """(pair_at, kpos, klen, vpos, vlen) of the rows' properties (`kernels._property_pairs`): row i's
    pairs are pair_at[i]:pair_at[i + 1]. `first`: a (4, 8 a row) array tried first; rows with more
    pairs than that get arrays of the bound of their bytes."""
    m = len(props_pos)
    pair_at = np.empty(m + 1, np.int32)
    for cap in (first.shape[1], int(props_len.sum()) // 3 + 1):
        kpos, klen, vpos, vlen = first if cap == first.shape[1] else np.empty((4, cap), np.int64)
        if k.property_pairs(a, props_pos, props_len, pair_at, kpos, klen, vpos, vlen) >= 0:
            break
    return pair_at, kpos, klen, vpos, vlen


def _hosts(a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every distinct IPv6 host of the rows formatted once (`fastscan.host_text`): a text table and
    each row's born and store host code into it; -1 for an IPv4 host, which `_lines` writes itself
    (`_host4`)."""
    texts: dict[str, int] = {}
    codes = []
    for col, bit in ((fastscan.C_BORN_HOST, BORNHOST_V6), (fastscan.C_STORE_HOST, STOREHOST_V6)):
        pos = c[col]
        code = np.full(len(pos), -1, np.int64)
        for i in np.flatnonzero(c[fastscan.C_SYS_FLAG] & bit).tolist():
            t = fastscan.host_text(bytes(a[pos[i] : pos[i] + cl.HOST_SIZE_V6]))
            code[i] = texts.setdefault(t, len(texts))
        codes.append(code)
    tab, at = _table([json.dumps(t).encode() for t in texts])
    return tab, at, codes[0], codes[1]


# ===================================================================== the compiled writer
# Plain functions compiled by `_writer()` with numba (never imported at module level): the helpers
# are inlined into `_lines`, which numba caches on disk like the scan kernels.
_TEXTS = (
    b'{"physical_offset": ',  # T_OPEN
    b', "file": ',  # T_FILE
    b', "position": ',  # T_POSITION
    b', "total_size": ',  # T_TOTAL_SIZE
    b', "magic": "v2"',  # T_MAGIC_V2
    b', "magic": "v1"',  # T_MAGIC_V1
    b', "body_crc": ',  # T_BODY_CRC
    b', "crc_ok": true',  # T_CRC_TRUE
    b', "crc_ok": false',  # T_CRC_FALSE
    b', "queue_id": ',  # T_QUEUE_ID
    b', "flag": ',  # T_FLAG
    b', "queue_offset": ',  # T_QUEUE_OFFSET
    b', "sys_flag": ',  # T_SYS_FLAG
    b', ',  # T_SEP
    b', "born_timestamp": ',  # T_BORN_TIMESTAMP
    b', "born_host": ',  # T_BORN_HOST
    b', "store_timestamp": ',  # T_STORE_TIMESTAMP
    b', "store_host": ',  # T_STORE_HOST
    b', "reconsume_times": ',  # T_RECONSUME_TIMES
    b', "prepared_transaction_offset": ',  # T_PREPARED_TRANSACTION_OFFSET
    b', "topic": ',  # T_TOPIC
    b', "properties": {',  # T_PROPERTIES
    b': ',  # T_COLON
    b'}, "uniq_key": ',  # T_UNIQ_KEY
    b'null',  # T_NULL
    b', "msg_id": "',  # T_MSG_ID
    b'", "body_length": ',  # T_BODY_LENGTH
    b', "body": ',  # T_BODY
    b', "dledger": {"index": ',  # T_DLEDGER
    b', "term": ',  # T_TERM
    b', "pos": ',  # T_POS
    b'}',  # T_CLOSE
    b'}\n',  # T_END
)
(T_OPEN, T_FILE, T_POSITION, T_TOTAL_SIZE, T_MAGIC_V2, T_MAGIC_V1, T_BODY_CRC, T_CRC_TRUE, T_CRC_FALSE,
 T_QUEUE_ID, T_FLAG, T_QUEUE_OFFSET, T_SYS_FLAG, T_SEP, T_BORN_TIMESTAMP, T_BORN_HOST, T_STORE_TIMESTAMP,
 T_STORE_HOST, T_RECONSUME_TIMES, T_PREPARED_TRANSACTION_OFFSET, T_TOPIC, T_PROPERTIES, T_COLON, T_UNIQ_KEY,
 T_NULL, T_MSG_ID, T_BODY_LENGTH, T_BODY, T_DLEDGER, T_TERM, T_POS, T_CLOSE, T_END) = range(len(_TEXTS))
_LITS = np.frombuffer(b"".join(_TEXTS), np.uint8)
_ESCAPES = np.zeros(128, np.uint8)  # the letter after '\\' where json.dumps writes a two-character escape
_ESCAPES[list(b'"\\\b\f\n\r\t')] = list(b'"\\bfnrt')
_LIT_AT = np.cumsum([0, *map(len, _TEXTS)]).astype(np.int64)
_DIGITS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), np.uint8)  # "00" .. "99"
_POW10 = np.array([10**i for i in range(20)], np.uint64)


def _crc32(crc, ptr, n):  # pragma: no cover - the scan's zlib CRC symbol under numba (`_writer`)
    raise NotImplementedError


def _copy(out, o, src, s, n):  # pragma: no cover - `_memcpy()` under numba (`_numba_writer`)
    raise NotImplementedError


def _put(out, o, src, s, n):
    """Bytes `src[s:s + n]` to `out[o:]`: one memcpy (a loop of bytes was half of `_lines`'s time)."""
    _copy(out, o, src, s, n)
    return o + n


def _lit(out, o, lits, lit_at, k):
    """Text `k` of a table (`_table`; `_LITS` holds `_TEXTS`: numba would make a bytes object per use of a
    literal): bytes `lits[lit_at[k]:lit_at[k + 1]]`."""
    return _put(out, o, lits, lit_at[k], lit_at[k + 1] - lit_at[k])


def _lit_int(out, o, lits, lit_at, k, v):
    """Literal `k` of `_TEXTS` and the decimal digits of `v`: a key and its number."""
    return _int(out, _lit(out, o, lits, lit_at, k), v)


def _int(out, o, v):
    """Decimal digits of an int64 (as `str(int)`): two digits a step from `_DIGITS`, the count
    from `_POW10` (no division to count them)."""
    if v < 0:
        out[o] = 45
        o += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)
    else:
        u = np.uint64(v)
    digits = 1
    while digits < 20 and u >= _POW10[digits]:
        digits += 1
    p = o + digits
    while u >= np.uint64(100):
        q = u // np.uint64(100)
        r = (u - q * np.uint64(100)) * np.uint64(2)
        p -= 2
        out[p] = _DIGITS[r]
        out[p + 1] = _DIGITS[r + np.uint64(1)]
        u = q
    if u >= np.uint64(10):
        r = u * np.uint64(2)
        out[p - 2] = _DIGITS[r]
        out[p - 1] = _DIGITS[r + np.uint64(1)]
    else:
        out[p - 1] = np.uint8(np.uint64(48) + u)
    return o + digits


def _host4(out, o, a, pos, port):
    """An IPv4 host as `fastscan.host_text` writes it, in JSON quotes: `"a.b.c.d:port"`."""
    out[o] = 34
    o += 1
    for t in range(4):
        o = _int(out, o, np.int64(a[pos + t]))
        out[o] = 46 if t < 3 else 58
        o += 1
    o = _int(out, o, port)
    out[o] = 34
    return o + 1


def _utf8_ok(a, s, n):
    """Well-formed UTF-8 (what Python's strict decoder accepts: no overlongs, surrogates, > U+10FFFF)."""
    i = s
    e = s + n
    while i < e:
        b = a[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif b == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= b <= 0xEC or 0xEE <= b <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif b == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif b == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= b <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        if i + need >= e:
            return False
        b1 = a[i + 1]
        if b1 < lo or b1 > hi:
            return False
        for t in range(2, need + 1):
            if a[i + t] < 0x80 or a[i + t] > 0xBF:
                return False
        i += need + 1
    return True


def _str(out, o, a, s, n):
    """A JSON string of UTF-8 bytes as `json.dumps(ensure_ascii=False)` writes it."""
    out[o] = 34
    o += 1
    for i in range(s, s + n):
        b = a[i]
        e = _ESCAPES[b] if b < 128 else 0
        if e != 0:
            out[o] = 92
            out[o + 1] = e
            o += 2
        elif b >= 0x20:
            out[o] = b
            o += 1
        else:
            out[o] = 92
            out[o + 1] = 117
            out[o + 2] = 48
            out[o + 3] = 48
            out[o + 4] = 48 + (b >> 4)
            lo = b & 15
            out[o + 5] = (48 + lo) if lo < 10 else (87 + lo)
            o += 6
    out[o] = 34
    return o + 1


def _hex(out, o, a, s, n, upper):
    base = 55 if upper else 87
    for i in range(s, s + n):
        hi = a[i] >> 4
        lo = a[i] & 15
        out[o] = (48 + hi) if hi < 10 else (base + hi)
        out[o + 1] = (48 + lo) if lo < 10 else (base + lo)
        o += 2
    return o


def _lines(a, c, row_lo, row_hi, base, file_json, pair_at, kpos, klen, vpos, vlen, uniq, host_tab, host_at, born, store,
           flag_tab, flag_at, flag_codes, dl, crc_ok, need_crc, body_mode, decompress, lits, lit_at, out, ends):
    """One JSON line per column row_lo..row_hi-1 of `c` into `out`; `ends[i - row_lo]` is where row i's
    line ends, or `-(that position) - 1` when row i is left to the record path (nothing written for
    it). The pairs (`pair_at`) are those of these rows (row i's: `pair_at[i - row_lo]`); the other
    per-row arrays are indexed by i."""
    o = 0
    for i in range(row_lo, row_hi):
        sysf = c[fastscan.C_SYS_FLAG, i]
        body_pos = c[fastscan.C_BODY_POS, i]
        body_len = c[fastscan.C_BODY_LEN, i]
        topic_pos = c[fastscan.C_TOPIC_POS, i]
        topic_len = c[fastscan.C_TOPIC_LEN, i]
        if (not _utf8_ok(a, topic_pos, topic_len)
                or not _utf8_ok(a, c[fastscan.C_PROPS_POS, i], c[fastscan.C_PROPS_LEN, i])
                or (body_mode == 2 and not _utf8_ok(a, body_pos, body_len))
                or (decompress and (sysf & COMPRESSED) != 0)):
            ends[i - row_lo] = -o - 1
            continue
        pos = c[fastscan.C_POS, i]
        o = _lit_int(out, o, lits, lit_at, T_OPEN, base + pos)
        o = _lit(out, o, lits, lit_at, T_FILE)
        o = _put(out, o, file_json, 0, len(file_json))
        o = _lit_int(out, o, lits, lit_at, T_POSITION, pos)
        o = _lit_int(out, o, lits, lit_at, T_TOTAL_SIZE, c[fastscan.C_TOTAL, i])
        o = _lit(out, o, lits, lit_at, T_MAGIC_V2 if c[fastscan.C_MAGIC, i] == _V2 else T_MAGIC_V1)
        o = _lit_int(out, o, lits, lit_at, T_BODY_CRC, c[fastscan.C_BODY_CRC, i])
        ok = crc_ok[i]
        if need_crc and body_len > 0:
            ok = (_crc32(0, a.ctypes.data + body_pos, body_len) & 0x7FFFFFFF) == c[fastscan.C_BODY_CRC, i]
        o = _lit(out, o, lits, lit_at, T_CRC_TRUE if ok else T_CRC_FALSE)
        o = _lit_int(out, o, lits, lit_at, T_QUEUE_ID, c[fastscan.C_QUEUE_ID, i])
        o = _lit_int(out, o, lits, lit_at, T_FLAG, c[fastscan.C_FLAG, i])
        o = _lit_int(out, o, lits, lit_at, T_QUEUE_OFFSET, c[fastscan.C_QUEUE_OFFSET, i])
        o = _lit_int(out, o, lits, lit_at, T_SYS_FLAG, sysf)
        o = _lit(out, o, lits, lit_at, T_SEP)
        o = _lit(out, o, flag_tab, flag_at, flag_codes[i])
        o = _lit_int(out, o, lits, lit_at, T_BORN_TIMESTAMP, c[fastscan.C_BORN_TS, i])
        o = _lit(out, o, lits, lit_at, T_BORN_HOST)
        if born[i] < 0:
            o = _host4(out, o, a, c[fastscan.C_BORN_HOST, i], c[fastscan.C_BORN_PORT, i])
        else:
            o = _lit(out, o, host_tab, host_at, born[i])
        o = _lit_int(out, o, lits, lit_at, T_STORE_TIMESTAMP, c[fastscan.C_STORE_TS, i])
        o = _lit(out, o, lits, lit_at, T_STORE_HOST)
        if store[i] < 0:
            o = _host4(out, o, a, c[fastscan.C_STORE_HOST, i], c[fastscan.C_STORE_PORT, i])
        else:
            o = _lit(out, o, host_tab, host_at, store[i])
        o = _lit_int(out, o, lits, lit_at, T_RECONSUME_TIMES, c[fastscan.C_RECONSUME, i])
        o = _lit_int(out, o, lits, lit_at, T_PREPARED_TRANSACTION_OFFSET, c[fastscan.C_PREPARED, i])
        o = _lit(out, o, lits, lit_at, T_TOPIC)
        o = _str(out, o, a, topic_pos, topic_len)
        o = _lit(out, o, lits, lit_at, T_PROPERTIES)
        u = -1
        for q in range(pair_at[i - row_lo], pair_at[i - row_lo + 1]):
            if q > pair_at[i - row_lo]:
                o = _lit(out, o, lits, lit_at, T_SEP)
            o = _str(out, o, a, kpos[q], klen[q])
            o = _lit(out, o, lits, lit_at, T_COLON)
            o = _str(out, o, a, vpos[q], vlen[q])
            if klen[q] == len(uniq):
                same = True
                for t in range(len(uniq)):
                    if a[kpos[q] + t] != uniq[t]:
                        same = False
                        break
                if same:
                    u = q
        o = _lit(out, o, lits, lit_at, T_UNIQ_KEY)
        if u >= 0:
            o = _str(out, o, a, vpos[u], vlen[u])
        else:
            o = _lit(out, o, lits, lit_at, T_NULL)
        o = _lit(out, o, lits, lit_at, T_MSG_ID)
        sh = c[fastscan.C_STORE_HOST, i]
        o = _hex(out, o, a, sh, _HOST_V6 if (sysf & STOREHOST_V6) != 0 else _HOST_V4, True)
        phys = c[fastscan.C_PHYS_FIELD, i]
        for t in range(7, -1, -1):
            b = (phys >> (8 * t)) & 255
            hi = b >> 4
            lo = b & 15
            out[o] = (48 + hi) if hi < 10 else (55 + hi)
            out[o + 1] = (48 + lo) if lo < 10 else (55 + lo)
            o += 2
        o = _lit_int(out, o, lits, lit_at, T_BODY_LENGTH, body_len)
        o = _lit(out, o, lits, lit_at, T_BODY)
        if body_mode == 0:
            o = _lit(out, o, lits, lit_at, T_NULL)
        elif body_mode == 1:
            out[o] = 34
            o = _hex(out, o + 1, a, body_pos, body_len, False)
            out[o] = 34
            o += 1
        else:
            o = _str(out, o, a, body_pos, body_len)
        if dl.shape[1] > 0:
            o = _lit_int(out, o, lits, lit_at, T_DLEDGER, dl[0, i])
            o = _lit_int(out, o, lits, lit_at, T_TERM, dl[1, i])
            o = _lit_int(out, o, lits, lit_at, T_POS, dl[2, i])
            o = _lit(out, o, lits, lit_at, T_CLOSE)
        o = _lit(out, o, lits, lit_at, T_END)
        ends[i - row_lo] = o
    return o


_compiled = None
_numba_compiled = None
_LINES_SPEC = ("u1[:] i8[:,:] i8 i8 i8 u1[:] i4[:] i8[:] i8[:] i8[:] i8[:] u1[:] u1[:] i8[:] i8[:] i8[:] u1[:] i8[:] "
               "i8[:] i8[:,:] b1[:] ? i8 ? u1[:] i8[:] u1[:] i8[:]")  # `_lines`'s arguments (`native.parse_spec`)
_NATIVE_SOURCES = ("mqtool/inspect/jsonlines.py", "mqtool/store/kernels.py", "mqtool/store/native.py",
                   "mqtool/store/fastscan.py", "mqtool/formats/commitlog.py", "mqtool/formats/sysflag.py")


def _writer():
    """`_lines` as native code loaded without numba (`store/native.py`), else numba's dispatcher."""
    global _compiled
    if _compiled is None:
        from mqtool.store import native

        _compiled = native.kernels_or_numba("jsonlines", {"lines": _LINES_SPEC}, lambda: {"lines": _numba_writer()},
                                            _NATIVE_SOURCES)["lines"]
    return _compiled


def _numba_writer():
    """`_lines` compiled with numba (cached on disk), its helpers inlined and `_crc32` the scan's zlib CRC."""
    global _numba_compiled
    if _numba_compiled is None:
        from numba import njit

        k = fastscan.kernels()
        g = dict(globals())
        g["_crc32"] = k._crc32
        g["_copy"] = _memcpy()
        for name in ("_put", "_lit", "_int", "_lit_int", "_host4", "_utf8_ok", "_str", "_hex"):
            fn = globals()[name]
            g[name] = njit(FunctionType(fn.__code__, g, name))
        _numba_compiled = njit(cache=True, nogil=True)(FunctionType(_lines.__code__, g, "_lines"))
    return _numba_compiled


def _memcpy():
    """`_copy(out, o, src, s, n)` for numba: LLVM's memcpy of `src[s:s + n]` to `out[o:]` (two uint8
    arrays; no slice objects, so the object code keeps needing neither NRT nor the Python API)."""
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _copy(typingctx, out, o, src, s, n):
        def codegen(context, builder, signature, args):
            ints = [context.cast(builder, args[i], signature.args[i], types.intp) for i in (1, 3, 4)]
            dst = context.make_array(signature.args[0])(context, builder, args[0]).data
            src_ = context.make_array(signature.args[2])(context, builder, args[2]).data
            cgutils.raw_memcpy(builder, builder.gep(dst, [ints[0]]), builder.gep(src_, [ints[1]]), ints[2], 1)
            return context.get_dummy_value()

        return types.void(out, o, src, s, n), codegen

    return _copy
