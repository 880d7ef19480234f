"""The `messages` and `message` views: CommitLog records, filtered, and one record fully explained.

`message_at` is `mqadmin queryMsgByOffset` without a broker: the record at a physical offset, every
field decoded, its checks (CRC, computed length, PHYSICALOFFSET), the ConsumeQueue unit that should
point back at it, and what the broker's services will do with it (`explain`).

`messages --json` prints its lines through `inspect/jsonlines.py` (made from the scan's columns, the
same bytes); its docstring says which options keep the record path of this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqtool.formats import names
from mqtool.formats.compression import DecompressError, decompress
from mqtool.formats.message import MessageRecord
from mqtool.formats.sysflag import SysFlag
from mqtool.inspect import JSON_VERSION
from mqtool.inspect.columns import ColumnChunk, commitlog_chunks, topic_rows
from mqtool.inspect.records import Progress, encode_body, record_dict
from mqtool.store import fastscan
from mqtool.store.commitlog import CommitLog
from mqtool.store.fastscan import C_POS, C_QUEUE_ID, C_STORE_TS, C_TOPIC_LEN, C_TOPIC_POS
from mqtool.store.findings import Finding, Findings, sort_findings
from mqtool.store.store import (
    Store,
)

if TYPE_CHECKING:  # imported by the filters that use it: the unfiltered walk needs no numpy
    import numpy as np


@dataclass(frozen=True)
class MessageQuery:
    """Filters of the `messages` view; all given ones must match. Offsets: [from, to)."""

    from_offset: int | None = None
    to_offset: int | None = None
    topic: str | None = None
    queue_id: int | None = None
    key: str | None = None
    uniq_key: str | None = None
    tag: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int | None = None

    def matches(self, r: MessageRecord) -> bool:
        if self.from_offset is not None and r.physical_offset < self.from_offset:
            return False
        if self.topic is not None and r.topic != self.topic:
            return False
        if self.queue_id is not None and r.queue_id != self.queue_id:
            return False
        if self.key is not None and self.key not in r.keys:
            return False
        if self.uniq_key is not None and (r.uniq_key or "").upper() != self.uniq_key.upper():
            return False
        if self.tag is not None and self.tag not in (r.tags or "").split("||"):
            return False
        if self.since_ms is not None and r.store_timestamp < self.since_ms:
            return False
        if self.until_ms is not None and r.store_timestamp >= self.until_ms:
            return False
        return True


def _scan_start(store: Store, from_offset: int | None) -> int | None:
    """The start of the file holding `from_offset`: scans begin at a file start (a record boundary)."""
    if from_offset is None:
        return None
    f = store.commitlog.queue.file_for(from_offset)
    if f is not None:
        return f.start
    later = [f.start for f in store.commitlog.files if f.start >= from_offset]
    return later[0] if later else from_offset


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _i64(v: int) -> np.int64:
    """`v` clamped to int64: column masks may select too much (records are checked again), never too little."""
    import numpy as np

    return np.int64(min(max(v, _I64_MIN), _I64_MAX))


def _topic_raw(topic: str) -> bytes | None:
    """The stored bytes of a topic (as `iter_records` decodes them), None when no record can have it."""
    try:
        return topic.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None


def _candidate_rows(cc: ColumnChunk, query: MessageQuery, end: int, topic_raw: bytes | None) -> np.ndarray | range:
    """Rows below `end` that can match the column filters (topic, queue id, offsets, store time): all of them
    (`range(end)`, no mask) when no such filter is given.

    A superset of the matching rows: `MessageQuery.matches` decides on the records built from them.
    """
    filters = (query.queue_id, query.from_offset, query.since_ms, query.until_ms, query.topic)
    if all(f is None for f in filters):
        return range(end)
    import numpy as np

    c = cc.cols[:, :end]
    mask = np.ones(end, bool)
    if query.queue_id is not None:
        mask &= c[C_QUEUE_ID] == _i64(query.queue_id)
    if query.from_offset is not None:
        mask &= c[C_POS] >= _i64(query.from_offset - cc.file.start)
    if query.since_ms is not None:
        mask &= c[C_STORE_TS] >= _i64(query.since_ms)
    if query.until_ms is not None:
        mask &= c[C_STORE_TS] < _i64(query.until_ms)
    rows = np.flatnonzero(mask)
    if query.topic is not None and len(rows):
        if topic_raw is None:
            return rows[:0]
        rows = rows[topic_rows(cc.buf, c[C_TOPIC_POS, rows], c[C_TOPIC_LEN, rows], topic_raw)]
    return rows


def _walked_to(cl: CommitLog, cc: ColumnChunk, row: int) -> None:
    """Leave `cl` as if the record walk had stopped after `row` of `cc`: drop the findings and the record
    count the column scan already added for the later rows of the chunk (the last ones added)."""
    drop = sum(1 for r, _ in fastscan.record_findings(cc.chunk) if r > row)
    if drop:
        del cl.findings[len(cl.findings) - drop :]
    scan = cl.scans.get(cc.rel)
    if scan is not None:
        scan.records -= len(cc) - 1 - row


def row_list(rows: np.ndarray | range) -> list[int]:
    """A chunk's rows (`RowWalk`'s: an index array, or a range for all of them) as a list of ints."""
    return list(rows) if isinstance(rows, range) else rows.tolist()


class RowWalk:
    """The column walk of a messages query: chunk by chunk, the rows the cheap filters allow.

    Used as `with walk: for cc, rows in walk: ...`; the consumer sets `last` to the last row of the
    chunk it has looked at. However the walk ends (to the end, at --to-offset, or the consumer stops
    early), the CommitLog's findings and record counts are left as the record walk stopped at that
    row would leave them (`_walked_to`). One loop for `iter_messages` and the column writers
    (`jsonlines`, `parquet`).
    """

    def __init__(self, store: Store, query: MessageQuery, verify: bool = False,
                 progress: Progress | None = None, chunk_records: int | None = None) -> None:
        self.store, self.query, self.last = store, query, -1
        size = {} if chunk_records is None else {"chunk_records": chunk_records}  # else the scan's default
        self._gen = self._walk(commitlog_chunks(store.commitlog, None, _scan_start(store, query.from_offset),
                                                verify, progress, **size))

    def __enter__(self) -> RowWalk:
        return self

    def __exit__(self, *exc) -> None:
        self._gen.close()

    def __iter__(self) -> Iterator[tuple[ColumnChunk, np.ndarray | range]]:
        return self._gen

    def _walk(self, chunks) -> Iterator[tuple[ColumnChunk, np.ndarray | range]]:
        query = self.query
        topic_raw = _topic_raw(query.topic) if query.topic is not None else None
        current: ColumnChunk | None = None  # the chunk being read, until all its rows are walked
        try:
            for cc in chunks:
                size = len(cc)
                if not size:
                    continue
                current, self.last = cc, -1
                end = size
                if query.to_offset is not None:  # the walk stops at the first record at or past it
                    import numpy as np

                    end = int(np.searchsorted(cc.cols[C_POS], _i64(query.to_offset - cc.file.start), "left"))
                rows = _candidate_rows(cc, query, end, topic_raw)
                if len(rows):
                    yield cc, rows
                if end < size:
                    self.last = end
                    return
                current = None
        finally:
            if current is not None:
                _walked_to(self.store.commitlog, current, self.last)
            chunks.close()


def iter_messages(store: Store, query: MessageQuery, verify: bool = False,
                  progress: Progress | None = None) -> Iterator[MessageRecord]:
    """The records matching `query`, in CommitLog order; `scan_findings` tells what the walk found.

    A column scan: per chunk, numpy masks (none without those filters) pick the rows the topic, queue id,
    offset range and store time allow, and only those become `MessageRecord`s (then checked in full by `query.matches`).
    Findings are those of the record walk (`iter_records`) stopped at the same record: all of them
    when the scan runs to the end, up to the last record looked at when `--limit` or `--to-offset`
    ends it early (or the caller stops reading).
    """
    if query.limit is not None and query.limit <= 0:
        return
    n = 0
    with RowWalk(store, query, verify, progress) as walk:
        for cc, rows in walk:
            for row, rec in zip(row_list(rows), cc.records(rows), strict=True):
                walk.last = row
                if query.matches(rec):
                    yield rec
                    n += 1
                    if query.limit is not None and n >= query.limit:
                        return


def find_messages(store: Store, query: MessageQuery, verify: bool = False,
                  progress: Progress | None = None) -> tuple[str, Iterator[MessageRecord]]:
    """The records matching `query` in CommitLog order, and what found them.

    With --key or --uniq-key (and no --verify, which needs the full walk) the broker's IndexFiles
    answer when they can (`open_key_index`): "indexfile", or "indexfile+scan" when a CommitLog part
    they do not cover is scanned too; otherwise the column scan ("scan"). Same records either way,
    except a rollback record (the broker indexes none) or one in a topic without a ConsumeQueue
    directory, which only the scan finds."""
    from mqtool.store.keyindex import open_key_index

    key = query.uniq_key if query.uniq_key is not None else query.key
    if key is None or verify:
        return "scan", iter_messages(store, query, verify, progress)
    ki = open_key_index(store, query.since_ms, query.until_ms)
    if ki is None:
        return "scan", iter_messages(store, query, verify, progress)
    return ki.source, _indexed_messages(store, query, ki, key)


def _indexed_messages(store: Store, query: MessageQuery, ki, key: str) -> Iterator[MessageRecord]:
    """The head scan, the IndexFile's records, the tail scan: in offset order, at most `query.limit`."""
    from dataclasses import replace

    from mqtool.formats.message import RecordError

    def parts() -> Iterator[MessageRecord]:
        if ki.head_end is not None:
            to = ki.head_end if query.to_offset is None else min(query.to_offset, ki.head_end)
            yield from iter_messages(store, replace(query, to_offset=to, limit=None))
        keys = [key, key.upper()] if query.uniq_key is not None and key != key.upper() else [key]
        offsets = sorted({o for k in keys for o in ki.offsets(k, [query.topic] if query.topic else None)})
        for off in offsets:
            if query.to_offset is not None and off >= query.to_offset:
                break
            try:
                rec = store.commitlog.read(off)
            except RecordError:
                continue
            if query.matches(rec):
                yield rec
        if ki.tail_start is not None:
            start = ki.tail_start if query.from_offset is None else max(query.from_offset, ki.tail_start)
            yield from iter_messages(store, replace(query, from_offset=start, limit=None))

    try:
        if query.limit is not None and query.limit <= 0:
            return
        for n, rec in enumerate(parts(), 1):
            yield rec
            if query.limit is not None and n >= query.limit:
                return
    finally:
        ki.close()


def scan_findings(store: Store) -> list[Finding]:
    """Findings of opening the store and of the last CommitLog scan, sorted."""
    seen = {*store.findings, *store.commitlog.findings}
    return sort_findings(list(seen))


def message_at(store: Store, offset: int, body: str = "text", decompress_body: bool = False) -> dict:
    """The `message` document for the record at a physical offset (RecordError when none starts there)."""
    rec = store.commitlog.read(offset)
    d = record_dict(rec, body, decompress_body)
    checks = {
        "crc_ok": rec.crc_ok,
        "size_ok": rec.total_size == rec.computed_size,
        "computed_size": rec.computed_size,
        "physical_offset_ok": rec.physical_offset_field == rec.physical_offset,
        "physical_offset_field": rec.physical_offset_field,
    }
    doc = {
        "version": JSON_VERSION,
        "view": "message",
        "record": d,
        "sys_flag_bits": SysFlag(rec.sys_flag).as_dict(),
        "keys": rec.keys,
        "tags": rec.tags,
        "checks": checks,
        "consume_queue": _cq_entry(store, rec),
        "explain": explain(store, rec),
    }
    if SysFlag(rec.sys_flag).inner_batch:
        doc["inner_batch"] = inner_batch(rec, body)
    return doc


def inner_batch(rec: MessageRecord, body: str = "text") -> dict:
    """An INNER_BATCH record's messages as the consumer's client unpacks them (`MessageDecoder.decodeMessage`
    into a list): inner message i at queue offset INNER_BASE + i; `error` when the body is no batch encoding
    (the client would throw), and `count_matches`: as many messages as INNER_NUM says."""
    from mqtool.formats.batchbody import BatchBodyError, decode_messages  # the message view's: not `messages`'
    from mqtool.store.batchcq import set_batch_size_if_needed

    base, num = set_batch_size_if_needed(rec.properties, rec.queue_offset)
    payload = rec.body
    if rec.compression:  # decodesBatch(decompressBody=true) unpacks the batch from the decompressed body
        try:
            payload = decompress(rec.body, rec.compression)
        except DecompressError as e:
            return {"base": base, "inner_num": num, "messages": [], "count_matches": False, "error": str(e)}
    try:
        inner = decode_messages(payload)
    except BatchBodyError as e:
        return {"base": base, "inner_num": num, "messages": [], "count_matches": False,
                "error": f"not a batch encoding (MessageDecoder.decodeMessages throws {e})"}
    messages = [{"queue_offset": base + i, "flag": m["flag"], "properties": m["properties"],
                 "body_length": len(m["body"]), "body": encode_body(m["body"], body)} for i, m in enumerate(inner)]
    return {"base": base, "inner_num": num, "messages": messages, "count_matches": len(inner) == num, "error": None}


def _cq_entry(store: Store, rec: MessageRecord) -> dict:
    """The unit at the record's queue offset in its ConsumeQueue (or BatchConsumeQueue), and whether it
    points back."""
    out = {"topic": rec.topic, "queue_id": rec.queue_id, "queue_offset": rec.queue_offset,
           "unit": None, "points_back": False}
    cq = store.consume_queue(rec.topic, rec.queue_id)
    if cq is None and (rec.topic, rec.queue_id) in store.batch_queue_ids:
        return _bcq_entry(store, rec, out)
    if cq is None:
        out["problem"] = "no ConsumeQueue directory for this topic and queue"
        return out
    unit = cq.unit(rec.queue_offset)
    if unit is None:
        out["problem"] = "the ConsumeQueue has no unit at this queue offset"
        return out
    out["unit"] = unit._asdict()
    out["points_back"] = unit.commitlog_offset == rec.physical_offset and unit.size == rec.total_size
    if not out["points_back"]:
        out["problem"] = f"the unit points to {unit.commitlog_offset} ({unit.size} bytes)"
    return out


def _bcq_entry(store: Store, rec: MessageRecord, out: dict) -> dict:
    """The BatchConsumeQueue unit whose base offset is the record's (`setBatchSizeIfNeeded`: INNER_BASE, or
    the record's QUEUEOFFSET), and whether it points back."""
    from mqtool.store.batchcq import set_batch_size_if_needed

    base, num = set_batch_size_if_needed(rec.properties, rec.queue_offset)
    out.update(queue_offset=base, batch=True)
    bcq = store.batch_consume_queue(rec.topic, rec.queue_id)
    unit = next((u for u in bcq.iter_units(Findings()) if u.queue_offset == base), None)
    if unit is None:
        out["problem"] = "the BatchConsumeQueue has no unit at this base offset"
        return out
    out["unit"] = {k: v for k, v in unit._asdict().items() if k not in ("file", "position")}
    out["points_back"] = (unit.commitlog_offset, unit.size, unit.batch_size) == (rec.physical_offset, rec.total_size,
                                                                                 num)
    if not out["points_back"]:
        out["problem"] = (f"the unit points to {unit.commitlog_offset} ({unit.size} bytes, batch of "
                          f"{unit.batch_size})")
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def explain(store: Store, rec: MessageRecord) -> list[str]:
    """One sentence per thing the broker's services will do with (or did to) this record."""
    # the `message` view's alone: `messages` does not import the schedule's and timer's rules
    from mqtool.rules.schedule import compute_deliver_timestamp, level_delay_ms, queue_id_2_delay_level
    from mqtool.rules.timer import dequeue_ms, roll_times, was_dequeued, was_rolled

    p = rec.properties
    out: list[str] = []
    real = f"{p.get(names.PROPERTY_REAL_TOPIC)}/{p.get(names.PROPERTY_REAL_QUEUE_ID)}"
    if rec.topic == names.RMQ_SYS_SCHEDULE_TOPIC:
        level = queue_id_2_delay_level(rec.queue_id)
        levels = store.config.delay_levels_ms()
        delay = level_delay_ms(level, levels)
        when = (f"never delivered: level {level} is not in messageDelayLevel ({len(levels)} levels)" if delay is None
                else f"deliver timestamp {compute_deliver_timestamp(level, rec.store_timestamp, levels)} "
                     f"(store time + {delay} ms)")
        out.append(f"delay-level message (level {level}, DELAY={p.get(names.PROPERTY_DELAY_TIME_LEVEL)}) "
                   f"waiting for {real}; {when}")
    elif rec.topic == names.TIMER_TOPIC:
        if names.PROPERTY_TIMER_DEL_UNIQKEY in p:
            out.append(f"timer cancel request for UNIQ_KEY {p[names.PROPERTY_TIMER_DEL_UNIQKEY]} "
                       f"in the slot of TIMER_OUT_MS={p.get(names.PROPERTY_TIMER_OUT_MS)}")
        else:
            out.append(f"timer message for {real}, TIMER_OUT_MS={p.get(names.PROPERTY_TIMER_OUT_MS)}"
                       + (f", rolled {roll_times(p)} time(s)" if was_rolled(p) else ""))
    elif rec.topic == names.RMQ_SYS_TRANS_HALF_TOPIC:
        out.append(f"half (prepared) message for {real}, producer group {p.get(names.PROPERTY_PRODUCER_GROUP)}, "
                   f"TRANSACTION_CHECK_TIMES={p.get(names.PROPERTY_TRANSACTION_CHECK_TIMES, 'absent')}")
        if names.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET in p:
            out.append(f"put-back copy of half queue offset {p[names.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET]} "
                       "(immunity)")
        if names.PROPERTY_DELAY_TIME_LEVEL in p:
            out.append(f"carries DELAY={p[names.PROPERTY_DELAY_TIME_LEVEL]}: loops between "
                       f"{names.RMQ_SYS_SCHEDULE_TOPIC} and the half topic "
                       "until its checks are spent (apache/rocketmq#1540)")
    elif rec.topic == names.RMQ_SYS_TRANS_OP_HALF_TOPIC:
        offsets = rec.body.decode("utf-8", "replace")
        out.append(f"op message: half queue offsets {offsets!r} are resolved (committed or rolled back)")
    elif rec.topic == names.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC:
        out.append(f"discarded half message of {real} (producer group {p.get(names.PROPERTY_PRODUCER_GROUP)}) after "
                   f"TRANSACTION_CHECK_TIMES={p.get(names.PROPERTY_TRANSACTION_CHECK_TIMES)}")
    if rec.transaction == "commit":
        out.append(f"committed transaction message; its half is at {rec.prepared_transaction_offset}")
    if rec.topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
        out.append(f"retry message of {p.get(names.PROPERTY_RETRY_TOPIC)}, reconsume times {rec.reconsume_times}")
    if rec.topic.startswith(names.DLQ_GROUP_TOPIC_PREFIX):
        origin = p.get(names.PROPERTY_DLQ_ORIGIN_TOPIC, p.get(names.PROPERTY_RETRY_TOPIC))
        out.append(f"dead-letter message (origin {origin})")
    if (rec.topic != names.RMQ_SYS_SCHEDULE_TOPIC and names.PROPERTY_DELAY_TIME_LEVEL in p
            and names.PROPERTY_REAL_TOPIC in p
            and rec.topic == p.get(names.PROPERTY_REAL_TOPIC)):
        out.append(f"delivered from delay level {p[names.PROPERTY_DELAY_TIME_LEVEL]} "
                   "(stale DELAY/REAL_TOPIC kept in the bytes)")
    if rec.topic != names.TIMER_TOPIC and was_dequeued(p):
        out.append(f"delivered by the timer service at {dequeue_ms(p)}")
    return out
