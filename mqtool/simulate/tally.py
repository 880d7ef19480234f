"""Counting over the event stream in bounded memory: per-key repeats and the summary's delivery tallies.

A run of millions of deliveries cannot keep a `Counter` of every UNIQ_KEY (about 100 bytes a key in
Python objects). `KeyTally` keeps 8 bytes per occurrence in memory (the key's `hash()`) and spools the
keys themselves to a temporary file; only when two hashes are equal are the keys read back, so the
repeats it reports are exact (equal hashes of different keys are told apart). `hash()` differs
between processes, but it only finds candidates: the results are the same in every run.
"""

from __future__ import annotations

import tempfile
from array import array
from collections import Counter
from itertools import compress
from typing import BinaryIO

from mqtool.formats.names import SYSTEM_TOPICS
from mqtool.simulate.events import Columns, SimEvent

TIMELINE_BUCKETS = 20


class KeyTally:
    """How often each key occurred: `repeated()` gives the keys seen more than once, exactly.

    The keys are spooled 8,192 at a time as one UTF-8 string (surrogates passed through) with their
    lengths in code points, which is what decoding the spool gives back."""

    def __init__(self) -> None:
        self._hashes = array("q")
        self._lens = array("I")  # of the spooled keys, in code points
        self._spool: BinaryIO | None = None
        self._buf: list[str] = []

    def __len__(self) -> int:
        return len(self._hashes)

    def add(self, key: str) -> None:
        self._hashes.append(hash(key))
        buf = self._buf
        buf.append(key)
        if len(buf) >= 8192:
            self._spill()

    def extend(self, keys: list[str]) -> None:
        """`add` each key, in order."""
        self._hashes.extend(map(hash, keys))
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
                yield text[pos:pos + n]
                pos += n
        yield from self._buf

    def counts(self, keys: set[str]) -> Counter[str]:
        """Exact occurrences of the given keys (one pass over the spool, none when `keys` is empty)."""
        if not keys:
            return Counter()
        wanted = {hash(k) for k in keys}
        found: Counter[str] = Counter()
        for k, h in zip(self._keys(), self._hashes, strict=True):
            if h in wanted and k in keys:
                found[k] += 1
        return found

    def repeated(self) -> dict[str, int]:
        """{key: occurrences} for the keys seen more than once."""
        import numpy as np

        h = np.sort(np.frombuffer(self._hashes, dtype=np.int64)) if self._hashes else np.zeros(0, np.int64)
        same = h[1:][h[1:] == h[:-1]]
        if not len(same):
            return {}
        candidates = set(same.tolist())
        found: Counter[str] = Counter(k for k, kh in zip(self._keys(), self._hashes, strict=True)
                                      if kh in candidates)
        return {k: n for k, n in found.items() if n > 1}

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._buf.clear()
        self._lens = array("I")


_SYSTEM_TOPICS = frozenset(SYSTEM_TOPICS)


class DeliveryTally:
    """The summary's delivery figures, fed by the event log's `deliver` events: deliveries per
    (non-system) topic, the 20-bucket timeline and the number of duplicate deliveries of a UNIQ_KEY.

    `EventLog.watch_columns` hands it the events in batches (`columns`): each batch is counted with a
    few C-level passes instead of a call per event; `__call__` takes one `SimEvent`."""

    def __init__(self, start_ms: int, until_ms: int) -> None:
        self.start = start_ms
        self.span = max(1, until_ms - start_ms)
        self.per_topic: Counter[str] = Counter()
        self.timeline: Counter[int] = Counter()
        self.keys = KeyTally()

    def __call__(self, e: SimEvent) -> None:
        if e.topic not in SYSTEM_TOPICS:
            self.per_topic[e.topic] += 1
            if e.uniq_key:
                self.keys.add(e.uniq_key)
            self.timeline[min(TIMELINE_BUCKETS - 1, (e.time - self.start) * TIMELINE_BUCKETS // self.span)] += 1

    def columns(self, cols: Columns) -> None:
        """`__call__` for each of a batch of events (`EventLog.watch_columns`): counted with a few
        C-level passes instead of a call per event."""
        topics, keys, times = cols["topic"], cols["uniq_key"], cols["time"]
        counts = Counter(topics)
        if not _SYSTEM_TOPICS.isdisjoint(counts):
            mine = [t not in _SYSTEM_TOPICS for t in topics]
            topics, keys, times = (list(compress(c, mine)) for c in (topics, keys, times))
            counts = Counter(topics)
        self.per_topic.update(counts)
        self.keys.extend(list(filter(None, keys)))
        timeline, start, span = self.timeline, self.start, self.span
        for t, n in Counter(times).items():
            timeline[min(TIMELINE_BUCKETS - 1, (t - start) * TIMELINE_BUCKETS // span)] += n

    def duplicates(self) -> int:
        return sum(n - 1 for n in self.keys.repeated().values())

    def timeline_list(self) -> list[int]:
        return [self.timeline.get(i, 0) for i in range(TIMELINE_BUCKETS)]
