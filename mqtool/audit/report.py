"""Turn task results into the report: one driver function per cross check, the summary, sorted findings.

The same `finish` serves the local runner and Spark. It orders its inputs by task index
(`AuditResults.collect`), so the report depends on the store and the plan only, never on which
worker finished first. Each `check_*` driver reads the typed results, adds its findings to the
`Findings` accumulator it is given and returns its part of the summary.
"""

import bisect
from collections.abc import Callable

import numpy as np

from mqtool.audit import CHECKS, schedule, stats, timer, transactions
from mqtool.audit.dledger import check_dledger
from mqtool.audit.index import check_index
from mqtool.audit.layouts import audit_layouts
from mqtool.audit.plan import AuditPlan
from mqtool.audit.results import AuditResults, TaskResult
from mqtool.audit.rocksdb import check_rocksdb
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, TIMER_TOPIC
from mqtool.store.findings import SEVERITIES, Finding, Findings, sort_findings

REPORT_VERSION = 1


def build_report(store: str, engine: dict, summary: dict, findings: list[Finding]) -> dict:
    """The report document (`mqtool/schemas/audit-report.json`)."""
    return {"version": REPORT_VERSION, "store": store, "engine": engine, "summary": summary,
            "findings": [f.as_dict() for f in sort_findings(findings)]}


def worst(findings: list[dict] | list[Finding]) -> str | None:
    sev = {f["severity"] if isinstance(f, dict) else f.severity for f in findings}
    return next((s for s in SEVERITIES if s in sev), None)


def finish(plan: AuditPlan, results: list[TaskResult]) -> tuple[dict, list[Finding]]:
    """The summary and the sorted findings of an audit, from its plan and every task's result."""
    res = AuditResults.collect(results)
    findings = Findings(plan.findings)
    for r in res.ordered:
        findings += r.findings
    commitlog = check_commitlog_integrity(plan, res, findings)
    check_consumequeue_consistency(res, findings)
    sched = check_schedule(plan, res, findings)
    timer_summary = check_timer(plan, res, findings)
    trans = check_transactions(plan, res, findings)
    dups = check_duplicate_keys(plan, res, findings)
    audit_layouts(plan, findings)  # DLedger and BatchCQ (audit/layouts.py)
    index = check_index(plan, res.index, findings)
    dledger = check_dledger(plan.store.dledger, res.dledger, findings) if plan.store.dledger is not None else None
    rocksdb = check_rocksdb(plan, res, findings)  # RocksDB consume queue: offset table, CHECKPOINT (§14)
    summary = {
        "now_ms": res.now,
        "checks": check_counts(findings),
        "commitlog": commitlog,
        "consumequeues": {"queues": len(res.queues), "units": sum(q.units for q in res.queues.values()),
                          "bad_units": sum(q.bad_units for q in res.queues.values())},
        "topics": stats.topic_summary(res.queue_stats, res.queues),
        "duplicate_uniq_keys": dups,
        "schedule": sched,
        "timer": timer_summary,
        "transactions": trans,
        "index": index,
    }
    if dledger is not None:
        summary["dledger"] = dledger  # entries, index and checkpoint (audit/dledger.py)
    if rocksdb is not None:
        summary["rocksdb"] = rocksdb  # offset table and CHECKPOINT (audit/rocksdb.py)
    return summary, sort_findings(findings)


def check_counts(findings: Findings) -> dict[str, dict[str, int]]:
    """Findings per check and severity; every check of `CHECKS` is listed, found or not."""
    counts = {c: {s: 0 for s in SEVERITIES} for c in CHECKS}
    for f in findings:
        counts.setdefault(f.check, {s: 0 for s in SEVERITIES})[f.severity] += 1
    return counts


def commitlog_file_of(plan: AuditPlan) -> Callable[[int], str]:
    """`file_of(offset)`: the CommitLog file holding a physical offset (for a finding's `file`)."""
    files = {start: rel for rel, start, _len in plan.commitlog_files}
    starts = sorted(files)

    def file_of(offset: int) -> str:
        i = bisect.bisect_right(starts, offset) - 1
        return files[starts[i]] if i >= 0 else "commitlog"

    return file_of


def check_commitlog_integrity(plan: AuditPlan, res: AuditResults, findings: Findings) -> dict:
    """How each CommitLog file ends and where the broker's recovery would stop."""
    last_start = max((start for _rel, start, _len in plan.commitlog_files), default=None)
    recovery_end = None
    for r in res.commitlog:
        if r.stop.startswith("invalid record") and recovery_end is None:
            recovery_end = r.file_start + r.valid_end
        if r.last_of_file and r.stop == "unwritten (zero) tail" and r.file_start != last_start:
            findings.add(r.file, r.file_start + r.valid_end, "commitlog.integrity", "warning",
                         "file ends in unwritten bytes, not a BLANK filler, and a later file exists")
    crc_first = min((f.offset for f in findings if f.check == "commitlog.integrity" and "CRC" in f.message),
                    default=None)
    max_offset, now = res.max_offset, res.now
    first_ts = [s.first_store_ts for s in res.queue_stats.values()]
    return {"files": len(plan.commitlog_files), "records": sum(r.records for r in res.commitlog),
            "bytes": sum(r.bytes for r in res.commitlog), "min_offset": plan.commitlog_min,
            "max_offset": max_offset, "recovery_end": recovery_end if recovery_end is not None else max_offset,
            "first_crc_mismatch": crc_first, "first_store_ts": min(first_ts) if first_ts else None,
            "last_store_ts": now or None}


def check_consumequeue_consistency(res: AuditResults, findings: Findings) -> None:
    """Each queue against the CommitLog walk: units beyond its end, queue offsets used twice or
    missing, records with no unit yet (dispatch lag)."""
    check = "consumequeue.consistency"
    cq, max_offset = res.queues, res.max_offset
    for key, q in sorted(cq.items()):
        if q.max_commitlog_end > max_offset:
            findings.add(q.file, None, check, "error", f"units reach CommitLog offset {q.max_commitlog_end}, "
                         f"beyond the CommitLog's end {max_offset}", *key)
    for key, s in sorted(res.queue_stats.items()):
        topic, qid = key
        count, q0, q1 = s.count, s.min_queue_offset, s.max_queue_offset
        span = q1 - q0 + 1
        qdir = f"consumequeue/{topic}/{qid}"
        if count > span:
            findings.add(qdir, None, check, "error", f"the CommitLog holds {count} records for queue offsets "
                         f"{q0}..{q1}: {count - span} queue offset(s) used twice", topic, qid)
        elif count < span and (q0 == 0 or key not in cq or q0 >= cq[key].min_offset):
            findings.add(qdir, None, check, "warning", f"the CommitLog holds {count} records for queue offsets "
                         f"{q0}..{q1}: {span - count} missing", topic, qid)
        q = cq.get(key)
        cq_max = q.max_offset if q else 0
        if q1 + 1 > cq_max:
            lag = q1 + 1 - max(cq_max, q0)
            findings.add(qdir, cq_max * CQ_UNIT_SIZE if q else None, check, "warning",
                         f"{lag} record(s) with no ConsumeQueue unit (dispatch lag): the CommitLog has queue "
                         f"offsets up to {q1}, the queue ends at {cq_max}", topic, qid)


def check_schedule(plan: AuditPlan, res: AuditResults, findings: Findings) -> dict:
    """delayOffset.json against the delay-level queues, and overdue messages (`schedule.check`)."""
    delay = _config_json(plan, "delayOffset.json", findings)
    queues = {qid: {"min": q.min_offset, "max": q.max_offset}
              for (t, qid), q in res.queues.items() if t == RMQ_SYS_SCHEDULE_TOPIC}
    tags: dict[int, list] = {}
    for r in res.consumequeue:
        if r.topic == RMQ_SYS_SCHEDULE_TOPIC:
            tags.setdefault(r.queue_id, []).extend(r.schedule_tags)
    return schedule.check(delay.offset_table if delay else None, queues, tags, plan.config.delay_levels_ms(),
                          res.now, findings)


def check_timer(plan: AuditPlan, res: AuditResults, findings: Findings) -> dict:
    """timercheck's cursors against the timer queue and the TimerLog; the timer summary."""
    tq = res.queues.get((TIMER_TOPIC, 0))
    tls, wheels = res.timerlog, res.wheel
    tl_end = max((r.end for r in tls if r.units), default=plan.timerlog_min if tls else None)
    timer.cursor_findings(plan.timercheck, tq.max_offset if tq else None, tl_end, findings)
    pending = timer.revised_slot_findings(plan.store, plan.timercheck, findings)  # slots recovery rebuilds
    for r in wheels:
        pending.update(r.pending_by_time)
    return {
        "timerlog_files": plan.timerlog_files, "timerlog_units": sum(r.units for r in tls),
        "timerlog_end": tl_end, "wheel_slots": sum(r.slots for r in wheels),
        "broken_slots": sum(r.broken for r in wheels),
        "pending_messages": sum(pending.values()),
        "next_due_ms": min(pending) if pending else None,
        "timercheck": plan.timercheck,
        "timer_queue_max": tq.max_offset if tq else None,
    }


def check_transactions(plan: AuditPlan, res: AuditResults, findings: Findings) -> dict:
    """Half and op messages against the check progress, and COMMIT records against their halves."""
    consumer = _config_json(plan, "consumerOffset.json", findings)
    file_of = commitlog_file_of(plan)
    kept = res.kept
    half_ranges = {qid: (q.min_offset, q.max_offset) for (t, qid), q in res.queues.items()
                   if t == RMQ_SYS_TRANS_HALF_TOPIC}
    summary = transactions.check(kept, transactions.trans_progress(consumer), half_ranges, plan.config, res.now,
                                 file_of, findings)
    commits = np.concatenate([r.commits for r in res.commitlog]) if res.commitlog else np.zeros((0, 2), np.int64)
    summary["commits"] = transactions.check_commits(commits, kept, plan.commitlog_min, plan.store.commitlog.read,
                                                    file_of, findings)
    return summary


def check_duplicate_keys(plan: AuditPlan, res: AuditResults, findings: Findings) -> int:
    """`stats`: records whose UNIQ_KEY an earlier record of an ordinary topic already has."""
    cl = res.commitlog
    return stats.duplicate_keys([r.key_hashes for r in cl], [r.key_offsets for r in cl], plan.store.commitlog.read,
                                commitlog_file_of(plan), findings)


def _config_json(plan: AuditPlan, name: str, findings: Findings):
    """config/delayOffset.json or consumerOffset.json through `Store` (with the broker's `.bak`
    fallback); the store's `store.config` findings for that file join the report."""
    st = plan.store
    value = st.config_files.delay_offsets if name == "delayOffset.json" else st.config_files.consumer_offsets
    findings += [f for f in st.findings if f.check == "store.config" and f.file == f"config/{name}"]
    return value
