"""`stats`: counts, bytes and store-time ranges per topic and queue; duplicate UNIQ_KEYs.

The CommitLog walk keeps per (topic, queue) counters and, for records of ordinary topics, a 63-bit
hash of each UNIQ_KEY with its offset (16 bytes per record, sorted per task). Here the hashes of all
tasks are merged; each repeated hash is confirmed by reading the records (a hash collision is not
reported). Re-puts of system topics (delay, timer, transaction, retry, DLQ) keep the original
UNIQ_KEY on purpose and take no part.
"""

import numpy as np

from mqtool.audit.results import QueueStats, QueueUnits
from mqtool.formats.message import RecordError
from mqtool.store.findings import Findings

CHECK = "stats"
MAX_DUPLICATE_FINDINGS = 1000


def duplicate_keys(hashes: list[np.ndarray], offsets: list[np.ndarray], read_record, file_of,
                   findings: Findings) -> int:
    """How many records have a UNIQ_KEY an earlier record already has; a finding for each (at most
    MAX_DUPLICATE_FINDINGS) goes to `findings`.

    `hashes[i]`/`offsets[i]`: one task's, sorted by hash (equal hashes by offset), tasks in offset order.
    """
    if not hashes:
        return 0
    h = np.concatenate(hashes)
    o = np.concatenate(offsets)
    if h.size == 0:
        return 0
    # Each part is sorted by hash with equal hashes in offset order, and parts come in offset order
    # (task order): a stable sort by hash alone gives (hash, offset) order, merging the sorted runs.
    order = np.argsort(h, kind="stable")
    h, o = h[order], o[order]
    dup = np.nonzero(h[1:] == h[:-1])[0] + 1
    count = 0
    firsts: dict[int, tuple[int, str | None]] = {}
    for i in dup.tolist():
        j = i
        while j > 0 and h[j - 1] == h[i]:
            j -= 1
        first = int(o[j])
        if first not in firsts:
            firsts[first] = (first, _key(read_record, first))
        key = firsts[first][1]
        off = int(o[i])
        other = _key(read_record, off)
        if key is None or other != key:
            continue  # a hash collision, not a duplicate
        count += 1
        if count <= MAX_DUPLICATE_FINDINGS:
            rec = read_record(off)
            findings.add(file_of(off), off, CHECK, "info", f"UNIQ_KEY {key} already used by the record at {first} "
                         "(a producer resend or a duplicated message)", rec.topic, rec.queue_id)
    return count


def _key(read_record, offset: int) -> str | None:
    try:
        return read_record(offset).uniq_key
    except RecordError:
        return None


def topic_summary(queues: dict[tuple[str, int], QueueStats], cq: dict[tuple[str, int], QueueUnits]) -> dict:
    """Records, bytes and store-time range per topic and queue, with each queue's ConsumeQueue range."""
    topics: dict[str, dict] = {}
    for (topic, qid) in sorted(set(queues) | set(cq)):
        c, b, t0, t1, q0, q1 = queues.get((topic, qid), (0, 0, None, None, None, None))
        t = topics.setdefault(topic, {"records": 0, "bytes": 0, "first_store_ts": None, "last_store_ts": None,
                                      "queues": {}})
        t["records"] += c
        t["bytes"] += b
        if t0 is not None:
            t["first_store_ts"] = t0 if t["first_store_ts"] is None else min(t["first_store_ts"], t0)
            t["last_store_ts"] = t1 if t["last_store_ts"] is None else max(t["last_store_ts"], t1)
        q = cq.get((topic, qid))
        t["queues"][str(qid)] = {"records": c, "bytes": b, "first_store_ts": t0, "last_store_ts": t1,
                                 "min_queue_offset": q0, "max_queue_offset": q1,
                                 "cq_min_offset": q.min_offset if q else None,
                                 "cq_max_offset": q.max_offset if q else None}
    return topics
