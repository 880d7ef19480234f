"""`trace FLEET`: one message searched on every store of a fleet (issue #29).

Each store is traced as `mqtool trace STORE` would (its own finder, its own "now"), and every record is
named by its store. Stores of one broker group (a master and its slaves, a DLedger group) hold copies of the
same CommitLog: a message found on several of them is replicated, once. A UNIQ_KEY found on two broker
groups is another matter: the client keeps a message's UNIQ_KEY across its send retries
(`MessageClientIDSetter.setUniqID` is called once, `DefaultMQProducerImpl.sendDefaultImpl` then retries on
another broker after a failure or timeout), so the broker that timed out may well have stored it too:
consumers get the message twice. `cross_broker` calls these out; a --key found on two broker groups under
different UNIQ_KEYs is a reused business key, listed in `key_broker_groups` without alarm. `not_replicated`
names the stores of a broker group that lack a message others of the group hold (a slave behind, killed
mid-transfer, joined late): promoting one of them now would lose it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqtool.errors import MqtoolError
from mqtool.formats.message import MessageRecord
from mqtool.store.fleet import Fleet, FleetMember
from mqtool.times import parse_time
from mqtool.trace.core import select_finder, trace
from mqtool.trace.model import JSON_VERSION, Trace, TraceQuery
from mqtool.trace.timeline import store_as_of


@dataclass
class StoreTraces:
    """What one store of the fleet holds of the message(s): its traces, newest message first."""

    member: FleetMember
    traces: list[Trace]
    lookup: str | None  # None: the store could not be searched (`notes` says why)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        m = self.member
        return {
            "store": m.name,
            "dir": m.rel,
            "broker_group": m.group,
            "role": m.identity.role,
            "lookup": self.lookup,
            "found": len(self.traces),
            "notes": self.notes,
        }


@dataclass
class FleetTrace:
    """The message(s) on every store; `cross_broker`: UNIQ_KEYs stored on more than one broker group."""

    fleet: Fleet
    query: TraceQuery
    stores: list[StoreTraces]
    cross_broker: list[dict]
    key_broker_groups: list[str]
    not_replicated: list[dict] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return any(s.traces for s in self.stores)

    def as_dict(self, record_dict) -> dict[str, Any]:
        """The `--json` document (`mqtool/schemas/trace-fleet.json`); each trace is a `trace.json` document
        whose records carry `store`."""
        traces = []
        for s in self.stores:
            name = s.member.name

            def rec(r: MessageRecord, name: str = name) -> dict:
                return {"store": name, **record_dict(r)}

            traces += [{"store": name, "broker_group": s.member.group, "trace": t.as_dict(rec)} for t in s.traces]
        return {
            "version": JSON_VERSION,
            "fleet": str(self.fleet.root),
            "query": self.query.as_dict(),
            "stores": [s.as_dict() for s in self.stores],
            "traces": traces,
            "cross_broker": self.cross_broker,
            "key_broker_groups": self.key_broker_groups,
            "not_replicated": self.not_replicated,
            "verdict": self.verdict(),
        }

    def verdict(self) -> str:
        """One line: where the message is, and the call-out when a UNIQ_KEY is on two broker groups."""
        holding = [s.member.name for s in self.stores if s.traces]
        if not holding:
            return f"not found on any of the {len(self.stores)} stores"
        text = f"found on {len(holding)} of {len(self.stores)} stores: {', '.join(holding)}"
        for c in self.cross_broker:
            text += (
                f"; UNIQ_KEY {c['uniq_key']} is stored on {len(c['broker_groups'])} broker groups "
                f"({', '.join(c['broker_groups'])}): sent twice, a producer retry that went to another "
                "broker; its consumers get it twice"
            )
        for n in self.not_replicated:
            text += (
                f"; {n['message']} is not on {', '.join(n['missing_on'])} of {n['broker_group']}: a promotion "
                "of it now would lose the message"
            )
        return text


def _first_record(t: Trace) -> MessageRecord:
    """The record the producer's send stored (the family's first in CommitLog order)."""
    return min((tr.record for tr in t.records), key=lambda r: r.physical_offset)


def _cross_broker(stores: list[StoreTraces]) -> list[dict]:
    """UNIQ_KEYs held by stores of two or more broker groups, with each store's first record of it."""
    by_key: dict[str, dict[str, list[tuple[StoreTraces, Trace]]]] = {}
    for s in stores:
        for t in s.traces:
            for key in t.uniq_keys:
                by_key.setdefault(key, {}).setdefault(s.member.group, []).append((s, t))
    out = []
    for key, groups in sorted(by_key.items()):
        if len(groups) < 2:
            continue
        copies = []
        for group, held in groups.items():
            for s, t in held:
                copies.append(record_copy(s.member.name, group, _first_record(t)))
        out.append(cross_broker_entry(key, groups, copies))
    return out


def record_copy(store: str, group: str, r: MessageRecord) -> dict:
    """One store's copy of a message stored on two broker groups (`trace FLEET`, `spark-audit FLEET`)."""
    return {
        "store": store,
        "broker_group": group,
        "topic": r.topic,
        "queue_id": r.queue_id,
        "queue_offset": r.queue_offset,
        "physical_offset": r.physical_offset,
        "born_timestamp": r.born_timestamp,
        "store_timestamp": r.store_timestamp,
    }


def cross_broker_entry(uniq_key: str, groups, copies: list[dict]) -> dict:
    """A UNIQ_KEY on two or more broker groups, its copies in store-time order."""
    copies.sort(key=lambda c: (c["store_timestamp"], c["store"]))
    return {"uniq_key": uniq_key, "broker_groups": sorted(groups), "copies": copies}


def _identity(t: Trace) -> str:
    """What names a message across stores: its UNIQ_KEY, else (no UNIQ_KEY) its first record's offset, which
    a classic slave shares with its master."""
    return t.uniq_keys[0] if t.uniq_keys else f"offset {_first_record(t).physical_offset}"


def _not_replicated(fleet: Fleet, stores: list[StoreTraces]) -> list[dict]:
    """Messages some stores of a broker group hold and others of the group do not (a slave behind, killed
    mid-transfer or joined late): what promoting one of those now would lose."""
    held: dict[tuple[str, str], set[str]] = {}
    for s in stores:
        for t in s.traces:
            held.setdefault((s.member.group, _identity(t)), set()).add(s.member.name)
    out = []
    groups = fleet.groups()
    for (group, message), names in sorted(held.items()):
        missing = [m.name for m in groups.get(group, []) if m.name not in names]
        if missing:
            label = f"UNIQ_KEY {message}" if not message.startswith("offset ") else f"the message at {message}"
            out.append({"message": label, "broker_group": group, "held_by": sorted(names), "missing_on": missing})
    return out


def trace_fleet(
    fleet: Fleet,
    query: TraceQuery,
    *,
    now: str | None = None,
    local: bool = False,
    limit: int | None = None,
    lookup: str = "auto",
) -> FleetTrace:
    """Trace the query on every store of the fleet (each with its own finder; no SQLite index). `now`: the
    time verdicts are judged at (relative to each store's last sign of life); None: each store's own."""
    stores = []
    for m in fleet.members:
        try:
            store = m.open()
            finder, used, notes = select_finder(store, query, None, lookup)
        except MqtoolError as e:  # an unreadable store, or one the asked-for lookup cannot answer: a note
            stores.append(StoreTraces(m, [], None, [f"not searched: {e}"]))
            continue
        as_of = parse_time(now, store_as_of(store), local) if now is not None else None
        traces = trace(store, query, finder=finder, as_of=as_of, limit=limit, lookup=used)
        stores.append(StoreTraces(m, traces, used, notes))
    key_groups = sorted({s.member.group for s in stores if s.traces}) if query.key is not None else []
    key_groups = key_groups if len(key_groups) > 1 else []
    return FleetTrace(fleet, query, stores, _cross_broker(stores), key_groups, _not_replicated(fleet, stores))
