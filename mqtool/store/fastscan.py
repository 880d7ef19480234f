"""Fast scans of the store's files: a compiled kernel for the CommitLog, numpy views for the rest.

The CommitLog kernel does the broker's recovery work over one memory-mapped file (spec §2.7,
`CommitLog.checkMessageAndReturnSize`): walk by TOTALSIZE, check the magic, decode every header
field, the topic and properties lengths, check the computed length and CRC32 the body. It returns
**column arrays** (positions and lengths into the mapping, never copies), in chunks of a bounded
number of records, so a caller can

- build `MessageRecord`s lazily (`records_from_chunk`, what `CommitLog.iter_records` does),
- aggregate over numpy columns without any Python object per record (`CommitLog.scan_columns`),
- or build Arrow columns directly (`chunk_to_arrow`).

Inside `columns_from` the columns are plain buffers (`Columns`) and numpy is not imported: `messages --json`
writes its lines from them (`inspect/jsonlines.py`); `ScanChunk.cols` makes the numpy array where one is asked for.

The field layout is the one of `mqtool.formats.commitlog.commitlog_record`: every offset and width
the kernel reads is that definition's (`formats/record_layout.py`, proven equal to it by a test)
and is given to the kernel (`LAYOUT`, with the magic codes, column numbers and stop codes), so the
compiled kernel holds no offset of its own. `tests/store/test_fastscan.py` proves both agree on every
oracle record, on generated records and on damaged files. Invalid data never raises: a scan stops with a
`stop` code and a `detail` that `stop_reason`/`stop_message` turn into the same reasons and findings
as `decode_message` and the slow walk.

The kernels are compiled code in the package's extension module, `mqtool._native` (`mqtool/_kernels/scan.pxi`,
its CRC32 `crc32.h`), built by the package's own build; they run without the GIL. Where the extension
cannot be imported, the same walk runs as plain Python (`walk.py`, the reference the tests compare the
extension with; `kernels.py` for the column kernels) after one warning.

ConsumeQueue, TimerLog and TimerWheel units are fixed-size: they are numpy structured views over
the mapping (`cq_units`, `timerlog_units`, `timerwheel_slots`) whose dtypes are derived from the
Construct structs (`CQ_DTYPE`, `TIMERLOG_DTYPE`, `SLOT_DTYPE` in `mqtool.formats`).
"""

from __future__ import annotations

import ipaddress
import itertools
import mmap
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqtool.formats import record_layout as cl
from mqtool.formats.message import MessageRecord
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.store import extension
from mqtool.store.walk import (  # the walk's layout, columns and stop codes (defined with the walk)
    BAD_BODY_NEG,
    BAD_BODY_PAST,
    BAD_HEADER,
    BAD_MAGIC,
    BAD_PROPS_LEN_PAST,
    BAD_PROPS_NEG,
    BAD_PROPS_PAST,
    BAD_SIZE,
    BAD_TOPIC_LEN_PAST,
    BAD_TOPIC_NEG,
    BAD_TOPIC_PAST,
    C_BODY_CRC,
    C_BODY_LEN,
    C_BODY_POS,
    C_BORN_HOST,
    C_BORN_TS,
    C_CRC,
    C_FLAG,
    C_MAGIC,
    C_PHYS_FIELD,
    C_POS,
    C_PREPARED,
    C_PROPS_LEN,
    C_PROPS_POS,
    C_QUEUE_ID,
    C_QUEUE_OFFSET,
    C_RECONSUME,
    C_STORE_HOST,
    C_STORE_TS,
    C_SYS_FLAG,
    C_TOPIC_LEN,
    C_TOPIC_POS,
    C_TOTAL,
    COLUMNS,
    KERNEL_CODES,
    LAYOUT,
    LAYOUT_NAMES,
    NCOL,
    STOP_BLANK,
    STOP_CODES,
    STOP_END_OF_FILE,
    STOP_MORE,
    STOP_ZERO_TAIL,
    TopicTable,
    commitlog_kernel,
)

if TYPE_CHECKING:  # numpy is imported where arrays are made: a walk into the caller's buffers needs none
    import numpy as np

# ===================================================================== CommitLog kernel
_INVALID_REASONS = {  # the RecordError reasons of `decode_message`
    BAD_HEADER: "header runs past the end of the data",
    BAD_MAGIC: "bad magic code 0x{hex}",
    BAD_BODY_NEG: "negative body length {detail}",
    BAD_BODY_PAST: "body runs past the end of the data",
    BAD_TOPIC_LEN_PAST: "topic length runs past the end of the data",
    BAD_TOPIC_NEG: "negative topic length {detail}",
    BAD_TOPIC_PAST: "topic runs past the end of the data",
    BAD_PROPS_LEN_PAST: "properties length runs past the end of the data",
    BAD_PROPS_NEG: "negative properties length {detail}",
    BAD_PROPS_PAST: "properties runs past the end of the data",
}


class ScanKernels:
    """The scan's kernels: `walk(a, pos, verify_crc, out) -> (n, end, stop, detail)` over a uint8 array
    and an (NCOL, cap) int64 array, `gather`, `property_pairs` and `host_keys` (see `store/kernels.py`);
    compiled (`mqtool._native`, `native` True) or their plain-Python references."""

    def __init__(self, walk, gather, property_pairs, host_keys, native: bool, topic_table=TopicTable):
        self.walk, self.gather, self.property_pairs, self.host_keys, self.native = (
            walk, gather, property_pairs, host_keys, native)
        self.topic_table = topic_table  # the table `walk(..., topics, ids)` numbers topics in
        # the names the output modules (`inspect/jsonlines.py`, `inspect/parquet.py`, `audit/commitlog.py`)
        # call them by while they are being moved to the extension
        self._gather, self._property_pairs, self._host_keys = gather, property_pairs, host_keys


_kernels: ScanKernels | None = None


def python_kernels() -> ScanKernels:
    """The plain-Python walk (`walk.py`, reading through a memoryview) and column kernels (`kernels.py`)."""
    from mqtool.store import kernels

    def walk(a, pos, verify_crc, out, topics=None, ids=None):
        return commitlog_kernel(memoryview(a), pos, verify_crc, out, LAYOUT, topics, ids)

    return ScanKernels(walk, kernels.gather, kernels.property_pairs, kernels.host_keys, native=False)


def compiled_kernels() -> ScanKernels:
    """The extension's kernels; where `extension.kernel` has none (no C compiler at install, a build older
    than the scan kernels: it warns once), the plain-Python ones."""
    global _kernels
    walk_type, *column_kernels = map(
        extension.kernel, ("CommitLogWalk", "gather", "property_pairs", "host_keys", "TopicTable")
    )
    if walk_type is None or None in column_kernels:
        return python_kernels()
    if _kernels is None:
        walk = walk_type(dict(zip(LAYOUT_NAMES, LAYOUT, strict=True)), KERNEL_CODES, STOP_CODES,
                         {name: i for i, name in enumerate(COLUMNS)})
        gather, pairs, hosts, topic_table = column_kernels
        _kernels = ScanKernels(walk, gather, pairs, hosts, native=True, topic_table=topic_table)
    return _kernels


def compiled_walk():
    """The walk `compiled_kernels()` gives (loading the extension now, e.g. before a progress bar starts)."""
    return compiled_kernels().walk


def compiled_loaded() -> bool:
    """Whether the scan runs compiled code (the extension is loaded)."""
    return compiled_kernels().native


# ===================================================================== chunks and results
WALK_AHEAD = 6  # chunks the walk may run ahead of the reader inside `walk_ahead()`: the walk starts before the
# reader has numpy (`columns.summarise`), and with 2 it waited ~70 ms for it (its peak RSS is the same)
# Inside `walk_ahead()` the walk writes chunk k into the arrays of chunk k - _RING: when it starts chunk k it
# has queued chunk k - 1, so the reader has taken chunk k - 1 - WALK_AHEAD and is done with the ones before
_RING = WALK_AHEAD + 3
DEFAULT_CHUNK = 32768  # records per chunk: 24 int64 columns = 6 MiB
_keep_pages: ContextVar[bool] = ContextVar("mqtool_keep_pages", default=False)
_columns_from: ContextVar[Callable | None] = ContextVar("mqtool_columns_from", default=None)
_walk_ahead: ContextVar[bool] = ContextVar("mqtool_walk_ahead", default=False)
_topic_table: ContextVar[object | None] = ContextVar("mqtool_topic_table", default=None)


@contextmanager
def pages_kept() -> Iterator[None]:
    """A walk resumed inside this block keeps the pages of the chunks it walked mapped (no
    `MADV_DONTNEED`): for a caller that reads a chunk's bytes on other threads after the walk has gone
    on, and drops them itself once read (`jsonlines._pipelined`; else each page faults twice)."""
    token = _keep_pages.set(True)
    try:
        yield
    finally:
        _keep_pages.reset(token)


@contextmanager
def columns_from(take: Callable) -> Iterator[None]:
    """A walk resumed inside this block puts each chunk's columns in `take(nbytes)` (a writable byte buffer of at
    least `nbytes`) instead of a new numpy array, and its chunks hold them as `Columns` (no numpy): a caller
    that reuses its buffers once no chunk refers to them (`jsonlines._Buffers`) spares the kernel fresh pages
    to fault in and zero (6 MiB a chunk). Not for a walk inside `walk_ahead()`."""
    token = _columns_from.set(take)
    try:
        yield
    finally:
        _columns_from.reset(token)


@contextmanager
def walk_ahead() -> Iterator[None]:
    """A walk started inside this block runs on a second thread, up to `WALK_AHEAD` chunks ahead of the caller,
    body CRCs included: the kernels run without the GIL, so on two cores the walk and the caller's work per chunk
    (`columns.summarise`) overlap. The chunks are the same, but a chunk's arrays are reused for a later chunk once
    the caller has gone on (`_RING`): handle a chunk before asking for the next one, copying what must outlive it
    (fresh arrays cost page faults)."""
    token = _walk_ahead.set(True)
    try:
        yield
    finally:
        _walk_ahead.reset(token)


@contextmanager
def numbered_topics(table) -> Iterator[None]:
    """A walk started inside this block numbers each record's topic in `table` (`compiled_kernels().topic_table()`,
    `walk.TopicTable`): every chunk's `topic_ids`, computed while the walk has the record in hand."""
    token = _topic_table.set(table)
    try:
        yield
    finally:
        _topic_table.reset(token)


class _Walker(threading.Thread):
    """The walk of one file on its own thread, up to `WALK_AHEAD` chunks ahead of the reader (`chunks()`), so
    neither side waits for the other to be scheduled at each chunk."""

    def __init__(self, walk, a, pos: int, verify_crc: bool, cap: int, table, take):
        super().__init__(name="mqtool-walk", daemon=True)
        self.walk, self.a, self.pos, self.verify_crc, self.cap, self.table, self.take = (
            walk, a, pos, verify_crc, cap, table, take)
        self.done: queue.Queue = queue.Queue(WALK_AHEAD)
        self.cancelled = False
        self.start()

    def run(self) -> None:
        pos = self.pos
        ring: list[tuple[memoryview, memoryview | None]] = []
        try:
            for k in itertools.count():
                if self.cancelled:
                    return
                if self.take is not None:
                    out, ids = _columns(self.cap, self.table, self.take)
                elif len(ring) < _RING:
                    out, ids = _plain_columns(self.cap, self.table)
                    ring.append((out, ids))
                else:  # the reader is done with chunk k - _RING: its arrays' pages are faulted in already
                    out, ids = ring[k % _RING]
                r = self.walk(self.a, pos, self.verify_crc, out, *_numbering(self.table, ids))
                self.done.put((out, ids, r))
                if r[2] != STOP_MORE:
                    return
                pos = r[1]
        except BaseException as e:  # noqa: BLE001 - raised again by `next_chunk` in the reader's thread
            self.done.put(e)

    def next_chunk(self) -> tuple:
        item = self.done.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self) -> None:
        """Stop walking and wait until the thread no longer reads the buffer (before the mapping closes)."""
        self.cancelled = True
        while self.is_alive():
            try:
                self.done.get(timeout=0.01)  # unblocks a full queue
            except queue.Empty:
                pass
        self.join()


class Columns:
    """A chunk's columns where the walk wrote them (`columns_from`), without numpy: `NCOL` rows of `cap` int64 in
    one byte buffer, columns `lo` to `n - 1` of each row used. `grid()` is what the kernels take (the walk's whole
    buffer), `row(k)` column k, `rows(lo, hi)` some of them."""

    __slots__ = ("buf", "cap", "n", "lo")

    def __init__(self, buf: memoryview, cap: int, n: int, lo: int = 0) -> None:
        self.buf, self.cap, self.n, self.lo = buf, cap, n, lo

    def __len__(self) -> int:
        return self.n - self.lo

    def grid(self) -> memoryview:
        """The (NCOL, cap) int64 buffer."""
        return self.buf.cast("q", (NCOL, self.cap))

    def row(self, k: int) -> memoryview:
        """Column `k`'s values (int64)."""
        return self.buf[(k * self.cap + self.lo) * 8 : (k * self.cap + self.n) * 8].cast("q")

    def rows(self, lo: int, hi: int) -> Columns:
        """Columns `lo` to `hi - 1` of these."""
        return Columns(self.buf, self.cap, self.lo + min(hi, len(self)), self.lo + lo)

    def array(self) -> np.ndarray:
        """The (NCOL, n - lo) numpy view, for the code that computes with arrays."""
        import numpy as np

        grid = np.frombuffer(self.buf, np.int64, count=NCOL * self.cap).reshape(NCOL, self.cap)
        return grid[:, self.lo : self.n]


def _used(out, n: int):
    """A chunk's columns: the first `n` columns of the walk's `out` (a numpy array, or a `columns_from` buffer)."""
    if isinstance(out, memoryview):
        return Columns(out.cast("B"), out.shape[1], n)
    return out[:, :n]


@dataclass
class ScanChunk:
    """Up to `DEFAULT_CHUNK` consecutive records of one file, as columns.

    `columns` is a (NCOL, n) int64 numpy array, or `Columns` for a walk inside `columns_from` (`cols` is the
    numpy array in either case: numpy is imported where the arrays are asked for). `stop` is STOP_MORE when
    the file goes on after `end`; otherwise why the scan of the file ended at `end` (see `stop_reason`).
    Positions are file positions; add `base_offset` for physical offsets.
    """

    base_offset: int
    columns: np.ndarray | Columns  # (NCOL, n) int64
    end: int
    stop: int
    detail: int
    crc_checked: bool
    file_size: int
    dledger: np.ndarray | None = None  # (3, n) index, term, pos of each row's DLedger entry (spec §12)
    topic_ids: np.ndarray | None = None  # (n,) each row's topic number, inside `numbered_topics`

    @property
    def cols(self) -> np.ndarray:
        if isinstance(self.columns, Columns):
            self.columns = self.columns.array()
        return self.columns

    def column(self, k: int):
        """Column `k`: a memoryview of int64 (`Columns`) or a numpy row."""
        c = self.columns
        return c.row(k) if isinstance(c, Columns) else c[k]

    def __len__(self) -> int:
        c = self.columns
        return len(c) if isinstance(c, Columns) else c.shape[1]

    def __getattr__(self, name: str) -> np.ndarray:
        if name not in COLUMNS:
            raise AttributeError(name)
        return self.cols[COLUMNS.index(name)]

    @property
    def physical_offset(self) -> np.ndarray:
        return self.cols[C_POS] + self.base_offset

    @property
    def crc_ok(self) -> np.ndarray:
        """Body CRC matches (True for empty bodies, like RocketMQ; all True when not checked)."""
        import numpy as np

        if not self.crc_checked:
            return np.ones(len(self), bool)
        return (self.cols[C_BODY_LEN] == 0) | (self.cols[C_CRC] == self.cols[C_BODY_CRC])

    @property
    def physical_offset_ok(self) -> np.ndarray:
        return self.cols[C_PHYS_FIELD] == self.physical_offset

    @property
    def finished(self) -> bool:
        return self.stop != STOP_MORE


@dataclass
class ScanResult:
    """A whole file's scan: the chunks' columns concatenated, and where and why it stopped."""

    base_offset: int
    cols: np.ndarray
    end: int
    stop: int
    detail: int
    crc_checked: bool
    file_size: int

    def __len__(self) -> int:
        return self.cols.shape[1]

    __getattr__ = ScanChunk.__getattr__
    physical_offset = ScanChunk.physical_offset
    crc_ok = ScanChunk.crc_ok
    physical_offset_ok = ScanChunk.physical_offset_ok

    @property
    def stop_reason(self) -> str:
        return stop_reason(self.stop, self.detail)


def as_array(buf) -> np.ndarray:
    """A read-only uint8 view of bytes, a bytearray, a memoryview or an mmap (no copy)."""
    import numpy as np

    a = np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.zeros(0, np.uint8)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False  # one kernel signature for every kind of buffer
    return a


def iter_commitlog_chunks(buf, base_offset: int = 0, start: int = 0, verify_crc: bool = True,
                          chunk_records: int = DEFAULT_CHUNK, release: bool = True,
                          ahead: int = 0) -> Iterator[ScanChunk]:
    """Scan one CommitLog file from `start` in chunks; the last chunk says why the scan ended.

    With an mmap and `release`, the pages of each finished chunk are dropped from this process
    (`MADV_DONTNEED`: they stay in the page cache), so the resident size stays about one chunk
    however large the file is. `ahead`: bytes the same scan will walk in later files (unused: kept for
    callers). Inside `walk_ahead()` the walk runs on a second thread, ahead of the chunk being handled.
    """
    a = memoryview(buf).cast("B")  # what the walk reads (an mmap, bytes or an array: no numpy needed)
    kernels = compiled_kernels()
    walk = kernels.walk
    table, take = _topic_table.get(), _columns_from.get()
    walker = None
    if _walk_ahead.get() and kernels.native:  # (the Python walk holds the GIL: no gain)
        # the walk checks the CRCs itself: its prefetch streams the bodies in as it goes (a second pass over a
        # chunk's bodies on this thread read them from memory again: 0.45 s of CPU against 0.30 s on 1 GiB)
        walker = _Walker(walk, a, start, verify_crc, chunk_records, table, take)
    try:
        pos = start
        released = 0
        while True:
            if walker is None:
                out, ids = _columns(chunk_records, table, take)
                n, end, stop, detail = walk(a, pos, verify_crc, out, *_numbering(table, ids))
            else:
                out, ids, (n, end, stop, detail) = walker.next_chunk()
            yield ScanChunk(base_offset, _used(out, n), int(end), int(stop), int(detail), verify_crc, len(a),
                            topic_ids=None if ids is None else _ids_array(ids, n))
            if release and isinstance(buf, mmap.mmap) and not _keep_pages.get():
                released = _release(buf, released, int(end))  # pages before `end`: the walk ahead is past it
            if stop != STOP_MORE:
                return
            pos = int(end)
    finally:
        if walker is not None:  # abandoned or done: the thread must be done with `a` before the mapping closes
            walker.cancel()
        walker = None
        del a


def _plain_columns(cap: int, table) -> tuple[memoryview, memoryview | None]:
    """`_columns` for the walker thread: anonymous mappings (the kernel faults their pages in as it writes, without
    the GIL), no numpy, so the walk starts before numpy is imported and runs while it is (`columns.summarise`)."""
    out = memoryview(mmap.mmap(-1, NCOL * cap * 8)).cast("q", (NCOL, cap))
    return out, None if table is None else memoryview(mmap.mmap(-1, cap * 8)).cast("q")


def _ids_array(ids, n: int) -> np.ndarray:
    """The first `n` topic numbers of a chunk as a numpy array (the walker's are plain buffers)."""
    if not isinstance(ids, memoryview):
        return ids[:n]
    import numpy as np

    return np.frombuffer(ids, np.int64, count=n)


def _numbering(table, ids) -> tuple:
    """The walk's optional arguments: none, or the topic table and the chunk's topic numbers."""
    return () if table is None else (table, ids)


def _columns(cap: int, table, take) -> tuple[np.ndarray | memoryview, np.ndarray | None]:
    """A chunk's (NCOL, cap) int64 columns (a new numpy array, or the caller's `take` buffer: `columns_from`) and,
    with a topic table, its topic numbers' array."""
    if take is not None and table is None:
        return take(NCOL * cap * 8)[: NCOL * cap * 8].cast("q", (NCOL, cap)), None
    import numpy as np

    if take is None:
        out = np.empty((NCOL, cap), np.int64)
    else:
        out = np.frombuffer(take(NCOL * cap * 8), np.int64, count=NCOL * cap).reshape(NCOL, cap)
    return out, None if table is None else np.empty(cap, np.int64)


def _release(mm: mmap.mmap, done: int, upto: int) -> int:
    """Drop the mapped pages of [done, upto) (whole pages only); returns the new `done`."""
    upto -= upto % mmap.PAGESIZE
    if upto > done and hasattr(mm, "madvise"):
        try:
            mm.madvise(mmap.MADV_DONTNEED, done, upto - done)
        except (OSError, ValueError):  # pragma: no cover - platform without it
            return done
        return upto
    return done


def scan_commitlog_file(buf, base_offset: int = 0, verify_crc: bool = True, start: int = 0) -> ScanResult:
    """The whole file's scan as one set of columns (see `iter_commitlog_chunks` to stream)."""
    import numpy as np

    parts, last = [], None
    for last in iter_commitlog_chunks(buf, base_offset, start, verify_crc, release=False):
        parts.append(last.cols)
    cols = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    return ScanResult(base_offset, np.ascontiguousarray(cols), last.end, last.stop, last.detail, verify_crc,
                      last.file_size)


def stop_reason(stop: int, detail: int) -> str:
    """The `FileScan.stop_reason` text of a stop code."""
    if stop == STOP_END_OF_FILE or stop == STOP_MORE:
        return "end of file"
    if stop == STOP_BLANK:
        return "blank filler"
    if stop == STOP_ZERO_TAIL:
        return "unwritten (zero) tail"
    if stop == BAD_SIZE:
        return "invalid record: size mismatch"
    return f"invalid record: {invalid_reason(stop, detail)}"


def invalid_reason(stop: int, detail: int) -> str:
    """The `RecordError.reason` that `decode_message` gives for an invalid record."""
    return _INVALID_REASONS[stop].format(detail=detail, hex=f"{detail & 0xFFFFFFFF:08X}")


def stop_finding(buf, stop: int, detail: int, end: int) -> tuple[str, str] | None:
    """(severity, message) of the finding the slow walk adds where a file's scan stopped, if any."""
    if stop == STOP_BLANK:
        if detail != len(buf) - end:
            return "warning", f"BLANK filler declares {detail} bytes, {len(buf) - end} remain in the file"
        return None
    if stop == BAD_SIZE:
        total = int.from_bytes(bytes(buf[end : end + 4]), "big", signed=True)
        return "error", (f"TOTALSIZE {total} != computed length {detail}; the broker's recovery treats this "
                         "as the end of valid data")
    if stop >= BAD_HEADER:
        return "error", (f"{invalid_reason(stop, detail)}; the broker's recovery treats this as the end of "
                         "valid data (torn tail)")
    return None


def row_checks(chunk: ScanChunk, crc_ok=None) -> list[int]:
    """The rows of a chunk whose PHYSICALOFFSET field is not their position or whose body CRC does not match
    (ascending); `crc_ok` (a byte a row), when given, is set to each row's CRC check (1 when not checked)."""
    n = len(chunk)
    if crc_ok is None:
        crc_ok = bytearray(n)
    check = extension.kernel("row_checks")
    if check is None:
        from mqtool.store.kernels import row_checks as check
    return check(*(chunk.column(k) for k in (C_POS, C_PHYS_FIELD, C_BODY_LEN, C_CRC, C_BODY_CRC)),
                 chunk.base_offset, chunk.crc_checked, crc_ok)


def record_findings(chunk: ScanChunk) -> Iterator[tuple[int, str]]:
    """(row, message) of every per-record error in a chunk, in record order (PHYSICALOFFSET, then CRC)."""
    crc_ok = bytearray(len(chunk))
    bad = row_checks(chunk, crc_ok)
    if not bad:
        return
    pos, phys, stored = (chunk.column(k) for k in (C_POS, C_PHYS_FIELD, C_BODY_CRC))
    for i in bad:
        if phys[i] != pos[i] + chunk.base_offset:
            yield i, f"PHYSICALOFFSET field {phys[i]} != position {pos[i] + chunk.base_offset}"
        if not crc_ok[i]:
            yield i, f"body CRC mismatch (stored {stored[i]}); recovery with checkCRCOnRecover stops here"


# ===================================================================== MessageRecords from columns
_hosts: dict[bytes, str] = {}
_topics: dict[bytes, str] = {}


def host_text(raw: bytes) -> str:
    """`ip:port` / `[v6]:port` of a stored host (address bytes + port), as `decode_message` prints it."""
    s = _hosts.get(raw)
    if s is None:
        ip = ipaddress.ip_address(raw[:-4])
        port = int.from_bytes(raw[-4:], "big", signed=True)
        s = f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"
        if len(_hosts) > 65536:
            _hosts.clear()
        _hosts[raw] = s
    return s


def _topic_text(raw: bytes) -> str:
    s = _topics.get(raw)
    if s is None:
        s = raw.decode("utf-8", "surrogateescape")
        if len(_topics) > 65536:
            _topics.clear()
        _topics[raw] = s
    return s


def records_from_chunk(buf, chunk: ScanChunk, file: str = "") -> Iterator[MessageRecord]:
    """`MessageRecord`s equal to `decode_message`'s for each row (body/topic/properties copied out)."""
    base = chunk.base_offset
    crc_checked = chunk.crc_checked
    entries = iter(()) if chunk.dledger is None else zip(*chunk.dledger.tolist(), strict=True)
    rows = zip(*(chunk.column(i).tolist() for i in range(NCOL)), strict=True)
    for (pos, total, magic, crc, qid, flag, qoff, physf, sysf, born_ts, bh, _bp, store_ts, sh, _sp, recon,
         prep, body_pos, body_len, topic_pos, topic_len, props_pos, props_len, computed) in rows:
        born_n = cl.HOST_SIZE_V6 if sysf & BORNHOST_V6 else cl.HOST_SIZE_V4
        store_n = cl.HOST_SIZE_V6 if sysf & STOREHOST_V6 else cl.HOST_SIZE_V4
        body = buf[body_pos : body_pos + body_len]
        rec = MessageRecord(
            base + pos, total, magic, crc, qid, flag, qoff, physf, sysf, born_ts,
            host_text(bytes(buf[bh : bh + born_n])), store_ts, host_text(bytes(buf[sh : sh + store_n])),
            recon, prep, body if type(body) is bytes else bytes(body),
            _topic_text(bytes(buf[topic_pos : topic_pos + topic_len])),
            bytes(buf[props_pos : props_pos + props_len]).decode("utf-8", "surrogateescape"),
            file, pos,
        )
        if crc_checked:
            rec.__dict__["crc_ok"] = body_len == 0 or computed == crc
        entry = next(entries, None)
        if entry is not None:
            rec.extra["dledger"] = {"index": entry[0], "term": entry[1], "pos": entry[2]}
        yield rec


# ===================================================================== Arrow columns


def _pool_array(n: int, dtype) -> tuple[np.ndarray, object]:
    """A numpy array over a pyarrow pool buffer: the pool reuses freed pages (fresh pages fault slowly)."""
    import numpy as np
    import pyarrow as pa

    dtype = np.dtype(dtype)
    buf = pa.allocate_buffer(max(n, 1) * dtype.itemsize)
    return np.frombuffer(buf, dtype, count=n), buf


def _binary(a: np.ndarray, starts: np.ndarray, lens: np.ndarray, typ):
    import numpy as np
    import pyarrow as pa

    offsets, obuf = _pool_array(len(lens) + 1, np.int32)
    offsets[0] = 0
    np.cumsum(lens, out=offsets[1:])
    data, dbuf = _pool_array(int(offsets[-1]), np.uint8)
    compiled_kernels().gather(a, starts, lens, offsets, data)
    return pa.Array.from_buffers(typ, len(lens), [None, obuf, dbuf])


def _text(a: np.ndarray, starts: np.ndarray, lens: np.ndarray):
    """A string column; bytes that are not UTF-8 become U+FFFD (Arrow strings must be valid)."""
    import pyarrow as pa

    arr = _binary(a, starts, lens, pa.string())
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        arr = pa.array([bytes(a[s : s + n]).decode("utf-8", "replace") for s, n in
                        zip(starts.tolist(), lens.tolist(), strict=True)], pa.string())
    return arr


def _host_column(a: np.ndarray, pos: np.ndarray, v6: np.ndarray):
    """Host strings (dictionary-encoded), each distinct address and port formatted once."""
    import numpy as np
    import pyarrow as pa

    codes = np.empty(len(pos), np.int32)
    texts: list[str] = []
    v4 = ~v6
    if v4.any():
        keys = np.empty(int(v4.sum()), np.int64)
        compiled_kernels().host_keys(a, pos[v4], keys)
        uniq, inverse = np.unique(keys, return_inverse=True)
        texts = [host_text(k.to_bytes(8, "big", signed=True)) for k in uniq.tolist()]
        codes[v4] = inverse.ravel()
    if v6.any():
        index: dict[str, int] = {}
        for i in np.flatnonzero(v6).tolist():
            t = host_text(bytes(a[pos[i] : pos[i] + cl.HOST_SIZE_V6]))
            codes[i] = index.setdefault(t, len(texts) + len(index))
        texts += list(index)
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(texts, pa.string()))


def chunk_to_arrow(buf, chunk: ScanChunk, file: str = ""):
    """One `pyarrow.RecordBatch` for a chunk: every field, body, topic and parsed properties.

    Decoded without a Python object per record: hosts, topics and the file name are
    dictionary-encoded, properties are a `map<string, string>` in stored order (a repeated name
    keeps its last value). The batch owns its data (copied out of the mapping).
    """
    import numpy as np
    import pyarrow as pa

    a = as_array(buf)
    c = chunk.cols
    n = len(chunk)
    try:
        props_pos, props_len = c[C_PROPS_POS], c[C_PROPS_LEN]
        rec_offsets = np.empty(n + 1, np.int32)
        m = -1
        for cap in (n * 8, int(props_len.sum()) // 3 + 1):
            kpos, klen, vpos, vlen = np.empty((4, cap), np.int64)
            m = compiled_kernels().property_pairs(a, props_pos, props_len, rec_offsets, kpos, klen, vpos, vlen)
            if m >= 0:
                break
        props = pa.MapArray.from_arrays(pa.array(rec_offsets), _text(a, kpos[:m], klen[:m]),
                                        _text(a, vpos[:m], vlen[:m]))
        topics = _text(a, c[C_TOPIC_POS], c[C_TOPIC_LEN]).dictionary_encode()
        sys_flag = c[C_SYS_FLAG]
        columns = {
            "file": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([file])),
            "physical_offset": pa.array(chunk.physical_offset),
            "total_size": pa.array(c[C_TOTAL].astype(np.int32)),
            "magic_code": pa.array(c[C_MAGIC].astype(np.int32)),
            "body_crc": pa.array(c[C_BODY_CRC].astype(np.int32)),
            "crc_ok": pa.array(chunk.crc_ok) if chunk.crc_checked else pa.nulls(n, pa.bool_()),
            "queue_id": pa.array(c[C_QUEUE_ID].astype(np.int32)),
            "flag": pa.array(c[C_FLAG].astype(np.int32)),
            "queue_offset": pa.array(c[C_QUEUE_OFFSET]),
            "physical_offset_field": pa.array(c[C_PHYS_FIELD]),
            "sys_flag": pa.array(sys_flag.astype(np.int32)),
            "born_timestamp": pa.array(c[C_BORN_TS]),
            "born_host": _host_column(a, c[C_BORN_HOST], (sys_flag & BORNHOST_V6) != 0),
            "store_timestamp": pa.array(c[C_STORE_TS]),
            "store_host": _host_column(a, c[C_STORE_HOST], (sys_flag & STOREHOST_V6) != 0),
            "reconsume_times": pa.array(c[C_RECONSUME].astype(np.int32)),
            "prepared_transaction_offset": pa.array(c[C_PREPARED]),
            "body": _binary(a, c[C_BODY_POS], c[C_BODY_LEN], pa.binary()),
            "topic": topics,
            "properties": props,
        }
        return pa.RecordBatch.from_pydict(columns)
    finally:
        del a


# ===================================================================== fixed-size units
# The views' dtypes (`CQ_DTYPE`, `TIMERLOG_DTYPE`, `SLOT_DTYPE`) are derived from the Construct
# structs in `mqtool.formats` (same field names); each reader imports its own (a CommitLog scan needs none).


def cq_units(buf, start: int = 0) -> tuple[np.ndarray, bool]:
    """The written units of one ConsumeQueue file from byte `start` (a unit boundary).

    Returns (big-endian structured view over the mapping, ended): `ended` is True when an empty
    (all-zero, never written) unit was found, which marks the end of the queue's data. Keep the view
    only while the mapping is open (copy with `.astype(CQ_DTYPE.newbyteorder('='))` to keep it).
    """
    import numpy as np

    units = cq_view(buf, start)
    n = len(units)
    if n == 0:
        return units, False
    empty = _first_empty_unit(np.frombuffer(buf, "<u4", count=n * 5, offset=start).reshape(n, 5))
    if empty >= 0:
        return units[:empty], True
    return units, False


def cq_view(buf, start: int = 0) -> np.ndarray:
    """Every whole unit of a ConsumeQueue file from byte `start`, written or not (no end detection)."""
    import numpy as np

    from mqtool.formats.consumequeue import CQ_DTYPE, CQ_UNIT_SIZE

    n = max(0, (len(buf) - start) // CQ_UNIT_SIZE)
    return np.frombuffer(buf, CQ_DTYPE, count=n, offset=start) if n else np.zeros(0, CQ_DTYPE)


def _first_empty_unit(words: np.ndarray, block: int = 1 << 16) -> int:
    """Index of the first all-zero row of 32-bit words, or -1 (block by block: small temporaries)."""
    import numpy as np

    for lo in range(0, words.shape[0], block):
        w = words[lo : lo + block]
        acc = w[:, 0].copy()
        for k in range(1, w.shape[1]):
            acc |= w[:, k]
        zero = np.flatnonzero(acc == 0)
        if zero.size:
            return lo + int(zero[0])
    return -1


def timerlog_units(buf) -> np.ndarray:
    """The units of one TimerLog file (a view): from position 0 until the first size != 52
    (the 16-byte end filler, or zeros); a partial unit at the end is not one."""
    import numpy as np

    from mqtool.formats.timerlog import TIMERLOG_DTYPE, TIMERLOG_UNIT_SIZE

    n = len(buf) // TIMERLOG_UNIT_SIZE
    if n == 0:
        return np.zeros(0, TIMERLOG_DTYPE)
    units = np.frombuffer(buf, TIMERLOG_DTYPE, count=n)
    bad = np.flatnonzero(units["size"] != TIMERLOG_UNIT_SIZE)
    return units[: int(bad[0])] if bad.size else units


def timerlog_unit_at(buf, pos: int) -> tuple | None:
    """The fields of the TimerLog unit at file position `pos` (`timerlog_unit`'s order), None when
    no unit is written there (outside the file, or a size other than 52: the filler or zeros)."""
    from mqtool.formats.timerlog import TIMERLOG_UNIT, TIMERLOG_UNIT_SIZE

    if pos < 0 or pos + TIMERLOG_UNIT_SIZE > len(buf):
        return None
    fields = TIMERLOG_UNIT.unpack_from(buf, pos)
    return fields if fields[0] == TIMERLOG_UNIT_SIZE else None


def timerwheel_slots(buf) -> np.ndarray:
    """The wheel's slots as a structured view (`SLOT_DTYPE`)."""
    import numpy as np

    from mqtool.formats.timerwheel import SLOT_DTYPE, SLOT_SIZE

    return np.frombuffer(buf, SLOT_DTYPE, count=len(buf) // SLOT_SIZE)


def warm_up() -> None:
    """Load the kernels now, e.g. before timing or before a progress bar starts."""
    compiled_kernels()
