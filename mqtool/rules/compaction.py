"""The compaction rule: which records of a compaction topic's queue a compaction run keeps (spec §16).

Mirrors rocketmq-all-5.3.1 `store/.../kv/CompactionLog`: `getCompactionFile` picks the files (every
compaction-log file but the last, the one being written; only files holding a queue offset past the
saved position count as new), `getOffsetMap` maps each KEYS string of the new files to its newest queue
offset, `shouldRetainMsg` keeps a record that is newer than the map's last offset, or whose offset is its
key's newest and whose body is not empty. So a key whose newest value is an empty body (a tombstone)
disappears entirely, tombstone included; a record without KEYS never reaches the compaction log
(`asyncPutMessage`: "have no key") and `shouldRetainMsg` would drop it. The map is keyed by the whole
KEYS property (space-separated keys are one string), hashed with MD5 in Java; collisions are ignored here.
Records of the last file are not compacted, so a key's older value may survive next to a newer one there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqtool.formats.names import PROPERTY_KEYS

NO_POSITION = -1  # CompactionPositionMgr.getOffset for a queue never compacted


class CompactionRecord(Protocol):
    """What the rule reads of a compaction-log record (a `MessageRecord` fits)."""

    queue_offset: int
    body: bytes

    @property
    def properties(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class OffsetMap:
    """`CompactionLog.OffsetMap`: newest queue offset per KEYS string, and the offset put last."""

    offsets: dict[str, int] = field(default_factory=dict)
    last_offset: int = 0  # a Java long field: 0 until the first put

    def get(self, key: str) -> int:
        """`OffsetMap.get`: -1 for a key not in the map."""
        return self.offsets.get(key, -1)


def is_not_blank(s: str | None) -> bool:
    """`StringUtils.isNotBlank`: not null, not empty, not only whitespace."""
    return s is not None and s.strip() != ""


def get_offset_map(new_files: Iterable[Iterable[CompactionRecord]], position: int = NO_POSITION) -> OffsetMap:
    """`CompactionLog.getOffsetMap`: over the new files in order, each record past `position` puts its
    KEYS -> queue offset (a later put of the same key overwrites it)."""
    offsets: dict[str, int] = {}
    last = 0
    for records in new_files:
        for rec in records:
            if rec.queue_offset > position:
                offsets[rec.properties.get(PROPERTY_KEYS, "")] = rec.queue_offset
                last = rec.queue_offset
    return OffsetMap(offsets, last)


def should_retain_msg(rec: CompactionRecord, offset_map: OffsetMap) -> bool:
    """`CompactionLog.shouldRetainMsg`: newer than anything mapped, or the newest of its key with a body."""
    if rec.queue_offset > offset_map.last_offset:
        return True
    key = rec.properties.get(PROPERTY_KEYS)
    if not is_not_blank(key):
        return False
    return rec.queue_offset >= offset_map.get(key) and len(rec.body) > 0


def get_compaction_file(files: Sequence[Sequence[CompactionRecord]],
                        position: int = NO_POSITION) -> tuple[list[Sequence[CompactionRecord]],
                                                              list[Sequence[CompactionRecord]]] | None:
    """`CompactionLog.getCompactionFile`: (toCompactFiles, newFiles) of a queue's log files in order, or
    None when no compaction runs (a single file, or no file past `position`). The max queue offset of a
    file is its last record's (`SparseConsumeQueue.getMaxMsgOffsetFromFile`)."""
    if len(files) <= 1:
        return None
    to_compact = list(files[:-1])
    new = [f for f in to_compact if f and max(r.queue_offset for r in f) > position]
    return (to_compact, new) if new else None


def compaction(files: Sequence[Sequence[CompactionRecord]],
               position: int = NO_POSITION) -> list[CompactionRecord] | None:
    """`CompactionLog.compactAndReplace` (`getOffsetMap` + `compaction`): the records of the compacted files
    the next run keeps, in order; None when no run would happen. The last file stays as it is."""
    picked = get_compaction_file(files, position)
    if picked is None:
        return None
    to_compact, new = picked
    offset_map = get_offset_map(new, position)
    return [r for records in to_compact for r in records if should_retain_msg(r, offset_map)]
