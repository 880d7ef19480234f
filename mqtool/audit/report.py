"""Turn task results into the report: driver-side cross checks, the summary and sorted findings.

The same function serves the local runner and Spark, and it orders its inputs by task index, so
the report depends on the store and the plan only, never on which worker finished first.
"""

import bisect

import numpy as np

from mqtool.audit import CHECKS, schedule, stats, timer, transactions
from mqtool.audit.index import finish_index
from mqtool.audit.plan import AuditPlan
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, TIMER_TOPIC
from mqtool.store.findings import SEVERITIES, Finding, sort_findings

REPORT_VERSION = 1


def build_report(store: str, engine: dict, summary: dict, findings: list[Finding]) -> dict:
    """The report document (`mqtool/schemas/audit-report.json`)."""
    return {"version": REPORT_VERSION, "store": store, "engine": engine, "summary": summary,
            "findings": [f.as_dict() for f in sort_findings(findings)]}


def worst(findings: list[dict] | list[Finding]) -> str | None:
    sev = {f["severity"] if isinstance(f, dict) else f.severity for f in findings}
    return next((s for s in SEVERITIES if s in sev), None)


def _config_json(plan: AuditPlan, name: str, findings: list[Finding]):
    """delayOffset.json / consumerOffset.json through `Store` (with the broker's `.bak` fallback);
    a file the broker could not use becomes a `store.config` finding."""
    st = plan.store
    before = len(st.findings)
    value = st.delay_offsets if name == "delay" else st.consumer_offsets
    findings += [f for f in st.findings[before:] if f.check == "store.config"]
    return value


def finish(plan: AuditPlan, results: list[dict]) -> tuple[dict, list[Finding]]:
    results = sorted(results, key=lambda r: r["index"])
    findings: list[Finding] = list(plan.findings)
    for r in results:
        findings += r["findings"]
    cl = [r for r in results if r["kind"] == "commitlog"]
    cqs = [r for r in results if r["kind"] == "consumequeue"]
    tls = [r for r in results if r["kind"] == "timerlog"]
    wheels = [r for r in results if r["kind"] == "wheel"]
    files = {start: rel for rel, start, _len in plan.commitlog_files}
    starts = sorted(files)

    def file_of(offset: int) -> str:
        i = bisect.bisect_right(starts, offset) - 1
        return files[starts[i]] if i >= 0 else "commitlog"

    read_record = plan.store.commitlog.read  # RecordError when no record starts at the offset

    # ----- commitlog.integrity: how each file ends, where recovery would stop -----
    recovery_end = None
    for r in cl:
        if r["stop"].startswith("invalid record") and recovery_end is None:
            recovery_end = r["file_start"] + r["valid_end"]
        if r["last_of_file"] and r["stop"] == "unwritten (zero) tail" and r["file_start"] != starts[-1]:
            findings.append(Finding(r["file"], r["file_start"] + r["valid_end"], "commitlog.integrity", "warning",
                                    "file ends in unwritten bytes, not a BLANK filler, and a later file exists"))
    crc_first = min((f.offset for f in findings if f.check == "commitlog.integrity" and "CRC" in f.message),
                    default=None)
    last = [r for r in cl if r["last_of_file"]]
    max_offset = last[-1]["file_start"] + last[-1]["valid_end"] if last else 0
    queue_stats = stats.merge_queue_stats([r["queues"] for r in cl])
    store_ts = [v[3] for v in queue_stats.values()]
    now = max(store_ts) if store_ts else 0

    # ----- consumequeue.consistency: per queue, against the CommitLog walk -----
    cq: dict[tuple[str, int], dict] = {}
    for r in cqs:
        q = cq.setdefault((r["topic"], r["queue_id"]), {"min": r["first_offset"], "max": r["first_offset"],
                                                        "units": 0, "bad_units": 0, "max_commitlog_end": 0,
                                                        "file": r["file"]})
        q["min"] = min(q["min"], r["first_offset"])
        if r["units"]:
            q["max"] = max(q["max"], r["end_offset"])
        q["units"] += r["units"]
        q["bad_units"] += r["bad_units"]
        if r["max_commitlog_end"] > q["max_commitlog_end"]:
            q["max_commitlog_end"], q["file"] = r["max_commitlog_end"], r["file"]
    for key, q in sorted(cq.items()):
        if q["max_commitlog_end"] > max_offset:
            findings.append(Finding(q["file"], None, "consumequeue.consistency", "error",
                                    f"units reach CommitLog offset {q['max_commitlog_end']}, beyond the CommitLog's "
                                    f"end {max_offset}", *key))
    for key, (count, _b, _t0, _t1, q0, q1) in sorted(queue_stats.items()):
        topic, qid = key
        span = q1 - q0 + 1
        qdir = f"consumequeue/{topic}/{qid}"
        if count > span:
            findings.append(Finding(qdir, None, "consumequeue.consistency", "error",
                                    f"the CommitLog holds {count} records for queue offsets {q0}..{q1}: "
                                    f"{count - span} queue offset(s) used twice", topic, qid))
        elif count < span and (q0 == 0 or key not in cq or q0 >= cq[key]["min"]):
            findings.append(Finding(qdir, None, "consumequeue.consistency", "warning",
                                    f"the CommitLog holds {count} records for queue offsets {q0}..{q1}: "
                                    f"{span - count} missing", topic, qid))
        q = cq.get(key)
        cq_max = q["max"] if q else 0
        if q1 + 1 > cq_max:
            lag = q1 + 1 - max(cq_max, q0)
            findings.append(Finding(qdir, cq_max * CQ_UNIT_SIZE if q else None, "consumequeue.consistency",
                                    "warning", f"{lag} record(s) with no ConsumeQueue unit (dispatch lag): the "
                                    f"CommitLog has queue offsets up to {q1}, the queue ends at {cq_max}",
                                    topic, qid))

    # ----- schedule -----
    delay = _config_json(plan, "delay", findings)
    sched_q = {qid: {"min": q["min"], "max": q["max"]} for (t, qid), q in cq.items() if t == RMQ_SYS_SCHEDULE_TOPIC}
    sched_tags: dict[int, list] = {}
    for r in cqs:
        if r["topic"] == RMQ_SYS_SCHEDULE_TOPIC:
            sched_tags.setdefault(r["queue_id"], []).extend(r["schedule_tags"])
    f, sched_summary = schedule.check(delay.offset_table if delay else None, sched_q, sched_tags,
                                      len(plan.config.delay_levels_ms()), now)
    findings += f

    # ----- timer -----
    tq = cq.get((TIMER_TOPIC, 0))
    tl_end = max((r["end"] for r in tls if r["units"]), default=plan.timerlog_min if tls else None)
    findings += timer.cursor_findings(plan.timercheck, tq["max"] if tq else None, tl_end)
    pending_slots: dict[int, int] = {}
    for r in wheels:
        pending_slots.update(r["pending_by_time"])
    timer_summary = {
        "timerlog_files": plan.timerlog_files, "timerlog_units": sum(r["units"] for r in tls),
        "timerlog_end": tl_end, "wheel_slots": sum(r["slots"] for r in wheels),
        "broken_slots": sum(r["broken"] for r in wheels),
        "pending_messages": sum(pending_slots.values()),
        "next_due_ms": min(pending_slots) if pending_slots else None,
        "timercheck": plan.timercheck,
        "timer_queue_max": tq["max"] if tq else None,
    }

    # ----- transactions -----
    consumer = _config_json(plan, "consumer", findings)
    kept = [k for r in cl for k in r["kept"]]
    half_ranges = {qid: (q["min"], q["max"]) for (t, qid), q in cq.items() if t == RMQ_SYS_TRANS_HALF_TOPIC}
    f, trans_summary = transactions.check(kept, transactions.trans_progress(consumer), half_ranges, plan.config,
                                          now, file_of)
    findings += f
    commits = np.concatenate([r["commits"] for r in cl]) if cl else np.zeros((0, 2), np.int64)
    f, trans_summary["commits"] = transactions.check_commits(commits, kept, plan.commitlog_min, read_record,
                                                             file_of)
    findings += f

    # ----- stats -----
    f, dups = stats.duplicate_keys([r["key_hashes"] for r in cl], [r["key_offsets"] for r in cl], read_record,
                                   file_of)
    findings += f

    # ----- index -----
    f, index_summary = finish_index(plan, results)
    findings += f

    counts = {c: {s: 0 for s in SEVERITIES} for c in CHECKS}
    for x in findings:
        counts.setdefault(x.check, {s: 0 for s in SEVERITIES})[x.severity] += 1
    all_ts = [v[2] for v in queue_stats.values()]
    summary = {
        "now_ms": now,
        "checks": counts,
        "commitlog": {"files": len(plan.commitlog_files), "records": sum(r["records"] for r in cl),
                      "bytes": sum(r["bytes"] for r in cl), "min_offset": plan.commitlog_min,
                      "max_offset": max_offset, "recovery_end": recovery_end if recovery_end is not None
                      else max_offset, "first_crc_mismatch": crc_first,
                      "first_store_ts": min(all_ts) if all_ts else None, "last_store_ts": now or None},
        "consumequeues": {"queues": len(cq), "units": sum(q["units"] for q in cq.values()),
                          "bad_units": sum(q["bad_units"] for q in cq.values())},
        "topics": stats.topic_summary(queue_stats, cq),
        "duplicate_uniq_keys": dups,
        "schedule": sched_summary,
        "timer": timer_summary,
        "transactions": trans_summary,
        "index": index_summary,
    }
    return summary, sort_findings(findings)

