"""The `queue` view: one ConsumeQueue's units resolved against the CommitLog (spec §3).

Like Kafka's index-against-log check: each unit must point to a record of the same topic, queue
id and queue offset, with the unit's size; the tagsCode must be the TAGS hash (for
`SCHEDULE_TOPIC_XXXX`: the deliver timestamp, store time + the level's delay). A BatchConsumeQueue
(spec §13) is read the same way; its lines add the unit's base offset, batch size, store time and
compacted offset, and the record's INNER_BASE / INNER_NUM must give that base and batch size.
"""

from collections.abc import Iterable, Iterator

from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC
from mqtool.inspect.records import empty_record_dict, record_dict
from mqtool.rules.dispatch import tags_string_2_tags_code
from mqtool.rules.schedule import compute_deliver_timestamp, is_level_started, queue_id_2_delay_level
from mqtool.store.batchcq import BcqUnit, check_unit_against_record
from mqtool.store.consumequeue import CqUnit
from mqtool.store.errors import StoreError
from mqtool.store.findings import Findings
from mqtool.store.store import Store


def expected_tags_code(store: Store, rec: MessageRecord) -> int | None:
    """What the broker's dispatch writes as tagsCode for this record (None: not predictable)."""
    if rec.topic == RMQ_SYS_SCHEDULE_TOPIC:
        level, levels = queue_id_2_delay_level(rec.queue_id), store.config.delay_levels_ms()
        if not is_level_started(level, levels):
            return None
        return compute_deliver_timestamp(level, rec.store_timestamp, levels)
    return tags_string_2_tags_code(rec.tags)


def unit_problems(store: Store, topic: str, queue_id: int, unit: CqUnit,
                  rec: MessageRecord | None, error: str | None) -> list[str]:
    """Why a unit does not match the record it points to (empty when it does)."""
    if rec is None:
        return [f"no record at CommitLog offset {unit.commitlog_offset}: {error}"]
    out = []
    if rec.topic != topic:
        out.append(f"record topic {rec.topic!r} != {topic!r}")
    if rec.queue_id != queue_id:
        out.append(f"record queue id {rec.queue_id} != {queue_id}")
    if rec.queue_offset != unit.queue_offset:
        out.append(f"record queue offset {rec.queue_offset} != unit index {unit.queue_offset}")
    if rec.total_size != unit.size:
        out.append(f"record size {rec.total_size} != unit size {unit.size}")
    want = expected_tags_code(store, rec)
    if not out and want is not None and want != unit.tags_code:
        out.append(f"tagsCode {unit.tags_code} != expected {want}")
    return out


def iter_queue(store: Store, topic: str, queue_id: int, start: int = 0, limit: int | None = None,
               body: str = "text", decompress_body: bool = False) -> Iterator[dict]:
    """One JSON Lines record per unit from `start`: the message keys (null when its record is missing),
    then `cq_*` fields of the unit, `match` and `problems`. StoreError when the queue does not exist."""
    cq = store.consume_queue(topic, queue_id)
    if cq is None:
        if store.batch_consume_queue(topic, queue_id) is not None:
            yield from _iter_batch_queue(store, topic, queue_id, start, limit, body, decompress_body)
            return
        known = sorted({t for t, _ in [*store.queue_ids, *store.batch_queue_ids]})
        hint = f" (topics: {', '.join(known)})" if known else ""
        raise StoreError(f"no ConsumeQueue {topic}/{queue_id}{hint}", store.root / "consumequeue")
    yield from _iter_units(store, topic, queue_id, cq.iter_units(start), limit, body, decompress_body)


def _iter_units(store: Store, topic: str, queue_id: int, units: Iterable[CqUnit], limit: int | None,
                body: str, decompress_body: bool) -> Iterator[dict]:
    """The `queue` lines of ConsumeQueue units (a file-based queue's or a RocksDB queue's: same fields)."""
    n = 0
    for unit in units:
        if limit is not None and n >= limit:
            break
        rec, error = _record(store, unit.commitlog_offset)
        problems = unit_problems(store, topic, queue_id, unit, rec, error)
        yield _queue_line(rec, body, decompress_body, topic, queue_id, unit, problems)
        n += 1


def _queue_line(rec: MessageRecord | None, body: str, decompress_body: bool, topic: str, queue_id: int,
                unit: CqUnit | BcqUnit, problems: list[str], extra: dict | None = None) -> dict:
    """One `queue` line: the record's fields, then the unit's (`extra`: a BatchCQ unit's own), then the verdict."""
    d = record_dict(rec, body, decompress_body) if rec else empty_record_dict()
    d.update({
        "cq_topic": topic,
        "cq_queue_id": queue_id,
        "cq_queue_offset": unit.queue_offset,
        "cq_commitlog_offset": unit.commitlog_offset,
        "cq_size": unit.size,
        "cq_tags_code": unit.tags_code,
        **(extra or {}),
        "match": not problems,
        "problems": problems,
    })
    return d


def _record(store: Store, offset: int) -> tuple[MessageRecord | None, str | None]:
    """(the record at a CommitLog offset, None) or (None, why there is none)."""
    cl = store.commitlog
    try:
        if offset < cl.min_offset:
            raise RecordError(f"before the CommitLog's first file ({cl.min_offset}): deleted")
        return cl.read(offset), None
    except RecordError as e:
        return None, e.reason


def batch_unit_problems(store: Store, topic: str, queue_id: int, unit: BcqUnit, rec: MessageRecord | None,
                        error: str | None) -> list[str]:
    """Why a BatchCQ unit does not match its record: topic, queue, size, INNER_BASE / INNER_NUM, tagsCode."""
    if rec is None:
        return [f"no record at CommitLog offset {unit.commitlog_offset}: {error}"]
    found = Findings()
    check_unit_against_record(unit, topic, queue_id, rec, found)
    out = [f.message for f in found]
    want = expected_tags_code(store, rec)
    if not out and want is not None and want != unit.tags_code:
        out.append(f"tagsCode {unit.tags_code} != expected {want}")
    return out


def _iter_batch_queue(store: Store, topic: str, queue_id: int, start: int, limit: int | None, body: str,
                      decompress_body: bool) -> Iterator[dict]:
    """The `queue` lines of a BatchConsumeQueue from the unit holding logical offset `start`."""
    bcq = store.batch_consume_queue(topic, queue_id)
    n = 0
    for unit in bcq.iter_units(Findings()):
        if unit.next_offset <= start:
            continue
        if limit is not None and n >= limit:
            break
        rec, error = _record(store, unit.commitlog_offset)
        problems = batch_unit_problems(store, topic, queue_id, unit, rec, error)
        yield _queue_line(rec, body, decompress_body, topic, queue_id, unit, problems, {
            "cq_base_offset": unit.queue_offset,
            "cq_batch_size": unit.batch_size,
            "cq_store_time": unit.store_time,
            "cq_compacted_offset": unit.compacted_offset,
        })
        n += 1


def queue_summary(store: Store, topic: str, queue_id: int) -> dict:
    """min/max offsets of a queue, for the text header."""
    cq = store.consume_queue(topic, queue_id)
    if cq is None:
        bcq = store.batch_consume_queue(topic, queue_id)
        if bcq is None:
            return {}
        lo, hi = bcq.offsets(Findings())
        return {"min_offset": lo, "max_offset": hi, "files": len(bcq.queue.files), "batch": True}
    rocksdb = {"rocksdb": True} if getattr(cq, "rocksdb", False) else {}  # a RocksDB consume queue (§14)
    return {"min_offset": cq.min_offset(store.commitlog.min_offset), "max_offset": cq.max_offset,
            "files": len(cq.queue.files), **rocksdb}
