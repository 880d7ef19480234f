"""`transactions` (spec §7): half messages, op messages and discards (driver side).

Inputs are the records of RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC and
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC kept by the CommitLog walk, and the check service's progress
(consumerOffset.json, group CID_RMQ_SYS_TRANS).
- A half at or after the check progress with no op entry, older than its immunity and the check
  interval: stuck (the check service should have resolved or re-checked it; #9500).
- A half whose TRANSACTION_CHECK_TIMES reached transactionCheckMax: discarded at the next round.
- A half carrying DELAY: loops between the schedule and half topics (#1540).
- An op entry naming a half queue offset with no half message (#2133).
- Every discarded message (RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC), with its original topic and producer group.
- A COMMIT record (sysFlag transaction type 0x8, written by `EndTransactionProcessor` to the real
  topic) whose PREPARED TRANSACTION OFFSET names no half message (§7.3: it must be the physical
  offset of the half, or of its put-back copy, in RMQ_SYS_TRANS_HALF_TOPIC).
"""

import numpy as np

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.message import RecordError
from mqtool.formats.names import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from mqtool.formats.opbody import parse_op_body
from mqtool.formats.properties import parse_properties
from mqtool.rules.transaction import check_immunity_time, check_times_of, get_int, need_discard, next_round_visits
from mqtool.store.findings import Finding, Findings

CHECK = "transactions"
MAX_COMMIT_FINDINGS = 1000


op_offsets = parse_op_body  # half queue offsets of an op body (both dialects)


def check(kept: list[dict], progress: dict[str, dict[int, int]], half_ranges: dict[int, tuple[int, int]],
          config: BrokerConfig, now: int, file_of, findings: Findings) -> dict:
    """`progress`: topic → {queue id: offset} of CID_RMQ_SYS_TRANS; `file_of(offset)`: CommitLog file name.
    Findings go to `findings`; returns the summary."""
    halves = {}
    removed: dict[int, set[int]] = {}
    ops = discards = 0
    for r in kept:
        if r["topic"] == RMQ_SYS_TRANS_HALF_TOPIC:
            halves[(r["queue_id"], r["queue_offset"])] = r
    for r in kept:
        if r["topic"] == RMQ_SYS_TRANS_OP_HALF_TOPIC:
            ops += 1
            for o in op_offsets(r["body"]):
                removed.setdefault(r["queue_id"], set()).add(o)
                if (r["queue_id"], o) not in halves and not _in_range(half_ranges, r["queue_id"], o, deleted=True):
                    findings.append(Finding(file_of(r["offset"]), r["offset"], CHECK, "error",
                                            f"op message names half queue offset {o}, which holds no half message",
                                            RMQ_SYS_TRANS_OP_HALF_TOPIC, r["queue_id"]))
        elif r["topic"] == RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC:
            discards += 1
            p = parse_properties(r["properties"])
            n = check_times_of(p)
            findings.append(Finding(file_of(r["offset"]), r["offset"], CHECK, "info",
                                    f"discarded half message after {'?' if n is None else n} "
                                    f"checks: topic {p.get(PROPERTY_REAL_TOPIC, '?')}, "
                                    f"producer group {p.get(PROPERTY_PRODUCER_GROUP, '?')}, "
                                    f"UNIQ_KEY {p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, '?')}",
                                    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, r["queue_id"]))
    half_progress = progress.get(RMQ_SYS_TRANS_HALF_TOPIC, {})
    stuck = pending = 0
    oldest = None
    for (qid, qoff), r in sorted(halves.items()):
        p = parse_properties(r["properties"])
        where = file_of(r["offset"])
        if PROPERTY_DELAY_TIME_LEVEL in p:
            findings.append(Finding(where, r["offset"], CHECK, "warning",
                                    f"half message at queue offset {qoff} carries "
                                    f"DELAY={p[PROPERTY_DELAY_TIME_LEVEL]}: it loops "
                                    "between SCHEDULE_TOPIC_XXXX and the half topic until its checks are spent",
                                    RMQ_SYS_TRANS_HALF_TOPIC, qid))
        if not next_round_visits([qoff], half_progress.get(qid), removed.get(qid, ())):
            continue  # resolved by an op, or already handled by a check round (put back or discarded)
        pending += 1
        age = now - r["born_ts"]
        oldest = age if oldest is None else max(oldest, age)
        immunity = check_immunity_time(p.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), config.transaction_timeout)
        times = max(get_int(check_times_of(p)), 0)
        if age > max(immunity, config.transaction_check_interval):
            stuck += 1
            findings.append(Finding(where, r["offset"], CHECK, "warning",
                                    f"half message at queue offset {qoff} has no op message and is {age} ms old "
                                    f"(immunity {immunity} ms, check interval {config.transaction_check_interval}"
                                    f" ms, checked {times} time(s)): stuck", RMQ_SYS_TRANS_HALF_TOPIC, qid))
        if need_discard(check_times_of(p), config.transaction_check_max)[0]:
            findings.append(Finding(where, r["offset"], CHECK, "info",
                                    f"half message at queue offset {qoff} was checked {times} time(s) "
                                    f"(transactionCheckMax {config.transaction_check_max}): the next round "
                                    "discards it to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC", RMQ_SYS_TRANS_HALF_TOPIC, qid))
    summary = {"half_messages": len(halves), "op_messages": ops, "resolved": sum(len(v) for v in removed.values()),
               "pending": pending, "stuck": stuck, "discarded": discards, "oldest_pending_age_ms": oldest,
               "progress": {k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(progress.items())}}
    return summary


def check_commits(commits: np.ndarray, kept: list[dict], commitlog_min: int, read_record,
                  file_of, out: Findings) -> dict:
    """COMMIT records against the half messages they name.

    `commits`: rows of (physical offset, PREPARED TRANSACTION OFFSET) of every COMMIT record;
    `kept`: the system-topic records of the walk (every half message among them);
    `read_record(offset)`: the record there (RecordError when none starts there);
    findings go to `out` (at most MAX_COMMIT_FINDINGS of them); returns the counts.
    """
    halves = np.array(sorted(r["offset"] for r in kept if r["topic"] == RMQ_SYS_TRANS_HALF_TOPIC), np.int64)
    commits = commits.reshape(-1, 2)
    found = np.isin(commits[:, 1], halves)
    findings: list[Finding] = []
    without = 0
    for off, prep in commits[~found].tolist():
        without += 1
        if len(findings) >= MAX_COMMIT_FINDINGS:
            continue
        try:
            rec = read_record(off)
            topic, qid = rec.topic, rec.queue_id
        except RecordError:  # pragma: no cover - the walk found a valid record there
            topic = qid = None
        if prep < commitlog_min:
            findings.append(Finding(file_of(off), off, CHECK, "info",
                                    f"COMMIT record names half message at {prep}, before the first CommitLog file "
                                    "(deleted by retention)", topic, qid))
            continue
        try:
            there = f"the record there is of topic {read_record(prep).topic}"
        except RecordError as e:
            there = f"no record starts there: {e}"
        findings.append(Finding(file_of(off), off, CHECK, "error",
                                f"COMMIT record's PREPARED TRANSACTION OFFSET {prep} names no half message "
                                f"({there})", topic, qid))
    out += findings
    return {"records": int(len(commits)), "without_half": without}


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
        if group == CID_SYS_RMQ_TRANS:
            out[topic] = dict(table)
    return out
