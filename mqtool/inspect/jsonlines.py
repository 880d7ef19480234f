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
arrays a chunk needs (columns, lines) are reused while hot instead of faulted in and
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
    """The big arrays of a pass (lines, column copies), each used again once nothing
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
    """One chunk's lines in three steps: `__init__` (the columns, texts and hosts: numpy), `write(i)`
    (the compiled writer alone on piece i of the rows, GIL released: the step `_pipelined` hands to
    its worker threads) and `parts` (the lines as `memoryview`s, the
    left-out rows as record-path dicts). The job holds a view of the chunk's mapping until its parts
    are read: the scan cannot unmap it earlier."""

    def __init__(self, cc: ColumnChunk, rows: np.ndarray, body: str, decompress: bool, pieces: int = 1,
                 buffers: _Buffers | None = None) -> None:
        self.cc, self.rows, self.body, self.decompress = cc, rows, body, decompress
        buffers = buffers or _Buffers()
        self.last = -1
        self.pieces: list[tuple] = []  # (lo, hi, out, ends, the writer's args)
        file_json = _json_text(cc.rel)
        if file_json is None:  # a file name only `json` writes (never in a real store): record rows
            return
        chunk = cc.chunk
        c = _whole_columns(chunk.cols, rows)  # row i of the rows is column i of c (c may be wider)
        a = fastscan.as_array(cc.buf)
        m = len(rows)
        v = c[:, :m]
        props_len = v[fastscan.C_PROPS_LEN]
        host_tab, host_at, born, store = _hosts(a, v)
        flags, flag_codes = np.unique(v[fastscan.C_SYS_FLAG], return_inverse=True)
        flag_tab, flag_at = _table([b", " + _flag_json(int(f)) + b', "born_timestamp": ' for f in flags.tolist()])
        flag_codes = flag_codes.ravel().astype(np.int64)
        dl = (np.ascontiguousarray(chunk.dledger[:, rows]) if chunk.dledger is not None
              else np.zeros((3, 0), np.int64))
        fixed = 1024 + len(file_json) + 2 * int(np.diff(host_at).max(initial=0))  # an upper bound of each line
        per_row = 6 * v[fastscan.C_TOPIC_LEN] + 20 * props_len + (0 if body == "none" else 6 * v[fastscan.C_BODY_LEN])
        crc_ok = chunk.crc_ok[rows]  # all True while the CRC is still to check: `_lines` computes it
        lits, lit_at = _texts_table(file_json)
        keys = int(props_len.max(initial=0)) // 3 + 2  # pairs a row can have at most (`_properties`)
        self.writer = _writer()
        pieces = min(pieces, m)
        for i in range(pieces):
            lo, hi = m * i // pieces, m * (i + 1) // pieces
            out = buffers.take(fixed * (hi - lo) + int(per_row[lo:hi].sum()) + _PAD)  # no pyarrow import
            ends = np.empty(hi - lo, np.int64)
            args = [a, c, lo, hi, chunk.base_offset, lits, lit_at, flag_tab, flag_at, flag_codes, host_tab, host_at,
                    born, store, dl, crc_ok, not chunk.crc_checked, _BODY_MODES[body], decompress,
                    np.empty((3, keys), np.int64), out, ends]
            self.pieces.append((lo, hi, out, ends, args))

    def write(self, i: int = 0) -> None:
        """Run the compiled writer on piece i (`ends`: see `_lines`): native, so a worker thread runs it
        without the GIL."""
        self.writer(*self.pieces[i][4])

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


_UNIQ_LEN = len(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode())
assert _UNIQ_LEN <= 8  # compared as one int64 (`_key8`)
_UNIQ8 = int.from_bytes(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode(), "little")  # `_key8` of UNIQ_KEY
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
    """(bytes, starts) of texts for `_lit`; 64 bytes of padding let `_put` copy each in moves of a constant size."""
    at = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=at[1:])
    return np.frombuffer(b"".join(texts) + bytes(_PAD), np.uint8), at


_PAD = 64
_chunk_texts: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}


def _texts_table(file_json: bytes) -> tuple[np.ndarray, np.ndarray]:
    """`_table` of `_texts(file_json)`, made once a file."""
    t = _chunk_texts.get(file_json)
    if t is None:
        t = _chunk_texts[file_json] = _table(_texts(file_json))
    return t


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
# are inlined into `_lines`, which numba caches on disk like the scan kernels. A line is the texts
# between its values (`_texts`: adjacent constant texts are one, the file name included) and the values.
def _texts(file_json: bytes) -> list[bytes]:
    """The constant texts of a line in the order `L_*` names them; `file_json` is the chunk's file."""
    return [
        b'{"physical_offset": ',  # L_OPEN
        b', "file": ' + file_json + b', "position": ',  # L_POSITION
        b', "total_size": ',  # L_TOTAL_SIZE
        b', "magic": "v2", "body_crc": ',  # L_MAGIC_V2
        b', "magic": "v1", "body_crc": ',  # L_MAGIC_V1
        b', "crc_ok": true, "queue_id": ',  # L_CRC_TRUE
        b', "crc_ok": false, "queue_id": ',  # L_CRC_FALSE
        b', "flag": ',  # L_FLAG
        b', "queue_offset": ',  # L_QUEUE_OFFSET
        b', "sys_flag": ',  # L_SYS_FLAG; then the sys flag's text (`_flag_text`) up to the born timestamp
        b', "born_host": ',  # L_BORN_HOST
        b', "store_timestamp": ',  # L_STORE_TIMESTAMP
        b', "store_host": ',  # L_STORE_HOST
        b', "reconsume_times": ',  # L_RECONSUME_TIMES
        b', "prepared_transaction_offset": ',  # L_PREPARED
        b', "topic": ',  # L_TOPIC
        b', "properties": {',  # L_PROPERTIES
        b', ',  # L_SEP
        b': ',  # L_COLON
        b'}, "uniq_key": ',  # L_UNIQ_KEY
        b', "msg_id": "',  # L_MSG_ID
        b'null, "msg_id": "',  # L_NULL_MSG_ID
        b'", "body_length": ',  # L_BODY_LENGTH
        b', "body": ',  # L_BODY
        b', "body": null}\n',  # L_BODY_NULL_END
        b', "body": null, "dledger": {"index": ',  # L_BODY_NULL_DLEDGER
        b', "dledger": {"index": ',  # L_DLEDGER
        b', "term": ',  # L_TERM
        b', "pos": ',  # L_POS
        b'}}\n',  # L_DLEDGER_END
        b'}\n',  # L_END
    ]


(L_OPEN, L_POSITION, L_TOTAL_SIZE, L_MAGIC_V2, L_MAGIC_V1, L_CRC_TRUE, L_CRC_FALSE, L_FLAG, L_QUEUE_OFFSET,
 L_SYS_FLAG, L_BORN_HOST, L_STORE_TIMESTAMP, L_STORE_HOST, L_RECONSUME_TIMES, L_PREPARED, L_TOPIC, L_PROPERTIES,
 L_SEP, L_COLON, L_UNIQ_KEY, L_MSG_ID, L_NULL_MSG_ID, L_BODY_LENGTH, L_BODY, L_BODY_NULL_END, L_BODY_NULL_DLEDGER,
 L_DLEDGER, L_TERM, L_POS, L_DLEDGER_END, L_END) = range(len(_texts(b"")))

_ESCAPES = np.zeros(128, np.uint8)  # the letter after '\\' where json.dumps writes a two-character escape
_ESCAPES[list(b'"\\\b\f\n\r\t')] = list(b'"\\bfnrt')
_CLASS = np.zeros(256, np.uint8)  # how `_str` writes a byte: 0 itself, 1 a two-character escape, 2 \u00XX, 3 UTF-8
_CLASS[:0x20] = 2
_CLASS[list(b'"\\\b\f\n\r\t')] = 1
_CLASS[0x80:] = 3
_DIGITS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), np.uint8)  # "00" .. "99"
_POW10 = np.array([10**i for i in range(20)], np.uint64)
_HEX_UPPER = np.frombuffer("".join(f"{i:02X}" for i in range(256)).encode(), np.uint8)  # "00" .. "FF"
_HEX_LOWER = np.frombuffer("".join(f"{i:02x}" for i in range(256)).encode(), np.uint8)
_ONES, _HIGHS = 0x0101010101010101, 0x8080808080808080


def _crc32(crc, ptr, n):  # pragma: no cover - the scan's zlib CRC symbol under numba (`_writer`)
    raise NotImplementedError


def _copy(out, o, src, s, n):  # pragma: no cover - `compiled.memcpy()` under numba (`_numba_writer`)
    raise NotImplementedError


def _load8(a, i):  # pragma: no cover - `_intrinsics()` under numba: bytes a[i:i + 8] as a little-endian uint64
    raise NotImplementedError


def _clz(u):  # pragma: no cover - numba's `leading_zeros` (`_numba_writer`)
    raise NotImplementedError


def _ctz(u):  # pragma: no cover - numba's `trailing_zeros` (`_numba_writer`)
    raise NotImplementedError


def _put(out, o, src, s, n):
    """Bytes `src[s:s + n]` to `out[o:]`. Up to 64 bytes (every text of a line) as a copy of a constant
    size, which LLVM writes as a few moves instead of a call of memcpy, when both arrays reach that far:
    the bytes past n are written again by what follows."""
    if n <= 16 and s + 16 <= src.shape[0] and o + 16 <= out.shape[0]:
        _copy(out, o, src, s, 16)
    elif n <= 32 and s + 32 <= src.shape[0] and o + 32 <= out.shape[0]:
        _copy(out, o, src, s, 32)
    elif n <= 64 and s + 64 <= src.shape[0] and o + 64 <= out.shape[0]:
        _copy(out, o, src, s, 64)
    else:
        _copy(out, o, src, s, n)
    return o + n


def _lit(out, o, lits, lit_at, k):
    """Text `k` of a table (`_table`): bytes `lits[lit_at[k]:lit_at[k + 1]]`."""
    return _put(out, o, lits, lit_at[k], lit_at[k + 1] - lit_at[k])


def _lit_int(out, o, lits, lit_at, k, v):
    """Text `k` of a table and the decimal digits of `v`: a key and its number."""
    return _int(out, _lit(out, o, lits, lit_at, k), v)


def _int(out, o, v):
    """Decimal digits of an int64 (as `str(int)`): two digits a step from `_DIGITS`; their count from
    the bit length (floor(log10(2) * bits) = bits * 1233 >> 12, one more when `_POW10` says so)."""
    if v < 0:
        out[o] = 45
        o += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)
    else:
        u = np.uint64(v)
    u1 = u | np.uint64(1)
    t = ((np.uint64(64) - _clz(u1)) * np.uint64(1233)) >> np.uint64(12)
    digits = np.int64(t) + (1 if u1 >= _POW10[t] else 0)
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


def _utf8_len(a, i, e):
    """Bytes of the well-formed UTF-8 sequence at a[i] (lead byte >= 0x80, what Python's strict decoder
    accepts: no overlongs, surrogates, > U+10FFFF) ending before e; 0 when it is not one."""
    b = a[i]
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
        return 0
    if i + need >= e:
        return 0
    b1 = a[i + 1]
    if b1 < lo or b1 > hi:
        return 0
    for t in range(2, need + 1):
        if a[i + t] < 0x80 or a[i + t] > 0xBF:
            return 0
    return need + 1


def _special8(x):
    """The high bit of each of the 8 bytes of x (little-endian) that needs more than itself in a JSON
    string (a byte < 0x20 or >= 0x80, '"' 0x22, '\\' 0x5C), at least of the first such: 0 when none.
    SWAR: a subtraction's borrow starts only at a byte below what is subtracted (x - 0x20 each,
    x ^ '"' - 1, x ^ '\\' - 1) and goes to later bytes only, so the first high bit set is exact (a
    byte >= 0x80 has its own)."""
    q = x ^ np.uint64(0x2222222222222222)
    s = x ^ np.uint64(0x5C5C5C5C5C5C5C5C)
    special = (x - np.uint64(0x2020202020202020)) | (q - np.uint64(_ONES)) | (s - np.uint64(_ONES)) | x
    return special & np.uint64(_HIGHS)


def _str(out, o, a, i, e, stop1, stop2):
    """A JSON string of the UTF-8 bytes a[i:] up to e or the first byte `stop1` or `stop2` (0x01/0x02
    of the properties; 256: none), as `json.dumps(ensure_ascii=False)` writes it. Returns (end in out,
    where it stopped in a), or (-1, i) at bytes that are not well-formed UTF-8. The UTF-8 check and
    the copy are one pass: 8 bytes are copied a step up to the first that needs more (`_special8`)."""
    out[o] = 34
    o += 1
    while i < e:
        if i + 8 <= a.shape[0] and o + 8 <= out.shape[0]:
            x = _load8(a, i)
            m = _special8(x)
            _copy(out, o, a, i, 8)
            k = 8 if m == np.uint64(0) else np.int64(_ctz(m) >> np.uint64(3))
            if k > e - i:
                k = e - i
            o += k
            i += k
            if k == 8 or i == e:
                continue
        b = a[i]
        k = _CLASS[b]
        if k == 0:
            out[o] = b
            o += 1
            i += 1
        elif k == 1:
            out[o] = 92
            out[o + 1] = _ESCAPES[b]
            o += 2
            i += 1
        elif k == 2:
            if b == stop1 or b == stop2:
                break
            out[o] = 92
            out[o + 1] = 117
            out[o + 2] = 48
            out[o + 3] = 48
            out[o + 4] = 48 + (b >> 4)
            lo = b & 15
            out[o + 5] = (48 + lo) if lo < 10 else (87 + lo)
            o += 6
            i += 1
        else:
            n = _utf8_len(a, i, e)
            if n == 0:
                return -1, i
            for t in range(n):
                out[o + t] = a[i + t]
            o += n
            i += n
    out[o] = 34
    return o + 1, i


def _hex(out, o, a, s, n, table):
    """Two hex digits a byte of a[s:s + n] from `_HEX_UPPER` or `_HEX_LOWER`."""
    for i in range(s, s + n):
        r = 2 * np.int64(a[i])
        out[o] = table[r]
        out[o + 1] = table[r + 1]
        o += 2
    return o


def _key8(a, i, n):
    """The n <= 8 bytes a[i:i + n] as a little-endian int64 (a name compared in one step)."""
    if i + 8 <= a.shape[0]:
        x = _load8(a, i)
        if n < 8:
            x &= (np.uint64(1) << np.uint64(8 * n)) - np.uint64(1)
        return np.int64(x)
    x = np.uint64(0)
    for t in range(n):
        x |= np.uint64(a[i + t]) << np.uint64(8 * t)
    return np.int64(x)


def _properties(out, o, a, s, n, lits, lit_at, keys):
    """The properties' pairs as `"name": "value"` (`string2messageProperties`: pairs end at 0x02, a name
    at its first 0x01; a pair without a name or a value is left out), each byte checked and copied
    once. Returns (end in out, where the UNIQ_KEY value's JSON text starts in out or -1, its end), or
    o = -1 for bytes that are not UTF-8 or a repeated name (the record path's dict keeps the first
    place and the last value): the row is then the record path's. `keys` (3, >= pairs): scratch (each
    name's start, length and, up to 8 bytes, `_key8`)."""
    i = s
    e = s + n
    m = 0
    u_at = -1
    u_end = -1
    while i < e:
        at = o
        if m > 0:
            o = _lit(out, o, lits, lit_at, L_SEP)
        o, j = _str(out, o, a, i, e, 1, 2)
        if o < 0:
            return -1, -1, -1
        if j < e and a[j] == 1:
            name = j > i
            o = _lit(out, o, lits, lit_at, L_COLON)
            v_at = o
            o, k = _str(out, o, a, j + 1, e, 2, 2)  # the rest of the pair: also checked when left out
            if o < 0:
                return -1, -1, -1
            if name and k > j + 1:
                kn = j - i
                k8 = _key8(a, i, kn) if kn <= 8 else 0
                for q in range(m):
                    if keys[1, q] == kn:
                        same = keys[2, q] == k8
                        if kn > 8:
                            for t in range(kn):
                                if a[keys[0, q] + t] != a[i + t]:
                                    same = False
                                    break
                        if same:
                            return -1, -1, -1
                keys[0, m] = i
                keys[1, m] = kn
                keys[2, m] = k8
                m += 1
                if kn == _UNIQ_LEN and k8 == _UNIQ8:
                    u_at, u_end = v_at, o
            else:
                o = at
            i = k + 1
        else:  # no 0x01 before the pair's end: no value
            o = at
            i = j + 1
    return o, u_at, u_end


def _host(out, o, a, hp, port, known, host_tab, host_at, key, at, end):
    """A born or store host's text in `_lines`: the host table's `known`-th when >= 0, else the IPv4 host
    and port at `a[hp]`, copied from where the row before wrote it (`out[at:end]`, `key` its 8 bytes)
    when it is the same; (o, key, at, end) for the next row."""
    if known >= 0:
        return _lit(out, o, host_tab, host_at, known), key, at, end
    k = _load8(a, hp)
    if at >= 0 and k == key:
        return _put(out, o, out, at, end - at), key, at, end
    e = _host4(out, o, a, hp, port)
    return e, k, o, e


def _leave(ends, k, start, born_at, store_at):
    """`_lines`' row k (its line began at `start`) left to the record path: its text goes, with the host
    texts written in it (`born_at`/`store_at` forgotten when there), and `ends[k]` says so; (where the
    next row starts, born_at, store_at)."""
    ends[k] = -start - 1
    return start, (-1 if born_at >= start else born_at), (-1 if store_at >= start else store_at)


def _lines(a, c, row_lo, row_hi, base, lits, lit_at, flag_tab, flag_at, flag_codes, host_tab, host_at, born, store,
           dl, crc_ok, need_crc, body_mode, decompress, keys, out, ends):
    """One JSON line per column row_lo..row_hi-1 of `c` into `out`; `ends[i - row_lo]` is where row i's
    line ends, or `-(that position) - 1` when row i is left to the record path (nothing written for
    it). `lits`/`lit_at`: the chunk's `_texts`; the per-row arrays are indexed by i."""
    o = 0
    born_key = np.uint64(0)  # the last IPv4 born / store host (its 8 bytes) and where its text is in out
    born_at = -1
    born_end = -1
    store_key = np.uint64(0)
    store_at = -1
    store_end = -1
    for i in range(row_lo, row_hi):
        start = o
        sysf = c[fastscan.C_SYS_FLAG, i]
        body_pos = c[fastscan.C_BODY_POS, i]
        body_len = c[fastscan.C_BODY_LEN, i]
        if decompress and (sysf & COMPRESSED) != 0:
            ends[i - row_lo] = -o - 1
            continue
        pos = c[fastscan.C_POS, i]
        o = _lit_int(out, o, lits, lit_at, L_OPEN, base + pos)
        o = _lit_int(out, o, lits, lit_at, L_POSITION, pos)
        o = _lit_int(out, o, lits, lit_at, L_TOTAL_SIZE, c[fastscan.C_TOTAL, i])
        o = _lit_int(out, o, lits, lit_at, L_MAGIC_V2 if c[fastscan.C_MAGIC, i] == _V2 else L_MAGIC_V1,
                     c[fastscan.C_BODY_CRC, i])
        ok = crc_ok[i]
        if need_crc and body_len > 0:
            ok = (_crc32(0, a.ctypes.data + body_pos, body_len) & 0x7FFFFFFF) == c[fastscan.C_BODY_CRC, i]
        o = _lit_int(out, o, lits, lit_at, L_CRC_TRUE if ok else L_CRC_FALSE, c[fastscan.C_QUEUE_ID, i])
        o = _lit_int(out, o, lits, lit_at, L_FLAG, c[fastscan.C_FLAG, i])
        o = _lit_int(out, o, lits, lit_at, L_QUEUE_OFFSET, c[fastscan.C_QUEUE_OFFSET, i])
        o = _lit_int(out, o, lits, lit_at, L_SYS_FLAG, sysf)
        o = _lit_int(out, o, flag_tab, flag_at, flag_codes[i], c[fastscan.C_BORN_TS, i])
        o = _lit(out, o, lits, lit_at, L_BORN_HOST)
        o, born_key, born_at, born_end = _host(out, o, a, c[fastscan.C_BORN_HOST, i], c[fastscan.C_BORN_PORT, i],
                                               born[i], host_tab, host_at, born_key, born_at, born_end)
        o = _lit_int(out, o, lits, lit_at, L_STORE_TIMESTAMP, c[fastscan.C_STORE_TS, i])
        o = _lit(out, o, lits, lit_at, L_STORE_HOST)
        sh = c[fastscan.C_STORE_HOST, i]
        o, store_key, store_at, store_end = _host(out, o, a, sh, c[fastscan.C_STORE_PORT, i], store[i], host_tab,
                                                  host_at, store_key, store_at, store_end)
        o = _lit_int(out, o, lits, lit_at, L_RECONSUME_TIMES, c[fastscan.C_RECONSUME, i])
        o = _lit_int(out, o, lits, lit_at, L_PREPARED, c[fastscan.C_PREPARED, i])
        o = _lit(out, o, lits, lit_at, L_TOPIC)
        topic_pos = c[fastscan.C_TOPIC_POS, i]
        o, _ = _str(out, o, a, topic_pos, topic_pos + c[fastscan.C_TOPIC_LEN, i], 256, 256)
        if o < 0:
            o, born_at, store_at = _leave(ends, i - row_lo, start, born_at, store_at)
            continue
        o = _lit(out, o, lits, lit_at, L_PROPERTIES)
        o, u_at, u_end = _properties(out, o, a, c[fastscan.C_PROPS_POS, i], c[fastscan.C_PROPS_LEN, i], lits,
                                     lit_at, keys)
        if o < 0:
            o, born_at, store_at = _leave(ends, i - row_lo, start, born_at, store_at)
            continue
        o = _lit(out, o, lits, lit_at, L_UNIQ_KEY)
        if u_at >= 0:
            _copy(out, o, out, u_at, u_end - u_at)  # exactly: the source ends just before o
            o = _lit(out, o + u_end - u_at, lits, lit_at, L_MSG_ID)
        else:
            o = _lit(out, o, lits, lit_at, L_NULL_MSG_ID)
        o = _hex(out, o, a, sh, _HOST_V6 if (sysf & STOREHOST_V6) != 0 else _HOST_V4, _HEX_UPPER)
        phys = c[fastscan.C_PHYS_FIELD, i]
        for t in range(7, -1, -1):
            r = 2 * ((phys >> (8 * t)) & 255)
            out[o] = _HEX_UPPER[r]
            out[o + 1] = _HEX_UPPER[r + 1]
            o += 2
        o = _lit_int(out, o, lits, lit_at, L_BODY_LENGTH, body_len)
        has_dl = dl.shape[1] > 0
        if body_mode == 0:
            o = _lit(out, o, lits, lit_at, L_BODY_NULL_DLEDGER if has_dl else L_BODY_NULL_END)
        else:
            o = _lit(out, o, lits, lit_at, L_BODY)
            if body_mode == 1:
                out[o] = 34
                o = _hex(out, o + 1, a, body_pos, body_len, _HEX_LOWER)
                out[o] = 34
                o += 1
            else:
                o, _ = _str(out, o, a, body_pos, body_pos + body_len, 256, 256)
                if o < 0:
                    o, born_at, store_at = _leave(ends, i - row_lo, start, born_at, store_at)
                    continue
            o = _lit(out, o, lits, lit_at, L_DLEDGER if has_dl else L_END)
        if has_dl:
            o = _int(out, o, dl[0, i])
            o = _lit_int(out, o, lits, lit_at, L_TERM, dl[1, i])
            o = _lit_int(out, o, lits, lit_at, L_POS, dl[2, i])
            o = _lit(out, o, lits, lit_at, L_DLEDGER_END)
        ends[i - row_lo] = o
    return o


_compiled = None
_numba_compiled = None
_LINES_SPEC = ("u1[:] i8[:,:] i8 i8 i8 u1[:] i8[:] u1[:] i8[:] i8[:] u1[:] i8[:] i8[:] i8[:] i8[:,:] b1[:] ? i8 ? "
               "i8[:,:] u1[:] i8[:]")  # `_lines`'s arguments (`native.parse_spec`)
_NATIVE_SOURCES = ("mqtool/inspect/jsonlines.py", "mqtool/store/kernels.py", "mqtool/store/native.py",
                   "mqtool/store/fastscan.py", "mqtool/formats/commitlog.py", "mqtool/formats/sysflag.py",
                   "mqtool/store/compiled.py")


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
        from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

        from mqtool.store import compiled

        _numba_compiled = compiled.kernel(
            _lines, (_put, _lit, _int, _lit_int, _host4, _utf8_len, _special8, _str, _hex, _key8, _properties, _leave,
                     _host),
            {"_crc32": fastscan.kernels()._crc32, "_copy": compiled.memcpy(), "_load8": _load8_intrinsic(),
             "_clz": leading_zeros, "_ctz": trailing_zeros})
    return _numba_compiled


def _load8_intrinsic():
    """`_load8(a, i)` for numba: the 8 bytes a[i:i + 8] of a uint8 array as one unaligned little-endian
    uint64 load (no slice, no view: the object code needs neither NRT nor the Python API)."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def _load8(typingctx, a, i):
        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            at = builder.gep(data, [context.cast(builder, args[1], signature.args[1], types.intp)])
            return builder.load(builder.bitcast(at, ir.IntType(64).as_pointer()), align=1)

        return types.uint64(a, i), codegen

    return _load8
