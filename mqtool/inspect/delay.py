"""The `delay` view: per delay level, where `ScheduleMessageService` stands (spec §4).

For level L (queue L-1 of `SCHEDULE_TOPIC_XXXX`): the offset stored in `config/delayOffset.json`
(absent = 0), the queue's min/max offsets, the offset the broker will really start from after
`correctDelayOffset` (the stored offset clamped into [min, max], only for levels present in the
table: `ScheduleMessageService.load`), the backlog from there, and the head unit's deliver
timestamp (its tagsCode, §4.3) and how overdue it is at `now_ms` (after `correctDeliverTimestamp`,
§4.5: a deliver time beyond now + delay is treated as now).

A level missing from `messageDelayLevel` has no delivery task (`rules.schedule.is_level_started`):
its backlog is `never_delivered`, it has no due time, and a warning says so.

The levels are the config's; the store's own units say what the broker had (`implied_level_delay_ms`:
a unit's tagsCode minus its record's store time). Where those differ, a finding says so, and without
a broker.conf (`store.delaylevels`: `delay_levels_in_effect`, `config_in_effect`) the data's levels are
used everywhere.
"""

from mqtool.formats.message import RecordError
from mqtool.formats.names import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from mqtool.inspect import JSON_VERSION
from mqtool.rules.schedule import (
    correct_delay_offset,
    correct_deliver_timestamp,
    delay_level_2_queue_id,
    is_level_started,
    level_delay_ms,
    queue_id_2_delay_level,
)
from mqtool.store.delaylevels import delay_levels_in_effect
from mqtool.store.findings import Finding, sort_findings
from mqtool.store.store import Store

HISTOGRAM_BUCKETS = 12


def delay_view(store: Store, now_ms: int) -> dict:
    """The `delay` document: one entry per configured level (and per stray queue or stored offset)."""
    delays, source, data_finding = delay_levels_in_effect(store)
    offsets = store.config_files.delay_offsets
    table = dict(offsets.offset_table) if offsets else {}
    findings: list[Finding] = []
    queue_levels = {queue_id_2_delay_level(qid) for t, qid in store.queue_ids if t == RMQ_SYS_SCHEDULE_TOPIC}
    levels = sorted(set(range(1, len(delays) + 1)) | set(table) | queue_levels)
    rows = [_level(store, level, delays, table, now_ms, findings) for level in levels]
    findings += [_level_finding(r, delays, table.get(r["level"])) for r in rows if not r["configured"]]
    findings += [f for f in store.findings if f.file.startswith("config/delayOffset")]
    findings += [data_finding] if data_finding is not None else []
    total_backlog = sum(r["backlog"] for r in rows)
    return {
        "version": JSON_VERSION,
        "view": "delay",
        "now_ms": now_ms,
        "offset_file": _offset_file(store, offsets),
        "delay_levels": {"source": source, "levels_ms": delays},
        "levels": rows,
        "totals": {
            "backlog": total_backlog,
            "overdue_levels": sum(1 for r in rows if (r["overdue_ms"] or 0) > 0),
            "corrections": sum(1 for r in rows if r["correction"]),
            "never_delivered": sum(r["never_delivered"] for r in rows),
            "never_levels": [r["level"] for r in rows if r["never_delivered"]],
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
        "data_version": None
        if dv is None
        else {"counter": dv.counter, "state_version": dv.state_version, "timestamp": dv.timestamp},
    }


def _level(
    store: Store, level: int, delays: list[int], table: dict[int, int], now_ms: int, findings: list[Finding]
) -> dict:
    qid = delay_level_2_queue_id(level)
    configured = is_level_started(level, delays)
    delay_ms = level_delay_ms(level, delays)
    stored = table.get(level)
    cq = store.consume_queue(RMQ_SYS_SCHEDULE_TOPIC, qid)
    row = {
        "level": level,
        "delay_ms": delay_ms,
        "queue_id": qid,
        "configured": configured,
        "offset": stored if stored is not None else 0,
        "offset_stored": stored is not None,
        "min_offset": None,
        "max_offset": None,
        "corrected_offset": None,
        "correction": None,
        "backlog": 0,
        "head_deliver_timestamp": None,
        "head_effective_deliver_timestamp": None,
        "overdue_ms": None,
        "head": None,
        "last_deliver_timestamp": None,
        "never_delivered": 0,
    }
    if cq is None or cq.max_offset == 0 and not cq.queue.files:
        # findOrCreateConsumeQueue creates an empty queue: min = max = 0
        lo = hi = 0
    else:
        lo, hi = cq.min_offset(store.commitlog.min_offset), cq.max_offset
        row["min_offset"], row["max_offset"] = lo, hi
    # correctDelayOffset walks delayLevelTable: a missing level keeps its stored offset
    corrected = correct_delay_offset(stored, lo, hi) if configured else stored
    start = corrected if corrected is not None else 0
    row["corrected_offset"] = start
    if stored is not None and corrected != stored:
        row["correction"] = {
            "from": stored,
            "to": corrected,
            "reason": f"stored offset {'below' if stored < lo else 'above'} the queue's [{lo}, {hi}]",
        }
        findings.append(
            Finding(
                "config/delayOffset.json",
                None,
                "delay.offset",
                "warning",
                f"level {level}: stored offset {stored} is outside [{lo}, {hi}]; "
                f"correctDelayOffset will start from {corrected}",
                RMQ_SYS_SCHEDULE_TOPIC,
                qid,
            )
        )
    elif start < lo:
        start = lo  # executeOnTimeUp resets an offset before the queue's first unit to it (a missing level's
        # units before the queue's min are gone: its waiting messages start there too)
    if cq is None or row["max_offset"] is None:
        return row
    row["backlog"] = max(0, hi - start)
    if not configured:
        row["never_delivered"] = row["backlog"]
    if row["backlog"] == 0:
        return row
    head = cq.unit(start)
    last = cq.unit(hi - 1)
    if last is not None:
        row["last_deliver_timestamp"] = last.tags_code
    if head is None:
        return row
    deliver = head.tags_code
    row["head_deliver_timestamp"] = deliver
    row["head"] = _head_record(store, head.commitlog_offset)
    if delay_ms is None:
        return row  # no task reads the queue: no due time (`never_delivered`)
    effective = correct_deliver_timestamp(now_ms, deliver, delay_ms)
    row["head_effective_deliver_timestamp"] = effective
    row["overdue_ms"] = now_ms - effective
    return row


def _level_finding(row: dict, delays: list[int], stored: int | None) -> Finding:
    """A level missing from messageDelayLevel: ScheduleMessageService.start gives it no task."""
    level, qid = row["level"], row["queue_id"]
    n = row["never_delivered"]
    first = max(row["corrected_offset"], row["min_offset"] or 0)
    held = (
        f"its {n} message(s) from queue offset {first} are never delivered while the level "
        "is missing (put it back in messageDelayLevel and restart the broker to deliver them)"
        if n
        else "nothing waits in it"
    )
    return Finding(
        "config/delayOffset.json" if stored is not None else f"consumequeue/{RMQ_SYS_SCHEDULE_TOPIC}/{qid}",
        None,
        "delay.levels",
        "warning",
        f"level {level} is not in messageDelayLevel ({len(delays)} levels): ScheduleMessageService "
        f"starts no delivery task for it; {held}",
        RMQ_SYS_SCHEDULE_TOPIC,
        qid,
    )


def _head_record(store: Store, offset: int) -> dict:
    try:
        rec = store.commitlog.read(offset)
    except RecordError as e:
        return {"physical_offset": offset, "error": e.reason}
    p = rec.properties
    return {
        "physical_offset": offset,
        "uniq_key": rec.uniq_key,
        "real_topic": p.get(PROPERTY_REAL_TOPIC),
        "real_queue_id": (
            int(p[PROPERTY_REAL_QUEUE_ID]) if p.get(PROPERTY_REAL_QUEUE_ID, "").lstrip("-").isdigit() else None
        ),
        "delay_property": p.get(PROPERTY_DELAY_TIME_LEVEL),
        "store_timestamp": rec.store_timestamp,
        "keys": rec.keys,
    }


def _histogram(store: Store, rows: list[dict], now_ms: int) -> list[dict]:
    """Pending delay messages by deliver time (tagsCode), in up to 12 equal buckets (never-delivered levels out)."""
    times = []
    for r in rows:
        if r["backlog"] and r["max_offset"] is not None and r["configured"]:
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
    return [
        {"start_ms": start + i * width, "end_ms": start + (i + 1) * width, "count": c} for i, c in enumerate(counts)
    ]


_NICE_WIDTHS = [
    1000,
    5000,
    10_000,
    30_000,
    60_000,
    300_000,
    600_000,
    1_800_000,
    3_600_000,
    6 * 3_600_000,
    12 * 3_600_000,
    86_400_000,
    7 * 86_400_000,
    30 * 86_400_000,
    365 * 86_400_000,
]
