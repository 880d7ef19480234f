"""`trace`: from a query to the traces of the matching messages (pure: returns records, never prints)."""

from __future__ import annotations

import re

from mqtool.formats.message import MessageRecord, RecordError
from mqtool.store.findings import Findings
from mqtool.store.store import Store
from mqtool.trace.find import Family, Finder, ScanFinder, collect_family, in_topic
from mqtool.trace.model import Trace, TraceError, TraceQuery
from mqtool.trace.timeline import build_timeline, store_as_of

_HEX = re.compile(r"^[0-9A-Fa-f]+$")


def _record_at(store: Store, offset: int) -> MessageRecord | None:
    """The record starting at `offset`, or None when no valid record starts there."""
    try:
        rec = store.commitlog.read(offset)
    except RecordError:
        return None
    return rec if rec.total_size == rec.computed_size else None


def offset_of_msg_id(msg_id: str) -> int | None:
    """The physical offset an offsetMsgId encodes (its last 16 hex digits), None for other ids (§2.4)."""
    if len(msg_id) in (32, 56) and _HEX.match(msg_id):
        return int(msg_id[-16:], 16)
    return None


def families(store: Store, query: TraceQuery, finder: Finder) -> list[Family]:
    """The records of each message the query names; newest message first."""
    if query.uniq_key is not None:
        fam = collect_family(finder, [], uniq_keys=[query.uniq_key.strip()])
        return [fam] if len(fam) else []
    if query.offset is not None:
        rec = _record_at(store, query.offset)
        return [collect_family(finder, [rec])] if rec is not None else []
    if query.msg_id is not None:
        mid = query.msg_id.strip()
        if not _HEX.match(mid):
            raise TraceError(f"not a message id: {mid!r} (an offsetMsgId or a UNIQ_KEY is hexadecimal)")
        off = offset_of_msg_id(mid)
        if off is not None:
            rec = _record_at(store, off)
            if rec is not None and rec.msg_id.upper() == mid.upper():
                return [collect_family(finder, [rec])]
        # not this store's offsetMsgId: clients call the UNIQ_KEY "msgId"; retries name it ORIGIN_MESSAGE_ID
        fam = collect_family(finder, [], uniq_keys=[mid], msg_ids=[mid])
        return [fam] if len(fam) else []
    key = query.key.strip()
    topic = None if query.topic is None else query.topic.strip()
    hits = sorted((r for r in finder.by_key(key, topic) if key in r.keys and (topic is None or in_topic(r, topic))),
                  key=lambda r: r.physical_offset, reverse=True)
    out: list[Family] = []
    covered: set[int] = set()
    for rec in hits:
        if rec.physical_offset in covered:
            continue
        fam = collect_family(finder, [rec])
        covered |= set(fam.records)
        out.append(fam)
    return out


def select_finder(store: Store, query: TraceQuery, index_dir=None,
                  lookup: str = "auto") -> tuple[Finder, str, list[str]]:
    """The finder for a query, its name for the output ("indexfile", "indexfile+scan", "sqlite",
    "sqlite+scan", "scan") and notes. `auto`: for --key / --uniq-key the broker's IndexFiles when
    they can answer, else the SQLite index when `index_dir` is given, else the scan; the other
    queries (offset, msgId) need joins the IndexFile does not hold and never use it."""
    if lookup in ("auto", "indexfile") and (query.key is not None or query.uniq_key is not None):
        from mqtool.trace.indexfile import indexfile_finder

        found = indexfile_finder(store)
        if found is not None:
            return found[0], found[1].source, []
        if lookup == "indexfile":
            raise TraceError(f"{store.root}: no IndexFile can answer this lookup (index/ absent, empty or damaged)")
    if lookup in ("auto", "sqlite") and index_dir is not None:
        from mqtool.trace.index import index_finder

        finder, notes = index_finder(store, index_dir)
        return finder, "sqlite+scan" if len(getattr(finder, "finders", ())) > 1 else "sqlite", notes
    if lookup == "sqlite":
        raise TraceError("--lookup sqlite needs --index DIR")
    return ScanFinder(store), "scan", []


def trace(store: Store, query: TraceQuery, *, finder: Finder | None = None, as_of: int | None = None,
          limit: int | None = None, lookup: str | None = None, broker_version: str = "5.3") -> list[Trace]:
    """Trace every message the query names (newest first, at most `limit`); [] when none is found.
    `lookup` names the finder in each trace's JSON (`query.lookup`); `broker_version` whose rules the verdict's
    predictions follow (4.9: transaction check rounds without 5.x's 1 s sleep)."""
    if limit is not None and limit <= 0:
        raise TraceError(f"--limit must be positive, got {limit}")
    finder = finder or ScanFinder(store)
    fams = families(store, query, finder)
    if limit is not None:
        fams = fams[:limit]
    out = []
    end = recovered_end(store) if fams else None
    for fam in fams:
        notes = _cut_by_recovery(fam, end)
        recs = fam.sorted()
        now = as_of if as_of is not None else store_as_of(store, recs)
        records, stages, verdict = build_timeline(store, fam, now, broker_version)
        out.append(Trace(query, sorted(fam.uniq_keys), records, stages, verdict, now, notes=notes, lookup=lookup))
    return out


def recovered_end(store: Store) -> int | None:
    """Where the broker's recovery ends the CommitLog when it starts on a store it did not shut down cleanly
    (the `abort` file: `recoverAbnormally`, as `inspect restart` shows it); None after a clean shutdown."""
    from mqtool.store.recovery import commitlog_recovery, java_bool, shutdown_state

    if shutdown_state(store)["clean"]:
        return None
    cl = commitlog_recovery(store, False, java_bool(store.config, "checkCRCOnRecover", True), False, Findings())
    return None if cl is None else cl["end_offset"]


def _cut_by_recovery(fam: Family, end: int | None) -> list[str]:
    """Leave out the records recovery cuts (a torn delivery did not happen: the broker delivers the message
    again); kept when nothing else of the message is left. The note says which."""
    cut = sorted(o for o in fam.records if end is not None and o >= end)
    if not cut or len(cut) == len(fam.records):
        return []
    for o in cut:
        del fam.records[o], fam.joins[o]
    return [f"left out: record(s) at {', '.join(map(str, cut))}, at or after {end}, where recovery ends the "
            "CommitLog (the broker was not shut down cleanly: the abort file): it cuts them when it starts"]
