"""The `delay` view: per delay level, where `ScheduleMessageService` stands (spec §4).

For level L (queue L-1 of `SCHEDULE_TOPIC_XXXX`): the offset stored in `config/delayOffset.json`
(absent = 0), the queue's min/max offsets, the offset the broker will really start from after
`correctDelayOffset` (the stored offset clamped into [min, max], only for levels present in the
table: `ScheduleMessageService.load`), the backlog from there, and the head unit's deliver
timestamp (its tagsCode, §4.3) and how overdue it is at `now_ms` (after `correctDeliverTimestamp`,
§4.5: a deliver time beyond now + delay is treated as now).
"""

from mqtool.formats.message import RecordError
from mqtool.formats.names import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from mqtool.inspect import JSON_VERSION
from mqtool.rules.schedule import correct_delay_offset, correct_deliver_timestamp
from mqtool.store.findings import Finding, sort_findings
from mqtool.store.store import Store

HISTOGRAM_BUCKETS = 12


def delay_view(store: Store, now_ms: int) -> dict:
    """The `delay` document: one entry per configured level (and per stray queue or stored offset)."""
    delays = store.config.delay_levels_ms()
    offsets = store.delay_offsets
    table = dict(offsets.offset_table) if offsets else {}
    findings: list[Finding] = []
    queue_levels = {qid + 1 for t, qid in store.queue_ids if t == RMQ_SYS_SCHEDULE_TOPIC}
    levels = sorted(set(range(1, len(delays) + 1)) | set(table) | queue_levels)
    rows = [_level(store, level, delays, table, now_ms, findings) for level in levels]
    findings += [f for f in store.findings if f.file.startswith("config/delayOffset")]
    total_backlog = sum(r["backlog"] for r in rows)
    return {
        "version": JSON_VERSION,
        "view": "delay",
        "now_ms": now_ms,
        "offset_file": _offset_file(store, offsets),
        "levels": rows,
        "totals": {
            "backlog": total_backlog,
            "overdue_levels": sum(1 for r in rows if (r["overdue_ms"] or 0) > 0),
            "corrections": sum(1 for r in rows if r["correction"]),
        },
        "histogram": _histogram(store, rows, now_ms),
        "findings": [f.as_dict() for f in sort_findings(findings)],
    }


def _offset_file(store: Store, offsets) -> dict:
    cfg = store.root / "config"
    dv = offsets.data_version if offsets else None
    return {
        "present": (cfg / "delayOffset.json").is_file(),
        "bak_present": (cfg / "delayOffset.json.bak").is_file(),
        "data_version": None if dv is None else {"counter": dv.counter, "state_version": dv.state_version,
                                                 "timestamp": dv.timestamp},
    }


def _level(store: Store, level: int, delays: list[int], table: dict[int, int], now_ms: int,
           findings: list[Finding]) -> dict:
    qid = level - 1
    configured = level <= len(delays)
    delay_ms = delays[level - 1] if configured else None
    stored = table.get(level)
    cq = store.consume_queue(RMQ_SYS_SCHEDULE_TOPIC, qid)
    row = {
        "level": level, "delay_ms": delay_ms, "queue_id": qid, "configured": configured,
        "offset": stored if stored is not None else 0, "offset_stored": stored is not None,
        "min_offset": None, "max_offset": None, "corrected_offset": None, "correction": None,
        "backlog": 0, "head_deliver_timestamp": None, "head_effective_deliver_timestamp": None,
        "overdue_ms": None, "head": None, "last_deliver_timestamp": None,
    }
    if not configured:
        findings.append(Finding("config/delayOffset.json" if stored is not None else
                                f"consumequeue/{RMQ_SYS_SCHEDULE_TOPIC}/{qid}", None, "delay.levels", "warning",
                                f"level {level} is not in messageDelayLevel ({len(delays)} levels): the broker "
                                "never delivers it", RMQ_SYS_SCHEDULE_TOPIC, qid))
    if cq is None or cq.max_offset == 0 and not cq.queue.files:
        # findOrCreateConsumeQueue creates an empty queue: min = max = 0
        lo = hi = 0
    else:
        lo, hi = cq.min_offset(store.commitlog.min_offset), cq.max_offset
        row["min_offset"], row["max_offset"] = lo, hi
    corrected = correct_delay_offset(stored, lo, hi)
    start = corrected if corrected is not None else 0
    row["corrected_offset"] = start
    if stored is not None and corrected != stored:
        row["correction"] = {"from": stored, "to": corrected,
                             "reason": f"stored offset {'below' if stored < lo else 'above'} the queue's "
                                       f"[{lo}, {hi}]"}
        findings.append(Finding("config/delayOffset.json", None, "delay.offset", "warning",
                                f"level {level}: stored offset {stored} is outside [{lo}, {hi}]; "
                                f"correctDelayOffset will start from {corrected}", RMQ_SYS_SCHEDULE_TOPIC, qid))
    elif stored is None and start < lo:
        start = lo  # executeOnTimeUp resets an offset before the queue's first unit to it
    if cq is None or row["max_offset"] is None:
        return row
    row["backlog"] = max(0, hi - start)
    if row["backlog"] == 0:
        return row
    head = cq.unit(start)
    last = cq.unit(hi - 1)
    if last is not None:
        row["last_deliver_timestamp"] = last.tags_code
    if head is None:
        return row
    deliver = head.tags_code
    effective = deliver if delay_ms is None else correct_deliver_timestamp(now_ms, deliver, delay_ms)
    row["head_deliver_timestamp"] = deliver
    row["head_effective_deliver_timestamp"] = effective
    row["overdue_ms"] = now_ms - effective
    row["head"] = _head_record(store, head.commitlog_offset)
    return row


def _head_record(store: Store, offset: int) -> dict:
    try:
        rec = store.commitlog.read(offset)
    except RecordError as e:
        return {"physical_offset": offset, "error": e.reason}
    p = rec.properties
    return {"physical_offset": offset, "uniq_key": rec.uniq_key, "real_topic": p.get(PROPERTY_REAL_TOPIC),
            "real_queue_id": (int(p[PROPERTY_REAL_QUEUE_ID])
                              if p.get(PROPERTY_REAL_QUEUE_ID, "").lstrip("-").isdigit() else None),
            "delay_property": p.get(PROPERTY_DELAY_TIME_LEVEL), "store_timestamp": rec.store_timestamp,
            "keys": rec.keys}


def _histogram(store: Store, rows: list[dict], now_ms: int) -> list[dict]:
    """Pending delay messages by deliver time (tagsCode), in up to 12 equal buckets."""
    times = []
    for r in rows:
        if r["backlog"] and r["max_offset"] is not None:
            cq = store.consume_queue(RMQ_SYS_SCHEDULE_TOPIC, r["queue_id"])
            times += [u.tags_code for u in cq.iter_units(r["corrected_offset"])]
    return time_histogram(times)


def time_histogram(times: list[int], buckets: int = HISTOGRAM_BUCKETS) -> list[dict]:
    """`{start_ms, end_ms, count}` buckets of a "nice" width covering `times` (empty list: none)."""
    if not times:
        return []
    lo, hi = min(times), max(times)
    width = next((w for w in _NICE_WIDTHS if (hi - lo) // w < buckets), _NICE_WIDTHS[-1])
    start = lo - lo % width
    n = (hi - start) // width + 1
    counts = [0] * n
    for t in times:
        counts[(t - start) // width] += 1
    return [{"start_ms": start + i * width, "end_ms": start + (i + 1) * width, "count": c}
            for i, c in enumerate(counts)]


_NICE_WIDTHS = [1000, 5000, 10_000, 30_000, 60_000, 300_000, 600_000, 1_800_000, 3_600_000, 6 * 3_600_000,
                12 * 3_600_000, 86_400_000, 7 * 86_400_000, 30 * 86_400_000, 365 * 86_400_000]
