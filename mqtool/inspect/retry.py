"""The `retry` view: per consumer group, what waits to be retried and what is dead-lettered (spec §17, §4.10).

From what is stored, without a scenario. A failed message sent back by a push consumer
(`consumerSendMsgBack`) is parked in `SCHEDULE_TOPIC_XXXX` queue level - 1 with REAL_TOPIC
`%RETRY%<group>` until the schedule service delivers it into `%RETRY%<group>`; after the group's
max reconsume times it goes to `%DLQ%<group>` instead. So, per group:

- `backlog`: the schedule units not yet delivered (from the level's offset in delayOffset.json,
  corrected as `correctDelayOffset` does) whose record names `%RETRY%<group>`, per delay level,
  with the next due time (the unit's tagsCode, §4.3); a level missing from messageDelayLevel (`delay_ms`
  null) has no delivery task (`rules.schedule.is_level_started`): no due time, never delivered;
- `retry_queues`: the `%RETRY%<group>` queues and how far the group has consumed them
  (consumerOffset.json), i.e. retries delivered but not yet consumed;
- `dlq`: the `%DLQ%<group>` messages: origin topic (RETRY_TOPIC), ORIGIN_MESSAGE_ID, reconsume times;
- `settings`: the group's `SubscriptionGroupConfig` from subscriptionGroup.json (or RocksDB): retryQueueNums,
  retryMaxTimes (after which `consumerSendMsgBack` dead-letters), broadcast, orderly, sys flag, ...;
  null when the group has no entry (the broker then applies the defaults, 1 queue and 16 times).
"""

from __future__ import annotations

from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from mqtool.inspect import JSON_VERSION
from mqtool.rules.retry import get_dlq_topic, get_retry_topic
from mqtool.rules.schedule import correct_delay_offset, delay_level_2_queue_id, level_delay_ms, queue_id_2_delay_level
from mqtool.store.findings import Findings, sort_findings
from mqtool.store.store import Store

DLQ_SHOWN = 100  # the newest DLQ messages listed per group (all are counted)


def retry_view(store: Store, now_ms: int, group: str | None = None) -> dict:
    """The `retry` document: every group with a retry backlog, a retry topic or a DLQ (or just `group`)."""
    findings = Findings()
    backlog = _schedule_backlog(store, findings)
    groups = _groups(store, backlog)
    if group is not None:
        groups = [g for g in groups if g == group] or [group]
    rows = [_group(store, g, backlog.get(g, {}), now_ms) for g in groups]
    return {
        "version": JSON_VERSION,
        "view": "retry",
        "now_ms": now_ms,
        "group": group,
        "groups": rows,
        "totals": {
            "groups": len(rows),
            "retry_backlog": sum(r["backlog"]["count"] for r in rows),
            "retry_lag": sum(q["lag"] or 0 for r in rows for q in r["retry_queues"]),
            "dlq_messages": sum(r["dlq"]["count"] for r in rows),
        },
        "findings": [f.as_dict() for f in sort_findings(findings)],
    }


def _read(store: Store, offset: int) -> MessageRecord | None:
    try:
        return store.commitlog.read(offset)
    except RecordError:
        return None


def _queue_range(store: Store, topic: str, qid: int) -> tuple[int, int] | None:
    cq = store.consume_queue(topic, qid)
    if cq is None or cq.max_offset == 0 and not cq.queue.files:
        return None
    return cq.min_offset(store.commitlog.min_offset), cq.max_offset


def _schedule_backlog(store: Store, findings: Findings) -> dict[str, dict[int, list[tuple[int, MessageRecord]]]]:
    """group -> level -> [(tagsCode, record)] of the undelivered schedule units that are retries."""
    table = dict(store.config_files.delay_offsets.offset_table) if store.config_files.delay_offsets else {}
    out: dict[str, dict[int, list[tuple[int, MessageRecord]]]] = {}
    for topic, qid in sorted(store.queue_ids):
        if topic != RMQ_SYS_SCHEDULE_TOPIC:
            continue
        rng = _queue_range(store, topic, qid)
        if rng is None:
            continue
        lo, hi = rng
        level = queue_id_2_delay_level(qid)
        start = max(lo, correct_delay_offset(table.get(level), lo, hi) or 0)
        for unit in store.consume_queue(topic, qid).iter_units(start):
            rec = _read(store, unit.commitlog_offset)
            if rec is None:
                findings.add(f"consumequeue/{topic}/{qid}", None, "retry.unit", "warning",
                             f"unit at CommitLog offset {unit.commitlog_offset} has no readable record", topic, qid)
                continue
            real = rec.properties.get(PROPERTY_REAL_TOPIC) or ""
            if real.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group = real[len(RETRY_GROUP_TOPIC_PREFIX):]
                out.setdefault(group, {}).setdefault(level, []).append((unit.tags_code, rec))
    return out


def _groups(store: Store, backlog: dict) -> list[str]:
    """Groups named by a retry or DLQ topic, a retry backlog, or a consumer offset on a retry topic."""
    names = set(backlog)
    for topic, _qid in store.queue_ids:
        for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
            if topic.startswith(prefix):
                names.add(topic[len(prefix):])
    co = store.config_files.consumer_offsets
    for key in (co.offset_table if co is not None else {}):
        topic, _, group = key.rpartition("@")
        if topic == get_retry_topic(group):
            names.add(group)
    return sorted(names)


def _record_summary(rec: MessageRecord) -> dict:
    p = rec.properties
    return {"physical_offset": rec.physical_offset, "queue_id": rec.queue_id, "queue_offset": rec.queue_offset,
            "store_timestamp": rec.store_timestamp, "born_timestamp": rec.born_timestamp, "uniq_key": rec.uniq_key,
            "keys": rec.keys, "tags": p.get(PROPERTY_TAGS), "origin_topic": p.get(PROPERTY_RETRY_TOPIC),
            "origin_message_id": p.get(PROPERTY_ORIGIN_MESSAGE_ID), "reconsume_times": rec.reconsume_times}


def _group(store: Store, group: str, levels: dict[int, list[tuple[int, MessageRecord]]], now_ms: int) -> dict:
    delays = store.config.delay_levels_ms()
    rows = []
    for level in sorted(levels):
        units = levels[level]
        due, head = min(units, key=lambda u: (u[0], u[1].physical_offset))
        row = {"level": level, "delay_ms": level_delay_ms(level, delays),
               "queue_id": delay_level_2_queue_id(level), "count": len(units), "next_due_ms": due,
               "last_due_ms": max(u[0] for u in units), "overdue_ms": max(0, now_ms - due),
               "head": _record_summary(head)}
        if row["delay_ms"] is None:  # a level missing from messageDelayLevel: no task delivers it, no due time
            row.update(next_due_ms=None, last_due_ms=None, overdue_ms=None)
        real_qid = head.properties.get(PROPERTY_REAL_QUEUE_ID)
        row["head"]["real_queue_id"] = int(real_qid) if (real_qid or "").isdigit() else None
        rows.append(row)
    return {
        "group": group,
        "retry_topic": get_retry_topic(group),
        "dlq_topic": get_dlq_topic(group),
        "backlog": {"count": sum(r["count"] for r in rows),
                    "next_due_ms": min((r["next_due_ms"] for r in rows if r["next_due_ms"] is not None), default=None),
                    "levels": rows},
        "retry_queues": _retry_queues(store, group),
        "dlq": _dlq(store, group),
        "settings": _settings(store, group),
    }


def _settings(store: Store, group: str) -> dict | None:
    """The group's entry in subscriptionGroup.json, in RocketMQ's names' snake_case; None without one."""
    sg = store.config_files.subscription_groups
    g = None if sg is None else sg.subscription_group_table.get(group)
    if g is None:
        return None
    policy = g.group_retry_policy
    return {"retry_queue_nums": g.retry_queue_nums, "retry_max_times": g.retry_max_times,
            "consume_enable": g.consume_enable, "consume_broadcast_enable": g.consume_broadcast_enable,
            "consume_message_orderly": g.consume_message_orderly, "consume_from_min_enable": g.consume_from_min_enable,
            "group_sys_flag": g.group_sys_flag, "broker_id": g.broker_id,
            "which_broker_when_consume_slowly": g.which_broker_when_consume_slowly,
            "consume_timeout_minute": g.consume_timeout_minute,
            "group_retry_policy": None if policy is None else policy.type}


def _topic_queues(store: Store, topic: str) -> list[int]:
    return sorted(q for t, q in store.queue_ids if t == topic)


def _retry_queues(store: Store, group: str) -> list[dict]:
    topic = get_retry_topic(group)
    co = store.config_files.consumer_offsets
    committed = (co.offset_table if co is not None else {}).get(f"{topic}@{group}", {})
    out = []
    for qid in sorted(set(_topic_queues(store, topic)) | set(committed)):
        lo, hi = _queue_range(store, topic, qid) or (None, None)
        off = committed.get(qid)
        lag = None if hi is None else max(0, hi - max(off if off is not None else 0, lo or 0))
        out.append({"queue_id": qid, "min_offset": lo, "max_offset": hi, "consumer_offset": off, "lag": lag})
    return out


def _dlq(store: Store, group: str) -> dict:
    topic = get_dlq_topic(group)
    queues, messages, count = [], [], 0
    for qid in _topic_queues(store, topic):
        rng = _queue_range(store, topic, qid)
        if rng is None:
            continue
        lo, hi = rng
        queues.append({"queue_id": qid, "min_offset": lo, "max_offset": hi})
        count += hi - lo
        for unit in store.consume_queue(topic, qid).iter_units(max(lo, hi - DLQ_SHOWN)):
            rec = _read(store, unit.commitlog_offset)
            if rec is not None:
                messages.append(_record_summary(rec))
    messages.sort(key=lambda m: m["physical_offset"])
    return {"count": count, "queues": queues, "messages": messages[-DLQ_SHOWN:]}
