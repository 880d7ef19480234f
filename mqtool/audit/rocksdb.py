"""`rocksdb.integrity` (spec §14): a RocksDB consume queue's offset table and CHECKPOINT against its entries
and the CommitLog. Runs on the driver (local runner and spark-audit alike): the queue is one database.

The entries themselves (each against the record it names, holes, units beyond the CommitLog's end) are the
`consumequeue.consistency` tasks' (`QueueFileTask(rocksdb=True)`); this adds what only RocksDB has, as
rocketmq-all-5.3.1 keeps it (`RocksDBConsumeQueueStore`, `RocksDBConsumeQueueOffsetTable`):
- The `max` entry of a queue is written with every dispatch batch (`putMaxPhyAndCqOffset`): its queue
  offset and CommitLog offset must be those of the queue's last key. The `min` entry is written lazily
  (`correctMinCqOffset`, on the first `getMinOffsetInQueue`), so a missing one is no finding; a stale one
  (before the CommitLog's first file) is corrected by the broker when it is next asked.
- A queue with entries but no `max` entry is invisible (`getMaxOffsetInQueue` answers 0).
- CHECKPOINT (`appendMaxPhyOffset`, 8 bytes, in the same write batch as the entries) = the end of the last
  record dispatched: never beyond the CommitLog's end (the broker then truncates the offset table,
  `truncateDirty`), never before a `max` entry's record end; before the CommitLog's end is dispatch lag.
- A non-system topic's queue in the offset table whose topic the topic config (topics.json, or
  `config/topics/`) lacks is destroyed by the broker's next `cleanDirty` (`rules.rocksdb`). Without any topic
  config the check is not made: a copy without config/ says nothing about the broker's topic table.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from mqtool.audit.plan import AuditPlan
from mqtool.audit.results import AuditResults, RocksDBState
from mqtool.formats.rocksdb_cq import CQ_COLUMN_FAMILY
from mqtool.rules.rocksdb import clean_dirty_message, iterate_offset_table_2_find_dirty
from mqtool.store.findings import Findings
from mqtool.store.rocksdb import CHECK, CQ_DIR, QueueKeyRange, QueueOffsets

CHECKPOINT_SIZE = 8  # appendMaxPhyOffset: maxPhyOffset only


def read_rocksdb_state(plan: AuditPlan, findings: Findings) -> RocksDBState | None:
    """The offset table, every queue's first and last key and the CHECKPOINT; None without a RocksDB
    consume queue (or when it does not open: `Store` has the finding)."""
    db = plan.store.rocksdb_consume_queues
    if db is None:
        return None
    offsets = dict(plan.store.rocksdb_queue_offsets)
    max_units = {}
    for (topic, qid), qo in offsets.items():
        if qo.max_cq_offset is not None and (u := db.unit(topic, qid, qo.max_cq_offset)) is not None:
            max_units[(topic, qid)] = u
    return RocksDBState(offsets, db.queue_key_ranges(findings), db.checkpoint_value(), max_units)


def check_rocksdb(plan: AuditPlan, res: AuditResults, findings: Findings) -> dict | None:
    """The driver: `check_state` over what `read_rocksdb_state` reads; None for a store without one."""
    state = read_rocksdb_state(plan, findings)
    if state is None:
        return None
    topics = plan.store.config_files.topics
    config = None if topics is None else (set(topics.topic_config_table), plan.store.config_files.topics_file)
    return check_state(state, plan.commitlog_min, res.max_offset, findings, config)


def check_state(state: RocksDBState, commitlog_min: int, commitlog_end: int, findings: Findings,
                topic_config: tuple[Collection[str], str] | None = None) -> dict:
    """Every check of the module docstring; returns the summary. `topic_config`: the configured topics and
    the file they came from (None: no topic config, no `cleanDirty` check)."""
    for key in sorted(set(state.offsets) | set(state.keys)):
        _check_queue(key, state.offsets.get(key), state.keys.get(key), commitlog_min, findings)
    if topic_config is not None:
        clean_dirty_findings(state.offsets, *topic_config, findings)
    checkpoint = _check_checkpoint(state, commitlog_end, findings)
    return {"queues": len(state.keys), "offset_table_queues": len(state.offsets),
            "max_entries": sum(q.max_cq_offset is not None for q in state.offsets.values()),
            "min_entries": sum(q.min_cq_offset is not None for q in state.offsets.values()),
            "queues_without_offsets": len(set(state.keys) - set(state.offsets)),
            "checkpoint": checkpoint, "commitlog_end": commitlog_end}


def clean_dirty_findings(offsets: Iterable[tuple[str, int]], exist_topics: Collection[str], config_file: str,
                         findings: Findings) -> None:
    """A warning per queue `iterate_offset_table_2_find_dirty` names: `cleanDirty` destroys it."""
    for topic, qids in sorted(iterate_offset_table_2_find_dirty(offsets, exist_topics).items()):
        for qid in sorted(qids):
            findings.add(CQ_DIR, None, CHECK, "warning", clean_dirty_message(config_file), topic, qid)


def _check_queue(key: tuple[str, int], qo: QueueOffsets | None, keys: QueueKeyRange | None, commitlog_min: int,
                 findings: Findings) -> None:
    topic, qid = key

    def add(severity: str, message: str) -> None:
        findings.add(CQ_DIR, None, CHECK, severity, message, topic, qid)

    if qo is None or qo.max_cq_offset is None:
        if keys is not None:
            add("warning", f"entries at queue offsets {keys.first_offset}..{keys.last_offset} but no max entry in "
                "the offset table: the broker's getMaxOffsetInQueue answers 0, consumers never see them")
        if qo is None:
            return
    if keys is None:
        if qo.max_phy_offset is not None and qo.max_phy_offset < commitlog_min:
            add("info", f"no entries left; the offset table's max entry (queue offset {qo.max_cq_offset}, CommitLog "
                f"offset {qo.max_phy_offset}) is before the CommitLog's first file {commitlog_min}: deleted by "
                "retention (the compaction filter drops expired entries)")
        elif qo.max_cq_offset is not None:
            add("error", f"the offset table's max entry names queue offset {qo.max_cq_offset} (CommitLog offset "
                f"{qo.max_phy_offset}) but the queue has no entries")
        return
    if qo.max_cq_offset is not None:
        _check_max(qo, keys, add)
    if qo.min_cq_offset is not None:
        _check_min(qo, keys, commitlog_min, add)


def _check_max(qo: QueueOffsets, keys: QueueKeyRange, add) -> None:
    m, last = qo.max_cq_offset, keys.last_offset
    if m > last:
        add("error", f"the offset table's max entry names queue offset {m} but the last entry is {last}: offsets "
            f"{last + 1}..{m} have no entry (getMaxOffsetInQueue answers {m + 1})")
    elif m < last:
        add("warning", f"entries at queue offsets {m + 1}..{last} lie beyond the offset table's max entry {m}: the "
            f"broker does not serve them (getMaxOffsetInQueue answers {m + 1}) and overwrites them when it "
            "dispatches those offsets again (left so by truncateDirty)")
    elif keys.last is not None and keys.last.commitlog_offset != qo.max_phy_offset:
        add("error", f"the offset table's max entry names CommitLog offset {qo.max_phy_offset} for queue offset {m}, "
            f"the entry there names {keys.last.commitlog_offset}")


def _check_min(qo: QueueOffsets, keys: QueueKeyRange, commitlog_min: int, add) -> None:
    n, first = qo.min_cq_offset, keys.first_offset
    if qo.max_cq_offset is not None and n > qo.max_cq_offset:
        add("error", f"the offset table's min entry {n} is beyond its max entry {qo.max_cq_offset}")
    elif n < first:
        if qo.min_phy_offset is not None and qo.min_phy_offset < commitlog_min:
            add("info", f"the offset table's min entry (queue offset {n}, CommitLog offset {qo.min_phy_offset}) is "
                f"before the CommitLog's first file {commitlog_min}: stale, the broker corrects it when next asked "
                "(getMinCqOffset)")
        else:
            add("warning", f"the offset table's min entry names queue offset {n} but the first entry is {first}: "
                f"offsets {n}..{first - 1} have no entry (getMinOffsetInQueue answers {n})")
    elif n > first:
        if keys.first is not None and keys.first.commitlog_offset < commitlog_min:
            add("info", f"entries at queue offsets {first}..{n - 1}, below the offset table's min entry {n}, name "
                "records before the CommitLog's first file: the compaction filter drops them")
        else:
            add("warning", f"entries at queue offsets {first}..{n - 1} lie below the offset table's min entry {n}: "
                "consumers starting at the min never get them")
    elif keys.first is not None and keys.first.commitlog_offset != qo.min_phy_offset:
        add("error", f"the offset table's min entry names CommitLog offset {qo.min_phy_offset} for queue offset {n}, "
            f"the entry there names {keys.first.commitlog_offset}")


def _check_checkpoint(state: RocksDBState, commitlog_end: int, findings: Findings) -> int | None:
    """The CHECKPOINT against the CommitLog's end and the max entries' record ends; its value (None: absent)."""
    def add(severity: str, message: str) -> None:
        findings.add(CQ_DIR, None, CHECK, severity, message)

    raw = state.checkpoint
    if raw is None:
        if state.keys:
            add("warning", "no CHECKPOINT entry in the offset column family (getMaxPhyOffset answers 0): "
                f"the highest CommitLog offset dispatched into the {CQ_COLUMN_FAMILY!r} family is unknown")
        return None
    if len(raw) != CHECKPOINT_SIZE:
        add("error", f"the CHECKPOINT value is {len(raw)} bytes, not {CHECKPOINT_SIZE}")
        return None
    cp = int.from_bytes(raw, "big", signed=True)
    if cp > commitlog_end:
        add("error", f"CHECKPOINT {cp} is beyond the CommitLog's end {commitlog_end}: the consume queue was built "
            f"from {cp - commitlog_end} bytes the CommitLog does not have (at start the broker truncates the "
            "offset table to the CommitLog's end: truncateDirty)")
    elif cp < commitlog_end:
        add("info", f"CHECKPOINT {cp} is {commitlog_end - cp} bytes before the CommitLog's end {commitlog_end}: "
            "records after it are not dispatched yet")
    ends = {k: u.commitlog_offset + u.size for k, u in state.max_units.items()}
    beyond = {k: e for k, e in ends.items() if e > cp}
    if beyond:
        (topic, qid), end = max(beyond.items(), key=lambda kv: (kv[1], kv[0]))
        add("error", f"{len(beyond)} queue(s)' max entries name records ending beyond the CHECKPOINT {cp} (furthest: "
            f"{topic}/{qid}, up to {end}); they are written in one batch with it")
    return cp
