"""A fleet: a directory holding the stores of several brokers, as collected after an incident (issue #29).

Stores lie at depth 1 or 2 below the fleet directory (`fleet/broker-a-0/`, `fleet/cluster/broker-a-s/`);
a store is never searched inside. Each store's settings come from the first of:

1. `STORE/broker.conf`;
2. `STORE.broker.conf` beside it (the fixtures' convention), or `broker-STORE.conf` beside it (how the
   oracle's replication pair names them: `broker-master.conf` beside `master/`);
3. `--config` for every store without one of its own;
4. RocketMQ 5.3.1's defaults.

A store is named after its broker: `brokerName:brokerId` from broker.conf (`BrokerConfig`), in DLedger mode
`brokerName:dLegerSelfId` (the role is the Raft election's, not the file's), in controller mode the
`brokerIdentity` file the broker writes when the controller assigns its id (`BrokerMetadata`:
`cluster#name#id`). Without a brokerName the store is named by its directory. Two stores with the same name
(copies of one broker) are told apart by `@directory`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from mqtool.formats.broker_conf import BrokerConfig, ConfigFileError, load_broker_conf, parse_properties
from mqtool.store.dirs import find_dledger_dirs, is_store_dir
from mqtool.store.errors import StoreError
from mqtool.store.findings import Findings

__all__ = ["Fleet", "FleetMember", "BrokerIdentity", "is_store_dir", "is_fleet_dir", "open_fleet"]

CHECK = "fleet.discovery"
BROKER_CONF = "broker.conf"
BROKER_IDENTITY = "brokerIdentity"  # MessageStoreConfig#getStorePathBrokerIdentity: controller mode's id file
MASTER_ID = 0  # MixAll.MASTER_ID
DEFAULT_ROLE = "ASYNC_MASTER"  # BrokerRole default of MessageStoreConfig
DEFAULT_CLUSTER = "DefaultCluster"  # BrokerConfig#brokerClusterName default
ROLE_DLEDGER = "DLEDGER"  # the Raft election decides who leads: nothing on disk says it
ROLE_CONTROLLER = "CONTROLLER"  # the controller decides (epoch files, brokerIdentity)


@dataclass(frozen=True)
class BrokerIdentity:
    """Who the broker was: its cluster, group (brokerName), id within the group and role."""

    cluster: str | None = None
    broker_name: str | None = None
    broker_id: str | None = None  # "0" for a master; a DLedger self id ("n0") in DLedger mode
    role: str | None = None  # ASYNC_MASTER, SYNC_MASTER, SLAVE, DLEDGER, CONTROLLER; None without broker.conf
    dledger_group: str | None = None
    dledger_self_id: str | None = None
    dledger_peers: str | None = None
    controller_mode: bool = False
    source: str = "directory"  # where the name came from: "broker.conf", "brokerIdentity", "directory"

    @property
    def is_master(self) -> bool:
        """A classic master (brokerId 0 outside DLedger and controller mode)."""
        return self.role in ("ASYNC_MASTER", "SYNC_MASTER") or (self.role is None and self.broker_id == "0")

    def as_dict(self) -> dict:
        return {
            "cluster": self.cluster,
            "broker_name": self.broker_name,
            "broker_id": self.broker_id,
            "role": self.role,
            "dledger_group": self.dledger_group,
            "dledger_self_id": self.dledger_self_id,
            "dledger_peers": self.dledger_peers,
            "controller_mode": self.controller_mode,
            "source": self.source,
        }


def _flag(raw: dict[str, str], key: str) -> bool:
    return raw.get(key, "false").strip().lower() == "true"  # Boolean.parseBoolean


def read_broker_identity(path: Path) -> tuple[str, str, str] | None:
    """`BrokerMetadata#decodeFromStr`: `cluster#brokerName#brokerId`; None when absent or malformed."""
    try:
        parts = path.read_text("utf-8", errors="replace").strip().split("#")
    except OSError:
        return None
    return (parts[0], parts[1], parts[2]) if len(parts) >= 3 and all(parts[:3]) else None


def identity_of(store: Path, config: BrokerConfig, conf_path: Path | None, findings: Findings) -> BrokerIdentity:
    """The broker's identity from its settings (and, in controller mode, its brokerIdentity file)."""
    raw = config.raw if conf_path is not None else {}
    cluster = raw.get("brokerClusterName") or (DEFAULT_CLUSTER if raw else None)
    name = raw.get("brokerName")
    dledger = _flag(raw, "enableDLegerCommitLog")
    controller = _flag(raw, "enableControllerMode")
    common = dict(
        dledger_group=raw.get("dLegerGroup") if dledger else None,
        dledger_self_id=raw.get("dLegerSelfId") if dledger else None,
        dledger_peers=raw.get("dLegerPeers") if dledger else None,
        controller_mode=controller,
    )
    ident = read_broker_identity(store / BROKER_IDENTITY) if controller or not raw else None
    if ident is not None:  # the controller's assignment wins over broker.conf's brokerId
        common["controller_mode"] = True
        return BrokerIdentity(ident[0], ident[1], ident[2], ROLE_CONTROLLER, **common, source=BROKER_IDENTITY)
    if dledger:
        self_id = raw.get("dLegerSelfId") or _dledger_dir_id(store)
        return BrokerIdentity(
            cluster, name or raw.get("dLegerGroup"), self_id, ROLE_DLEDGER, **common, source=BROKER_CONF
        )
    if not raw:
        dirs = find_dledger_dirs(store)
        self_id = _dledger_dir_id(store)
        return BrokerIdentity(role=ROLE_DLEDGER if dirs else None, broker_id=self_id, dledger_self_id=self_id)
    broker_id = raw.get("brokerId", str(MASTER_ID)).strip()
    if not broker_id.lstrip("-").isdigit():
        findings.add(
            conf_path.name if conf_path else BROKER_CONF,
            None,
            CHECK,
            "warning",
            f'brokerId = "{broker_id}" is not a number; the broker would not start with it',
        )
    role = ROLE_CONTROLLER if controller else raw.get("brokerRole", DEFAULT_ROLE).strip().upper()
    return BrokerIdentity(cluster, name, broker_id, role, **common, source=BROKER_CONF)


def _dledger_dir_id(store: Path) -> str | None:
    dirs = find_dledger_dirs(store)
    return dirs[0].name.removeprefix("dledger-") if len(dirs) == 1 else None


@dataclass
class FleetMember:
    """One store of the fleet: where it lies, its settings (and where they came from), who it was."""

    name: str
    path: Path
    rel: str  # the directory relative to the fleet root
    config: BrokerConfig
    conf_path: Path | None  # None: --config or the defaults
    identity: BrokerIdentity

    @property
    def group(self) -> str:
        """The broker group the store replicates within (brokerName; DLedger group), or its own name."""
        return self.identity.dledger_group or self.identity.broker_name or self.name

    def open(self, findings: Findings | None = None):
        """The store, opened read-only (`Store.open`) with this member's settings."""
        from mqtool.store.store import Store

        return Store.open(self.path, self.config, findings)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "path": str(self.path),
            "dir": self.rel,
            "group": self.group,
            "config": None if self.conf_path is None else str(self.conf_path),
            **self.identity.as_dict(),
        }


@dataclass
class Fleet:
    """The stores found below a fleet directory, in directory order, and what discovery noticed."""

    root: Path
    members: list[FleetMember]
    findings: Findings = field(default_factory=Findings)

    def groups(self) -> dict[str, list[FleetMember]]:
        """Members by broker group, masters (brokerId 0) first, then by id and name."""
        out: dict[str, list[FleetMember]] = {}
        for m in sorted(self.members, key=_group_order):
            out.setdefault(m.group, []).append(m)
        return out

    def select(self, spec: str) -> FleetMember:
        """The member `--broker NAME[:ID]` names: its full name, its brokerName (when one store has it),
        `brokerName:id`, or its directory. A user error when none or several match."""
        for how in (
            lambda m: m.name == spec,
            lambda m: m.rel == spec,
            lambda m: _name_id(m) == spec,
            lambda m: m.identity.broker_name == spec,
            lambda m: m.path.name == spec,
        ):
            hits = [m for m in self.members if how(m)]
            if len(hits) == 1:
                return hits[0]
            if hits:
                raise StoreError(
                    f'--broker "{spec}" matches {len(hits)} stores: '
                    + ", ".join(m.name for m in hits)
                    + "; give NAME:ID or the directory",
                    self.root,
                )
        raise StoreError(
            f'--broker "{spec}" names no store of the fleet; it holds: ' + ", ".join(m.name for m in self.members),
            self.root,
        )

    def as_dict(self) -> dict:
        return {"root": str(self.root), "stores": [m.as_dict() for m in self.members]}


def _name_id(m: FleetMember) -> str | None:
    i = m.identity
    return None if i.broker_name is None else f"{i.broker_name}:{i.broker_id}"


def _group_order(m: FleetMember) -> tuple:
    bid = m.identity.broker_id or ""
    return (m.group, not m.identity.is_master, (0, int(bid)) if bid.isdigit() else (1, bid), m.name)


def find_store_dirs(root: Path) -> list[Path]:
    """Stores at depth 1, then inside each non-store directory at depth 2; hidden directories skipped."""
    found: list[Path] = []
    for d in _subdirs(root):
        if is_store_dir(d):
            found.append(d)
        else:
            found.extend(s for s in _subdirs(d) if is_store_dir(s))
    return found


def _subdirs(d: Path) -> list[Path]:
    try:
        return sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def is_fleet_dir(path: Path) -> bool:
    """A directory that is no store itself and holds at least one store at depth 1 or 2."""
    return path.is_dir() and not is_store_dir(path) and bool(find_store_dirs(path))


def conf_for(store: Path) -> Path | None:
    """The store's own broker.conf: inside it, else `STORE.broker.conf` or `broker-STORE.conf` beside it."""
    for p in (
        store / BROKER_CONF,
        store.parent / f"{store.name}.{BROKER_CONF}",
        store.parent / f"broker-{store.name}.conf",
    ):
        if p.is_file():
            return p
    return None


def open_fleet(path: Path | str, config: Path | None = None) -> Fleet:
    """Discover the stores of a fleet directory and their settings; StoreError when it holds none."""
    root = Path(path)
    if not root.is_dir():
        raise StoreError("no such directory" if not root.exists() else "not a directory", root)
    dirs = find_store_dirs(root)
    if not dirs:
        raise StoreError("not a fleet: no store (commitlog/, consumequeue/, dledger-*/ ...) at depth 1 or 2", root)
    shared = load_broker_conf(config) if config is not None else BrokerConfig()
    findings = Findings()
    root = root.absolute()  # not resolved: a store may be a symbolic link into another place
    members = [_member(root, root / d.relative_to(path), shared, config, findings) for d in dirs]
    _disambiguate(members)
    return Fleet(root, members, findings)


def _member(root: Path, store: Path, shared: BrokerConfig, config: Path | None, findings: Findings) -> FleetMember:
    own = conf_for(store)
    cfg = _own_config(own, shared, config, findings) if own is not None else shared
    conf_path = own if own is not None else config
    ident = identity_of(store, cfg, conf_path, findings)
    rel = store.relative_to(root).as_posix()
    name = rel if ident.broker_name is None else f"{ident.broker_name}:{ident.broker_id}"
    if ident.broker_name is None and ident.broker_id is not None:
        name = f"{rel}:{ident.broker_id}"
    return FleetMember(name, store, rel, cfg, conf_path, ident)


def _own_config(own: Path, shared: BrokerConfig, config: Path | None, findings: Findings) -> BrokerConfig:
    """The store's own broker.conf; one it cannot use is an error finding, and the store is read with the
    shared settings (its names still taken from the file's keys when the text parses)."""
    try:
        return load_broker_conf(own)
    except ConfigFileError as e:
        fallback = "--config" if config is not None else "RocketMQ's defaults"
        findings.add(own.name, None, CHECK, "error", f"{e}; the store is read with {fallback}")
    try:
        raw = parse_properties(own.read_bytes().decode("latin-1"), source=own.name)
    except (OSError, ConfigFileError):
        raw = {}
    return replace(shared, raw=raw)


def _disambiguate(members: list[FleetMember]) -> None:
    """Stores sharing a name (one broker's copies, a --config for all) become `name@directory`."""
    counts: dict[str, int] = {}
    for m in members:
        counts[m.name] = counts.get(m.name, 0) + 1
    for m in members:
        if counts[m.name] > 1:
            m.name = f"{m.name}@{m.rel}"
