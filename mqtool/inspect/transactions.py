"""The `transactions` view: every half message, its state and what the check service will do (spec §7).

A transaction is a half message of `RMQ_SYS_TRANS_HALF_TOPIC` together with its put-back copies
(same `UNIQ_KEY`, or `TRAN_PREPARED_QUEUE_OFFSET` naming the original's queue offset). Its state:

- `committed`: a COMMIT record (sysFlag transaction type 0x8) has `PREPARED TRANSACTION OFFSET` =
  the half's (or a copy's) physical offset (`EndTransactionProcessor`);
- `rolled_back`: an op message (`RMQ_SYS_TRANS_OP_HALF_TOPIC`, tag `d`, body = comma-separated half
  queue offsets; 5.x ends with a comma, 4.x does not) covers the half or a copy, without a COMMIT;
- `discarded`: its `UNIQ_KEY` is in `RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC` (`resolveDiscardMsg`);
- `pending`: none of these.

For every half the check rounds read again, `prediction` replays `TransactionalMessageServiceImpl.check`
rounds over its half queue as if the check service started at `now_ms` (rounds at now + k x
transactionCheckInterval; `mqtool.rules.transaction.predict_rounds`, `check_visit` per record, from the
persisted half offset, passing over what op messages cover; a committed or rolled back half read again
is checked once more and its producer answers as before; null: never read again): each visit
discards when `TRANSACTION_CHECK_TIMES` >= transactionCheckMax (or the half is older than
fileReservedTime), else increments it; within the immunity (`CHECK_IMMUNITY_TIME_IN_SECONDS`, else
transactionTimeOut) a half with the property is put back without a check (apache/rocketmq#8311),
one without it waits; past it a check request is sent. The copy written in a round is discarded in
that same round once its count reaches the maximum (as the 5.3.1 oracle shows), unless an earlier
copy written in that round ("fresh stored") stops the round before it.

`metrics` sets `config/transactionMetrics` (5.x `TransactionMetrics`: +1 per half put, -1 per commit,
rollback or discard, keyed by REAL_TOPIC) next to the pending halves found per real topic.
"""

from dataclasses import dataclass, field

import numpy as np

from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    REMOVE_TAG,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from mqtool.formats.opbody import parse_op_body  # noqa: F401 - part of this module's API
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK, TRANSACTION_ROLLBACK
from mqtool.inspect import JSON_VERSION
from mqtool.inspect.columns import ColumnChunk, TopicIds, scan_chunks
from mqtool.inspect.metrics import metrics_view
from mqtool.inspect.records import Progress
from mqtool.rules.transaction import (
    HalfRecord,
    check_immunity_time,
    check_times_of,
    odd_check_settings,
    op_body_offsets,
    predict_rounds,
)
from mqtool.store.fastscan import C_POS, C_PREPARED, C_SYS_FLAG
from mqtool.store.findings import Finding, sort_findings
from mqtool.store.store import Store

STATES = ("committed", "rolled_back", "pending", "discarded")


def _int(text: str | None, default: int | None = None) -> int | None:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


@dataclass
class TransactionScan:
    """What one CommitLog pass collects for the view; `feed` every record, then `report`."""

    halves: list[MessageRecord] = field(default_factory=list)
    ops: dict[tuple[int, int], int] = field(default_factory=dict)
    op_units: dict[int, dict[int, str]] = field(default_factory=dict)  # qid -> op queue offset -> its body (tag d)
    op_records: int = 0
    commits: dict[int, int] = field(default_factory=dict)
    rollbacks: dict[int, int] = field(default_factory=dict)
    discards: list[MessageRecord] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def feed(self, rec: MessageRecord) -> None:
        if rec.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            self.halves.append(rec)
        elif rec.topic == RMQ_SYS_TRANS_OP_HALF_TOPIC:
            self.op_records += 1
            if rec.tags != REMOVE_TAG:
                self.findings.append(Finding(rec.file, rec.physical_offset, "transactions.op", "warning",
                                             f"op message with tag {rec.tags!r} (not {REMOVE_TAG!r}): the check "
                                             "service ignores it", RMQ_SYS_TRANS_OP_HALF_TOPIC, rec.queue_id))
                return
            self.op_units.setdefault(rec.queue_id, {})[rec.queue_offset] = (rec.body or b"").decode("utf-8", "replace")
            for off in parse_op_body(rec.body):
                self.ops.setdefault((rec.queue_id, off), rec.physical_offset)
        elif rec.topic == RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC:
            self.discards.append(rec)
        if rec.transaction == "commit":
            self.commits.setdefault(rec.prepared_transaction_offset, rec.physical_offset)
        elif rec.transaction == "rollback":
            self.rollbacks.setdefault(rec.prepared_transaction_offset, rec.physical_offset)

    def feed_chunk(self, cc: ColumnChunk, topics: TopicIds) -> None:
        """`feed` every record of a column chunk: only the transaction topics' records are built;
        COMMIT/ROLLBACK records of other topics only give their two offsets."""
        if not len(cc):
            return
        wanted = [i for i in (topics.get(t) for t in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
                                                      RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC))
                  if i >= 0]
        full = np.isin(cc.topic_ids, wanted) if wanted else np.zeros(len(cc), bool)
        c = cc.cols
        kind = c[C_SYS_FLAG] & TRANSACTION_MASK
        end = (kind == TRANSACTION_COMMIT) | (kind == TRANSACTION_ROLLBACK)
        rows = np.flatnonzero(full | end)
        if not len(rows):
            return
        records = cc.records(np.flatnonzero(full))
        base = cc.chunk.base_offset
        for is_full, k, prepared, pos in zip(full[rows].tolist(), kind[rows].tolist(), c[C_PREPARED, rows].tolist(),
                                             c[C_POS, rows].tolist(), strict=True):
            if is_full:
                self.feed(next(records))
            elif k == TRANSACTION_COMMIT:
                self.commits.setdefault(prepared, base + pos)
            else:
                self.rollbacks.setdefault(prepared, base + pos)

    def report(self, store: Store, now_ms: int, v4: bool = False, predict: bool = True) -> dict:
        """The view's document; `predict=False` leaves every `prediction` null (the overview needs none)."""
        return _report(self, store, now_ms, v4, predict)


def transactions_view(store: Store, now_ms: int, progress: Progress | None = None, v4: bool = False) -> dict:
    """The `transactions` document (one CommitLog column scan; only transaction records are decoded);
    `v4`: predict as a 4.9.8 broker checks (no 1 s sleep when a round finds no further op record)."""
    ts = TransactionScan()
    topics = TopicIds()
    for cc in scan_chunks(store, topics, verify_crc=False, progress=progress):
        ts.feed_chunk(cc, topics)
    return ts.report(store, now_ms, v4)


def check_queue_records(store: Store, queue_id: int) -> list[MessageRecord]:
    """What the check rounds of half queue `queue_id` read: its half records from the persisted half offset
    and its op records from the persisted op offset (through the consume queues; a unit whose record does
    not read is left out). Fed to a `TransactionScan` with one message's records, they make its row's
    prediction the view's (`trace`)."""
    co = store.config_files.consumer_offsets
    out: list[MessageRecord] = []
    for topic in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC):
        cq = store.consume_queue(topic, queue_id)
        if cq is None:
            continue
        start = (co.offset(topic, CID_SYS_RMQ_TRANS, queue_id) if co else None) or 0
        for u in cq.iter_units(max(start, 0)):
            try:
                out.append(store.commitlog.read(u.commitlog_offset))
            except RecordError:
                continue
    return out


def _settings(store: Store) -> dict:
    c = store.config
    return {"transaction_timeout_ms": c.transaction_timeout, "transaction_check_max": c.transaction_check_max,
            "transaction_check_interval_ms": c.transaction_check_interval,
            "file_reserved_time_h": c.file_reserved_time}


def _group(halves: list[MessageRecord]) -> list[list[MessageRecord]]:
    """Originals with their put-back copies, in order of the original's queue offset."""
    groups: list[list[MessageRecord]] = []
    by_key: dict[object, list[MessageRecord]] = {}
    by_qoff: dict[tuple[int, int], list[MessageRecord]] = {}
    for h in sorted(halves, key=lambda r: (r.queue_id, r.queue_offset)):
        prepared = _int(h.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET))
        g = None
        if h.uniq_key:
            g = by_key.get(h.uniq_key)
        if g is None and prepared is not None:
            g = by_qoff.get((h.queue_id, prepared))
        if g is None:
            g = []
            groups.append(g)
        g.append(h)
        if h.uniq_key:
            by_key.setdefault(h.uniq_key, g)
        by_qoff[(h.queue_id, h.queue_offset)] = g
    return groups


def _report(ts: TransactionScan, store: Store, now_ms: int, v4: bool = False, predict: bool = True) -> dict:
    settings = _settings(store)
    discards_by_key = {}
    for d in ts.discards:
        if d.uniq_key:
            discards_by_key.setdefault(d.uniq_key, d)
    progress = _check_progress(store)
    groups = _group(ts.halves)
    states = [_state(g, ts, discards_by_key) for g in groups]
    predictions = (_predictions(groups, states, ts.op_units, progress, store, now_ms, v4) if predict
                   else [False] * len(groups))
    rows = []
    for g, state, pred in zip(groups, states, predictions, strict=True):
        rows.append(_half_row(g, state, pred, ts, discards_by_key, store, now_ms, progress))
    counts = dict.fromkeys(STATES, 0)
    for r in rows:
        counts[r["state"]] += 1
    pending = [r for r in rows if r["state"] == "pending"]
    oldest = min(pending, key=lambda r: r["born_timestamp"], default=None)
    metric_findings: list[Finding] = []
    metrics = _metrics(store, pending, metric_findings)
    c = store.config
    metric_findings += [Finding("broker.conf", None, "transactions.settings", "warning", m)
                        for m in odd_check_settings(c.transaction_check_max, c.transaction_timeout)]
    return {
        "version": JSON_VERSION,
        "view": "transactions",
        "now_ms": now_ms,
        "settings": settings,
        "counts": counts,
        "half_messages": rows,
        "oldest_pending": None if oldest is None else {"uniq_key": oldest["uniq_key"],
                                                        "born_timestamp": oldest["born_timestamp"],
                                                        "age_ms": oldest["age_ms"]},
        "check_progress": progress,
        "op_messages": {"records": ts.op_records, "half_offsets": len(ts.ops)},
        "discarded": [_discard_row(d) for d in ts.discards],
        "metrics": metrics,
        "findings": [f.as_dict() for f in sort_findings([*ts.findings, *metric_findings])],
    }


def _metrics(store: Store, pending: list[dict], findings: list[Finding]) -> dict | None:
    """config/transactionMetrics per topic next to the pending halves of that REAL_TOPIC (`metrics_view`;
    the broker persists it in TransactionMetricsFlushService)."""
    found: dict[str, int] = {}
    for r in pending:
        found[r["real_topic"] or "-"] = found.get(r["real_topic"] or "-", 0) + 1
    return metrics_view(store.config_files.transaction_metrics, found, "pending_halves", "config/transactionMetrics",
                        "transactions.metrics", "transactionMetrics counts {count} open transaction(s) of {topic}, "
                        "the half topic holds {held} pending", findings)


def _check_progress(store: Store) -> list[dict]:
    """Per half queue: the check service's stored half/op offsets against the queues' ends."""
    co = store.config_files.consumer_offsets
    qids = {q for t, q in store.queue_ids if t == RMQ_SYS_TRANS_HALF_TOPIC}
    if co:
        qids |= set(co.offset_table.get(f"{RMQ_SYS_TRANS_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}", {}))
    out = []
    for q in sorted(qids):
        half_cq = store.consume_queue(RMQ_SYS_TRANS_HALF_TOPIC, q)
        op_cq = store.consume_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, q)
        out.append({
            "queue_id": q,
            "half_offset": co.offset(RMQ_SYS_TRANS_HALF_TOPIC, CID_SYS_RMQ_TRANS, q) if co else None,
            "half_max_offset": half_cq.max_offset if half_cq else None,
            "op_offset": co.offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, CID_SYS_RMQ_TRANS, q) if co else None,
            "op_max_offset": op_cq.max_offset if op_cq else None,
        })
    return out


def _state(g: list[MessageRecord], ts: TransactionScan, discards: dict) -> str:
    """committed, rolled_back, discarded or pending (the module docstring)."""
    if any(h.physical_offset in ts.commits for h in g):
        return "committed"
    if any((h.queue_id, h.queue_offset) in ts.ops or h.physical_offset in ts.rollbacks for h in g):
        return "rolled_back"
    return "discarded" if g[0].uniq_key and g[0].uniq_key in discards else "pending"


def _predictions(groups: list[list[MessageRecord]], states: list[str], op_units: dict[int, dict[int, str]],
                 progress: list[dict], store: Store, now_ms: int, v4: bool = False) -> list[dict | None]:
    """Per transaction, what the check rounds from `now_ms` do (`rules.transaction.predict_rounds` over each
    half queue; committed and rolled back ones are answered again); None: never read again."""
    c = store.config
    by_qid: dict[int, dict[int, HalfRecord]] = {}
    answered: set[str] = set()
    for n, (g, state) in enumerate(zip(groups, states, strict=True)):
        key = str(n)
        if state in ("committed", "rolled_back"):
            answered.add(key)
        for h in g:
            p = h.properties
            by_qid.setdefault(h.queue_id, {})[h.queue_offset] = HalfRecord(
                key, check_times_of(p), h.born_timestamp, h.store_timestamp,
                p.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), p.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET))
    found: dict[str, dict] = {}
    for qid, records in by_qid.items():
        prog = next((x for x in progress if x["queue_id"] == qid), {})
        ops = {q: op_body_offsets(body, v4) for q, body in op_units.get(qid, {}).items()}
        for key, pred in predict_rounds(records, prog.get("half_offset"), ops,
                                        prog.get("op_offset"), answered, now_ms, c.transaction_check_interval,
                                        c.transaction_timeout, c.transaction_check_max, c.file_reserved_time,
                                        sleep_while_no_op=not v4).items():
            found[key] = pred.as_dict()
    return [found.get(str(n)) for n in range(len(groups))]


def _half_row(g: list[MessageRecord], state: str, prediction: dict | None | bool, ts: TransactionScan,
              discards: dict, store: Store, now_ms: int, progress: list[dict]) -> dict:
    """One transaction's row; `prediction` False: not predicted (no note drawn from it)."""
    first, latest = g[0], g[-1]
    p = first.properties
    op_hits = [(h.queue_offset, ts.ops[(h.queue_id, h.queue_offset)]) for h in g
               if (h.queue_id, h.queue_offset) in ts.ops]
    # a put-back copy's op may name the original's offset through TRAN_PREPARED_QUEUE_OFFSET
    commit = next((ts.commits[h.physical_offset] for h in g if h.physical_offset in ts.commits), None)
    discard = discards.get(first.uniq_key) if first.uniq_key else None
    times = max((_int(h.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES), 0) for h in g), default=0)
    immunity_prop = latest.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    timeout = store.config.transaction_timeout
    immunity = check_immunity_time(immunity_prop, timeout)
    notes = []
    if commit is not None and not op_hits:
        notes.append("COMMIT record written but no op message covers the half: the broker will still check it")
    if PROPERTY_DELAY_TIME_LEVEL in p:
        notes.append(f"carries DELAY={p[PROPERTY_DELAY_TIME_LEVEL]}: it loops through {RMQ_SYS_SCHEDULE_TOPIC} "
                     "until its checks "
                     "are spent (apache/rocketmq#1540)")
    half_offset = next((c["half_offset"] for c in progress if c["queue_id"] == latest.queue_id), None)
    if prediction and state in ("committed", "rolled_back"):
        notes.append(f"{state.replace('_', ' ')}, but the check rounds read it again (the half offset "
                     f"{half_offset or 0} is not past it and no op message they read covers it): it is checked "
                     "again, and a producer that answered answers again")
    elif prediction is None and state == "pending":
        notes.append(f"the check offset ({half_offset}) is past the half and every copy, and no op message covers "
                     "them: the check service never reads it again (neither checked nor discarded)")
    row = {
        "queue_offset": first.queue_offset,
        "queue_id": first.queue_id,
        "physical_offset": first.physical_offset,
        "uniq_key": first.uniq_key,
        "transaction_id": p.get(PROPERTY_TRANSACTION_ID),
        "real_topic": p.get(PROPERTY_REAL_TOPIC),
        "real_queue_id": _int(p.get(PROPERTY_REAL_QUEUE_ID)),
        "producer_group": p.get(PROPERTY_PRODUCER_GROUP),
        "keys": first.keys,
        "state": state,
        "check_times": times,
        "born_timestamp": first.born_timestamp,
        "store_timestamp": first.store_timestamp,
        "age_ms": now_ms - first.born_timestamp,
        "immunity_ms": immunity,
        "immunity_property": immunity_prop is not None,
        "copies": [{"queue_offset": h.queue_offset, "physical_offset": h.physical_offset,
                    "store_timestamp": h.store_timestamp,
                    "check_times": _int(h.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)),
                    "prepared_queue_offset": _int(h.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET))}
                   for h in g[1:]],
        "op": None if not op_hits else {"half_queue_offset": op_hits[0][0], "op_physical_offset": op_hits[0][1]},
        "commit_offset": commit,
        "discard": None if discard is None else {"physical_offset": discard.physical_offset,
                                                 "store_timestamp": discard.store_timestamp},
        "behind_check_offset": half_offset is not None and latest.queue_offset < half_offset,
        "notes": notes,
        "prediction": None,
    }
    row["prediction"] = prediction or None
    return row


def _discard_row(d: MessageRecord) -> dict:
    p = d.properties
    return {"physical_offset": d.physical_offset, "queue_id": d.queue_id, "queue_offset": d.queue_offset,
            "store_timestamp": d.store_timestamp, "uniq_key": d.uniq_key, "real_topic": p.get(PROPERTY_REAL_TOPIC),
            "real_queue_id": _int(p.get(PROPERTY_REAL_QUEUE_ID)), "producer_group": p.get(PROPERTY_PRODUCER_GROUP),
            "check_times": _int(p.get(PROPERTY_TRANSACTION_CHECK_TIMES)), "born_timestamp": d.born_timestamp,
            "keys": d.keys}
