"""The `consumers` view: how far every consumer group is behind, offline (mqadmin's consumerProgress, spec §5).

The broker answers `mqadmin consumerProgress` with `AdminBrokerProcessor.getConsumeStats`; this view gives
the same numbers from what is stored (`rules/consumer.py`):

- groups and topics: the keys of the offset table (consumerOffset.json, or the RocksDB config of a 5.2+
  store when that copy is newer, `Store.config_files.consumer_offsets`), as `whichTopicByConsumer`; the broker's own
  groups (`CID_RMQ_SYS_...`: transaction check, POP revive) are shown and flagged `system`;
- queues: 0 .. readQueueNums - 1 of the topic's entry in topics.json, as the broker iterates them; a topic
  without one (no topics.json, or not in it: the broker would skip it, a finding says so) shows the queues
  the group committed or the store holds;
- per queue: `max_offset` (`getMaxOffsetInQueue`), `committed_offset` (`queryOffset`; null when the group
  has none, which the broker counts as 0) and `lag` = max - committed (`computeTotalDiff`'s term, so a
  committed offset past the queue's end gives a negative lag and a finding); `min_offset` and `expired`
  (offsets the broker deleted before the group consumed them, counted in the lag as mqadmin does);
  `last_consumed_ms` (mqadmin's "LastTime": the store time at committed - 1) and the oldest unconsumed
  message's store time (at the first offset the group will still get) and its age at `now_ms`
  (`queryConsumeTimeSpan`'s delay, `ConsumerLagCalculator`'s earliest unconsumed timestamp).

Queues are read through `Store.consume_queue` (a ConsumeQueue or a RocksDB consume queue) or, for a
`queue.type=BatchCQ` topic, the BatchConsumeQueue, whose offsets count messages, not batches.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np

from mqtool.errors import MqtoolError
from mqtool.formats.message import RecordError
from mqtool.inspect import JSON_VERSION
from mqtool.rules.consumer import (
    compute_total_diff,
    consumer_groups,
    get_consume_stats_queue,
    is_sys_consumer_group,
    query_consumer_offset,
    which_topic_by_consumer,
)
from mqtool.rules.rocksdb import is_system_topic
from mqtool.store.batchcq import BatchConsumeQueue
from mqtool.store.findings import Findings, sort_findings
from mqtool.store.fleet import Fleet
from mqtool.store.store import Store

CHECK = "consumers"
CONFIG_FILES = ("config/consumerOffset.json", "config/consumerOffsets", "config/topics.json", "config/topics")


@dataclass
class _Queue:
    """One queue's offsets and the store times the view asks for, whatever backs the queue."""

    store: Store
    topic: str
    queue_id: int
    findings: Findings
    min_offset: int = 0
    max_offset: int = 0
    batch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # BatchCQ: (base offset, batch size, store time)

    @classmethod
    def open(cls, store: Store, topic: str, queue_id: int, findings: Findings) -> _Queue:
        q = cls(store, topic, queue_id, findings)
        if (topic, queue_id) in store.batch_queue_ids:
            q.batch = _batch_columns(store.batch_consume_queue(topic, queue_id), findings)
            base, num, _times = q.batch
            if len(base):
                q.min_offset, q.max_offset = int(base[0]), int(base[-1] + num[-1])
            return q
        cq = store.consume_queue(topic, queue_id)
        if cq is not None:
            q.max_offset = cq.max_offset
            q.min_offset = min(cq.min_offset(store.commitlog.min_offset), q.max_offset)
        return q

    def store_time(self, offset: int) -> int | None:
        """`getMessageStoreTimeStamp`: the store time of the message at a queue offset, None when it is gone."""
        if not self.min_offset <= offset < self.max_offset:
            return None
        if self.batch is not None:  # the batch holding the offset: the last base at or before it
            base, _num, times = self.batch
            return int(times[np.searchsorted(base, offset, side="right") - 1])
        unit = self.store.consume_queue(self.topic, self.queue_id).unit(offset)
        if unit is None:
            return None
        try:
            return self.store.commitlog.read(unit.commitlog_offset).store_timestamp
        except RecordError as e:
            self.findings.add(
                f"consumequeue/{self.topic}/{self.queue_id}",
                None,
                CHECK,
                "warning",
                f"queue offset {offset}: no readable record at CommitLog offset {unit.commitlog_offset} ({e})",
                self.topic,
                self.queue_id,
            )
            return None


def _batch_columns(bcq: BatchConsumeQueue, findings: Findings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A BatchConsumeQueue's units as columns: msgBaseOffset, batch size and store time (no object per unit)."""
    cols: list[list[np.ndarray]] = [[], [], []]
    for _f, _first, units in bcq.scan_columns(findings):
        for col, name in zip(cols, ("msg_base_offset", "batch_size", "store_time"), strict=True):
            col.append(units[name].astype(np.int64))
        del units
    return tuple(np.concatenate(c) if c else np.zeros(0, np.int64) for c in cols)


def consumers_view(store: Store, now_ms: int, group: str | None = None, topic: str | None = None) -> dict:
    """The `consumers` document: per group, topic and queue the committed and max offset and the lag."""
    findings = Findings()
    co = store.config_files.consumer_offsets
    table = co.offset_table if co is not None else {}
    names = sorted(consumer_groups(table))
    if group is not None:
        names = [group]
    queues: dict[tuple[str, int], _Queue] = {}
    rows: list[dict] = []
    groups = []
    for g in sorted(names, key=lambda n: (is_sys_consumer_group(n), n)):
        topics = sorted(t for t in which_topic_by_consumer(table, g) if topic in (None, t))
        if not topics and topic is not None and group is None:
            continue  # --topic: only the groups consuming it
        group_rows = [
            _row(store, table, g, t, qid, now_ms, queues, findings)
            for t in topics
            for qid in _queue_ids(store, table, g, t, findings)
        ]
        groups.append(_group(g, topics, group_rows, now_ms))
        rows += group_rows
    return {
        **_head(now_ms, group, topic),
        "offsets_source": store.config_files.consumer_offsets_source,
        "groups": groups,
        "queues": rows,
        "totals": _totals(groups, len(rows)),
        "findings": [f.as_dict() for f in sort_findings(findings + _config_findings(store))],
    }


def _head(now_ms: int, group: str | None, topic: str | None) -> dict:
    """The keys a `consumers` document of a store and of a fleet both begin with."""
    return {"version": JSON_VERSION, "view": "consumers", "now_ms": now_ms, "group": group, "topic": topic}


def _totals(groups: list[dict], queues: int) -> dict:
    """The lag totals over groups: user groups counted, system groups (`isSysConsumerGroup`) apart."""
    user = [g for g in groups if not g["system"]]
    return {
        "groups": len(user),
        "system_groups": len(groups) - len(user),
        "queues": queues,
        "lag": sum(g["lag"] for g in user),
        "system_lag": sum(g["lag"] for g in groups if g["system"]),
        "expired": sum(g["expired"] for g in user),
    }


def _config_findings(store: Store) -> list:
    """What reading the offset and topic tables found (a torn file read from its .bak, an unusable copy)."""
    return [f for f in store.findings if f.file.startswith(CONFIG_FILES)]


def _queue_ids(store: Store, table: dict, group: str, topic: str, findings: Findings) -> list[int]:
    """The queues `getConsumeStats` reports: 0 .. readQueueNums - 1 of the topic's config; without one,
    the queues the group committed or the store holds."""
    topics = store.config_files.topics
    config = topics.topic_config_table.get(topic) if topics is not None else None
    if config is not None:
        return list(range(config.read_queue_nums))
    if topics is not None:
        findings.add(
            store.config_files.topics_file or "config/topics.json",
            None,
            CHECK,
            "info",
            f"{topic} (consumed by {group}) is not in the topic table: its queues are the ones committed "
            "or stored (the broker's consumerProgress skips a topic it has no config for)",
            topic,
        )
    committed = table.get(f"{topic}@{group}", {})
    held = {q for t, q in (*store.queue_ids, *store.batch_queue_ids) if t == topic}
    return sorted(set(committed) | held)


def _row(
    store: Store,
    table: dict,
    group: str,
    topic: str,
    qid: int,
    now_ms: int,
    queues: dict[tuple[str, int], _Queue],
    findings: Findings,
) -> dict:
    q = queues.get((topic, qid))
    if q is None:
        q = queues[(topic, qid)] = _Queue.open(store, topic, qid, findings)
    committed = query_consumer_offset(table, group, topic, qid)
    stats = get_consume_stats_queue(q.max_offset, committed)
    if stats.diff < 0:
        findings.add(
            f"consumequeue/{topic}/{qid}",
            None,
            CHECK,
            "warning",
            f"{group} committed offset {committed} is past the queue's max offset {q.max_offset} "
            "(queue units lost or rebuilt shorter: the broker corrects the offset on the next pull)",
            topic,
            qid,
        )
    start = max(stats.consumer_offset, q.min_offset)
    oldest = q.store_time(start) if start < stats.broker_offset else None
    return {
        "group": group,
        "topic": topic,
        "queue_id": qid,
        "system": is_sys_consumer_group(group) or is_system_topic(topic),
        "committed_offset": None if committed < 0 else committed,
        "min_offset": q.min_offset,
        "max_offset": stats.broker_offset,
        "lag": stats.diff,
        "expired": max(0, min(q.min_offset, stats.broker_offset) - stats.consumer_offset),
        "last_consumed_ms": q.store_time(stats.consumer_offset - 1),
        "oldest_unconsumed_ms": oldest,
        "age_ms": None if oldest is None else now_ms - oldest,
    }


def _group(group: str, topics: list[str], rows: list[dict], now_ms: int) -> dict:
    oldest = min((r["oldest_unconsumed_ms"] for r in rows if r["oldest_unconsumed_ms"] is not None), default=None)
    return {
        "group": group,
        "system": is_sys_consumer_group(group),
        "topics": topics,
        "queues": len(rows),
        "lag": compute_total_diff(get_consume_stats_queue(r["max_offset"], r["committed_offset"] or 0) for r in rows),
        "expired": sum(r["expired"] for r in rows),
        "oldest_unconsumed_ms": oldest,
        "age_ms": None if oldest is None else now_ms - oldest,
    }


def fleet_consumers_view(fleet: Fleet, now_ms: int, group: str | None = None, topic: str | None = None) -> dict:
    """The `consumers` document of a fleet: one section per store, and per consumer group the cluster's
    lag, counted once per broker group on its master (or first store: a slave's offsets and queues copy
    its master's, mqadmin asks the master), as `mqadmin consumerProgress` sums the brokers it asks; each
    replica's section compares its committed offsets with its master's (`vs_master`)."""
    counted = {members[0].name for members in fleet.groups().values()}
    stores = []
    for m in fleet.members:
        try:
            doc = consumers_view(m.open(), now_ms, group, topic)
        except MqtoolError as e:  # one store that cannot be read: an error finding in its section
            doc = _unread(m.rel, e)
        for r in doc["queues"]:
            r["store"] = m.name
        stores.append(
            {
                "store": m.name,
                "dir": m.rel,
                "broker_group": m.group,
                "role": m.identity.role,
                "counted": m.name in counted,
                **{k: doc[k] for k in ("offsets_source", "groups", "queues", "totals", "findings")},
            }
        )
    by_name = {s["store"]: s for s in stores}
    for members in fleet.groups().values():
        for m in members:
            first = by_name[members[0].name]
            by_name[m.name]["vs_master"] = None if m is members[0] else _vs_master(first, by_name[m.name])
    groups = _cluster_groups([s for s in stores if s["counted"]], now_ms)
    return {
        **_head(now_ms, group, topic),
        "fleet": str(fleet.root),
        "stores": stores,
        "groups": groups,
        "totals": {
            "stores": len(stores),
            "counted_stores": len(counted),
            **_totals(groups, sum(s["totals"]["queues"] for s in stores if s["counted"])),
        },
        "findings": [f.as_dict() for f in sort_findings(fleet.findings)]
        + [{**f, "file": posixpath.normpath(f"{s['dir']}/{f['file']}")} for s in stores for f in s["findings"]],
    }


def _unread(rel: str, error: MqtoolError) -> dict:
    """The section of a store that could not be opened or read."""
    finding = Findings()
    finding.add(".", None, CHECK, "error", f"cannot read the store {rel}: {error}")
    return {
        "offsets_source": None,
        "groups": [],
        "queues": [],
        "totals": dict.fromkeys(("groups", "system_groups", "queues", "lag", "system_lag", "expired"), 0),
        "findings": [f.as_dict() for f in finding],
    }


def _vs_master(master: dict, replica: dict) -> dict:
    """A replica's committed offsets against its master's. `SlaveSynchronize` copies consumerOffset.json from
    the master every 10 s, so a slave's copy lags: promoted now, it serves each group from its own offsets and
    the messages in between are consumed again (`rewind`). An offset the replica lacks (`missing`, rewind null)
    leaves the restart to the client's ConsumeFromWhere; a replica ahead of its master (`ahead`) is odd.
    (`inspect FLEET replicas` compares the whole files; this is the same per queue the view shows.)"""
    theirs = {(r["group"], r["topic"], r["queue_id"]): r["committed_offset"] for r in master["queues"]}
    rows = []
    for r in replica["queues"]:
        want, got = theirs.get((r["group"], r["topic"], r["queue_id"])), r["committed_offset"]
        if want is not None and got != want:
            rows.append(
                {
                    "group": r["group"],
                    "topic": r["topic"],
                    "queue_id": r["queue_id"],
                    "committed_offset": got,
                    "master_committed_offset": want,
                    "rewind": None if got is None else want - got,
                }
            )
    diffs = [x["rewind"] for x in rows if x["rewind"] is not None]
    return {
        "master": master["store"],
        "rewind": sum(d for d in diffs if d > 0),
        "ahead": sum(-d for d in diffs if d < 0),
        "missing": len(rows) - len(diffs),
        "queues": rows,
    }


def _cluster_groups(stores: list[dict], now_ms: int) -> list[dict]:
    """Per consumer group over the counted stores: lag and expired summed, the oldest unconsumed message."""
    by: dict[str, dict] = {}
    for s in stores:
        for g in s["groups"]:
            c = by.setdefault(
                g["group"],
                {
                    "group": g["group"],
                    "system": g["system"],
                    "brokers": [],
                    "queues": 0,
                    "lag": 0,
                    "expired": 0,
                    "oldest_unconsumed_ms": None,
                    "age_ms": None,
                },
            )
            c["brokers"].append(s["store"])
            c["queues"] += g["queues"]
            c["lag"] += g["lag"]
            c["expired"] += g["expired"]
            if g["oldest_unconsumed_ms"] is not None and (
                c["oldest_unconsumed_ms"] is None or g["oldest_unconsumed_ms"] < c["oldest_unconsumed_ms"]
            ):
                c["oldest_unconsumed_ms"] = g["oldest_unconsumed_ms"]
                c["age_ms"] = now_ms - g["oldest_unconsumed_ms"]
    return sorted(by.values(), key=lambda c: (c["system"], c["group"]))
