"""A trace `Finder` answering from the broker's own IndexFiles (spec §11): no scan, no prebuilt index.

The IndexFile holds `topic#UNIQ_KEY` and `topic#KEYS word` for every dispatched record, so a
message's copies (delay, timer, half, commit, retry, DLQ all keep the UNIQ_KEY) are found by
asking each topic. What the IndexFile does not hold is read otherwise: timer cancel records
(`TIMER_DEL_UNIQKEY`) through the timer topic's ConsumeQueue, op records through the op topic's
(as the scan does), and the CommitLog parts the files do not cover by a scan of those parts only.
"""

from __future__ import annotations

from collections.abc import Iterable

from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import PROPERTY_TIMER_DEL_UNIQKEY, TIMER_TOPIC
from mqtool.store.keyindex import KeyIndex, open_key_index
from mqtool.store.store import Store
from mqtool.trace.find import Finder, ScanFinder, UnionFinder, del_target, key_topics


class IndexFileFinder:
    """Looks keys up in the IndexFiles; records are read by offset."""

    def __init__(self, store: Store, ki: KeyIndex):
        self.store = store
        self.ki = ki
        self._cancels: list[MessageRecord] | None = None

    def _read(self, offsets: Iterable[int]) -> list[MessageRecord]:
        out = []
        for off in sorted(set(offsets)):
            try:
                out.append(self.store.commitlog.read(off))
            except RecordError:
                continue
        return out

    def _cancel_records(self) -> list[MessageRecord]:
        """Timer records naming a message to cancel (the timer topic's ConsumeQueue, read once)."""
        if self._cancels is None:
            self._cancels = []
            for cq in self.store.consume_queues(TIMER_TOPIC):
                for unit in cq.iter_units():
                    try:
                        rec = self.store.commitlog.read(unit.commitlog_offset)
                    except RecordError:
                        continue
                    if rec.properties.get(PROPERTY_TIMER_DEL_UNIQKEY):
                        self._cancels.append(rec)
        return self._cancels

    def related(self, uniq_keys: set[str], msg_ids: set[str]) -> list[MessageRecord]:
        offsets = [o for k in uniq_keys for o in self.ki.offsets(k)]
        cancels = [
            r for r in self._cancel_records() if del_target(r.properties.get(PROPERTY_TIMER_DEL_UNIQKEY)) in uniq_keys
        ]
        return sorted(
            {r.physical_offset: r for r in [*self._read(offsets), *cancels]}.values(), key=lambda r: r.physical_offset
        )

    def by_key(self, key: str, topic: str | None = None) -> list[MessageRecord]:
        """`queryMsgByKey`: with `topic`, only `topic#key` and the parking topics' keys (a delayed, timed
        or half message is indexed under SCHEDULE_TOPIC_XXXX / the timer / the half topic until delivered)."""
        return self._read(self.ki.offsets(key, None if topic is None else key_topics(topic, self.ki.topics)))

    def by_prepared(self, offsets: set[int]) -> list[MessageRecord]:
        return []  # COMMIT records keep the half's UNIQ_KEY: `related` has found them

    def op_records(self, halves: set[tuple[int, int]]) -> list[MessageRecord]:
        return ScanFinder(self.store).op_records(halves)


class _PartScan(ScanFinder):
    """A scan of one CommitLog part for the keys (op records come from the IndexFile finder)."""

    def op_records(self, halves: set[tuple[int, int]]) -> list[MessageRecord]:
        return []


def indexfile_finder(store: Store) -> tuple[Finder, KeyIndex] | None:
    """The IndexFile finder (with scans of what it does not cover), or None when the store's
    IndexFiles cannot answer (`open_key_index`). The caller closes the KeyIndex."""
    ki = open_key_index(store)
    if ki is None:
        return None
    parts: list[Finder] = [IndexFileFinder(store, ki)]
    if ki.head_end is not None:
        parts.append(_PartScan(store, 0, ki.head_end))
    if ki.tail_start is not None:
        parts.append(_PartScan(store, ki.tail_start))
    return (parts[0] if len(parts) == 1 else UnionFinder(*parts)), ki
