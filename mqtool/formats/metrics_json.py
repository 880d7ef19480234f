"""`config/timermetrics` and `config/transactionMetrics`: the 5.x per-topic counters (spec §6, §7).

`TimerMetrics` (store/timer) and `TransactionMetrics` (broker/transaction) are ConfigManagers that
override `persist()`: `write0` serialises a `*SerializeWrapper` with fastjson
`JSON.writeJSONString(writer, wrapper, SerializerFeature.BrowserCompatible)` -- compact, not the
pretty format of the other config files -- to `<file>.tmp`, copies the old file to `<file>.bak` and
renames. The wrapper's members, in fastjson's alphabetical order, are `dataVersion` and one map
topic -> `Metric{count, timeStamp}`: `timingCount` (TimerMetrics: timer messages enqueued and not yet
delivered, per real topic) or `transactionCount` (TransactionMetrics: half messages put minus those
committed or rolled back, per topic). Both maps are `new ConcurrentHashMap<>(1024)` (2048 bins); a
restarted broker `putAll`s the loaded entries into that map, so the iteration order is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.formats.javahash import java_string_hash
from mqtool.formats.offsets_json import (
    ConfigFileError,
    DataVersion,
    _chm_order,
    _data_version,
    _fields,
    _integer,
    _present,
    _quote,
    _Reader,
)

__all__ = ["METRICS_TABLE_SIZE", "TIMER_METRICS", "TRANSACTION_METRICS", "Metric", "TopicMetrics",
           "dump_topic_metrics", "parse_timer_metrics", "parse_topic_metrics", "parse_transaction_metrics"]

METRICS_TABLE_SIZE = 2048  # new ConcurrentHashMap<>(1024) -> 2048 bins (TimerMetrics, TransactionMetrics)
TIMER_METRICS = "timingCount"  # TimerMetricsSerializeWrapper's map member
TRANSACTION_METRICS = "transactionCount"  # TransactionMetricsSerializeWrapper's map member
BROWSER_SAFE_LONG = 9007199254740991  # fastjson BrowserCompatible quotes longs beyond +-(2^53 - 1)


@dataclass(frozen=True)
class Metric:
    """`TimerMetrics.Metric` / `TransactionMetrics.Metric`: a count and when it last changed (ms)."""

    count: int = 0
    time_stamp: int = 0


@dataclass(frozen=True)
class TopicMetrics:
    """A metrics file: `member` ("timingCount" or "transactionCount") -> topic -> Metric, file order."""

    member: str
    counts: dict[str, Metric]
    data_version: DataVersion | None = None

    def count(self, topic: str) -> int:
        """`getTimingCount(topic)` / `getTransactionCount(topic)`: 0 for a topic without an entry."""
        m = self.counts.get(topic)
        return 0 if m is None else m.count


def _metric(topic: str, node) -> Metric:
    f = _fields(node, f"{topic!r}")
    count, ts = _present(f.get("count")), _present(f.get("timeStamp"))
    return Metric(0 if count is None else _integer(count, f"{topic}.count"),
                  0 if ts is None else _integer(ts, f"{topic}.timeStamp"))


def parse_topic_metrics(text: str, member: str) -> TopicMetrics:
    """Read a metrics file whose map member is `member`; unknown members are ignored, as fastjson does."""
    top = _fields(_Reader(text).document(), "the document")
    table = _present(top.get(member))
    counts = {} if table is None else {k: _metric(k, v) for k, v in _fields(table, member).items()}
    return TopicMetrics(member, counts, _data_version(top.get("dataVersion")))


def parse_timer_metrics(text: str) -> TopicMetrics:
    """config/timermetrics (`TimerMetrics.decode`)."""
    return parse_topic_metrics(text, TIMER_METRICS)


def parse_transaction_metrics(text: str) -> TopicMetrics:
    """config/transactionMetrics (`TransactionMetrics.decode`)."""
    return parse_topic_metrics(text, TRANSACTION_METRICS)


def _long(v: int) -> str:
    return str(v) if -BROWSER_SAFE_LONG <= v <= BROWSER_SAFE_LONG else f'"{v}"'


def _bean(fields: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'"{k}":{v}' for k, v in fields) + "}"


def dump_topic_metrics(m: TopicMetrics, *, table_size: int = METRICS_TABLE_SIZE) -> str:
    """The file exactly as `TimerMetrics.persist` / `TransactionMetrics.persist` writes it (no newline);
    a model without dataVersion (a hand-written file) is written without it."""
    if m.member not in (TIMER_METRICS, TRANSACTION_METRICS):
        raise ConfigFileError(f"unknown metrics member {m.member!r}")
    fields: list[tuple[str, str]] = []
    if m.data_version is not None:
        dv = m.data_version
        dv_fields = [("counter", _long(dv.counter))]
        if dv.state_version is not None:
            dv_fields.append(("stateVersion", _long(dv.state_version)))
        dv_fields.append(("timestamp", _long(dv.timestamp)))
        fields.append(("dataVersion", _bean(dv_fields)))
    order = _chm_order(m.counts, java_string_hash, table_size)
    entries = ",".join(f"{_quote(t, browser_compatible=True)}:" + _bean([("count", _long(m.counts[t].count)),
                                                 ("timeStamp", _long(m.counts[t].time_stamp))]) for t in order)
    fields.append((m.member, "{" + entries + "}"))
    return _bean(fields)
