"""`messages --format parquet` written from the scan's Arrow columns, one record batch per chunk.

The record path (`iter_messages` -> `record_dict` -> `output.write_parquet`) builds a
`MessageRecord`, a dict and then Arrow values for each record; here each chunk's selected rows go
from the scan's columns (`fastscan.chunk_to_arrow`) to the documented schema
(`output.parquet_schema("messages")`) with Arrow and numpy operations, and a `ParquetWriter` streams
them (row groups of `ROW_GROUP` records, at most one row group and one chunk held). The table read
back equals the record path's (`tests/inspect/test_parquet.py`).

Which path writes what (as `inspect/jsonlines.py` decides for `--json`):

- **columns** (this module): `messages` with any of --from-offset, --to-offset, --topic,
  --queue-id, --since, --until, --limit, --verify and every --body mode (`jsonlines.columns_answer`
  for the filters; base64 is allowed here too).
- **record path, per row**: a row whose topic or properties are not valid UTF-8 (the record path
  shows them with `surrogateescape`, which Arrow refuses exactly as before), or a compressed body
  with --decompress; also every row where the extension has no `body_crcs` (`store/extension.py`: built
  without a C compiler, it warns once).
- **record path, whole query**: --key, --uniq-key, --tag, offsets or times past 64 bits.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mqtool.formats import commitlog as cl
from mqtool.formats.names import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.sysflag import BORNHOST_V6, COMPRESSED, STOREHOST_V6, SysFlag
from mqtool.inspect.columns import ColumnChunk
from mqtool.inspect.jsonlines import columns_answer as fast_query  # the same filters as `--json`'s columns
from mqtool.inspect.jsonlines import limited_chunks
from mqtool.inspect.messages import MessageQuery
from mqtool.inspect.records import Progress, record_dict
from mqtool.store import extension, fastscan
from mqtool.store.store import Store

ROW_GROUP = 65_536
"""Records per Parquet row group (as `output.write_parquet`)."""

DICTIONARY_COLUMNS = [
    "file",
    "magic",
    "transaction",
    "compression",
    "born_host",
    "store_host",
    "topic",
    "properties.key_value.key",
]
"""Columns with few distinct values, dictionary-encoded; the others (msg_id, uniq_key, bodies: one value
a row) are written plain, which saves the encoder's attempt (~0.2 CPU s per 210,000 rows) and bytes."""

_HEX_LOWER = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint16)
_HEX_UPPER = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), np.uint16)


def write_messages(
    store: Store,
    query: MessageQuery,
    path: Path,
    verify: bool = False,
    body: str = "text",
    decompress: bool = False,
    progress: Progress | None = None,
) -> int:
    """The `messages` rows of `query` as one Parquet file (zstd), streamed chunk by chunk; the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mqtool.output import parquet_schema

    schema = parquet_schema("messages")
    n = 0
    pending: list = []
    held = 0
    with pq.ParquetWriter(str(path), schema, compression="zstd", use_dictionary=DICTIONARY_COLUMNS) as writer:
        for batch in message_batches(store, query, verify, body, decompress, progress):
            pending.append(batch)
            held += batch.num_rows
            if held >= ROW_GROUP:
                table = pa.Table.from_batches(pending, schema)
                cut = held - held % ROW_GROUP
                writer.write_table(table.slice(0, cut), row_group_size=ROW_GROUP)
                n += cut
                pending = table.slice(cut).to_batches()
                held -= cut
        if held or n == 0:
            writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=ROW_GROUP)
            n += held
    return n


def message_batches(
    store: Store,
    query: MessageQuery,
    verify: bool = False,
    body: str = "text",
    decompress: bool = False,
    progress: Progress | None = None,
) -> Iterator:
    """The `messages` rows of `query` as `pyarrow.RecordBatch`es of the documented schema, in CommitLog order."""
    import pyarrow as pa

    from mqtool.output import parquet_schema

    schema = parquet_schema("messages")
    if not fast_query(query):
        from mqtool.inspect.messages import find_messages

        _, records = find_messages(store, query, verify, progress)
        yield from _pylist_batches([record_dict(r, body, decompress) for r in records], schema)
        return
    for walk, cc, rows, _ in limited_chunks(store, query, verify, progress):
        if extension.kernel("body_crcs") is not None:
            yield chunk_batch(cc, rows, body, decompress, schema)
        else:
            yield pa.RecordBatch.from_pylist(
                _rows([record_dict(r, body, decompress) for r in cc.records(rows)]), schema=schema
            )
        walk.last = int(rows[-1])


def _rows(dicts: list[dict]) -> list[dict]:
    """Record-path dicts as `output.write_parquet` gives them to Arrow (properties as pairs)."""
    for d in dicts:
        p = d.get("properties")
        d["properties"] = list(p.items()) if p is not None else None
    return dicts


def _pylist_batches(dicts: list[dict], schema) -> Iterator:
    import pyarrow as pa

    for i in range(0, len(dicts), ROW_GROUP):
        yield pa.RecordBatch.from_pylist(_rows(dicts[i : i + ROW_GROUP]), schema=schema)


def chunk_batch(cc: ColumnChunk, rows: np.ndarray, body: str, decompress: bool, schema):
    """The `messages` rows of the given rows of one chunk (rows only the record path writes right included)."""
    import pyarrow as pa

    c = cc.chunk
    sub = fastscan.ScanChunk(c.base_offset, c.cols[:, rows], c.end, c.stop, c.detail, c.crc_checked, c.file_size, None)
    a = fastscan.as_array(cc.buf)
    try:
        cols = _columns(a, cc.rel, sub, body)
    finally:
        del a
    back = _record_path_rows(cc, sub, cols, decompress)
    batch = pa.RecordBatch.from_arrays(
        [cols[f.name] if f.name in cols else pa.nulls(len(rows), f.type) for f in schema], schema=schema
    )
    if not len(back):
        return batch
    keep = np.setdiff1d(np.arange(len(rows)), back)
    slow = pa.RecordBatch.from_pylist(
        _rows([record_dict(r, body, decompress) for r in cc.records(rows[back])]), schema=schema
    )
    table = pa.Table.from_batches([batch.take(pa.array(keep)), slow], schema)
    order = np.argsort(np.concatenate([keep, back]), kind="stable")
    return table.take(pa.array(order)).combine_chunks().to_batches()[0]


def _record_path_rows(cc: ColumnChunk, sub: fastscan.ScanChunk, cols: dict, decompress: bool) -> np.ndarray:
    """Rows whose topic or properties are not valid UTF-8 (the scan shows U+FFFD where the record path
    has surrogates), or compressed bodies to decompress."""
    import pyarrow.compute as pc

    n = len(sub)
    bad = np.zeros(n, bool)
    if decompress:
        bad |= (sub.cols[fastscan.C_SYS_FLAG] & COMPRESSED) != 0
    topic = cols["topic"]
    hit = pc.match_substring(topic, "\ufffd")
    if pc.any(hit).as_py():
        bad |= hit.to_numpy(zero_copy_only=False)
    props = cols["properties"]
    hit = pc.or_(pc.match_substring(props.keys, "\ufffd"), pc.match_substring(props.items, "\ufffd"))
    if pc.any(hit).as_py():
        pair_row = (
            np.searchsorted(props.offsets.to_numpy(), np.flatnonzero(hit.to_numpy(zero_copy_only=False)), "right") - 1
        )
        bad[pair_row] = True
    if not bad.any():
        return np.flatnonzero(bad)
    # a U+FFFD the bytes really hold is fine: check the candidates against their bytes
    a = fastscan.as_array(cc.buf)
    try:
        c = sub.cols
        for i in np.flatnonzero(bad).tolist():
            if decompress and c[fastscan.C_SYS_FLAG, i] & COMPRESSED:
                continue
            try:
                for col in (fastscan.C_TOPIC_POS, fastscan.C_PROPS_POS):
                    bytes(a[c[col, i] : c[col, i] + c[col + 1, i]]).decode("utf-8")
                bad[i] = False
            except UnicodeDecodeError:
                pass
    finally:
        del a
    return np.flatnonzero(bad)


def _columns(a: np.ndarray, rel: str, sub: fastscan.ScanChunk, body: str) -> dict:
    """The documented columns of a chunk's rows (`decompressed_length`, `body_error` left null), read
    from the mapping `a` as `fastscan.chunk_to_arrow` reads them, without copying bodies --body none drops."""
    import pyarrow as pa

    k = fastscan.compiled_kernels()
    c = sub.cols
    n = len(sub)
    sys_flag = c[fastscan.C_SYS_FLAG]
    flags, codes = np.unique(sys_flag, return_inverse=True)
    codes = pa.array(codes.ravel().astype(np.int32))
    sf = [SysFlag(int(f)) for f in flags.tolist()]
    props_pos, props_len = c[fastscan.C_PROPS_POS], c[fastscan.C_PROPS_LEN]
    rec_offsets = np.empty(n + 1, np.int32)
    m = -1
    for cap in (n * 8, int(props_len.sum()) // 3 + 1):
        kpos, klen, vpos, vlen = np.empty((4, cap), np.int64)
        m = k.property_pairs(a, props_pos, props_len, rec_offsets, kpos, klen, vpos, vlen)
        if m >= 0:
            break
    props = pa.MapArray.from_arrays(
        pa.array(rec_offsets), fastscan._text(a, kpos[:m], klen[:m]), fastscan._text(a, vpos[:m], vlen[:m])
    )
    topic = fastscan._text(a, c[fastscan.C_TOPIC_POS], c[fastscan.C_TOPIC_LEN])

    def dictionary(codes, texts):
        return pa.DictionaryArray.from_arrays(codes, pa.array(texts, pa.string())).cast(pa.string())

    def i32(col):
        return pa.array(c[col].astype(np.int32))

    return {
        "physical_offset": pa.array(sub.physical_offset),
        "file": dictionary(pa.array(np.zeros(n, np.int8)), [rel]),
        "position": pa.array(c[fastscan.C_POS]),
        "total_size": i32(fastscan.C_TOTAL),
        "magic": dictionary(pa.array((c[fastscan.C_MAGIC] == cl.MESSAGE_MAGIC_CODE_V2).astype(np.int8)), ["v1", "v2"]),
        "body_crc": i32(fastscan.C_BODY_CRC),
        "crc_ok": pa.array(_crc_ok(a, sub)),
        "queue_id": i32(fastscan.C_QUEUE_ID),
        "flag": i32(fastscan.C_FLAG),
        "queue_offset": pa.array(c[fastscan.C_QUEUE_OFFSET]),
        "sys_flag": i32(fastscan.C_SYS_FLAG),
        "transaction": dictionary(codes, [f.transaction for f in sf]),
        "compression": dictionary(codes, [f.compression for f in sf]),
        "born_timestamp": pa.array(c[fastscan.C_BORN_TS]),
        "born_host": fastscan._host_column(a, c[fastscan.C_BORN_HOST], (sys_flag & BORNHOST_V6) != 0).cast(pa.string()),
        "store_timestamp": pa.array(c[fastscan.C_STORE_TS]),
        "store_host": fastscan._host_column(a, c[fastscan.C_STORE_HOST], (sys_flag & STOREHOST_V6) != 0).cast(
            pa.string()
        ),
        "reconsume_times": i32(fastscan.C_RECONSUME),
        "prepared_transaction_offset": pa.array(c[fastscan.C_PREPARED]),
        "topic": topic,
        "properties": props,
        "uniq_key": _uniq_key(props, n),
        "msg_id": _msg_id(a, c),
        "body_length": i32(fastscan.C_BODY_LEN),
        "body": _body(a, c, body),
    }


def _decoded(arr):
    """A dictionary-encoded string column as plain strings (the schema's type)."""
    import pyarrow as pa

    return arr.cast(pa.string()) if hasattr(arr, "dictionary") else arr


def _crc_ok(a: np.ndarray, sub: fastscan.ScanChunk) -> np.ndarray:
    """`MessageRecord.crc_ok` of each row: the scan's CRC when it computed one, else the extension's here."""
    c = sub.cols
    if not sub.crc_checked:
        crc = np.empty(len(sub), np.int64)
        extension.kernel("body_crcs")(
            a, np.ascontiguousarray(c[fastscan.C_BODY_POS]), np.ascontiguousarray(c[fastscan.C_BODY_LEN]), crc
        )
    else:
        crc = c[fastscan.C_CRC]
    return (c[fastscan.C_BODY_LEN] == 0) | (crc == c[fastscan.C_BODY_CRC])


def _offsets(arr) -> np.ndarray:
    """The value bounds of a binary or string array (from its offsets buffer)."""
    return np.frombuffer(arr.buffers()[1], np.int32, count=len(arr) + 1, offset=arr.offset * 4)


def _uniq_key(props, n: int):
    """UNIQ_KEY's value of each row's properties map (null without one; a map holds a name once)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    hit = np.flatnonzero(pc.equal(props.keys, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX).to_numpy(zero_copy_only=False))
    if not len(hit):
        return pa.nulls(n, pa.string())
    owner = np.searchsorted(props.offsets.to_numpy(), hit, "right") - 1
    at = np.full(n, -1, np.int64)
    at[owner] = hit
    return props.items.take(pa.array(at, mask=at < 0))


def _hex(data: np.ndarray, offsets: np.ndarray, upper: bool):
    """A string column of the hex of each value (`data` the values' bytes, `offsets` their bounds)."""
    import pyarrow as pa

    digits = (_HEX_UPPER if upper else _HEX_LOWER)[data]
    return pa.Array.from_buffers(
        pa.string(), len(offsets) - 1, [None, pa.py_buffer((offsets * 2).astype(np.int32)), pa.py_buffer(digits)]
    )


def _msg_id(a: np.ndarray, c: np.ndarray):
    """`offset_msg_id`: hex (upper case) of STOREHOST (address + port) and the PHYSICALOFFSET field."""
    n = c.shape[1]
    width = np.where((c[fastscan.C_SYS_FLAG] & STOREHOST_V6) != 0, cl.HOST_SIZE_V6, cl.HOST_SIZE_V4) + 8
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(width, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    host = width - 8
    if (host == cl.HOST_SIZE_V4).all():
        idx = c[fastscan.C_STORE_HOST][:, None] + np.arange(cl.HOST_SIZE_V4)
        block = np.empty((n, cl.HOST_SIZE_V4 + 8), np.uint8)
        block[:, : cl.HOST_SIZE_V4] = a[idx]
        block[:, cl.HOST_SIZE_V4 :] = c[fastscan.C_PHYS_FIELD].astype(">i8").view(np.uint8).reshape(n, 8)
        data = block.ravel()
    else:
        phys = c[fastscan.C_PHYS_FIELD].astype(">i8").view(np.uint8).reshape(n, 8)
        for i in range(n):
            s, h = int(offsets[i]), int(host[i])
            data[s : s + h] = a[c[fastscan.C_STORE_HOST, i] : c[fastscan.C_STORE_HOST, i] + h]
            data[s + h : s + h + 8] = phys[i]
    return _hex(data, offsets, True)


def _body(a: np.ndarray, c: np.ndarray, mode: str):
    """The body as --body asks (text: invalid UTF-8 replaced as Python's decoder replaces it)."""
    import pyarrow as pa

    n = c.shape[1]
    if mode == "none":
        return pa.nulls(n, pa.string())
    raw = fastscan._binary(a, c[fastscan.C_BODY_POS], c[fastscan.C_BODY_LEN], pa.binary())
    if mode == "hex":
        offsets = _offsets(raw)
        return _hex(
            np.frombuffer(raw.buffers()[2] or b"", np.uint8, count=int(offsets[-1])), offsets.astype(np.int64), False
        )
    if mode == "base64":
        return pa.array([base64.b64encode(b).decode("ascii") for b in raw.to_pylist()], pa.string())
    text = raw.view(pa.string())
    try:
        text.validate(full=True)
        return text
    except pa.ArrowInvalid:
        return pa.array([b.decode("utf-8", "replace") for b in raw.to_pylist()], pa.string())
