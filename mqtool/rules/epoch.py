"""Controller mode's epoch rules (RocketMQ 5.3.1 `EpochFileCache`, `AutoSwitchHAClient#doTruncate`).

A broker that comes back as a slave (an old master, after the controller elected another) compares its
epoch entries with the new master's and truncates its CommitLog to the last point both agree on.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.rules.index import LONG_MAX


@dataclass(frozen=True)
class EpochEntry:
    """One epoch: the offsets [start_offset, end_offset) its master wrote."""

    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX


def init_entries(entries: list[tuple[int, int]]) -> list[EpochEntry]:
    """`EpochFileCache#initEntries`: each entry ends where the next starts; the last is open (Long.MAX_VALUE).
    The map is keyed by epoch (a TreeMap): a repeated epoch keeps the later line."""
    by_epoch: dict[int, tuple[int, int]] = {}
    prev = None
    for epoch, start in entries:
        if prev is not None:
            by_epoch[prev[0]] = (by_epoch[prev[0]][0], start)
        by_epoch[epoch] = (start, LONG_MAX)
        prev = (epoch, start)
    return [EpochEntry(e, s, end) for e, (s, end) in sorted(by_epoch.items())]


def set_last_epoch_entry_end_offset(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """`EpochFileCache#setLastEpochEntryEndOffset`: the last entry ends at the store's max offset (when not
    before its start)."""
    if not entries or entries[-1].start_offset > end_offset:
        return list(entries)
    last = entries[-1]
    return [*entries[:-1], EpochEntry(last.epoch, last.start_offset, end_offset)]


def find_consistent_point(local: list[EpochEntry], compare: list[EpochEntry]) -> int:
    """`EpochFileCache#findConsistentPoint`: from the newest local epoch down, the first epoch both hold with
    the same start; the smaller of the two ends. -1: none (the slave refuses to truncate)."""
    theirs = {e.epoch: e for e in compare}
    for mine in sorted(local, key=lambda e: e.epoch, reverse=True):
        other = theirs.get(mine.epoch)
        if other is not None and other.start_offset == mine.start_offset:
            return min(mine.end_offset, other.end_offset)
    return -1


def truncate_offset(
    local: list[tuple[int, int]], local_max_offset: int, master: list[tuple[int, int]], master_max_offset: int
) -> int | None:
    """`AutoSwitchHAClient#doTruncate`: where a returning broker truncates its CommitLog before it follows
    `master`; None when its epoch cache is empty (a new replica: nothing truncated, it reports 0)."""
    if not local:
        return None
    mine = set_last_epoch_entry_end_offset(init_entries(local), local_max_offset)
    theirs = set_last_epoch_entry_end_offset(init_entries(master), master_max_offset)
    return find_consistent_point(mine, theirs)
