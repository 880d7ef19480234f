"""The `metrics` part of the timer and transactions views: a broker's per-topic counters file
(config/timermetrics, config/transactionMetrics) next to what the store holds for each topic."""

from __future__ import annotations

from mqtool.formats.metrics_json import TopicMetrics
from mqtool.store.findings import Finding


def metrics_view(m: TopicMetrics | None, held: dict[str, int], key: str, file: str, check: str,
                 message: str, findings: list[Finding]) -> dict | None:
    """Per topic of `m` (then of `held`), its count next to `held[topic]` under `key`; None without the
    file. The broker persists the file periodically, so a difference is an `info` finding: `message`
    formatted with `count`, `topic` and `held`."""
    if m is None:
        return None
    rows = []
    for topic in [*m.counts, *sorted(t for t in held if t not in m.counts)]:
        metric = m.counts.get(topic)
        row = {"topic": topic, "count": m.count(topic), "time_stamp": metric.time_stamp if metric else None,
               key: held.get(topic, 0)}
        rows.append(row)
        if row["count"] != row[key]:
            findings.append(Finding(file, None, check, "info",
                                    message.format(count=row["count"], topic=topic, held=row[key]), topic))
    dv = m.data_version
    return {"data_version": None if dv is None else {"counter": dv.counter, "timestamp": dv.timestamp},
            "topics": rows, "agrees": all(r["count"] == r[key] for r in rows)}
