"""The `overview` view (the default): the store at a glance, and every finding.

One CommitLog column scan (CRC checked; `columns.summarise`: numpy per chunk, no object per
record) gives the offset and time ranges, the records per topic and queue and the transaction
records; the ConsumeQueues give each queue's min/max offsets (a queue whose last unit points past
the CommitLog's end is what the broker truncates on restart); the delay, timer and transaction
views give their headline numbers. `inspect.layouts` adds the layouts found (DLedger, BatchCQ,
RocksDB, compaction, POP), every path of the store root and what it is, and topics.json's queues
next to the queue directories. Exit code 1 in the CLI when any finding is an error.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from mqtool.formats.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_TOPIC,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SYSTEM_TOPICS,
    TIMER_TOPIC,
)
from mqtool.inspect import JSON_VERSION
from mqtool.inspect.columns import CommitLogSummary, summarise
from mqtool.inspect.records import Progress
from mqtool.store.findings import Finding, Findings, findings_section
from mqtool.store.store import Store

if TYPE_CHECKING:
    from mqtool.inspect.transactions import TransactionScan

SYSTEM_ROLES = {
    RMQ_SYS_SCHEDULE_TOPIC: "delay levels (schedule)",
    TIMER_TOPIC: "timer messages",
    RMQ_SYS_TRANS_HALF_TOPIC: "transaction half messages",
    RMQ_SYS_TRANS_OP_HALF_TOPIC: "transaction op messages",
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: "discarded half messages",
}


def _role(topic: str) -> str | None:
    if topic in SYSTEM_ROLES:
        return SYSTEM_ROLES[topic]
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dead letter"
    if topic.startswith(REVIVE_TOPIC):  # rmq_sys_REVIVE_LOG_<cluster>: a system topic (TopicValidator)
        return "POP revive (checkpoints and acks)"
    return None


def _plain(container) -> dict | None:
    return None if container is None else {k: int(v) for k, v in container.items() if not k.startswith("_")}


class _Scan(threading.Thread):
    """`summarise` on a thread of its own: the CommitLog's walk starts first (on a thread of the walk's own,
    without the GIL) and the modules the rest of the view needs, numpy and the transaction scan's included, are
    imported meanwhile instead of before or after it (a `--json` run's start-up is mostly imports). The caller's
    thread imports them all (`give` hands the transaction scan over): two threads importing modules that import
    each other could each find the other's half-initialised."""

    def __init__(self, store: Store, progress: Progress | None):
        super().__init__(name="mqtool-overview-scan", daemon=True)
        self.args = (store, progress)
        self.summary: CommitLogSummary | None = None
        self.ts: TransactionScan | None = None
        self.given = threading.Event()
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        store, progress = self.args
        try:
            self.summary = summarise(store, verify_crc=True, progress=progress, feeder=self._feeder)
        except BaseException as e:  # noqa: BLE001 - raised again by `result` in the caller's thread
            self.error = e

    def give(self, ts: TransactionScan | None) -> None:
        """The transaction scan every chunk is fed to (None: the caller failed before it had one)."""
        self.ts = ts
        self.given.set()

    def _feeder(self):
        self.given.wait()
        return None if self.ts is None else self.ts.feed_chunk

    def result(self) -> CommitLogSummary:
        self.join()
        if self.error is not None:
            raise self.error
        return self.summary


def overview(store: Store, now_ms: int, progress: Progress | None = None) -> dict:
    """The `overview` document."""
    cl = store.commitlog
    scan = _Scan(store, progress)
    ts = None
    try:
        from mqtool.inspect.transactions import TransactionScan  # imports numpy: while the CommitLog is walked

        ts = TransactionScan()
    finally:
        scan.give(ts)
    from mqtool.inspect.delay import delay_view  # imported while the CommitLog is scanned (`_Scan`)
    from mqtool.inspect.layouts import (
        batch_queues,
        compaction_next_run,
        compaction_section,
        config_sources,
        layouts_section,
        load_config_files,
        not_yet_read,
        paths,
        pop_section,
        rocksdb_queues,
        topic_config,
    )
    from mqtool.inspect.restart import restart_headline
    from mqtool.inspect.timer import timer_view

    summary = scan.result()
    per_queue, per_topic_bytes = summary.per_queue, summary.per_topic_bytes
    first_ts, last_ts, records = summary.first_store_timestamp, summary.last_store_timestamp, summary.records
    end = cl.min_offset if summary.end_offset is None else summary.end_offset
    findings: list[Finding] = [*store.findings, *cl.findings]
    scans = [{"file": s.file, "start": s.start, "records": s.records, "valid_bytes": s.valid_bytes,
              "stop_reason": s.stop_reason, "trailing_bytes": s.trailing_bytes} for s in cl.scans.values()]

    queues = {}
    for t, q in store.queue_ids:
        cq = store.consume_queue(t, q)
        findings += cq.findings
        hi = cq.max_offset
        entry = {"queue_id": q, "records": per_queue.get((t, q), 0), "cq_min_offset": cq.min_offset(cl.min_offset),
                 "cq_max_offset": hi, "cq_files": len(cq.queue.files)}
        last = cq.unit(hi - 1) if hi > 0 else None
        if last is not None and last.commitlog_offset + last.size > end:
            findings.append(Finding(str(cq.queue.directory.relative_to(store.root)), None, "consumequeue.range",
                                    "error", f"last unit (offset {hi - 1}) points to {last.commitlog_offset}, past "
                                    f"the CommitLog's valid end {end}: the broker truncates it on restart", t, q))
        queues[(t, q)] = entry
    found = Findings()  # batch queues, paths, layouts not yet read, topic config
    queues.update(batch_queues(store, per_queue, found))
    queues.update(rocksdb_queues(store, per_queue, found))
    for (t, q), n in per_queue.items():
        if (t, q) not in queues:
            queues[(t, q)] = {"queue_id": q, "records": n, "cq_min_offset": None, "cq_max_offset": None,
                              "cq_files": 0}
    topics = []
    for t in sorted({t for t, _ in queues}):
        qs = [queues[k] for k in sorted(k for k in queues if k[0] == t)]
        topics.append({"topic": t, "system": t in SYSTEM_TOPICS or _role(t) is not None, "role": _role(t),
                       "records": sum(x["records"] for x in qs), "bytes": per_topic_bytes.get(t, 0),
                       "queues": qs})

    path_list = paths(store, found)
    not_yet_read(store, found)
    load_config_files(store)
    config = topic_config(store, found)
    compaction = compaction_section(store, queues, found)
    extra = {k: v for k, v in (("config_sources", config_sources(store)),
                               ("compaction", compaction),
                               ("compaction_next_run", compaction_next_run(store, compaction)),
                               ("pop", pop_section(store, now_ms, found))) if v is not None}
    findings += [*found, *store.findings]
    delay = delay_view(store, now_ms)
    tx = ts.report(store, now_ms, predict=False)
    timer = timer_view(store, now_ms) if _has_timer(store) else None
    for doc in (delay, tx, timer):
        if doc:
            findings += [Finding(**f) for f in doc["findings"]]
    return {
        "version": JSON_VERSION,
        "view": "overview",
        "store": str(store.root),
        "now_ms": now_ms,
        "files": _files(store),
        "layouts": layouts_section(store),
        "paths": path_list,
        "topic_config": config,
        "commitlog": {"min_offset": cl.min_offset, "max_offset": end, "records": records,
                      "first_store_timestamp": first_ts, "last_store_timestamp": last_ts, "scans": scans},
        "topics": topics,
        "system_topics": {t: sum(x["records"] for x in topics if x["topic"] == t) for t in SYSTEM_TOPICS},
        "delay": {"levels_with_backlog": sum(1 for r in delay["levels"] if r["backlog"]),
                  "backlog": delay["totals"]["backlog"], "overdue_levels": delay["totals"]["overdue_levels"],
                  "corrections": delay["totals"]["corrections"],
                  "never_delivered": delay["totals"]["never_delivered"],
                  "never_levels": delay["totals"]["never_levels"],
                  "offsets": {str(r["level"]): r["offset"] for r in delay["levels"] if r["offset_stored"]}},
        "timer": None if timer is None else {
            "checkpoint": timer["checkpoint"], "units": timer["units"], "slots": len(timer["slots"]),
            "pending": timer["pending"]["count"], "enqueue_behind": timer["timer_queue"]["enqueue_behind"],
            "missing_records": len(timer["missing_records"])},
        "transactions": {"counts": tx["counts"], "discarded_records": len(tx["discarded"]),
                         "oldest_pending": tx["oldest_pending"]},
        "checkpoint": _plain(store.checkpoint),
        **findings_section(list(dict.fromkeys(findings))),
        **_restart_preview(restart_headline(store, store.config, now_ms)),
        **extra,
    }


def _restart_preview(line: str | None) -> dict:
    """`restart_preview`: "restart preview: N duplicates, M overdue" when the store was not shut down cleanly."""
    return {} if line is None else {"restart_preview": line}


def _has_timer(store: Store) -> bool:
    r = store.root
    return any(p.exists() for p in (r / "timerlog", r / "timerwheel", r / "timerwheel.gz", r / "config/timercheck"))


def _files(store: Store) -> dict:
    r = store.root
    cl = store.commitlog
    tl = store.timerlog
    cqs = store.consume_queues()
    config = sorted(p.name for p in (r / "config").iterdir() if p.is_file()) if (r / "config").is_dir() else []
    index = sorted(p.name for p in (r / "index").iterdir()) if (r / "index").is_dir() else []
    return {
        "commitlog": {"files": len(cl.files), "file_size": cl.queue.file_size,
                      "bytes": sum(f.length for f in cl.files),
                      "first": cl.files[0].name if cl.files else None,
                      "last": cl.files[-1].name if cl.files else None},
        "consumequeue": {"topics": len({q.topic for q in cqs}), "queues": len(cqs),
                         "files": sum(len(q.queue.files) for q in cqs)},
        "batchconsumequeue": {"topics": len({t for t, _ in store.batch_queue_ids}),
                              "queues": len(store.batch_queue_ids)},
        "queues_total": {"topics": len({q.topic for q in cqs} | {t for t, _ in store.batch_queue_ids}),
                         "queues": len(cqs) + len(store.batch_queue_ids)},
        "timerlog": None if tl is None else {"files": len(tl.queue.files), "file_size": tl.queue.file_size},
        "timerwheel": next((n for n in ("timerwheel", "timerwheel.gz") if (r / n).is_file()), None),
        "index_files": len(index),
        "checkpoint": (r / "checkpoint").is_file(),
        "abort": (r / "abort").exists(),
        "lock": (r / "lock").exists(),
        "config": config,
    }
