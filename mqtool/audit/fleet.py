"""`spark-audit FLEET`: every store of a fleet audited in one plan, one pass, one report (issue #29).

Each store is planned as `spark-audit STORE` plans it (`plan_audit`, with the store's own settings from
`store/fleet.py`). Its tasks are wrapped in `StoreTask`s that name the store and take a place in the fleet's
one task list, so the local runner and Spark run every store's files in one pass (one Spark job, not one per
store). The driver finishes each store's section with the single-store `finish` on that store's results, so a
section says what `spark-audit STORE` says, and then runs the cross-store checks:

- replica consistency: the `replicas` view (`inspect/replicas.py`: each slave against its master, byte
  ranges compared mapped, what a promotion now would lose; DLedger and controller-mode groups);
- a UNIQ_KEY on two broker groups: the UNIQ_KEY hashes the CommitLog tasks already send for the duplicate
  check are intersected across broker groups, and each hit is confirmed by reading the records (a hash
  collision is not reported). The client keeps a message's UNIQ_KEY across its send retries
  (`DefaultMQProducerImpl.sendDefaultImpl` retries on another broker after a timeout), so the broker that
  timed out may have stored it too: its consumers get it twice. Copies within one broker group are
  replicas, not duplicates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mqtool.audit.plan import DEFAULT_SPLIT_BYTES, AuditPlan, plan_audit
from mqtool.audit.report import REPORT_VERSION, commitlog_file_of, finish
from mqtool.audit.results import CommitLogResult, TaskResult
from mqtool.audit.stats import MAX_DUPLICATE_FINDINGS
from mqtool.audit.storetask import StoreTask, StoreTaskResult
from mqtool.errors import MqtoolError
from mqtool.formats.message import RecordError
from mqtool.store.findings import SEVERITIES, Finding, Findings, sort_findings
from mqtool.store.fleet import Fleet, FleetMember

CHECK_STORE = "fleet.store"  # a store that cannot be opened (as `inspect FLEET` reports it)
CHECK_UNIQ = "fleet.uniq_key"


@dataclass
class StorePlan:
    """One store of the fleet: its audit plan, or why it could not be planned."""

    member: FleetMember
    plan: AuditPlan | None
    error: str | None = None


@dataclass
class FleetPlan:
    """Every store's plan, and all their tasks in one list (store by store, each in its own plan's order)."""

    fleet: Fleet
    stores: list[StorePlan] = field(default_factory=list)
    tasks: list[StoreTask] = field(default_factory=list)


def plan_fleet_audit(fleet: Fleet, split_bytes: int = DEFAULT_SPLIT_BYTES) -> FleetPlan:
    """Plan each store (with its own settings) and gather their tasks; a store that cannot be opened is a
    section with an error finding, not the end of the audit."""
    out = FleetPlan(fleet)
    for m in fleet.members:
        try:
            plan = plan_audit(m.open(), split_bytes=split_bytes)
        except MqtoolError as e:
            out.stores.append(StorePlan(m, None, str(e)))
            continue
        out.stores.append(StorePlan(m, plan))
        first = len(out.tasks)
        out.tasks += [StoreTask(first + i, m.name, t) for i, t in enumerate(plan.tasks)]
    return out


def run_fleet_local(
    fleet: Fleet, split_bytes: int = DEFAULT_SPLIT_BYTES, progress: Callable[[int, int], None] | None = None
) -> dict:
    """Audit every store of the fleet in this process; returns the fleet report."""
    from mqtool.audit.tasks import run_task

    fplan = plan_fleet_audit(fleet, split_bytes)
    results = []
    for i, task in enumerate(fplan.tasks):
        results.append(run_task(task))
        if progress:
            progress(i + 1, len(fplan.tasks))
    engine = {"master": "local (no Spark)", "partitions": len(fplan.tasks), "executors": 1}
    return finish_fleet(fplan, results, engine)


def finish_fleet(fplan: FleetPlan, results: list[TaskResult], engine: dict) -> dict:
    """The fleet report (`mqtool/schemas/audit-report.json`): a section per store, the cluster's totals, the
    cross-store checks and their findings (with discovery's)."""
    by_store: dict[str, list[TaskResult]] = {}
    for r in sorted(results, key=lambda r: r.index):
        assert isinstance(r, StoreTaskResult)
        by_store.setdefault(r.store, []).append(r.result)
    sections = []
    audited: list[tuple[FleetMember, AuditPlan, list[CommitLogResult]]] = []
    for sp in fplan.stores:
        if sp.plan is None:
            sections.append(_failed_section(sp.member, sp.error or ""))
            continue
        own = by_store.get(sp.member.name, [])
        summary, found = finish(sp.plan, own)
        sections.append(_section(sp.member, sp.plan, summary, found, len(own)))
        audited.append((sp.member, sp.plan, [r for r in own if isinstance(r, CommitLogResult)]))
    now_ms = max((s["summary"]["now_ms"] for s in sections if s["summary"]), default=0)
    findings = Findings()
    replicas = _replicas(fplan.fleet, now_ms, findings)
    uniq, uniq_count = uniq_keys_on_two_groups(audited, findings)
    found = sort_findings(findings)
    return {
        "version": REPORT_VERSION,
        "fleet": str(fplan.fleet.root),
        "engine": engine,
        "stores": sections,
        "totals": _totals(fplan.fleet, sections, found, uniq_count),
        "cross_store": {
            "now_ms": now_ms,
            "replicas": replicas,
            "uniq_keys_on_two_groups": uniq,
        },
        "findings": [f.as_dict() for f in found],
    }


def _who(member: FleetMember) -> dict:
    return {"name": member.name, "dir": member.rel, "broker_group": member.group, "role": member.identity.role}


def _section(member: FleetMember, plan: AuditPlan, summary: dict, found: list[Finding], tasks: int) -> dict:
    cl = summary["commitlog"]
    counts = Counter(f.severity for f in found)
    return {
        **_who(member),
        "store": plan.root,
        "summary": summary,
        "findings": [f.as_dict() for f in found],
        "totals": {
            "tasks": tasks,
            "records": cl["records"],
            "bytes": cl["bytes"],
            "duplicate_uniq_keys": summary["duplicate_uniq_keys"],
            "finding_counts": {s: counts.get(s, 0) for s in SEVERITIES},
        },
    }


def _failed_section(member: FleetMember, error: str) -> dict:
    finding = Finding(member.rel, None, CHECK_STORE, "error", f"cannot open the store: {error}")
    return {
        **_who(member),
        "store": str(member.path),
        "summary": None,
        "findings": [finding.as_dict()],
        "totals": {
            "tasks": 0,
            "records": 0,
            "bytes": 0,
            "duplicate_uniq_keys": 0,
            "finding_counts": {"error": 1, "warning": 0, "info": 0},
        },
    }


def _totals(fleet: Fleet, sections: list[dict], fleet_findings: list[Finding], uniq_keys: int) -> dict:
    """The cluster's totals: stores, groups, records and bytes, every finding by severity (stores' and the
    cross-store checks')."""
    counts = Counter({s: 0 for s in SEVERITIES})
    for s in sections:
        counts.update(s["totals"]["finding_counts"])
    counts.update(f.severity for f in fleet_findings)
    cls = [s["summary"]["commitlog"] for s in sections if s["summary"]]
    firsts = [c["first_store_ts"] for c in cls if c.get("first_store_ts") is not None]
    lasts = [c["last_store_ts"] for c in cls if c.get("last_store_ts") is not None]
    return {
        "stores": len(sections),
        "broker_groups": len(fleet.groups()),
        "tasks": sum(s["totals"]["tasks"] for s in sections),
        "records": sum(s["totals"]["records"] for s in sections),
        "bytes": sum(s["totals"]["bytes"] for s in sections),
        "first_store_ts": min(firsts, default=None),
        "last_store_ts": max(lasts, default=None),
        "duplicate_uniq_keys": sum(s["totals"]["duplicate_uniq_keys"] for s in sections),
        "uniq_keys_on_two_groups": uniq_keys,
        "finding_counts": {s: counts[s] for s in SEVERITIES},
    }


def _replicas(fleet: Fleet, now_ms: int, findings: Findings) -> dict:
    """The `replicas` view's groups (without the keys of every lost record: `inspect FLEET replicas --json`
    lists them); its findings, discovery's included, join the fleet's."""
    from mqtool.inspect.replicas import replicas_view

    try:
        doc = replicas_view(fleet, now_ms, keys=False)
    except MqtoolError as e:
        findings += fleet.findings
        findings.add(str(fleet.root), None, "fleet.replica", "error", f"replicas not compared: {e}")
        return {"groups": []}
    findings += [
        Finding(f["file"], f["offset"], f["check"], f["severity"], f["message"], f["topic"], f["queue_id"])
        for f in doc["findings"]
    ]
    return {"groups": doc["groups"]}


def uniq_keys_on_two_groups(
    audited: list[tuple[FleetMember, AuditPlan, list[CommitLogResult]]], findings: Findings
) -> tuple[list[dict], int]:
    """UNIQ_KEYs stored on two or more broker groups, each with every store's first record of it (as
    `trace FLEET` lists them), a finding per key; and how many there are.

    Only the first MAX_DUPLICATE_FINDINGS hashes found on two groups are confirmed by reading their records
    (one per store and hash); the rest are counted by hash alone. A fleet whose stores lack broker.conf makes
    every store its own group, and a slave then shares every key with its master: this keeps that cheap.
    """
    from mqtool.trace.fleet import cross_broker_entry, record_copy

    columns = {}
    per_group: dict[str, list[np.ndarray]] = {}
    for m, _plan, cl in audited:
        h = np.concatenate([r.key_hashes for r in cl]) if cl else np.zeros(0, np.int64)
        o = np.concatenate([r.key_offsets for r in cl]) if cl else np.zeros(0, np.int64)
        columns[m.name] = (h, o)
        per_group.setdefault(m.group, []).append(h)
    if len(per_group) < 2:
        return [], 0
    every = np.sort(np.concatenate([_distinct(np.concatenate(hs)) for hs in per_group.values()]))
    candidates = _distinct(every[1:][every[1:] == every[:-1]])  # hashes of two or more groups
    checked = candidates[:MAX_DUPLICATE_FINDINGS]
    by_key: dict[str, dict[str, dict[str, tuple]]] = {}  # key -> group -> store -> (record, file of it)
    for m, plan, _cl in audited:
        h, o = columns[m.name]
        hit = np.isin(h, checked)
        hh, ho = h[hit], o[hit]
        order = np.lexsort((ho, hh))
        hh, ho = hh[order], ho[order]
        firsts = ho[np.r_[True, hh[1:] != hh[:-1]]] if hh.size else ho  # the store's first record per hash
        file_of = commitlog_file_of(plan)
        for off in sorted(int(x) for x in firsts):
            try:
                rec = plan.store.commitlog.read(off)
            except RecordError:
                continue
            if rec.uniq_key is not None:
                copies = by_key.setdefault(rec.uniq_key, {}).setdefault(m.group, {})
                copies.setdefault(m.name, (rec, f"{m.rel}/{file_of(off)}"))
    out = []
    for key, groups in sorted(by_key.items()):
        if len(groups) < 2:
            continue  # a hash collision
        copies = [record_copy(store, g, rec) for g, held in groups.items() for store, (rec, _f) in held.items()]
        entry = cross_broker_entry(key, groups, copies)
        out.append(entry)
        _key_finding(entry, groups, findings)
    return out, len(out) + int(candidates.size - checked.size)


def _distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values (a sort and a compare: `np.unique`'s hash path is slower on 10^6 int64s)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if a.size else a


def _key_finding(entry: dict, groups: dict[str, dict[str, tuple]], findings: Findings) -> None:
    """One finding per key, at the latest copy (the producer's retry)."""
    last = entry["copies"][-1]
    rec, file = groups[last["broker_group"]][last["store"]]
    where = ", ".join(f"{c['store']} @{c['physical_offset']}" for c in entry["copies"])
    findings.add(
        file,
        rec.physical_offset,
        CHECK_UNIQ,
        "warning",
        f"UNIQ_KEY {entry['uniq_key']} is stored on {len(entry['broker_groups'])} broker groups "
        f"({', '.join(entry['broker_groups'])}: {where}): a producer retry that went to another broker; "
        "its consumers get it twice",
        rec.topic,
        rec.queue_id,
    )
