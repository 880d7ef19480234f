"""`index` (spec §11): the broker's IndexFiles against the CommitLog.

Per index file (a task): the structural checks of `store.indexfile.check_index_file` (slots and
prevIndex beyond indexCount, times outside the header, ...), chains that loop (an entry whose
prevIndex walk never reaches 0: the broker's walk only stops on `prevIndex == current`), and each
entry against the record at its phyOffset: no record there (past the CommitLog's written end: one
warning per file, as the CommitLog check already reports the damage), or a record none of whose keys
(`topic#UNIQ_KEY`, `topic#KEYS word`, as `buildIndex` puts them) hashes to the entry's keyHash.
On the driver: records that should be indexed but are not (`IndexService.queryOffset` does not
return them for one of their keys).

Sampling (large stores): a file with more than `SAMPLE` written entries has every k-th entry
checked against its record (k = ceil(entries / SAMPLE), entries k, 2k, ...); the structural and
loop checks always read every entry. The "not indexed" check takes records from the ConsumeQueue
units, every k-th unit of each queue (k = ceil(all units / SAMPLE)), and only those inside the
IndexFiles' CommitLog range [first beginPhyOffset, last endPhyOffset].
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqtool.audit.records import CommitLogRecords
from mqtool.audit.results import IndexResult
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.indexfile import build_key, index_key_hash
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.properties import parse_properties
from mqtool.rules.index import LONG_MAX, DispatchRequest, index_keys, query_offset
from mqtool.store.findings import Finding, Findings
from mqtool.store.indexfile import check_index_file, index_geometry, open_index_dir, open_index_file
from mqtool.store.store import Store

CHECK = "index"
SAMPLE = 10_000
_MAX_ROWS = 20  # findings of one kind per file; the rest are counted
# `CommitLogRecords.get` reasons for an offset beyond the CommitLog's written bytes (or a record torn by its end)
_PAST_END = ("past the end of its CommitLog file", "in a missing CommitLog file", "no record there (unwritten bytes)",
             "past the end of the data")


@dataclass(frozen=True)
class IndexFileTask:
    """One IndexFile with the geometry it was written with."""

    index: int
    root: str
    path: str
    rel: str
    hash_slot_num: int
    index_num: int


def plan_index_tasks(store: Store, first_index: int) -> list[IndexFileTask]:
    """One task per file of `index/`, numbered from `first_index`."""
    d = store.root / "index"
    if not d.is_dir():
        return []
    out = []
    for p in sorted(x for x in d.iterdir() if x.is_file()):
        slots, num, _ = index_geometry(store.config, p.stat().st_size)
        out.append(IndexFileTask(first_index + len(out), str(store.root), str(p), f"index/{p.name}", slots, num))
    return out


def _record_keys(rec) -> list[str]:
    props = parse_properties(rec.properties_raw)
    return index_keys(DispatchRequest(rec.topic, 0, rec.store_timestamp, rec.sys_flag, props.get(PROPERTY_KEYS),
                                      props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)))


def looping_entries(prev: np.ndarray, index_count: int) -> np.ndarray:
    """Entry numbers (1-based) whose prevIndex walk never reaches an end (0, or a link the broker's
    walk stops at: <= 0, > indexCount, or to itself): pointer doubling, log2(n) numpy passes."""
    n = len(prev) + 1
    nxt = np.zeros(n, np.int64)
    p = prev.astype(np.int64)
    numbers = np.arange(1, n)
    nxt[1:] = np.where((p > 0) & (p <= min(index_count, n - 1)) & (p != numbers), p, 0)
    for _ in range(max(1, int(n).bit_length())):
        nxt = nxt[nxt]
    return np.flatnonzero(nxt[1:]) + 1


def check_index_task(task: IndexFileTask) -> IndexResult:
    """The task's findings and counts."""
    acc = Findings()
    conf = BrokerConfig(raw={"maxHashSlotNum": str(task.hash_slot_num), "maxIndexNum": str(task.index_num)})
    counts = {"entries": 0, "checked": 0, "before_commitlog": 0, "past_commitlog_end": 0, "no_record": 0,
              "wrong_key": 0, "looping": 0, "sample_every": 1}
    with open_index_file(Path(task.path), acc, conf, task.rel) as f:
        check_index_file(f, acc)
        written = f.written()
        n = len(written)
        counts["entries"] = n
        loops = looping_entries(written["prev_index"], f.index_count) if n else np.empty(0, np.int64)
        counts["looping"] = len(loops)
        for e in loops[:_MAX_ROWS].tolist():
            acc.add(task.rel, f.entry_offset(e), CHECK, "error", f"entry {e}: its prevIndex chain loops "
                    "(a lookup through it never ends; the broker walks it until maxNum offsets)")
        step = -(-n // SAMPLE) if n > SAMPLE else 1
        counts["sample_every"] = step
        rows = {"no_record": [], "wrong_key": []}
        with CommitLogRecords(task.root) as records:
            cl_min = records.queue.min_offset
            for number in range(step, n + 1, step):
                kh, phy = int(written[number - 1]["key_hash"]), int(written[number - 1]["phy_offset"])
                if phy < cl_min:  # its CommitLog file was deleted (the broker deletes index files later)
                    counts["before_commitlog"] += 1
                    continue
                counts["checked"] += 1
                rec = records.get(phy)
                if isinstance(rec, str) and any(r in rec for r in _PAST_END):
                    counts["past_commitlog_end"] += 1
                elif isinstance(rec, str):
                    rows["no_record"].append((number, f"entry {number} points to CommitLog offset {phy}: {rec}"))
                elif kh not in {index_key_hash(k) for k in _record_keys(rec)}:
                    rows["wrong_key"].append((number, f"entry {number} (keyHash {kh}) points to the record at {phy} "
                                              f"({rec.topic}), which carries no key with that hash"))
        if counts["past_commitlog_end"]:
            acc.add(task.rel, None, CHECK, "warning", f"{counts['past_commitlog_end']} entries point past the "
                    "CommitLog's written end (a torn or truncated CommitLog: the broker's abnormal recovery "
                    "destroys index files newer than the checkpoint's indexMsgTimestamp)")
        for kind, found in rows.items():
            counts[kind] = len(found)
            for number, message in found[:_MAX_ROWS]:
                acc.add(task.rel, f.entry_offset(number), CHECK, "error", message)
            if len(found) > _MAX_ROWS:
                acc.add(task.rel, None, CHECK, "error", f"{len(found) - _MAX_ROWS} more entries like these")
    return IndexResult(index=task.index, findings=acc, file=task.rel, counts=counts)


def _sampled_units(store: Store) -> tuple[list[tuple[str, int, int]], int]:
    """(topic, queue id, commitLogOffset) of every k-th ConsumeQueue unit (numpy slices, no unit loop), and k."""
    queues = store.consume_queues()
    total = sum(max(0, q.max_offset - q.first_offset) for q in queues)
    step = -(-total // SAMPLE) if total > SAMPLE else 1
    out = []
    for q in queues:
        for first, units in q.scan_columns(q.first_offset):
            skip = (-(first - q.first_offset)) % step
            offs = units["commitlog_offset"][skip::step].tolist()
            del units
            out += [(q.topic, q.queue_id, o) for o in offs]
    return out, step


def check_index(plan, results: list[IndexResult], findings: Findings) -> dict:
    """Driver side: records that should be indexed but are not; the `index` summary."""
    store: Store = plan.store

    def total(name: str) -> int:
        return sum(r.counts[name] for r in results)

    summary = {"files": len(results), "entries": total("entries"), "entries_checked": total("checked"),
               "past_commitlog_end": total("past_commitlog_end"), "no_record": total("no_record"),
               "wrong_key": total("wrong_key"), "looping": total("looping"), "records_checked": 0,
               "not_indexed": 0, "unit_sample_every": None}
    if not results:
        return summary
    acc = Findings()
    files = open_index_dir(store.root, acc, store.config)
    written = [f for f in files if f.index_count > 1]
    try:
        if not written:
            return summary
        lo, hi = written[0].begin_phy_offset, written[-1].end_phy_offset
        cap = sum(f.index_count for f in files) + 1  # a looping chain ends here instead of never
        units, step = _sampled_units(store)
        summary["unit_sample_every"] = step
        missing = []
        with CommitLogRecords(str(store.root)) as records:
            for topic, qid, phy in units:
                if not lo <= phy <= hi:
                    continue
                rec = records.get(phy)
                if isinstance(rec, str):
                    continue  # the consumequeue check reports it
                summary["records_checked"] += 1
                for key in _record_keys(rec):
                    k = key[len(rec.topic) + 1:]
                    if phy not in query_offset(files, rec.topic, k, cap, 0, LONG_MAX, cap,
                                                  max_steps=cap).phy_offsets:
                        missing.append((topic, qid, phy, build_key(rec.topic, k)))
        summary["not_indexed"] = len(missing)
        for topic, qid, phy, key in missing[:_MAX_ROWS]:
            findings.append(Finding(f"consumequeue/{topic}/{qid}", phy, CHECK, "error",
                                    f"the record at {phy} is not in the IndexFiles under {key} "
                                    "(a lookup by that key misses it)", topic, qid))
        if len(missing) > _MAX_ROWS:
            findings.append(Finding("index", None, CHECK, "error", f"{len(missing) - _MAX_ROWS} more keys not indexed"))
    finally:
        for f in files:
            f.close()
    return summary
