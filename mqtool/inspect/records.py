"""A `MessageRecord` as the JSON Lines record of `messages` and `queue`, and the scan they share.

The keys and their order are the output contract of issue #3 (snake_case, always present): hosts
`ip:port` (`[v6]:port`), timestamps epoch-ms integers, properties in stored order.
"""

import base64
from collections.abc import Callable, Iterator

from mqtool.formats.compression import DecompressError, decompress
from mqtool.formats.message import MessageRecord
from mqtool.store.store import Store

BODY_MODES = ("text", "hex", "base64", "none")

Progress = Callable[[int, int], None]
"""Called as `progress(done_bytes, total_bytes)` during a scan (the CLI draws a bar on a TTY)."""

RECORD_KEYS = (
    "physical_offset", "file", "position", "total_size", "magic", "body_crc", "crc_ok", "queue_id", "flag",
    "queue_offset", "sys_flag", "transaction", "compression", "born_timestamp", "born_host",
    "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "topic",
    "properties", "uniq_key", "msg_id", "body_length", "body",
)


def encode_body(body: bytes, mode: str) -> str | None:
    """The body as the user asked: UTF-8 text (invalid bytes replaced), hex, base64, or nothing."""
    if mode == "none":
        return None
    if mode == "hex":
        return body.hex()
    if mode == "base64":
        return base64.b64encode(body).decode("ascii")
    if mode == "text":
        return body.decode("utf-8", "replace")
    raise ValueError(f"unknown body mode {mode!r} (use one of {', '.join(BODY_MODES)})")


def record_dict(rec: MessageRecord, body: str = "text", decompress_body: bool = False) -> dict:
    """The JSON Lines record for one message (the contract's keys, in the contract's order).

    `body_length` is the stored length; a DLedger entry's record adds `dledger` (index, term, pos); with
    `decompress_body` a compressed body is shown decompressed, and `body_error` says why when its
    codec rejects it.
    """
    payload = rec.body
    extra: dict = {}
    if decompress_body and rec.compression:
        try:
            payload = decompress(rec.body, rec.compression)
            extra["decompressed_length"] = len(payload)
        except DecompressError as e:
            extra["body_error"] = str(e)
    d = {
        "physical_offset": rec.physical_offset,
        "file": rec.file,
        "position": rec.position,
        "total_size": rec.total_size,
        "magic": rec.magic,
        "body_crc": rec.body_crc,
        "crc_ok": rec.crc_ok,
        "queue_id": rec.queue_id,
        "flag": rec.flag,
        "queue_offset": rec.queue_offset,
        "sys_flag": rec.sys_flag,
        "transaction": rec.transaction,
        "compression": rec.compression,
        "born_timestamp": rec.born_timestamp,
        "born_host": rec.born_host,
        "store_timestamp": rec.store_timestamp,
        "store_host": rec.store_host,
        "reconsume_times": rec.reconsume_times,
        "prepared_transaction_offset": rec.prepared_transaction_offset,
        "topic": rec.topic,
        "properties": dict(rec.properties),
        "uniq_key": rec.uniq_key,
        "msg_id": rec.msg_id,
        "body_length": rec.body_length,
        "body": encode_body(payload, body),
    }
    if "dledger" in rec.extra:  # a DLedger entry's body (spec §12): only then, so plain output is unchanged
        d["dledger"] = dict(rec.extra["dledger"])
    d.update(extra)
    return d


def empty_record_dict() -> dict:
    """Every contract key, null: a queue unit whose CommitLog record is missing."""
    return dict.fromkeys(RECORD_KEYS)


def commitlog_bytes(store: Store) -> int:
    """Bytes a full CommitLog scan walks (the progress total)."""
    return sum(f.length for f in store.commitlog.files)


def scan(store: Store, start: int | None = None, verify_crc: bool = True,
         progress: Progress | None = None) -> Iterator[MessageRecord]:
    """Every CommitLog record from `start` (a file start or record boundary), reporting progress.

    Findings of the walk land in `store.commitlog.findings` (reset by each scan).
    """
    cl = store.commitlog
    total = commitlog_bytes(store)
    base = cl.min_offset
    n = 0
    for rec in cl.iter_records(start, verify_crc):
        yield rec
        n += 1
        if progress and n % 512 == 0:
            progress(min(rec.end_offset - base, total), total)
    if progress:
        progress(total, total)
