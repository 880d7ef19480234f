"""The `replicas` view of a fleet: each slave against its master, and what a promotion now would lose.

Classic HA (RocketMQ 5.3.1 `DefaultHAConnection` / `DefaultHAClient`) copies the master's CommitLog bytes to
the same offsets on the slave; the slave builds its own ConsumeQueues and index from them. So the view

- compares the CommitLog byte ranges both stores hold (`store.compare`: mapped, never decoded);
- takes each side's end where the broker's own recovery would end it (`CommitLog#recoverNormally` on the
  last three files, `rules.recovery`): a torn last record of a slave killed mid-transfer is dropped unless
  it still parses, and a pre-allocated empty file past the end is deleted;
- decodes only the master's records the slave does not hold (or holds differently): counted per topic and
  queue, listed with their keys in `--json`. That is what a promotion of the slave now would lose;
- compares each ConsumeQueue's units (a late joiner's queues begin with `fillPreBlank` placeholder units;
  a slave killed before its reput caught up has queues behind its CommitLog).

The master of a group is its brokerId 0 (of several copies of it, the one whose CommitLog goes furthest);
without one, the slave whose CommitLog goes furthest stands in. DLedger groups are compared entry by entry
(`inspect.dledger_replicas`).
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.consumequeue import CQ_PRE_BLANK_SIZE
from mqtool.inspect import JSON_VERSION
from mqtool.inspect.dledger_replicas import dledger_group
from mqtool.inspect.replica_config import config_findings, config_sync
from mqtool.inspect.replica_records import Tally, records_in, walk_records
from mqtool.rules.epoch import truncate_offset
from mqtool.store.compare import compare_queues
from mqtool.store.epoch import read_epoch_entries
from mqtool.store.findings import Findings, findings_section
from mqtool.store.fleet import Fleet, FleetMember
from mqtool.store.recovery import LogEnd, log_end, shutdown_state
from mqtool.store.store import Store

CHECK = "fleet.replica"


def _overlaps(regions: list[list[int]]):
    """keep(start, end) for `records_in`: True for records overlapping a region."""
    lo = np.array([r[0] for r in regions], np.int64)
    hi = np.array([r[1] for r in regions], np.int64)

    def keep(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        i = np.searchsorted(hi, starts, side="right")  # the first region ending after the record starts
        j = np.minimum(i, len(lo) - 1)
        return (i < len(lo)) & (lo[j] < ends)

    return keep


def _split_records(store: Store, end: LogEnd, other_end: int, regions: list[list[int]], keys: bool):
    """This side's records the other side holds differently (overlapping a differing region) and those it does
    not hold at all (ending past `other_end`), as two `Tally`s. The walk starts at `other_end` when both agree
    up to there (a record boundary on both), else at the start of the file holding the first difference."""
    differing, only = Tally(keys), Tally(keys)
    if not regions and other_end >= end.end:
        return differing, only
    if regions:
        start = max(end.min_offset, regions[0][0] - regions[0][0] % store.commitlog.queue.file_size)
        over = _overlaps(regions)
    else:
        start = max(end.min_offset, other_end)
        over = None

    def keep(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        hit = over(starts, ends) if over is not None else np.zeros(len(starts), bool)
        return (ends > other_end) | hit

    def each(offset: int, size: int, *rest) -> None:
        hit = over is not None and bool(over(np.array([offset]), np.array([offset + size]))[0])
        (differing if hit else only).add(offset, size, *rest)

    walk_records(store, start, end.end, keep, each, keys)
    return differing, only


def compare_pair(master: Store, slave: Store, keys: bool = True, ends: tuple[LogEnd, LogEnd] | None = None) -> dict:
    """One slave against its master: CommitLog bytes, what only one side holds, the ConsumeQueues."""
    m, s = ends if ends is not None else (log_end(master), log_end(slave))
    lo, hi = max(m.min_offset, s.min_offset), min(m.end, s.end)
    diff = compare_queues(master.commitlog.queue, slave.commitlog.queue, lo, hi)
    regions = diff.regions
    if diff.more_regions:  # past the listed regions, every record of the common range counts as differing
        regions = [*regions[:-1], [regions[-1][0], hi]]
    differing, only_master = _split_records(master, m, s.end, regions, keys)
    _, only_slave = _split_records(slave, s, m.end, regions, keys)
    lost = differing.merged(only_master)
    behind_ms = (
        None
        if m.last_store_timestamp is None or s.last_store_timestamp is None
        else max(0, m.last_store_timestamp - s.last_store_timestamp)
    )
    return {
        "master_commitlog": {**m.as_dict(), "file_size": master.commitlog.queue.file_size},
        "slave_commitlog": {**s.as_dict(), "file_size": slave.commitlog.queue.file_size, "shutdown": _shutdown(slave)},
        "common": {
            "from_offset": lo,
            "to_offset": max(lo, hi),
            "bytes": max(0, hi - lo),
            "first_difference": diff.first,
            "differing_bytes": diff.differing_bytes,
            "differing_regions": diff.regions,
            "more_regions": diff.more_regions,
            "differing_records": differing.as_dict(),
        },
        "behind": {"bytes": max(0, m.end - s.end), "records": only_master.records, "store_time_ms": behind_ms},
        "ahead": {"bytes": max(0, s.end - m.end), "records": only_slave.records},
        "only_on_master": only_master.as_dict(),
        "only_on_slave": only_slave.as_dict(),
        "promotion_loses": lost.as_dict(),
        "consume_queues": compare_queues_units(master, slave, s.end),
    }


def _shutdown(store: Store) -> dict:
    state = shutdown_state(store)
    return {"clean": state["clean"], "abort_file": state["abort_file"]}


def _units(store: Store, topic: str, queue_id: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(first queue offset on disk, commitlog offsets, sizes) of a queue's written units."""
    cq = store.consume_queue(topic, queue_id)
    if cq is None or not hasattr(cq, "scan_columns"):
        return 0, np.zeros(0, np.int64), np.zeros(0, np.int64)
    first, offs, sizes = None, [], []
    for start, units in cq.scan_columns(cq.first_offset):
        first = start if first is None else first
        offs.append(units["commitlog_offset"].astype(np.int64))
        sizes.append(units["size"].astype(np.int64))
        del units
    if first is None:
        return cq.first_offset, np.zeros(0, np.int64), np.zeros(0, np.int64)
    return first, np.concatenate(offs), np.concatenate(sizes)


def compare_queues_units(master: Store, slave: Store, slave_end: int) -> list[dict]:
    """Per queue: the slave's units against the master's. `expected_max_offset` is how far the slave's queue
    reaches once its reput has dispatched its whole CommitLog (the master's units below the slave's end)."""
    rows = []
    for topic, qid in sorted({*master.queue_ids, *slave.queue_ids}):
        mf, mo, ms = _units(master, topic, qid)
        sf, so, ss = _units(slave, topic, qid)
        blank = (ss == CQ_PRE_BLANK_SIZE) & (so == 0)
        placeholders = int(np.argmin(blank)) if blank.size and not blank.all() else int(blank.size)
        m_max, s_max = mf + len(mo), sf + len(so)
        expected = mf + int(np.searchsorted(mo, slave_end, side="left")) if len(mo) else None
        lo, hi = max(mf, sf + placeholders), min(m_max, s_max)
        mismatched, first_mismatch = 0, None
        if hi > lo:
            a, b = mo[lo - mf : hi - mf], so[lo - sf : hi - sf]
            bad = np.flatnonzero((a != b) | (ms[lo - mf : hi - mf] != ss[lo - sf : hi - sf]))
            mismatched = int(bad.size)
            first_mismatch = lo + int(bad[0]) if bad.size else None
        rows.append(
            {
                "topic": topic,
                "queue_id": qid,
                "master_max_offset": m_max if len(mo) or mf else None,
                "slave_min_offset": sf + placeholders,
                "slave_max_offset": s_max,
                "placeholder_units": placeholders,
                "expected_max_offset": expected,
                "dispatch_behind": None if expected is None else max(0, expected - s_max),
                "past_commitlog_end": None if expected is None else max(0, s_max - expected),
                "mismatched_units": mismatched,
                "first_mismatch": first_mismatch,
            }
        )
    return rows


def _pick_master(
    members: list[FleetMember], ends: dict[str, LogEnd], epochs: dict[str, list | None]
) -> tuple[FleetMember, str]:
    if any(epochs.values()):  # controller mode: the controller's latest master wrote the latest epoch
        best = max(members, key=lambda m: ((epochs[m.name] or [(-1, 0)])[-1][0], ends[m.name].end))
        return best, f"controller mode: the latest epoch ({epochs[best.name][-1][0]})"
    masters = [m for m in members if m.identity.is_master]
    pool = masters or members
    best = max(pool, key=lambda m: (ends[m.name].end, -pool.index(m)))
    why = "brokerId 0" if masters else "no master in the fleet: the store whose CommitLog goes furthest"
    if len(masters) > 1:
        why = f"{len(masters)} copies of brokerId 0: the one whose CommitLog goes furthest"
    return best, why


def _pair_findings(group: str, master: str, slave: str, pair: dict, findings: Findings) -> None:
    where = f"{slave} vs {master}"

    def note(offset: int | None, severity: str, message: str, q: dict | None = None) -> None:
        """One finding on the slave, its message prefixed with the pair; `q` is the ConsumeQueue it is about."""
        queue = (q["topic"], q["queue_id"]) if q is not None else ()
        findings.add(slave, offset, CHECK, severity, f"{where}: {message}", *queue)

    sizes = (pair["master_commitlog"]["file_size"], pair["slave_commitlog"]["file_size"])
    if sizes[0] and sizes[1] and sizes[0] != sizes[1]:
        note(
            None,
            "error",
            f"CommitLog files of {sizes[1]} bytes, the master's are "
            f"{sizes[0]}: HA copies bytes to the same offsets in files of one size (mappedFileSizeCommitLog)",
        )
    c = pair["common"]
    if c["first_difference"] is not None:
        n = pair["common"]["differing_records"]["records"]
        note(
            c["first_difference"],
            "error",
            f"the CommitLogs differ from offset {c['first_difference']} ({c['differing_bytes']} "
            f"byte(s), {n} record(s) of the master)",
        )
    slave_end = pair["slave_commitlog"]["max_offset"]
    lost = pair["promotion_loses"]
    if lost["records"]:
        note(slave_end, "warning", f"a promotion now would lose {lost['records']} record(s) ({lost['bytes']} bytes)")
    if pair["ahead"]["bytes"]:
        note(
            pair["master_commitlog"]["max_offset"],
            "warning",
            f"the slave holds {pair['ahead']['bytes']} byte(s) past the master's end "
            f"({pair['ahead']['records']} record(s)): the master lost them, or this is not its slave",
        )
    if pair["slave_commitlog"]["torn_bytes"]:
        note(
            slave_end,
            "info",
            f"{pair['slave_commitlog']['torn_bytes']} byte(s) of a torn record after the end "
            "(a transfer cut mid-record; recovery drops them)",
        )
    ep = pair.get("epochs")
    if ep is not None and ep["truncate_offset"] == -1:
        note(
            None,
            "error",
            "no epoch both hold with the same start: the broker cannot find a consistent point and will not follow "
            "this master",
        )
    elif ep is not None and ep["truncated_bytes"]:
        note(
            ep["truncate_offset"],
            "warning",
            f"following this master, the store truncates its CommitLog at {ep['truncate_offset']}: "
            f"{ep['truncated_records']['records']} record(s) it wrote are dropped",
        )
    for q in pair["consume_queues"]:
        if q["mismatched_units"]:
            note(
                None,
                "error",
                f"{q['mismatched_units']} ConsumeQueue unit(s) differ from the master's, first at queue offset "
                f"{q['first_mismatch']}",
                q,
            )
        if q["past_commitlog_end"]:
            note(
                None,
                "warning",
                f"{q['past_commitlog_end']} unit(s) point past the slave's CommitLog end (truncateDirtyLogicFiles "
                "drops them)",
                q,
            )


def rejoin(
    store: Store, end: LogEnd, entries: list | None, master_end: LogEnd, master_entries: list | None, keys: bool
) -> dict:
    """Controller mode: both epoch files, and where this store truncates when it follows the master
    (`AutoSwitchHAClient#doTruncate`), with the records it drops."""
    point = truncate_offset(entries or [], end.end, master_entries or [], master_end.end)
    dropped = Tally(keys)
    if point is not None and end.min_offset <= point < end.end:
        dropped = records_in(store, point, end.end, keys)
    return {
        "slave": [list(e) for e in entries or []],
        "master": [list(e) for e in master_entries or []],
        "truncate_offset": point,
        "truncated_bytes": None if point is None or point < 0 else max(0, end.end - point),
        "truncated_records": dropped.as_dict(),
    }


def replicas_view(fleet: Fleet, now_ms: int, keys: bool = True) -> dict:
    """The `replicas` document: per broker group, every other store against the group's master."""
    findings = Findings(fleet.findings)
    groups = []
    for name, members in fleet.groups().items():
        stores = {m.name: m.open() for m in members}
        entry: dict = {"group": name, "stores": [m.name for m in members]}
        if any(m.identity.role == "DLEDGER" for m in members):
            entry.update(kind="dledger", **dledger_group(members, stores, findings, keys))
        elif len(members) < 2:
            entry.update(kind="single", master=members[0].name, pairs=[])
        else:
            ends = {m.name: log_end(stores[m.name]) for m in members}
            epochs = {m.name: read_epoch_entries(m.path, findings) for m in members}
            master, why = _pick_master(members, ends, epochs)
            pairs = []
            for m in members:
                if m is master:
                    continue
                pair = {
                    "master": master.name,
                    "slave": m.name,
                    **compare_pair(stores[master.name], stores[m.name], keys, (ends[master.name], ends[m.name])),
                }
                pair["config"] = config_sync(stores[master.name], stores[m.name])
                for severity, message in config_findings(f"{m.name} vs {master.name}", pair["config"]):
                    findings.add(m.name, None, CHECK, severity, message)
                if any(epochs.values()):
                    pair["epochs"] = rejoin(
                        stores[m.name], ends[m.name], epochs[m.name], ends[master.name], epochs[master.name], keys
                    )
                _pair_findings(name, master.name, m.name, pair, findings)
                pairs.append(pair)
            kind = "controller" if any(epochs.values()) else "classic"
            entry.update(kind=kind, master=master.name, master_reason=why, pairs=pairs)
        groups.append(entry)
    return {
        "version": JSON_VERSION,
        "view": "replicas",
        "fleet": str(fleet.root),
        "now_ms": now_ms,
        "groups": groups,
        **findings_section(findings),
    }


__all__ = ["compare_pair", "records_in", "replicas_view"]
