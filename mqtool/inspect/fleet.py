"""The fleet overview: `mqtool inspect FLEET`, one row per store and the cluster's totals (issue #29).

Each store gets the single-store `overview` (one CommitLog scan, its queues, the headline numbers, every
finding) in this one process: a fleet of N stores costs about N overviews. A store that cannot be opened
is a row with an error finding, not the end of the run.
"""

from __future__ import annotations

from collections import Counter

from mqtool.errors import MqtoolError
from mqtool.inspect import JSON_VERSION
from mqtool.inspect.overview import overview
from mqtool.store.findings import SEVERITIES
from mqtool.store.fleet import Fleet, FleetMember

CHECK = "fleet.store"


def store_row(member: FleetMember, doc: dict) -> dict:
    """A store's row from its overview document."""
    cl, files = doc["commitlog"], doc["files"]
    user = [t for t in doc["topics"] if not t["system"]]
    timer = doc["timer"]
    return {
        **_who(member),
        "records": cl["records"],
        "bytes": files["commitlog"]["bytes"],
        "min_offset": cl["min_offset"],
        "max_offset": cl["max_offset"],
        "first_store_timestamp": cl["first_store_timestamp"],
        "last_store_timestamp": cl["last_store_timestamp"],
        "topics": len(user),
        "queues": sum(len(t["queues"]) for t in user),
        "layouts": doc["layouts"]["found"],
        "clean_shutdown": not files["abort"],
        "delay_backlog": doc["delay"]["backlog"],
        "timer_pending": None if timer is None else timer["pending"],
        "transactions_pending": doc["transactions"]["counts"].get("pending", 0),
        "restart_preview": doc.get("restart_preview"),
        "finding_counts": doc["finding_counts"],
        "findings": doc["findings"],
    }


def _who(member: FleetMember) -> dict:
    i = member.identity
    return {
        "name": member.name,
        "dir": member.rel,
        "group": member.group,
        "cluster": i.cluster,
        "broker_name": i.broker_name,
        "broker_id": i.broker_id,
        "role": i.role,
        "config": None if member.conf_path is None else str(member.conf_path),
    }


def _failed_row(member: FleetMember, error: MqtoolError) -> dict:
    finding = {
        "check": CHECK,
        "severity": "error",
        "file": member.rel,
        "offset": None,
        "topic": None,
        "queue_id": None,
        "message": f"cannot open the store: {error}",
    }
    empty = dict.fromkeys(
        (
            "records",
            "bytes",
            "min_offset",
            "max_offset",
            "first_store_timestamp",
            "last_store_timestamp",
            "topics",
            "queues",
            "clean_shutdown",
            "delay_backlog",
            "timer_pending",
            "transactions_pending",
            "restart_preview",
        )
    )
    return {
        **_who(member),
        **empty,
        "layouts": [],
        "finding_counts": {"error": 1, "warning": 0, "info": 0},
        "findings": [finding],
    }


def fleet_overview(fleet: Fleet, now_ms: int) -> dict:
    """The `fleet` document: a row per store (discovery order), per-group store names, the totals."""
    rows = []
    for m in fleet.members:
        try:
            rows.append(store_row(m, overview(m.open(), now_ms)))
        except MqtoolError as e:
            rows.append(_failed_row(m, e))
    _behind_master(fleet, rows)
    discovery = [f.as_dict() for f in fleet.findings]
    return {
        "version": JSON_VERSION,
        "view": "fleet",
        "fleet": str(fleet.root),
        "now_ms": now_ms,
        "stores": rows,
        "groups": {g: [m.name for m in ms] for g, ms in fleet.groups().items()},
        "totals": totals(rows, discovery),
        "findings": discovery,
    }


def _behind_master(fleet: Fleet, rows: list[dict]) -> None:
    """`behind_master_bytes` on each classic slave's row: its group master's CommitLog end minus its own (from
    the overviews, no comparison: `inspect FLEET replicas` says what differs and what a promotion loses)."""
    by_name = {r["name"]: r for r in rows}
    for members in fleet.groups().values():
        masters = [m for m in members if m.identity.is_master]
        for m in members:
            row = by_name[m.name]
            row["behind_master_bytes"] = None
            if len(masters) == 1 and m is not masters[0] and m.identity.role == "SLAVE":
                top, own = by_name[masters[0].name]["max_offset"], row["max_offset"]
                if top is not None and own is not None:
                    row["behind_master_bytes"] = top - own


def totals(rows: list[dict], discovery: list[dict]) -> dict:
    """The cluster's totals: stores, records and bytes, the store-time range, findings by severity."""
    counts = Counter({s: 0 for s in SEVERITIES})
    for r in rows:
        counts.update(r["finding_counts"])
    counts.update(f["severity"] for f in discovery)
    firsts = [r["first_store_timestamp"] for r in rows if r["first_store_timestamp"] is not None]
    lasts = [r["last_store_timestamp"] for r in rows if r["last_store_timestamp"] is not None]
    return {
        "stores": len(rows),
        "groups": len({r["group"] for r in rows}),
        "clusters": sorted({r["cluster"] for r in rows if r["cluster"] is not None}),
        "records": sum(r["records"] or 0 for r in rows),
        "bytes": sum(r["bytes"] or 0 for r in rows),
        "first_store_timestamp": min(firsts, default=None),
        "last_store_timestamp": max(lasts, default=None),
        "crashed_stores": sum(1 for r in rows if r["clean_shutdown"] is False),
        "finding_counts": {s: counts[s] for s in SEVERITIES},
    }
