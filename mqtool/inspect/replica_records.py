"""The records of a CommitLog range, counted per topic and queue (and listed with their keys): what the `replicas`
view reports a slave lacks, for classic HA groups (`inspect.replicas`) and DLedger groups (`inspect.dledger_replicas`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from mqtool.store import fastscan
from mqtool.store.findings import Findings
from mqtool.store.store import Store


class Tally:
    """Records counted as they are walked: bytes, store-time range, per topic and queue; with `keys`, each
    record's row (offset, topic, queue, keys, UNIQ_KEY) as `--json` lists it."""

    def __init__(self, keys: bool) -> None:
        self.keys = keys
        self.records = 0
        self.bytes = 0
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.per_queue: Counter = Counter()
        self.rows: list[dict] = []

    def add(self, offset: int, size: int, topic: str, queue_id: int, queue_offset: int, ts: int, rec=None) -> None:
        self.records += 1
        self.bytes += size
        self.first_ts = ts if self.first_ts is None else self.first_ts
        self.last_ts = ts
        self.per_queue[(topic, queue_id)] += 1
        if self.keys:
            self.rows.append(
                {
                    "offset": offset,
                    "size": size,
                    "topic": topic,
                    "queue_id": queue_id,
                    "queue_offset": queue_offset,
                    "store_timestamp": ts,
                    "keys": rec.keys,
                    "uniq_key": rec.uniq_key,
                }
            )

    def merged(self, other: Tally) -> Tally:
        """Both tallies as one, rows in offset order."""
        out = Tally(self.keys)
        for t in (self, other):
            out.records += t.records
            out.bytes += t.bytes
            out.per_queue.update(t.per_queue)
            out.rows += t.rows
        out.rows.sort(key=lambda r: r["offset"])
        out.first_ts = min((t for t in (self.first_ts, other.first_ts) if t is not None), default=None)
        out.last_ts = max((t for t in (self.last_ts, other.last_ts) if t is not None), default=None)
        return out

    def as_dict(self) -> dict:
        per_topic: Counter = Counter()
        for (topic, _q), n in self.per_queue.items():
            per_topic[topic] += n
        out = {
            "records": self.records,
            "bytes": self.bytes,
            "first_store_timestamp": self.first_ts,
            "last_store_timestamp": self.last_ts,
            "per_topic": dict(sorted(per_topic.items())),
            "per_queue": [{"topic": t, "queue_id": q, "records": n} for (t, q), n in sorted(self.per_queue.items())],
        }
        if self.keys:
            out["messages"] = self.rows
        return out


def walk_records(store: Store, start: int, stop: int, keep, each, decode: bool) -> None:
    """`each(offset, size, topic, queue_id, queue_offset, store_timestamp, record)` for the records with
    start <= offset < stop that `keep(starts, ends)` selects, walked from the record boundary `start`.
    `record` is the decoded `MessageRecord` when `decode` (for its keys), else None: the columns suffice."""
    topics: dict[bytes, str] = {}
    for f, buf, chunk in store.commitlog.scan_mapped(start, verify_crc=False, findings=Findings()):
        if not len(chunk):
            continue
        offs = chunk.physical_offset
        if int(offs[0]) >= stop:
            return
        c = chunk.cols
        wanted = (offs < stop) & keep(offs, offs + c[fastscan.C_TOTAL])
        rows = np.flatnonzero(wanted)
        if not rows.size:
            continue
        recs = list(fastscan.records_from_chunk(buf, chunk, store.commitlog.rel(f))) if decode else None
        for i in rows.tolist():
            raw = bytes(
                buf[int(c[fastscan.C_TOPIC_POS, i]) : int(c[fastscan.C_TOPIC_POS, i] + c[fastscan.C_TOPIC_LEN, i])]
            )
            topic = topics.get(raw)
            if topic is None:
                topic = topics[raw] = raw.decode("utf-8", "surrogateescape")
            each(
                int(offs[i]),
                int(c[fastscan.C_TOTAL, i]),
                topic,
                int(c[fastscan.C_QUEUE_ID, i]),
                int(c[fastscan.C_QUEUE_OFFSET, i]),
                int(c[fastscan.C_STORE_TS, i]),
                recs[i] if decode else None,
            )


def records_in(store: Store, start: int, stop: int, keys: bool = True) -> Tally:
    """The records with start <= offset < stop, counted (and listed with `keys`), from a record boundary."""
    tally = Tally(keys)
    walk_records(store, start, stop, lambda s, e: np.ones(len(s), bool), tally.add, keys)
    return tally
