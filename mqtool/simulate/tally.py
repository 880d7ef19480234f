"""Counting over the event stream in bounded memory: per-key repeats and the summary's delivery tallies.

A run of millions of deliveries cannot keep a `Counter` of every UNIQ_KEY (about 100 bytes a key in
Python objects). `KeyTally` keeps 9 bytes per occurrence in memory (the key's `hash()`, a byte of tags) and
spools the keys themselves to a temporary file; only when two hashes are equal are the keys read back, so the
repeats it reports are exact (equal hashes of different keys are told apart). `hash()` differs
between processes, but it only finds candidates: the results are the same in every run.
"""

from __future__ import annotations

import tempfile
from array import array
from collections import Counter
from itertools import compress
from typing import BinaryIO

from mqtool.formats.names import RETRY_GROUP_TOPIC_PREFIX, SYSTEM_TOPICS
from mqtool.simulate.events import Columns

TIMELINE_BUCKETS = 20
SUMMARY, SCHEDULE, TIMER, ROLL = 1, 2, 4, 8  # a key's tags: counted by the summary, by the invariants (a roll too)


class KeyTally:
    """How often each key occurred, per tag (`SUMMARY`, `SCHEDULE`, `TIMER`, `ROLL`: the deliveries' and rolls' keys
    are hashed and spooled once for the summary and the invariant check, `DeliveryTally.keys`). The keys are
    spooled 8,192 at a time as one UTF-8 string (surrogates passed through) with their lengths in code points."""

    def __init__(self) -> None:
        self._hashes = array("q")
        self.tags = array("B")
        self._lens = array("I")  # of the spooled keys, in code points
        self._spool: BinaryIO | None = None
        self._buf: list[str] = []
        self._repeated: dict[int, dict[str, int]] | None = None

    def __len__(self) -> int:
        return len(self._hashes)

    def extend(self, keys: list[str], tags=None) -> None:
        """`add` each key, in order, with its tag of `tags` (default: `SUMMARY` for all)."""
        self._hashes.extend(map(hash, keys))
        if tags is None:
            self.tags.frombytes(bytes([SUMMARY]) * len(keys))
        else:
            self.tags.extend(tags)
        buf = self._buf
        buf += keys
        if len(buf) >= 8192:
            self._spill()

    def _spill(self) -> None:
        if self._spool is None:
            self._spool = tempfile.TemporaryFile()  # removed when closed
        self._lens.extend(map(len, self._buf))
        self._spool.write("".join(self._buf).encode("utf-8", "surrogatepass"))
        self._buf.clear()

    def _keys(self):
        """Every key added, in order (re-read from the spool)."""
        if self._spool is not None:
            self._spool.seek(0)
            text = self._spool.read().decode("utf-8", "surrogatepass")
            self._spool.seek(0, 2)
            pos = 0
            for n in self._lens:
                yield text[pos : pos + n]
                pos += n
        yield from self._buf

    def repeated_by(self, tag: int) -> dict[str, int]:
        """{key: occurrences} for the keys with `tag` seen more than once among those with it; for `ROLL`, the
        rolls of the keys `TIMER` repeats (every tag's answer from one pass over the spool, kept)."""
        if self._repeated is None:
            self._repeated = self._all_repeated()
        return self._repeated[tag]

    def _all_repeated(self) -> dict[int, dict[str, int]]:
        import numpy as np

        h, t = np.frombuffer(self._hashes, dtype=np.int64), np.frombuffer(self.tags, dtype=np.uint8)
        candidates = {}
        for b in (SUMMARY, SCHEDULE, TIMER):
            mine = np.sort(h[(t & b) != 0])
            candidates[b] = set(mine[1:][mine[1:] == mine[:-1]].tolist())
        candidates[ROLL] = candidates[TIMER]
        found: dict[int, Counter[str]] = {b: Counter() for b in candidates}
        union = set().union(*candidates.values())
        if union:
            for k, kh, kt in zip(self._keys(), self._hashes, self.tags, strict=True):
                if kh in union:
                    for b, mine in candidates.items():
                        if kt & b and kh in mine:
                            found[b][k] += 1
        out = {b: {k: n for k, n in found[b].items() if n > 1} for b in (SUMMARY, SCHEDULE, TIMER)}
        return out | {ROLL: {k: n for k, n in found[ROLL].items() if k in out[TIMER]}}

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._buf.clear()
        self._lens = array("I")


_INVARIANT_TAGS = {"schedule": SCHEDULE, "timer": TIMER}
_BOTH_TAGS = {"schedule": SUMMARY | SCHEDULE, "timer": SUMMARY | TIMER}
_SYSTEM_TOPICS = frozenset(SYSTEM_TOPICS)


class DeliveryTally:
    """The summary's delivery figures, fed the `deliver` events in blocks (`columns`): deliveries per
    (non-system) topic, the 20-bucket timeline and the number of duplicate deliveries of a UNIQ_KEY."""

    def __init__(self, start_ms: int, until_ms: int) -> None:
        self.start = start_ms
        self.span = max(1, until_ms - start_ms)
        self.per_topic: Counter[str] = Counter()
        self.timeline: Counter[int] = Counter()
        # tagged for the summary and for the invariant check's counts (`InvariantCheck.watch`): each key is
        # hashed and spooled once
        self.keys: KeyTally = KeyTally()

    def columns(self, cols: Columns) -> None:
        """A block of `deliver` events (`EventLog.watch_columns`), counted with a few C-level passes."""
        topics, keys, times = cols["topic"], cols["uniq_key"], cols["time"]
        counts = Counter(topics)
        self._tagged(cols, topics, keys, counts)
        if not _SYSTEM_TOPICS.isdisjoint(counts):
            mine = [t not in _SYSTEM_TOPICS for t in topics]
            topics, times = (list(compress(c, mine)) for c in (topics, times))
            counts = Counter(topics)
        self.per_topic.update(counts)
        timeline, start, span = self.timeline, self.start, self.span
        for t, n in Counter(times).items():
            timeline[min(TIMELINE_BUCKETS - 1, (t - start) * TIMELINE_BUCKETS // span)] += n

    def _tagged(self, cols: Columns, topics: list, keys: list, counts: Counter) -> None:
        """The batch's keys for the summary (a non-system topic, a non-empty key) and the invariant check
        (a schedule or timer delivery with a key; a schedule retry's key is `key@offset`), each tagged
        with who counts it: in one C-level pass when every key counts for both (the usual batch)."""
        services = cols["service"]
        kinds = set(services)
        if (
            _SYSTEM_TOPICS.isdisjoint(counts)
            and kinds <= _BOTH_TAGS.keys()
            and None not in keys
            and "" not in keys
            and not ("schedule" in kinds and any((t or "").startswith(RETRY_GROUP_TOPIC_PREFIX) for t in counts))
        ):
            self.keys.extend(keys, map(_BOTH_TAGS.__getitem__, services))
            return
        add = self.keys.extend
        for s, t, k, p in zip(services, topics, keys, cols["physical_offset"], strict=True):
            summary = SUMMARY if k and t not in _SYSTEM_TOPICS else 0
            mine = f"{k}@{p}" if s == "schedule" and (t or "").startswith(RETRY_GROUP_TOPIC_PREFIX) else k
            tag = _INVARIANT_TAGS.get(s, 0) if mine is not None else 0
            for key, bits in [(k, summary | tag)] if mine is k else [(k, summary), (mine, tag)]:
                if bits:
                    add([key], (bits,))

    def duplicates(self) -> int:
        return sum(n - 1 for n in self.keys.repeated_by(SUMMARY).values())

    def timeline_list(self) -> list[int]:
        return [self.timeline.get(i, 0) for i in range(TIMELINE_BUCKETS)]
