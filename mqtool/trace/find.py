"""Finding every record of one logical message (the joins of issue #9).

A message's records are joined on (store spec §4, §6, §7, §4.10; RocketMQ 5.3.1 sources in brackets):

- `UNIQ_KEY`: any record -> the same message in every topic (delay/timer re-puts, half copies,
  the commit record, retry and DLQ copies all keep it);
- `TIMER_DEL_UNIQKEY` (a timer cancel record) -> the message it cancels: the plain UNIQ_KEY in 5.3.1
  (`TimerMessageStore` dequeue: `deleteList.contains(uniqueKey)`), `topic+UNIQ_KEY` later; both read;
- `ORIGIN_MESSAGE_ID`, `DLQ_ORIGIN_MESSAGE_ID` (retry / DLQ copies) -> the offsetMsgId (or client
  msgId) of the record the consumer got (`AbstractSendMessageProcessor.consumerSendMsgBack`); both
  ways: from the origin to its copies by text, and from a copy back to its origin by the physical
  offset an offsetMsgId of this store encodes (a message without UNIQ_KEY has no other link);
- PREPARED TRANSACTION OFFSET (COMMIT / ROLLBACK records) -> the half or put-back copy it ends
  (`EndTransactionProcessor`);
- op message body (`RMQ_SYS_TRANS_OP_HALF_TOPIC`) -> half queue offsets of the same queue id (§7.4).

A `Finder` answers the lookups; `ScanFinder` searches the CommitLog bytes (no index needed) and
`mqtool.trace.index.IndexFinder` asks the SQLite index. `collect_family` runs the joins to a fixpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from mqtool.formats.message import MessageRecord, RecordError, decode_message
from mqtool.formats.names import (
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TIMER_TOPIC,
)
from mqtool.formats.opbody import parse_op_body
from mqtool.store.mapped_files import map_file
from mqtool.store.store import Store

_MAGICS = (b"\xda\xa3\x20\xa7", b"\xda\xa3\x20\xab")  # MESSAGE_MAGIC_CODE (V1), MESSAGE_MAGIC_CODE_V2
MAX_RECORD = 4 << 20  # maxMessageSize default: how far back a record start can lie from a hit
ORIGIN_PROPS = (PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_DLQ_ORIGIN_MESSAGE_ID)


def del_target(value: str | None) -> str | None:
    """The UNIQ_KEY a `TIMER_DEL_UNIQKEY` names: `KEY` (5.3.1) or `topic+KEY` (later 5.x)."""
    if not value:
        return None
    return value.rsplit("+", 1)[-1].upper()


def op_offsets(rec: MessageRecord) -> list[int]:
    """Half queue offsets in an op record's body: `"0,1,3,"` (5.x batch) or `"0"` (4.x), §7.4."""
    return op_body_offsets(rec.body)


op_body_offsets = parse_op_body  # half queue offsets in an op message body (see `op_offsets`)


def upper(s: str | None) -> str | None:
    return s.upper() if s else None


class Finder(Protocol):
    """The lookups `collect_family` needs; each returns records (duplicates allowed)."""

    def related(self, uniq_keys: set[str], msg_ids: set[str]) -> list[MessageRecord]:
        """Records whose UNIQ_KEY, TIMER_DEL_UNIQKEY target or ORIGIN_MESSAGE_ID is one of these."""

    def by_key(self, key: str, topic: str | None = None) -> list[MessageRecord]:
        """Records whose KEYS (may) contain `key`; `topic` may narrow the lookup (callers filter anyway)."""

    def by_prepared(self, offsets: set[int]) -> list[MessageRecord]:
        """COMMIT/ROLLBACK records whose PREPARED TRANSACTION OFFSET is one of these."""

    def op_records(self, halves: set[tuple[int, int]]) -> list[MessageRecord]:
        """Op records naming one of these (half queue id, half queue offset)."""


# --------------------------------------------------------------------------- scan without an index


class ScanFinder:
    """Finds records by searching the CommitLog's bytes (C-speed `mmap.find`) for the keys.

    Every join but the op message carries the message's UNIQ_KEY or a msgId as text in the
    properties, so a byte search finds the candidates; each hit is walked back to its record start
    (the nearest magic code whose record decodes and spans the hit) and decoded. Op records are read
    through the op topic's ConsumeQueues. `start` skips CommitLog bytes before it (an index covers them);
    `end`, when given, ignores records starting at or after it.
    """

    def __init__(self, store: Store, start: int = 0, end: int | None = None):
        self.store = store
        self.start = start
        self.end = end

    def _hits(self, needles: Iterable[str]) -> list[MessageRecord]:
        pats = sorted({n.encode("utf-8") for n in needles if n})
        if not pats:
            return []
        found: dict[int, MessageRecord] = {}
        for f in self.store.commitlog.files:
            if f.start + f.length <= self.start or f.length == 0 or (self.end is not None and f.start >= self.end):
                continue
            lo = max(0, self.start - f.start)
            with map_file(f.path) as mm:
                for pat in pats:
                    pos = mm.find(pat, lo)
                    while pos != -1:
                        rec = _record_around(mm, pos, f.start, lo)
                        if rec is not None:
                            rec.file = str(f.path.relative_to(self.store.root))
                            rec.position = rec.physical_offset - f.start
                            found.setdefault(rec.physical_offset, rec)
                            pos = mm.find(pat, rec.physical_offset - f.start + rec.total_size)
                        else:
                            pos = mm.find(pat, pos + 1)
        return [found[k] for k in sorted(found) if self.end is None or k < self.end]

    def related(self, uniq_keys: set[str], msg_ids: set[str]) -> list[MessageRecord]:
        return self._hits(uniq_keys | msg_ids)

    def by_key(self, key: str, topic: str | None = None) -> list[MessageRecord]:
        return self._hits([key])

    def by_prepared(self, offsets: set[int]) -> list[MessageRecord]:
        # COMMIT records copy the half's properties, UNIQ_KEY included: `related` has found them.
        return []

    def record_at(self, offset: int) -> MessageRecord | None:
        """The valid record starting at `offset` (the origin an offsetMsgId names), else None."""
        return record_at(self.store, offset)

    def op_records(self, halves: set[tuple[int, int]]) -> list[MessageRecord]:
        out = []
        for qid in sorted({q for q, _ in halves}):
            cq = self.store.consume_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)
            if cq is None:
                continue
            for unit in cq.iter_units():  # streams: iter_units drops its numpy view before yielding
                if unit.commitlog_offset < self.start:
                    continue
                try:
                    rec = self.store.commitlog.read(unit.commitlog_offset)
                except RecordError:
                    continue
                if any((rec.queue_id, o) in halves for o in op_offsets(rec)):
                    out.append(rec)
        return out


def _record_around(buf, hit: int, base: int, lo: int) -> MessageRecord | None:
    """The record whose bytes contain position `hit`: the nearest preceding magic code that decodes."""
    end = hit
    floor = max(lo, hit - MAX_RECORD)
    while True:
        m = max(buf.rfind(magic, floor, end) for magic in _MAGICS)
        if m == -1 or m - 4 < lo:
            return None
        start = m - 4
        try:
            rec = decode_message(buf, start, base)
        except RecordError:
            rec = None
        if rec is not None and rec.total_size == rec.computed_size and start + rec.total_size > hit:
            return rec
        end = m + 3  # a magic code inside a body: keep looking further back

# --------------------------------------------------------------------------- the joins


@dataclass
class Family:
    """The records of one logical message, keyed by physical offset, with how each was joined."""

    records: dict[int, MessageRecord] = field(default_factory=dict)
    joins: dict[int, str] = field(default_factory=dict)  # offset -> member | cancel | commit | op
    uniq_keys: set[str] = field(default_factory=set)
    msg_ids: set[str] = field(default_factory=set)

    def add(self, rec: MessageRecord, join: str) -> None:
        if rec.physical_offset not in self.records:
            self.records[rec.physical_offset] = rec
            self.joins[rec.physical_offset] = join

    def sorted(self) -> list[MessageRecord]:
        return [self.records[k] for k in sorted(self.records)]

    def __iter__(self) -> Iterator[MessageRecord]:
        return iter(self.sorted())

    def __len__(self) -> int:
        return len(self.records)


def _join(rec: MessageRecord, fam: Family) -> str | None:
    uk = upper(rec.uniq_key)
    if uk and uk in fam.uniq_keys:
        return "member"
    p = rec.properties
    if any(upper(p.get(n)) in fam.msg_ids or upper(p.get(n)) in fam.uniq_keys for n in ORIGIN_PROPS if p.get(n)):
        return "member"
    if del_target(p.get(PROPERTY_TIMER_DEL_UNIQKEY)) in fam.uniq_keys:
        return "cancel"
    return None


def record_at(store: Store, offset: int) -> MessageRecord | None:
    """The record starting at `offset`, or None when no valid record starts there."""
    try:
        rec = store.commitlog.read(offset)
    except RecordError:
        return None
    return rec if rec.total_size == rec.computed_size else None


def _origins(finder: Finder, fam: Family) -> None:
    """Add the origins the members' ORIGIN_MESSAGE_IDs name by offsetMsgId (§2.4: its last 16 hex
    digits are the physical offset), when the record there has that msgId."""
    read = getattr(finder, "record_at", None)
    if read is None:
        return
    for rec in list(fam.records.values()):
        if fam.joins[rec.physical_offset] != "member":
            continue
        for name in ORIGIN_PROPS:
            mid = (rec.properties.get(name) or "").strip().upper()
            if len(mid) not in (32, 56) or not all(c in "0123456789ABCDEF" for c in mid):
                continue
            off = int(mid[-16:], 16)
            if off in fam.records:
                continue
            origin = read(off)
            if origin is not None and origin.msg_id.upper() == mid:
                fam.add(origin, "member")
                if origin.uniq_key:
                    fam.uniq_keys.add(origin.uniq_key.upper())
                fam.msg_ids.add(mid)


def collect_family(finder: Finder, seeds: list[MessageRecord], uniq_keys: Iterable[str] = (),
                   msg_ids: Iterable[str] = (), max_rounds: int = 16) -> Family:
    """Run the joins from the seed records/keys until nothing new is found.

    The joins compare UNIQ_KEYs upper-cased (a hex msgId in either case); the finders are asked for the
    keys as written too, as a byte search or an IndexFile matches case (a POP checkpoint's key is text)."""
    fam = Family()
    spelled = set(uniq_keys) | {r.uniq_key for r in seeds if r.uniq_key}
    fam.uniq_keys |= {k.upper() for k in uniq_keys}
    fam.msg_ids |= {m.upper() for m in msg_ids}
    for r in seeds:
        fam.add(r, "member")
        if r.uniq_key:
            fam.uniq_keys.add(r.uniq_key.upper())
        fam.msg_ids.add(r.msg_id.upper())
    asked_keys: set[str] = set()
    asked_ids: set[str] = set()
    for _ in range(max_rounds):
        _origins(finder, fam)
        new_keys, new_ids = fam.uniq_keys - asked_keys, fam.msg_ids - asked_ids
        if not new_keys and not new_ids:
            break
        asked_keys |= new_keys
        asked_ids |= new_ids
        for rec in finder.related(new_keys | {k for k in spelled if k.upper() in new_keys}, new_ids):
            join = _join(rec, fam)
            if join is None:
                continue
            fam.add(rec, join)
            if join == "member":
                if rec.uniq_key:
                    fam.uniq_keys.add(rec.uniq_key.upper())
                    spelled.add(rec.uniq_key)
                fam.msg_ids.add(rec.msg_id.upper())
    # transactions: commit/rollback records by prepared offset, op records by half queue offset
    halves = [r for r in fam.records.values()
              if r.topic == RMQ_SYS_TRANS_HALF_TOPIC and fam.joins[r.physical_offset] == "member"]
    if halves:
        prepared = {h.physical_offset for h in halves}
        for rec in finder.by_prepared(prepared):
            if rec.transaction in ("commit", "rollback") and rec.prepared_transaction_offset in prepared:
                fam.add(rec, "member")
        pairs = {(h.queue_id, h.queue_offset) for h in halves}
        for rec in finder.op_records(pairs):
            if rec.topic == RMQ_SYS_TRANS_OP_HALF_TOPIC and any((rec.queue_id, o) in pairs for o in op_offsets(rec)):
                fam.add(rec, "op")
    return fam


class UnionFinder:
    """Asks several finders and merges their answers (the index plus a scan of the unindexed tail)."""

    def __init__(self, *finders: Finder):
        self.finders = finders

    def _all(self, name: str, *args) -> list[MessageRecord]:
        out: dict[int, MessageRecord] = {}
        for f in self.finders:
            for r in getattr(f, name)(*args):
                out.setdefault(r.physical_offset, r)
        return [out[k] for k in sorted(out)]

    def related(self, uniq_keys: set[str], msg_ids: set[str]) -> list[MessageRecord]:
        return self._all("related", uniq_keys, msg_ids)

    def by_key(self, key: str, topic: str | None = None) -> list[MessageRecord]:
        return self._all("by_key", key, topic)

    def by_prepared(self, offsets: set[int]) -> list[MessageRecord]:
        return self._all("by_prepared", offsets)

    def op_records(self, halves: set[tuple[int, int]]) -> list[MessageRecord]:
        return self._all("op_records", halves)

    def record_at(self, offset: int) -> MessageRecord | None:
        read = next((f.record_at for f in self.finders if hasattr(f, "record_at")), None)
        return read(offset) if read is not None else None


PARKING_TOPICS = (RMQ_SYS_SCHEDULE_TOPIC, TIMER_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC)  # hold a message before delivery


def key_topics(topic: str, known: list[str]) -> list[str]:
    """The topics a `--key --topic T` lookup asks: T and the parking topics the store has."""
    return [topic, *(t for t in PARKING_TOPICS if t in known and t != topic)]


def in_topic(rec: MessageRecord, topic: str) -> bool:
    """Sent to `topic`: stored there, or parked for it (REAL_TOPIC names it)."""
    return rec.topic == topic or rec.properties.get(PROPERTY_REAL_TOPIC) == topic
