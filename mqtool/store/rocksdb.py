"""RocksDB consume queues and config (spec §14), read-only through `rocksdict`.

Never writes into the store and never takes its LOCK: RocksDB's read-only open takes no lock, but
rocksdict writes a `rocksdict-config.json` into any directory it opens, read-only or not. So the
database is opened through a private directory of symbolic links to the store's files (`read_only_db`):
rocksdict and RocksDB may write there, the store's directory is only read (a test compares every
byte and mtime before and after). A write-ahead log not yet flushed is replayed in memory.
Damaged keys and values become findings under `CHECK`; a database that will not open is one finding.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from construct import ConstructError

from mqtool.formats import layout
from mqtool.formats.config_json import SubscriptionGroups, Topics
from mqtool.formats.names import RMQ_SYS_ROCKSDB_OFFSET_TOPIC
from mqtool.formats.offsets_json import ConfigFileError, ConsumerOffsets, DataVersion, derive_group_topic_map
from mqtool.formats.rocksdb_config import (
    CONSUMER_OFFSETS_DIR,
    FORBIDDEN_COLUMN_FAMILY,
    KV_DATA_VERSION_COLUMN_FAMILY,
    KV_DATA_VERSION_KEY,
    SUBSCRIPTION_GROUPS_DIR,
    TOPICS_DIR,
    V2_DIR,
    parse_data_version,
    parse_forbidden_value,
    parse_group_value,
    parse_offset_value,
    parse_topic_value,
)
from mqtool.formats.rocksdb_cq import (
    CQ_COLUMN_FAMILY,
    CQ_VALUE_SIZE,
    MAX,
    MIN,
    OFFSET_COLUMN_FAMILY,
    OFFSET_VALUE_SIZE,
    build_checkpoint_key,
    cq_key,
    cq_value,
    offset_key,
    offset_value,
    queue_prefix,
)
from mqtool.store.findings import Findings

CHECK = "rocksdb.integrity"
CQ_DIR = "consumequeue"
_CQ_VALUE = layout.struct_format(cq_value)
_OFFSET_VALUE = layout.struct_format(offset_value)
_CHECKPOINT_KEY = build_checkpoint_key()
_I64_MAX_BYTES = ((1 << 63) - 1).to_bytes(8, "big")
OFFSET_KEY_FIXED = len(build_checkpoint_key()) - len(RMQ_SYS_ROCKSDB_OFFSET_TOPIC)  # 4+1+1+3+1+4


class RocksDBUnavailable(Exception):
    """The binding is missing or the database does not open (the caller turns it into a finding)."""


def is_rocksdb_dir(path: Path) -> bool:
    """A RocksDB database directory: CURRENT and a MANIFEST file."""
    return (path / "CURRENT").is_file() and any(path.glob("MANIFEST-*"))


SHADOW_PREFIX = "mqtool-rocksdb-"  # + the opening process's pid + "-" + mkdtemp's suffix


def _sweep_shadows() -> None:
    """Remove the shadow directories of processes that are gone: a Spark worker that kept a store open is
    killed, not exited, so its finalizer never ran. They hold only links and RocksDB's own LOG."""
    for d in Path(tempfile.gettempdir()).glob(f"{SHADOW_PREFIX}*-*"):
        pid = d.name[len(SHADOW_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextmanager
def read_only_db(path: Path) -> Iterator[tuple[object, dict[str, object]]]:
    """(db, column families by name) of a RocksDB directory, opened read-only through a shadow directory.

    Raises `RocksDBUnavailable` when rocksdict is not installed or RocksDB refuses the files."""
    try:
        from rocksdict import AccessType, Options, Rdict
    except ImportError as e:  # pragma: no cover - a dependency of the project
        raise RocksDBUnavailable(f"the RocksDB binding is not installed ({e}); pip install rocksdict") from e
    _sweep_shadows()
    shadow = Path(tempfile.mkdtemp(prefix=f"{SHADOW_PREFIX}{os.getpid()}-"))
    db = None
    try:
        for p in path.iterdir():
            if p.is_file() and p.name != "LOCK":
                os.symlink(p.resolve(), shadow / p.name)
        try:
            names = Rdict.list_cf(str(shadow), Options(raw_mode=True))
            db = Rdict(str(shadow), Options(raw_mode=True), column_families={
                n: Options(raw_mode=True) for n in names if n != CQ_COLUMN_FAMILY},
                access_type=AccessType.read_only(False))
        except Exception as e:  # rocksdict raises plain Exceptions for every RocksDB status
            raise RocksDBUnavailable(f"RocksDB would not open {path}: {e}") from e
        families = {n: (db if n == CQ_COLUMN_FAMILY else db.get_column_family(n)) for n in names}
        yield db, families
    finally:
        if db is not None:
            db.close()
        shutil.rmtree(shadow, ignore_errors=True)


def _items_from(family, start: bytes, findings: Findings, where: str) -> Iterator[tuple[bytes, bytes]]:
    """Key/value pairs in key order from `start` (a RocksDB seek); a read RocksDB refuses (a corrupt block:
    checksum mismatch) ends the iteration with an error finding."""
    try:
        it = family.iter()
        it.seek(start)
        while it.valid():
            item = bytes(it.key()), bytes(it.value())
            yield item
            it.next()
    except Exception as e:  # rocksdict raises plain Exceptions for every RocksDB status
        findings.add(where, None, CHECK, "error", f"RocksDB read failed: {e}")


def _get(family, key: bytes) -> bytes | None:
    """A point get; None when absent or when RocksDB refuses the read (the iterations report corruption)."""
    try:
        value = family.get(key)
    except Exception:  # rocksdict raises plain Exceptions for every RocksDB status
        return None
    return None if value is None else bytes(value)


class RocksCqUnit(NamedTuple):
    """One RocksDB CQ entry; `queue_offset` comes from its key."""

    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_time: int


class QueueOffsets(NamedTuple):
    """A queue's `max` and `min` entries of the offset table (None when absent)."""

    max_phy_offset: int | None
    max_cq_offset: int | None
    min_phy_offset: int | None
    min_cq_offset: int | None

    @property
    def max_offset(self) -> int:
        """`getMaxOffsetInQueue`: the max entry's queue offset + 1 (0 without one)."""
        return 0 if self.max_cq_offset is None else self.max_cq_offset + 1


@dataclass
class RocksDBConsumeQueues:
    """The consume queues of a `storeType=defaultRocksDB` store (`STORE/consumequeue/` is a database).

    Use as a context manager (or call `close`): the database stays open between calls."""

    root: Path
    db: object
    families: dict[str, object]
    _cm: object = field(repr=False)

    @classmethod
    def open(cls, root: Path) -> RocksDBConsumeQueues:
        """Raises `RocksDBUnavailable`; `is_rocksdb_dir(root / "consumequeue")` says whether to try.
        Closed by `close`, or when the last reference goes (or at exit): readers may share one handle."""
        cm = read_only_db(root / CQ_DIR)
        db, families = cm.__enter__()
        out = cls(root, db, families, None)
        out._cm = weakref.finalize(out, cm.__exit__, None, None, None)
        return out

    def close(self) -> None:
        self._cm()  # a finalizer: runs once

    def __enter__(self) -> RocksDBConsumeQueues:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _offset_cf(self):
        return self.families.get(OFFSET_COLUMN_FAMILY)

    def max_phy_offset(self) -> int | None:
        """The CHECKPOINT entry: the highest CommitLog offset dispatched (`getMaxPhyOffset`)."""
        cf = self._offset_cf
        value = None if cf is None else _get(cf, _CHECKPOINT_KEY)
        return None if value is None or len(value) < 8 else int.from_bytes(value[:8], "big", signed=True)

    def offset_table(self, findings: Findings) -> dict[tuple[str, int], QueueOffsets]:
        """Every queue of the offset column family (the CHECKPOINT entry left out)."""
        found: dict[tuple[str, int], dict[str, tuple[int, int]]] = {}
        cf = self._offset_cf
        if cf is None:
            findings.add(CQ_DIR, None, CHECK, "error", f"no {OFFSET_COLUMN_FAMILY!r} column family")
            return {}
        for key, value in _items_from(cf, b"", findings, CQ_DIR):
            if key == _CHECKPOINT_KEY:
                continue
            try:
                k = offset_key.parse(key)
                if len(key) != OFFSET_KEY_FIXED + k.topic_length or k.kind not in (MAX, MIN):
                    raise ConstructError("trailing bytes or unknown kind")
            except (ConstructError, UnicodeError) as e:
                findings.add(CQ_DIR, None, CHECK, "warning", f"offset key {key.hex()} unreadable: {e}")
                continue
            if len(value) != OFFSET_VALUE_SIZE:
                findings.add(CQ_DIR, None, CHECK, "warning", f"offset value of {k.topic}/{k.queue_id} {k.kind} is "
                             f"{len(value)} bytes, not {OFFSET_VALUE_SIZE}", k.topic, k.queue_id)
                continue
            found.setdefault((k.topic, k.queue_id), {})[k.kind] = _OFFSET_VALUE.unpack(value)
        return {tq: QueueOffsets(*(d.get(MAX) or (None, None)), *(d.get(MIN) or (None, None)))
                for tq, d in sorted(found.items())}

    def queue_ids(self, findings: Findings) -> list[tuple[str, int]]:
        """(topic, queue id) of every queue with an offset-table entry."""
        return list(self.offset_table(findings))

    def iter_units(self, topic: str, queue_id: int, findings: Findings, start: int = 0,
                   report_gaps: bool = True) -> Iterator[RocksCqUnit]:
        """A queue's entries from queue offset `start` in order; a gap in the queue offsets (unless the caller
        reports gaps itself: `report_gaps`) or a value of the wrong size is a finding (the broker's
        `rangeQuery` stops at the first missing offset)."""
        prefix = queue_prefix(topic, queue_id)
        expected = None
        start_key = prefix + max(start, 0).to_bytes(8, "big", signed=True)
        for key, value in _items_from(self.db, start_key, findings, CQ_DIR):
            if not key.startswith(prefix):
                break
            if len(key) != len(prefix) + 8:
                findings.add(CQ_DIR, None, CHECK, "warning", f"CQ key {key.hex()} has {len(key)} bytes",
                             topic, queue_id)
                continue
            offset = cq_key.parse(key).cq_offset
            if report_gaps and expected is not None and offset != expected:
                findings.add(CQ_DIR, None, CHECK, "error", f"queue offsets jump from {expected - 1} to {offset}: "
                             "the broker's range query stops at the gap", topic, queue_id)
            expected = offset + 1
            if len(value) != CQ_VALUE_SIZE:
                findings.add(CQ_DIR, None, CHECK, "error", f"CQ value at offset {offset} is {len(value)} bytes, "
                             f"not {CQ_VALUE_SIZE}", topic, queue_id)
                continue
            yield RocksCqUnit(offset, *_CQ_VALUE.unpack(value))

    def unit(self, topic: str, queue_id: int, queue_offset: int) -> RocksCqUnit | None:
        """The entry at one queue offset (a point get), None when absent or not 28 bytes."""
        if queue_offset < 0:
            return None
        value = _get(self.db, queue_prefix(topic, queue_id) + queue_offset.to_bytes(8, "big", signed=True))
        if value is None or len(value) != CQ_VALUE_SIZE:
            return None
        return RocksCqUnit(queue_offset, *_CQ_VALUE.unpack(value))

    def last_cq_offset(self, topic: str, queue_id: int) -> int | None:
        """The queue offset of a queue's last entry by key (a reverse seek), None for an empty queue."""
        prefix = queue_prefix(topic, queue_id)
        try:
            it = self.db.iter()
            it.seek_for_prev(prefix + _I64_MAX_BYTES)
            if not it.valid():
                return None
            key = bytes(it.key())
        except Exception:  # a corrupt block: the forward iterations report it
            return None
        if not key.startswith(prefix) or len(key) != len(prefix) + 8:
            return None
        return int.from_bytes(key[-8:], "big", signed=True)


    def checkpoint_value(self) -> bytes | None:
        """The CHECKPOINT entry's raw value (8 bytes: `appendMaxPhyOffset`), None when absent."""
        cf = self._offset_cf
        return None if cf is None else _get(cf, _CHECKPOINT_KEY)

    def queue_key_ranges(self, findings: Findings) -> dict[tuple[str, int], QueueKeyRange]:
        """Every queue of the CQ family by its keys (whatever the offset table says): the first and the last
        entry. One seek per queue, not a scan: after a queue's first key, `seek_for_prev` finds its last and a
        seek past the prefix (its trailing CTRL_1 0x01 raised to 0x02) the next queue's first."""
        out: dict[tuple[str, int], QueueKeyRange] = {}
        try:
            it = self.db.iter()
            it.seek_to_first()
            while it.valid():
                key, value = bytes(it.key()), bytes(it.value())
                try:
                    k = cq_key.parse(key)
                    if queue_prefix(k.topic, k.queue_id) + key[-8:] != key:
                        raise ConstructError("trailing bytes or a topic that is not UTF-8")
                except (ConstructError, UnicodeError) as e:
                    findings.add(CQ_DIR, None, CHECK, "warning", f"CQ key {key.hex()} unreadable: {e}")
                    it.next()
                    continue
                prefix = key[:-8]
                it.seek_for_prev(prefix + _I64_MAX_BYTES)
                last_key, last_value = bytes(it.key()), bytes(it.value())
                if not last_key.startswith(prefix) or len(last_key) != len(key):
                    last_key, last_value = key, value
                out[(k.topic, k.queue_id)] = QueueKeyRange(k.cq_offset, _key_unit(key, value),
                                                           int.from_bytes(last_key[-8:], "big", signed=True),
                                                           _key_unit(last_key, last_value))
                it.seek(prefix[:-1] + b"\x02")
        except Exception as e:  # rocksdict raises plain Exceptions for every RocksDB status
            findings.add(CQ_DIR, None, CHECK, "error", f"RocksDB read failed: {e}")
        return out


def _key_unit(key: bytes, value: bytes) -> RocksCqUnit | None:
    """The entry of one key and value; None when the value is not 28 bytes."""
    if len(value) != CQ_VALUE_SIZE:
        return None
    return RocksCqUnit(int.from_bytes(key[-8:], "big", signed=True), *_CQ_VALUE.unpack(value))


class QueueKeyRange(NamedTuple):
    """A queue's first and last key's queue offsets and entries (an entry None when its value is not 28 bytes)."""

    first_offset: int
    first: RocksCqUnit | None
    last_offset: int
    last: RocksCqUnit | None


# ----------------------------------------------------------------------------- config in RocksDB
@dataclass
class KvTable:
    """One config database's entries: `entries` (key text -> raw value), its data version, `forbidden`."""

    path: Path
    entries: dict[str, bytes]
    data_version: DataVersion | None
    forbidden: dict[str, bytes] = field(default_factory=dict)


def read_kv_table(path: Path, findings: Findings, rel: str) -> KvTable | None:
    """A config database read whole (they are small); None when the directory is no database or does not open."""
    if not is_rocksdb_dir(path):
        return None
    try:
        with read_only_db(path) as (db, families):
            entries = {k.decode("utf-8", "surrogateescape"): v for k, v in _items_from(db, b"", findings, rel)}
            dv = None
            cf = families.get(KV_DATA_VERSION_COLUMN_FAMILY)
            raw = None if cf is None else _get(cf, KV_DATA_VERSION_KEY)
            if raw is not None:
                try:
                    dv = parse_data_version(bytes(raw))
                except ConfigFileError as e:
                    findings.add(rel, None, CHECK, "warning", f"kvDataVersion unreadable: {e}")
            fb = families.get(FORBIDDEN_COLUMN_FAMILY)
            forbidden = {} if fb is None else {k.decode("utf-8", "surrogateescape"): bytes(v)
                                                for k, v in _items_from(fb, b"", findings, rel)}
    except RocksDBUnavailable as e:
        findings.add(rel, None, CHECK, "error", str(e))
        return None
    return KvTable(path, entries, dv, forbidden)


def read_kv_consumer_offsets(root: Path, findings: Findings) -> ConsumerOffsets | None:
    """`config/consumerOffsets/` as `ConsumerOffsets` (what `RocksDBConsumerOffsetManager.load` reads)."""
    rel = f"config/{CONSUMER_OFFSETS_DIR}"
    t = read_kv_table(root / rel, findings, rel)
    if t is None:
        return None
    table: dict[str, dict[int, int]] = {}
    for key, value in t.entries.items():
        try:
            table[key] = parse_offset_value(value)
        except ConfigFileError as e:
            findings.add(rel, None, CHECK, "warning", f"offset of {key!r} unreadable: {e}")
    return ConsumerOffsets(table, t.data_version, derive_group_topic_map(table))


def read_kv_topics(root: Path, findings: Findings) -> Topics | None:
    """`config/topics/` as `Topics` (`RocksDBTopicConfigManager.decodeTopicConfig` per entry)."""
    rel = f"config/{TOPICS_DIR}"
    t = read_kv_table(root / rel, findings, rel)
    if t is None:
        return None
    topics = {}
    for key, value in t.entries.items():
        try:
            topics[key] = parse_topic_value(key, value)
        except ConfigFileError as e:
            findings.add(rel, None, CHECK, "warning", f"topic {key!r} unreadable: {e}")
    return Topics(topics, t.data_version)


def read_kv_subscription_groups(root: Path, findings: Findings) -> SubscriptionGroups | None:
    """`config/subscriptionGroups/` (groups and the forbidden column family)."""
    rel = f"config/{SUBSCRIPTION_GROUPS_DIR}"
    t = read_kv_table(root / rel, findings, rel)
    if t is None:
        return None
    groups, forbidden = {}, {}
    for key, value in t.entries.items():
        try:
            groups[key] = parse_group_value(key, value)
        except ConfigFileError as e:
            findings.add(rel, None, CHECK, "warning", f"group {key!r} unreadable: {e}")
    for key, value in t.forbidden.items():
        try:
            forbidden[key] = parse_forbidden_value(key, value)
        except ConfigFileError as e:
            findings.add(rel, None, CHECK, "warning", f"forbidden entry of {key!r} unreadable: {e}")
    return SubscriptionGroups(groups, t.data_version, forbidden)


def detect_rocksdb(root: Path, findings: Findings | None = None) -> dict[str, bool]:
    """Which RocksDB layouts the store has; the v2 config (`config/rdb`, 5.3.2+) gets an info finding
    because it is not read yet."""
    found = {"consumequeue": is_rocksdb_dir(root / CQ_DIR)}
    for d in (CONSUMER_OFFSETS_DIR, TOPICS_DIR, SUBSCRIPTION_GROUPS_DIR, V2_DIR):
        found[f"config/{d}"] = is_rocksdb_dir(root / "config" / d)
    if found[f"config/{V2_DIR}"] and findings is not None:
        findings.add(f"config/{V2_DIR}", None, CHECK, "info",
                     "RocksDB config v2 (configManagerVersion=v2, 5.3.2+) found: not yet read")
    return found


def pick_config(json_value, kv_value) -> tuple[object, str | None]:
    """(value, "json" / "rocksdb" / None): which of the two copies of a table an operator should trust.

    Mirrors the managers' `merge()`: the JSON file wins only when its dataVersion counter is greater than
    the RocksDB one (what a broker with transfer*JsonToRocksdb=true imports at start); otherwise RocksDB.
    """
    if kv_value is None:
        return (json_value, "json") if json_value is not None else (None, None)
    if json_value is None:
        return kv_value, "rocksdb"
    jc = json_value.data_version.counter if json_value.data_version else 0
    kc = kv_value.data_version.counter if kv_value.data_version else 0
    return (json_value, "json") if jc > kc else (kv_value, "rocksdb")

