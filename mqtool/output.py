"""Record streams as files: JSON Lines (orjson, the bytes `json.dumps` writes) and Parquet.

`write_jsonl` prints what `--json` prints for `messages` and `queue`: byte for byte the lines
`json.dumps(row, ensure_ascii=False)` gives, made by orjson where that is provably the same. orjson
escapes strings exactly as `json` does with `ensure_ascii=False` (tests/test_output.py, hypothesis
over every code point), and its indented form puts `": "` between a key and its value and a newline
(never raw inside a string) after each `,`; turning those newlines into the spaces of `json`'s
separators gives `json`'s line. Floats (orjson prints `1e16`, json `1e+16`), integers past 64 bits,
lone surrogates (names decoded with `surrogateescape`), non-string keys and other types go through
`json` itself.

`write_parquet` writes the same rows (an index lookup: its `matches`, then its `rejected` hits) with a
fixed schema (`parquet_schema(view)`, described in docs/formats.md), so DuckDB, pandas and Spark load
a store's records in one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

_SCALARS = frozenset({str, int, bool, type(None)})
_NESTED = frozenset({dict, list})


def _plain(row: dict) -> bool:
    """Every value a str, int, bool or None, or a dict or list of those (exact types: a float, an
    enum, a dataclass or a subclass is written by `json`). Keys need no check: orjson refuses a key
    that is not a str, and the row then goes to `json`."""
    kinds = set(map(type, row.values()))
    if kinds <= _SCALARS:
        return True
    if not kinds <= _SCALARS | _NESTED:
        return False
    for v in row.values():
        t = type(v)
        if t is dict:
            v = v.values()
        elif t is not list:
            continue
        if not set(map(type, v)) <= _SCALARS:
            return False
    return True


def json_line(row: Any, default=None) -> str:
    """The reference: what `--json` printed before orjson (kept for what orjson would write differently)."""
    return json.dumps(row, ensure_ascii=False, default=default) + "\n"


def fast_line(row: dict) -> bytes | None:
    """`json_line(row)` as UTF-8 bytes, made by orjson; None when only `json` writes it right."""
    import orjson

    if not _plain(row):
        return None
    try:
        text = orjson.dumps(row, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:  # an integer past 64 bits, a lone surrogate, a key not a str
        return None
    # Newlines are structural only (a string's is escaped), each followed by two spaces per depth (at
    # most 2 here) and then a token: `,` gets json's space, then the deepest indents go first.
    return text.replace(b",\n", b", \n").replace(b"\n    ", b"").replace(b"\n  ", b"").replace(b"\n", b"") + b"\n"


def write_jsonl(rows: Iterable[dict], out, default=None) -> None:
    """Every row to the text stream `out` (sys.stdout), one line each, through its byte buffer when
    it has one. A row only `json` writes right goes through `out` itself, as before (a lone
    surrogate then fails or passes exactly as it did)."""
    buffer = getattr(out, "buffer", None)
    out.flush()  # text written before goes first
    for row in rows:
        line = fast_line(row)
        if line is None:
            out.write(json_line(row, default))
            out.flush()  # into the buffer before the next line
        elif buffer is not None:
            buffer.write(line)
        else:
            out.write(line.decode("utf-8"))


def write_jsonl_parts(parts: Iterable[bytes | memoryview | dict], out, default=None) -> None:
    """`write_jsonl` for a stream mixing finished lines (bytes-like, UTF-8, written as they are: the
    fast `messages --json` path, `inspect/jsonlines.py`) and rows (`dict`, written as `write_jsonl`
    writes them)."""
    buffer = getattr(out, "buffer", None)
    out.flush()
    for part in parts:
        if type(part) is not dict:
            if buffer is not None:
                buffer.write(part)
            else:
                out.write(bytes(part).decode("utf-8"))
            continue
        line = fast_line(part)
        if line is None:
            out.write(json_line(part, default))
            out.flush()
        elif buffer is not None:
            buffer.write(line)
        else:
            out.write(line.decode("utf-8"))


class BlockWriter:
    """Writes blocks on a thread of its own, in order: `render(block)` gives a block's byte chunks and `write`
    takes each (a file's write releases the GIL, so the caller goes on meanwhile). At most `bound` blocks wait
    (memory stays bounded: `put` waits when they are all taken). After a failed write it drops the rest and
    keeps the error (`error`); `close` raises it on the caller's thread (the `simulate --events` writer)."""

    def __init__(self, write: Callable[[Any], Any], render: Callable[[Any], Iterable], bound: int, name: str) -> None:
        import queue
        import threading

        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(bound)
        self._thread = threading.Thread(target=self._run, args=(write, render), name=name, daemon=True)
        self._thread.start()

    def _run(self, write: Callable[[Any], Any], render: Callable[[Any], Iterable]) -> None:
        get = self._queue.get
        while (block := get()) is not None:
            if self.error is None:
                try:
                    for chunk in render(block):
                        write(chunk)
                except BaseException as e:  # noqa: BLE001 - handed to the caller's thread by `close`
                    self.error = e

    def put(self, block: Any) -> None:
        self._queue.put(block)

    def close(self) -> None:
        """Wait until every block is written and the thread is gone; raise the error of a write."""
        self._queue.put(None)
        self._thread.join()
        error, self.error = self.error, None
        if error is not None:
            raise error


def byte_buffer(sink) -> Any | None:
    """The byte stream under a UTF-8 text sink with no newline translation, flushed so that what was
    written to it before comes first (as `write_jsonl` does); None for any other sink (a StringIO)."""
    import codecs
    import os

    buffer = getattr(sink, "buffer", None)
    encoding = getattr(sink, "encoding", None)
    if buffer is None or encoding is None or os.linesep != "\n" or codecs.lookup(encoding).name != "utf-8":
        return None
    sink.flush()
    return buffer


# ----------------------------------------------------------------------------- Parquet

def _schemas():
    import pyarrow as pa

    message = [
        ("physical_offset", pa.int64()), ("file", pa.string()), ("position", pa.int64()),
        ("total_size", pa.int32()), ("magic", pa.string()), ("body_crc", pa.int32()), ("crc_ok", pa.bool_()),
        ("queue_id", pa.int32()), ("flag", pa.int32()), ("queue_offset", pa.int64()), ("sys_flag", pa.int32()),
        ("transaction", pa.string()), ("compression", pa.string()), ("born_timestamp", pa.int64()),
        ("born_host", pa.string()), ("store_timestamp", pa.int64()), ("store_host", pa.string()),
        ("reconsume_times", pa.int32()), ("prepared_transaction_offset", pa.int64()), ("topic", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())), ("uniq_key", pa.string()), ("msg_id", pa.string()),
        ("body_length", pa.int32()), ("body", pa.string()),
        ("decompressed_length", pa.int32()), ("body_error", pa.string()),
    ]
    queue = [
        ("cq_topic", pa.string()), ("cq_queue_id", pa.int32()), ("cq_queue_offset", pa.int64()),
        ("cq_commitlog_offset", pa.int64()), ("cq_size", pa.int32()), ("cq_tags_code", pa.int64()),
        ("match", pa.bool_()), ("problems", pa.list_(pa.string())),
    ]
    index = [  # an index lookup's `matches`, then its `rejected` hash hits (`reason` set)
        ("physical_offset", pa.int64()), ("file", pa.string()), ("entry", pa.int64()), ("index_time", pa.int64()),
        ("timestamp", pa.int64()), ("topic", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
        ("keys", pa.string()), ("uniq_key", pa.string()), ("matched_by", pa.string()), ("reason", pa.string()),
    ]
    return pa.schema(message), pa.schema(message + queue), pa.schema(index)


PARQUET_VIEWS = ("messages", "queue", "index")


def parquet_schema(view: str):
    """The Parquet schema of a record view (`messages`, `queue`, `index` lookups): the JSON keys, typed."""
    return dict(zip(PARQUET_VIEWS, _schemas(), strict=True))[view]


def _properties(rows: list[dict]) -> Iterator[dict]:
    for r in rows:
        p = r.get("properties")
        yield {**r, "properties": list(p.items()) if p is not None else None}


def write_parquet(rows: Iterable[dict], path: Path, view: str, batch_rows: int = 65_536) -> int:
    """The rows of `view` as one Parquet file (zstd), written in row groups of `batch_rows`; the row count.

    Properties keep their stored order (a map is a list of key/value pairs). Keys a row lacks
    (`decompressed_length`, `body_error` appear only with --decompress) are null.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema(view)
    n = 0
    with pq.ParquetWriter(str(path), schema, compression="zstd") as writer:
        batch: list[dict] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= batch_rows:
                writer.write_batch(pa.RecordBatch.from_pylist(list(_properties(batch)), schema=schema))
                n += len(batch)
                batch = []
        if batch or n == 0:
            writer.write_batch(pa.RecordBatch.from_pylist(list(_properties(batch)), schema=schema))
            n += len(batch)
    return n
