"""`transactions` (spec §7): half messages, op messages and discards (driver side).

Inputs are the records of RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC and
TRANS_CHECK_MAX_TIME_TOPIC kept by the CommitLog walk, and the check service's progress
(consumerOffset.json, group CID_RMQ_SYS_TRANS).
- A half at or after the check progress with no op entry, older than its immunity and the check
  interval: stuck (the check service should have resolved or re-checked it; #9500).
- A half whose TRANSACTION_CHECK_TIMES reached transactionCheckMax: discarded at the next round.
- A half carrying DELAY: loops between the schedule and half topics (#1540).
- An op entry naming a half queue offset with no half message (#2133).
- Every discarded message (TRANS_CHECK_MAX_TIME_TOPIC), with its original topic and producer group.
"""

from mqtool.audit.plan import HALF_TOPIC, OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_GROUP
from mqtool.audit.settings import AuditSettings
from mqtool.formats.properties import parse_properties
from mqtool.store.findings import Finding

CHECK = "transactions"


def op_offsets(body: bytes) -> list[int]:
    """Half queue offsets in an op body: "0,1,3," (5.x batches) or "7" (4.x)."""
    out = []
    for part in body.decode("utf-8", "replace").split(","):
        part = part.strip()
        if part.lstrip("-").isdigit():
            out.append(int(part))
    return out


def check(kept: list[dict], progress: dict[str, dict[int, int]], half_ranges: dict[int, tuple[int, int]],
          settings: AuditSettings, now: int, file_of) -> tuple[list[Finding], dict]:
    """`progress`: topic → {queue id: offset} of CID_RMQ_SYS_TRANS; `file_of(offset)`: CommitLog file name."""
    findings: list[Finding] = []
    halves = {}
    removed: dict[int, set[int]] = {}
    ops = discards = 0
    for r in kept:
        if r["topic"] == HALF_TOPIC:
            halves[(r["queue_id"], r["queue_offset"])] = r
    for r in kept:
        if r["topic"] == OP_HALF_TOPIC:
            ops += 1
            for o in op_offsets(r["body"]):
                removed.setdefault(r["queue_id"], set()).add(o)
                if (r["queue_id"], o) not in halves and not _in_range(half_ranges, r["queue_id"], o, deleted=True):
                    findings.append(Finding(file_of(r["offset"]), r["offset"], CHECK, "error",
                                            f"op message names half queue offset {o}, which holds no half message",
                                            OP_HALF_TOPIC, r["queue_id"]))
        elif r["topic"] == TRANS_CHECK_MAX_TIME_TOPIC:
            discards += 1
            p = parse_properties(r["properties"])
            findings.append(Finding(file_of(r["offset"]), r["offset"], CHECK, "info",
                                    f"discarded half message after {p.get('TRANSACTION_CHECK_TIMES', '?')} checks: "
                                    f"topic {p.get('REAL_TOPIC', '?')}, producer group {p.get('PGROUP', '?')}, "
                                    f"UNIQ_KEY {p.get('UNIQ_KEY', '?')}", TRANS_CHECK_MAX_TIME_TOPIC, r["queue_id"]))
    half_progress = progress.get(HALF_TOPIC, {})
    stuck = pending = 0
    oldest = None
    for (qid, qoff), r in sorted(halves.items()):
        p = parse_properties(r["properties"])
        where = file_of(r["offset"])
        if "DELAY" in p:
            findings.append(Finding(where, r["offset"], CHECK, "warning",
                                    f"half message at queue offset {qoff} carries DELAY={p['DELAY']}: it loops "
                                    "between SCHEDULE_TOPIC_XXXX and the half topic until its checks are spent",
                                    HALF_TOPIC, qid))
        if qoff in removed.get(qid, ()) or qoff < half_progress.get(qid, 0):
            continue  # resolved by an op, or already handled by a check round (put back or discarded)
        pending += 1
        age = now - r["born_ts"]
        oldest = age if oldest is None else max(oldest, age)
        immunity = settings.transaction_timeout_ms
        if p.get("CHECK_IMMUNITY_TIME_IN_SECONDS", "").isdigit():
            immunity = int(p["CHECK_IMMUNITY_TIME_IN_SECONDS"]) * 1000
        times = int(p["TRANSACTION_CHECK_TIMES"]) if p.get("TRANSACTION_CHECK_TIMES", "").isdigit() else 0
        if age > max(immunity, settings.transaction_check_interval_ms):
            stuck += 1
            findings.append(Finding(where, r["offset"], CHECK, "warning",
                                    f"half message at queue offset {qoff} has no op message and is {age} ms old "
                                    f"(immunity {immunity} ms, check interval {settings.transaction_check_interval_ms}"
                                    f" ms, checked {times} time(s)): stuck", HALF_TOPIC, qid))
        if times >= settings.transaction_check_max:
            findings.append(Finding(where, r["offset"], CHECK, "info",
                                    f"half message at queue offset {qoff} was checked {times} time(s) "
                                    f"(transactionCheckMax {settings.transaction_check_max}): the next round "
                                    "discards it to TRANS_CHECK_MAX_TIME_TOPIC", HALF_TOPIC, qid))
    summary = {"half_messages": len(halves), "op_messages": ops, "resolved": sum(len(v) for v in removed.values()),
               "pending": pending, "stuck": stuck, "discarded": discards, "oldest_pending_age_ms": oldest,
               "progress": {k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(progress.items())}}
    return findings, summary


def _in_range(ranges, qid, o, deleted) -> bool:
    """True when a half queue offset lies before the queue's retained range (its record was deleted)."""
    lo, _hi = ranges.get(qid, (0, 0))
    return deleted and o < lo


def trans_progress(consumer_offsets) -> dict[str, dict[int, int]]:
    """CID_RMQ_SYS_TRANS offsets per topic from a parsed consumerOffset.json."""
    out: dict[str, dict[int, int]] = {}
    if consumer_offsets is None:
        return out
    for key, table in consumer_offsets.offset_table.items():
        topic, _, group = key.rpartition("@")
        if group == TRANS_GROUP:
            out[topic] = dict(table)
    return out
