"""What `overview` says about the store's files beyond the CommitLog: every path accounted for,
the production layouts found (spec §12-§16), and each topic's configured queues next to the queue
directories on disk (issue 14: "every path accounted for"; issue 15: detection).

A path mqtool does not know is an `info` finding naming it; a layout mqtool detects but does not
read yet (`rocksdbstore/`, the v2 config `config/rdb`) is an `info` finding
saying so. Nothing is skipped silently. What is read shows in the overview: RocksDB queues among the
queues, which copy of the config was used (`config_sources`), `compaction` per queue and `pop` per group.
"""

import re
from pathlib import Path

from mqtool.formats.dledger import CHECKPOINT_FILE, TERM_FILE
from mqtool.store.findings import Findings
from mqtool.store.store import Store

# The readers and rules of the other layouts (compaction, POP, RocksDB) are imported where a store has the layout.

CHECK = "store.files"
CONFIG_CHECK = "store.config"
NO_QUEUE_DIRECTORY = "configured, no queue directory (nothing dispatched yet)"

_MAPPED = re.compile(r"^\d{20}$")
_INDEX_NAME = re.compile(r"^\d{17}$")

ROOT_PATHS = {  # name in the store root -> what it is (spec §1, §12-§16)
    "commitlog": "CommitLog",
    "consumequeue": "ConsumeQueue",
    "batchconsumequeue": "BatchConsumeQueue",
    "index": "IndexFile",
    "timerlog": "TimerLog",
    "timerwheel": "timer wheel",
    "timerwheel.gz": "timer wheel (gzipped copy)",
    "checkpoint": "checkpoint (StoreCheckpoint)",
    "abort": "abort (the broker is running or did not shut down cleanly)",
    # DefaultMessageStore.createTempFile (5.x) writes the pid with MixAll.string2File at every start, which
    # copies the abort file it replaces first: empty unless that start followed a crash (then its pid)
    "abort.bak": "abort.bak (5.x: written at every broker start, the copy of the abort file it replaced: "
                 "empty, or the crashed run's pid when the start followed a crash)",
    "lock": "lock (the running broker's file lock)",
    "config": "config directory",
    "compaction": "compaction",
    "rocksdbstore": "RocksDB consume queue",
    "kvStore": "RocksDB POP state (5.3.2+)",
}
NOT_READ = {"kvStore"}

CONFIG_FILES = {  # config/ file -> what it is; True when mqtool reads it
    "delayOffset.json": ("delay offsets (ScheduleMessageService)", True),
    "consumerOffset.json": ("consumer offsets (ConsumerOffsetManager)", True),
    "topics.json": ("topic config (TopicConfigManager)", True),
    "subscriptionGroup.json": ("subscription groups (SubscriptionGroupManager)", True),
    "timercheck": ("timer checkpoint (TimerCheckpoint)", True),
    "timermetrics": ("timer metrics (TimerMetrics)", False),
    "transactionMetrics": ("transaction metrics (TransactionMetrics)", False),
    "consumerFilter.json": ("consumer filters (ConsumerFilterManager)", False),
    "consumerOrderInfo.json": ("orderly POP consumer info (ConsumerOrderInfoManager)", False),
    "messageRequestMode.json": ("message request modes (MessageRequestModeManager)", False),
    "lmqConsumerOffset.json": ("LMQ consumer offsets (LmqConsumerOffsetManager)", False),
    "topics": ("topic config in RocksDB (5.2+)", True),
    "subscriptionGroups": ("subscription groups in RocksDB (5.2+)", True),
    "consumerOffsets": ("consumer offsets in RocksDB (5.2+)", True),
    "rdb": ("config RocksDB (configManagerVersion=v2)", False),
}
DLEDGER_PATHS = {"data": ("DLedger data files", True), "index": ("DLedger index files", True),
                 CHECKPOINT_FILE: ("DLedger checkpoint (committedIndex)", True),
                 CHECKPOINT_FILE + ".bak": ("DLedger checkpoint backup", False),
                 TERM_FILE: ("DLedger term (currTerm, voteLeader)", True),
                 TERM_FILE + ".bak": ("DLedger term backup", False)}
COMPACTION_PATHS = {"compactionLog": "compaction log", "compactionCq": "compaction ConsumeQueue",
                    "position-checkpoint": "compaction position checkpoint",
                    "position-checkpoint.bak": "compaction position checkpoint backup",
                    "compacting": "compaction in progress", "replicating": "compaction replication"}
COMPACTION_READ = {"compactionLog", "compactionCq", "position-checkpoint", "position-checkpoint.bak"}
# what Store picks against the JSON copy
READ_ROCKSDB_CONFIG = ("config/topics", "config/consumerOffsets", "config/subscriptionGroups")


def _entry(store: Store, p: Path, kind: str | None, read: bool) -> dict:
    return {"path": str(p.relative_to(store.root)), "type": "dir" if p.is_dir() else "file",
            "kind": kind, "read": read}


def _config_kind(name: str) -> tuple[str, bool] | None:
    for suffix, what in ((".bak", "backup"), (".tmp", "temporary copy (4.x write in progress)")):
        if name.endswith(suffix) and name[: -len(suffix)] in CONFIG_FILES:
            kind, read = CONFIG_FILES[name[: -len(suffix)]]
            return f"{kind}, {what}", read and suffix == ".bak"
    return CONFIG_FILES.get(name)


def paths(store: Store, findings: Findings) -> list[dict]:
    """Every file and directory of the store root (and of config/, dledger-*/ and compaction/), with
    what each is and whether mqtool reads it; an unknown one is an `info` finding naming it."""
    out: list[dict] = []
    layouts = store.layouts

    def unknown(p: Path) -> None:
        out.append(_entry(store, p, None, False))
        findings.add(str(p.relative_to(store.root)), None, CHECK, "info", "unknown path: mqtool does not know "
                     "what this is and does not read it")

    for p in sorted(store.root.iterdir()):
        name = p.name
        if name.startswith("dledger-") and p.is_dir():
            out.append(_entry(store, p, "DLedger CommitLog", True))
            for q in sorted(p.iterdir()):
                known = DLEDGER_PATHS.get(q.name)
                out.append(_entry(store, q, *known)) if known else unknown(q)
        elif name == "config" and p.is_dir():
            out.append(_entry(store, p, ROOT_PATHS[name], True))
            for q in sorted(p.iterdir()):
                known = _config_kind(q.name)
                out.append(_entry(store, q, *known)) if known else unknown(q)
        elif name == "compaction" and p.is_dir():
            out.append(_entry(store, p, ROOT_PATHS[name], True))
            for q in sorted(p.iterdir()):
                kind = COMPACTION_PATHS.get(q.name)
                out.append(_entry(store, q, kind, q.name in COMPACTION_READ)) if kind else unknown(q)
        elif name == "consumequeue" and "consumequeue" in layouts.rocksdb_consume_queue:
            out.append(_entry(store, p, "RocksDB consume queue", True))
        elif name in ROOT_PATHS:
            out.append(_entry(store, p, ROOT_PATHS[name], name not in NOT_READ and name != "rocksdbstore"))
        else:
            unknown(p)
    return out


def not_yet_read(store: Store, findings: Findings) -> None:
    """An `info` finding per detected layout mqtool does not read yet."""
    lay = store.layouts
    for d in lay.rocksdb_consume_queue:
        if d != "consumequeue":
            findings.add(d, None, CHECK, "info", "RocksDB consume queue (spec §14): detected, not yet read; the "
                         "queue views read consumequeue/ only")
    for d in lay.rocksdb_config:
        if d not in READ_ROCKSDB_CONFIG:
            findings.add(d, None, CONFIG_CHECK, "info", "config in RocksDB (spec §14): detected, not yet read")


def _attr(attributes: dict | None, key: str) -> str | None:
    for k, v in (attributes or {}).items():
        if k.lstrip("+") == key:
            return v
    return None


def topic_config(store: Store, findings: Findings) -> dict:
    """config/topics.json's queues next to the queue directories on disk (empty without topics.json)."""
    topics, topics_file = store.config_files.topics, store.config_files.topics_file
    if topics is None:
        return {"file": None, "topics": []}
    on_disk: dict[str, list[int]] = {}
    for t, q in [*store.queue_ids, *store.batch_queue_ids]:
        on_disk.setdefault(t, []).append(q)
    table = topics.topic_config_table
    rows = []
    idle = []  # configured, no queue directory: one finding naming them all
    for t in sorted(set(table) | set(on_disk)):
        tc = table.get(t)
        qs = sorted(on_disk.get(t, []))
        problems = []
        if tc is None:
            problems.append("queue directories but no entry in topics.json")
        else:
            beyond = [q for q in qs if not 0 <= q < tc.read_queue_nums]
            if beyond:
                problems.append(f"queue directories {beyond} beyond readQueueNums {tc.read_queue_nums}")
            if not qs:
                problems.append(NO_QUEUE_DIRECTORY)
                idle.append(t)
        for p in problems:
            if p == NO_QUEUE_DIRECTORY:
                continue
            where = "batchconsumequeue" if any(b == t for b, _ in store.batch_queue_ids) else "consumequeue"
            findings.add(f"{where}/{t}" if qs else topics_file, None, CONFIG_CHECK, "info", p, t)
        rows.append({"topic": t, "configured": tc is not None,
                     "read_queue_nums": tc.read_queue_nums if tc else None,
                     "write_queue_nums": tc.write_queue_nums if tc else None,
                     "perm": tc.perm if tc else None,
                     "queue_type": _attr(tc.attributes, "queue.type") if tc else None,
                     "cleanup_policy": _attr(tc.attributes, "cleanup.policy") if tc else None,
                     "queues_on_disk": qs, "problems": problems})
    if idle:
        findings.add(topics_file, None, CONFIG_CHECK, "info", f"{len(idle)} topic(s) {NO_QUEUE_DIRECTORY}: "
                     + ", ".join(idle))
    return {"file": topics_file, "topics": rows}


def layouts_section(store: Store) -> dict:
    """The layouts found, and the DLedger node's state (from its checkpoint and currterm, no walk)."""
    doc = store.layouts.as_dict()
    dl = store.dledger
    doc["dledger_log"] = None if dl is None else {
        "home": str(dl.home.relative_to(store.root)), "data_files": len(dl.data.files),
        "index_files": len(dl.index.files), "divided_commitlog_offset": dl.divided_offset,
        "committed_index": (dl.checkpoint or {}).get("committed_index"),
        "end_index": (dl.checkpoint or {}).get("end_index"),
        "curr_term": (dl.currterm or {}).get("curr_term"), "vote_leader": (dl.currterm or {}).get("vote_leader")}
    return doc


def batch_queues(store: Store, per_queue: dict, findings: Findings) -> dict[tuple[str, int], dict]:
    """Each BatchConsumeQueue as an overview queue entry (logical offsets; `batch`: true)."""
    out = {}
    for t, q in store.batch_queue_ids:
        bcq = store.batch_consume_queue(t, q)
        lo, hi = bcq.offsets(findings)
        out[(t, q)] = {"queue_id": q, "records": per_queue.get((t, q), 0), "cq_min_offset": lo, "cq_max_offset": hi,
                       "cq_files": len(bcq.queue.files), "batch": True}
    return out


def rocksdb_queues(store: Store, per_queue: dict, findings: Findings | None = None) -> dict[tuple[str, int], dict]:
    """Each RocksDB consume queue (spec §14) as an overview queue entry, offsets from its offset table; with
    `findings` and a topic config, a warning for each queue the broker's `cleanDirty` will destroy."""
    out = {}
    for (t, q), qo in store.rocksdb_queue_offsets.items():
        out[(t, q)] = {"queue_id": q, "records": per_queue.get((t, q), 0), "cq_min_offset": qo.min_cq_offset,
                       "cq_max_offset": qo.max_offset, "cq_files": 0, "rocksdb": True}
    cf = store.config_files
    if findings is not None and out and cf.topics is not None:  # (no queue: none is dirty)
        from mqtool.rules.rocksdb import clean_dirty_message, iterate_offset_table_2_find_dirty
        from mqtool.store.rocksdb import CHECK as ROCKSDB_CHECK
        from mqtool.store.rocksdb import CQ_DIR as ROCKSDB_CQ_DIR

        dirty = iterate_offset_table_2_find_dirty(out, cf.topics.topic_config_table)
        for t, q in sorted((t, q) for t, qs in dirty.items() for q in qs):
            findings.add(ROCKSDB_CQ_DIR, None, ROCKSDB_CHECK, "warning", clean_dirty_message(cf.topics_file), t, q)
    return out


def config_sources(store: Store) -> dict | None:
    """Which copy of consumer offsets, topics and subscription groups was used ("json", "rocksdb" or None), when
    the store has config in RocksDB (None otherwise: then only the JSON files exist)."""
    if not store.layouts.rocksdb_config:
        return None
    cf = store.config_files
    topics = None if cf.topics_file is None else "rocksdb" if cf.topics_file == "config/topics" else "json"
    out = {"consumer_offsets": cf.consumer_offsets_source, "topics": topics, "topics_file": cf.topics_file}
    if "config/subscriptionGroups" in store.layouts.rocksdb_config:  # only when there is a RocksDB copy
        out["subscription_groups"] = cf.subscription_groups_source
    return out


def load_config_files(store: Store) -> None:
    """Read the files the broker loads at start that this view does not otherwise use before it collects
    the findings (consumer offsets, subscription groups, topics, checkpoint, timercheck), so that an
    unparsable or short one is a finding here as delayOffset.json's is."""
    cf = store.config_files
    cf.consumer_offsets, cf.subscription_groups, cf.topics  # noqa: B018 - read for their findings
    store.checkpoint, store.timercheck  # noqa: B018 - a short page is a `store.files` finding


def compaction_section(store: Store, queues: dict[tuple[str, int], dict], findings: Findings) -> list[dict] | None:
    """Per compaction queue (spec §16): records kept in the compaction log next to the messages of its
    ordinary ConsumeQueue (`in_commitlog`); None without compaction/."""
    if not store.layouts.compaction:
        return None
    counts = {k: q["cq_max_offset"] - q["cq_min_offset"] for k, q in queues.items()
              if q["cq_max_offset"] is not None and q["cq_min_offset"] is not None}
    from mqtool.store.compaction import compaction_summary

    return compaction_summary(store.root, findings, counts)


def compaction_next_run(store: Store, rows: list[dict] | None) -> list[dict] | None:
    """Per compaction queue of `compaction_section`'s rows: the queue offsets the next run keeps."""
    if rows is None:
        return None
    return [{"topic": r["topic"], "queue_id": r["queue_id"],
             "keeps": next_compaction_keeps(store, r["topic"], r["queue_id"], r["compacted_to"])} for r in rows]


def next_compaction_keeps(store: Store, topic: str, queue_id: int, position: int | None) -> list[int] | None:
    """Queue offsets of the compacted files' records the next `CompactionLog.doCompaction` keeps
    (`rules.compaction`; the last file stays as it is), None when no run would happen. The queue's
    damage is reported once, by `compaction_summary`."""
    from mqtool.rules.compaction import NO_POSITION, compaction
    from mqtool.store.compaction import CompactionQueue

    quiet = Findings()
    q = CompactionQueue.open(store.root, topic, queue_id, quiet)
    by_start: dict[int, list] = {}
    for rec in q.iter_records(quiet):
        by_start.setdefault(rec.physical_offset - rec.position, []).append(rec)
    files = [by_start.get(f.start, []) for f in q.log_files]
    kept = compaction(files, NO_POSITION if position is None else position)
    return None if kept is None else [r.queue_offset for r in kept]


def pop_section(store: Store, now_ms: int, findings: Findings) -> dict | None:
    """POP per (group, topic) at `now_ms` (spec §15): popped, acked, invisible, due, revived, next revive
    time; None when the store has no revive topic."""
    if not store.layouts.revive_topics:
        return None
    from mqtool.store.pop import read_store_pop

    state = read_store_pop(store, findings, now_ms)
    return {"revive_topics": list(store.layouts.revive_topics), "checkpoints": len(state.checks),
            "orphan_acks": len(state.orphan_acks), "groups": state.by_group()}
