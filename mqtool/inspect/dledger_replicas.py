"""DLedger groups in the `replicas` view: each node's ledger, and where the others differ from the most
up-to-date one.

A DLedger follower appends the leader's entries at the leader's positions (`DLedgerMmapFileStore
#appendAsFollower` checks `entry.pos`), so the nodes' data files are byte copies up to the shorter ledger and
their index units (magic, pos, size, index, term) agree. The reference node is the one Raft would elect
from the files alone: the highest last-entry term, then the highest end index (`DLedgerLeaderElector`
compares `ledgerEndTerm`, then `ledgerEndIndex`). Each other node's index units are compared with the
reference's, and the entry bytes they both hold as mapped ranges (`store.compare`).
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.dledger import BODY_OFFSET
from mqtool.inspect.replica_records import Tally, records_in
from mqtool.store.compare import compare_queues
from mqtool.store.findings import Findings
from mqtool.store.fleet import FleetMember
from mqtool.store.store import Store

CHECK = "fleet.dledger"
MAX_LISTED = 1000  # differing entry indexes listed


def node_ledger(member: FleetMember, store: Store, findings: Findings) -> dict:
    """One node's ledger: begin/end index, terms, committed index and position (from its own files)."""
    dl = store.dledger
    base = {"name": member.name, "self_id": member.identity.dledger_self_id}
    if dl is None:
        findings.add(
            member.rel,
            None,
            CHECK,
            "error",
            f"{member.name}: broker.conf says DLedger, but the store has no dledger-<id> directory",
        )
        return {
            **base,
            **dict.fromkeys(
                (
                    "begin_index",
                    "end_index",
                    "term",
                    "last_entry_term",
                    "vote_leader",
                    "committed_index",
                    "committed_pos",
                    "end_pos",
                )
            ),
        }
    _first, units = dl.index_units(Findings())
    cp, term = dl.checkpoint or {}, dl.currterm or {}
    committed = cp.get("committed_index")
    pos_end = units["pos"].astype(np.int64) + units["size"].astype(np.int64) if len(units) else np.zeros(0, np.int64)
    idx = units["index"].astype(np.int64) if len(units) else np.zeros(0, np.int64)
    hit = np.flatnonzero(idx == committed) if committed is not None else np.zeros(0, np.int64)
    return {
        **base,
        "begin_index": int(idx[0]) if len(idx) else None,
        "end_index": int(idx[-1]) if len(idx) else None,
        "term": term.get("curr_term"),
        "last_entry_term": int(units["term"][-1]) if len(units) else None,
        "vote_leader": term.get("vote_leader") or None,
        "committed_index": committed,
        "committed_pos": int(pos_end[hit[0]]) if hit.size else None,
        "end_pos": int(pos_end[-1]) if len(pos_end) else None,
        "_units": units,
        "_dl": dl,
    }


def _compare_nodes(ref: dict, node: dict) -> dict:
    """Index units and entry bytes of `node` against `ref` over the indexes both hold."""
    ru, nu = ref["_units"], node["_units"]
    if ref["end_index"] is None or node["end_index"] is None:
        return {
            "common_from_index": None,
            "common_to_index": None,
            "differing_entries": 0,
            "first_differing_index": None,
            "differing_indexes": [],
            "behind_entries": None,
        }
    lo = max(ref["begin_index"], node["begin_index"])
    hi = min(ref["end_index"], node["end_index"])
    differing: set[int] = set()
    if hi >= lo:
        a = ru[lo - ref["begin_index"] : hi - ref["begin_index"] + 1]
        b = nu[lo - node["begin_index"] : hi - node["begin_index"] + 1]
        fields = ("magic", "pos", "size", "index", "term")
        bad = np.zeros(len(a), bool)
        for f in fields:
            bad |= a[f] != b[f]
        differing.update((lo + np.flatnonzero(bad)).tolist())
        start, end = int(a["pos"][0]), int(a["pos"][-1]) + int(a["size"][-1])
        diff = compare_queues(ref["_dl"].data, node["_dl"].data, start, end)
        if diff.regions:
            pos = a["pos"].astype(np.int64)
            ends = pos + a["size"].astype(np.int64)
            for r0, r1 in diff.regions:
                i = np.flatnonzero((pos < r1) & (ends > r0))
                differing.update((lo + i).tolist())
    listed = sorted(differing)
    return {
        "common_from_index": lo if hi >= lo else None,
        "common_to_index": hi if hi >= lo else None,
        "differing_entries": len(listed),
        "first_differing_index": listed[0] if listed else None,
        "differing_indexes": listed[:MAX_LISTED],
        "behind_entries": max(0, ref["end_index"] - node["end_index"]),
        "ahead_entries": max(0, node["end_index"] - ref["end_index"]),
    }


def only_on_reference(ref: dict, ref_store: Store, node: dict, keys: bool) -> dict:
    """The records in the reference's entries past the node's end index (the bodies' physical offsets are
    entry pos + BODY_OFFSET): counted per topic and queue, listed with `keys`."""
    units = ref["_units"]
    first = (node["end_index"] + 1) if node["end_index"] is not None else ref["begin_index"]
    k = first - ref["begin_index"]
    if ref["end_index"] is None or not 0 <= k < len(units):
        return Tally(keys).as_dict()
    start = int(units["pos"][k]) + BODY_OFFSET
    return records_in(ref_store, start, ref["end_pos"], keys).as_dict()


def dledger_group(members: list[FleetMember], stores: dict[str, Store], findings: Findings, keys: bool = True) -> dict:
    """The `replicas` entry of a DLedger group: every node's ledger and its comparison with the reference."""
    nodes = [node_ledger(m, stores[m.name], findings) for m in members]
    usable = [n for n in nodes if n["end_index"] is not None]
    ref = max(usable, key=lambda n: (n["last_entry_term"], n["end_index"]), default=None)
    ref_store = None if ref is None else stores[ref["name"]]
    for n in nodes:
        if ref is not None and n is not ref:
            n.update(_compare_nodes(ref, n))
            n["only_on_reference"] = only_on_reference(ref, ref_store, n, keys)
            if n["differing_entries"]:
                findings.add(
                    n["name"],
                    None,
                    CHECK,
                    "error",
                    f"{n['name']} vs {ref['name']}: "
                    f"{n['differing_entries']} entry(ies) differ, first index {n['first_differing_index']}",
                )
            if n["behind_entries"]:
                findings.add(
                    n["name"],
                    None,
                    CHECK,
                    "warning",
                    f"{n['name']} is {n['behind_entries']} entry(ies) "
                    f"behind {ref['name']} (end index {n['end_index']} vs {ref['end_index']})",
                )
    for n in nodes:
        n.pop("_units", None)
        n.pop("_dl", None)
    return {"reference": None if ref is None else ref["name"], "nodes": nodes}
