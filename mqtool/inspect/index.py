"""The `index` view: the broker's own IndexFiles (spec §11), as `mqadmin queryMsgByKey` would use them.

Three documents, one call each: `index_files_view` (one row per file: header, fill, slots used,
longest chain, entries outside the CommitLog, findings), `index_lookup` (what
`IndexService.queryOffset` finds for topic#key, kept only where the record really carries the key
in that topic) and `index_file_dump` (one file entry by entry). Schema: schemas/inspect-index.json.
"""

from __future__ import annotations

from pathlib import Path

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.indexfile import build_key, index_key_hash
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.inspect import JSON_VERSION
from mqtool.rules.index import LONG_MAX, MAX_MSGS_NUM_BATCH, query_offset
from mqtool.store.findings import Findings, sort_findings
from mqtool.store.indexfile import (
    IndexFile,
    check_index_file,
    index_file_stats,
    open_index_dir,
    open_index_file,
)
from mqtool.store.keyindex import close_index_files, walk_cap
from mqtool.store.keyindex import commitlog_range as _commitlog_range
from mqtool.store.store import Store


def index_files_view(
    store: Store, commitlog_range: tuple[int, int] | None = None, utc_offset_ms: int | None = None
) -> dict:
    """The `index` document: one row per file of `index/`, with totals and findings.

    `commitlog_range` defaults to the store's CommitLog; `utc_offset_ms` is the broker's local-time
    offset for the file-name check (unknown: any time zone is allowed)."""
    findings = Findings()
    files = open_index_dir(store.root, findings, store.config)
    rng = commitlog_range if commitlog_range is not None else _commitlog_range(store)
    rows = []
    for f in files:
        check_index_file(f, findings, utc_offset_ms)
        rows.append(index_file_stats(f, rng))
    close_index_files(files)
    for row in rows:
        row["findings"] = [x.as_dict() for x in sort_findings(findings) if x.file == row["file"]]
    if not (store.root / "index").is_dir():
        findings.add(
            "index",
            None,
            "index.integrity",
            "info",
            "no index/ directory (messageIndexEnable=false, or nothing was dispatched yet)",
        )
    return {
        "version": JSON_VERSION,
        "view": "index",
        "commitlog_range": None if rng is None else {"min_offset": rng[0], "max_offset": rng[1]},
        "files": rows,
        "totals": {
            "files": len(rows),
            "entries": sum(r["entries"] for r in rows),
            "entries_outside_commitlog": None if rng is None else sum(r["entries_outside_commitlog"] for r in rows),
            "begin_timestamp": min((r["begin_timestamp"] for r in rows if r["entries"]), default=None),
            "end_timestamp": max((r["end_timestamp"] for r in rows if r["entries"]), default=None),
        },
        "findings": [x.as_dict() for x in sort_findings(findings)],
    }


def _carrier(record, topic: str, key: str) -> str | None:
    """How a record carries the key in that topic ("UNIQ_KEY" or "KEYS"), None when it does not."""
    if record.topic != topic:
        return None
    props = record.properties
    if props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
        return PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    if key in (props.get(PROPERTY_KEYS) or "").split(" "):
        return PROPERTY_KEYS
    return None


def _candidate(store: Store, files: list[IndexFile], i: int, n: int, phy: int, topic: str, key: str) -> dict:
    """One chain entry whose hash matched, resolved against the CommitLog."""
    f = files[i]
    _, _, diff, _ = f.entry(n)
    row = {"physical_offset": phy, "file": f.rel, "entry": n, "index_time": f.begin_timestamp + diff * 1000}
    try:
        rec = store.commitlog.read(phy)
    except Exception as e:  # a bad offset is a result to show, not a crash
        return {**row, "reason": f"no record there: {e}"}
    how = _carrier(rec, topic, key)
    row.update(
        {
            "timestamp": rec.store_timestamp,
            "topic": rec.topic,
            "queue_id": rec.queue_id,
            "queue_offset": rec.queue_offset,
            "keys": rec.properties.get(PROPERTY_KEYS),
            "uniq_key": rec.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        }
    )
    if how is None:
        return {**row, "reason": "hash collision: the record does not carry the key in that topic"}
    return {**row, "matched_by": how}


def index_lookup(
    store: Store, topic: str, key: str, begin: int | None = None, end: int | None = None, limit: int | None = None
) -> dict:
    """What the broker's `IndexService.queryOffset` finds for topic#key in [begin, end] (default: all
    time), walked without the 64-offset cap; `matches` keeps the records that really carry the key
    in that topic (newest first, each offset once, at most `limit`); `rejected` says why the others
    went. `broker_phy_offsets` is what the broker itself returns (maxNum capped at maxMsgsNumBatch)."""
    findings = Findings()
    files = open_index_dir(store.root, findings, store.config)
    begin = 0 if begin is None else begin
    end = LONG_MAX if end is None else end
    hits: list[tuple[int, int, int]] = []
    cap = walk_cap(files)
    result = query_offset(
        files, topic, key, cap, begin, end, cap, on_match=lambda i, n, phy: hits.append((i, n, phy)), max_steps=cap
    )
    broker_cap = int(store.config.raw.get("maxMsgsNumBatch", MAX_MSGS_NUM_BATCH))
    broker = query_offset(files, topic, key, limit or broker_cap, begin, end, broker_cap, max_steps=cap).phy_offsets
    matches, rejected, seen = [], [], set()
    for i, n, phy in hits:
        row = _candidate(store, files, i, n, phy, topic, key)
        if "reason" in row:
            rejected.append(row)
        elif phy not in seen and (limit is None or len(matches) < limit):
            seen.add(phy)
            matches.append(row)
    searched = [f.rel for f in files]
    close_index_files(files)
    if not searched:
        findings.add("index", None, "index.integrity", "info", "no index file: the lookup needs a scan instead")
    full = build_key(topic, key)
    return {
        "version": JSON_VERSION,
        "view": "index",
        "topic": topic,
        "key": key,
        "index_key": full,
        "key_hash": index_key_hash(full),
        "begin": begin,
        "end": end,
        "limit": limit,
        "files": searched,
        "hash_matches": len(hits),
        "matches": matches,
        "rejected": rejected,
        "broker_phy_offsets": broker,
        "index_last_update_timestamp": result.index_last_update_timestamp,
        "index_last_update_phyoffset": result.index_last_update_phyoffset,
        "findings": [x.as_dict() for x in sort_findings(findings)],
    }


def index_file_dump(
    path: Path | str, config: BrokerConfig | None = None, limit: int | None = None, utc_offset_ms: int | None = None
) -> dict:
    """One IndexFile entry by entry (a `dump` document of kind "index"): header, stats, the set slots
    and the written entries (at most `limit` of each), findings."""
    path = Path(path)
    findings = Findings()
    with open_index_file(path, findings, config, path.name) as f:
        check_index_file(f, findings, utc_offset_ms)
        stats = index_file_stats(f)
        set_slots = [(s, int(v)) for s, v in enumerate(f.slots.tolist()) if v]
        written = f.written()
        entries = []
        for n in range(1, min(len(written), limit if limit is not None else len(written)) + 1):
            kh, phy, diff, prev = f.entry(n)
            entries.append(
                {
                    "entry": n,
                    "key_hash": kh,
                    "slot": kh % f.hash_slot_num,
                    "phy_offset": phy,
                    "time_diff": diff,
                    "timestamp": f.begin_timestamp + diff * 1000,
                    "prev_index": prev,
                }
            )
        doc = {
            "version": JSON_VERSION,
            "view": "dump",
            "kind": "index",
            "file": str(path),
            "size": f.size,
            "header": dict(f.header),
            "stats": {k: v for k, v in stats.items() if k not in f.header and k != "file"},
            "slot_count": len(set_slots),
            "slots": [{"slot": s, "entry": v} for s, v in set_slots[:limit]],
            "entry_count": len(written),
            "entries": entries,
            "findings": [x.as_dict() for x in sort_findings(findings)],
        }
    return doc
