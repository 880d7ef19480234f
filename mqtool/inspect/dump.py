"""Single-file dumps: `mqtool inspect FILE` decodes one store file according to its kind.

Like Kafka's `DumpLogSegments`, the kind comes from the file's place and name (spec §1): a CommitLog
file (`commitlog/<20 digits>`), a ConsumeQueue file (`consumequeue/TOPIC/QID/<20 digits>`), a
TimerLog file (`timerlog/<20 digits>`), `timerwheel` (or `timerwheel.gz`), `config/timercheck`,
`checkpoint`, an IndexFile (`index/yyyyMMddHHmmssSSS`),
or a config JSON file (`config/*.json`, `.bak` too, `timermetrics`). Corruption is
reported as findings and scan results, never raised; only an unknown kind or an unreadable config
file is an error (StoreError).
"""

import re
from pathlib import Path

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.checkpoint import CHECKPOINT_SIZE, checkpoint
from mqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.offsets_json import ConfigFileError, loads_lenient, parse_consumer_offsets, parse_delay_offsets
from mqtool.formats.timercheck import TIMERCHECK_SIZE, timercheck
from mqtool.inspect import JSON_VERSION
from mqtool.store.errors import StoreError
from mqtool.store.findings import sort_findings
from mqtool.store.mapped_files import MappedFile, MappedFileQueue, read_at

# The readers of each kind are imported where that kind is dumped: a config file's dump never loads
# numpy or the compiled scan kernels.

_NAME = re.compile(r"^\d{20}$")
_INDEX_NAME = re.compile(r"^\d{17}$")  # IndexFile: its creation time, yyyyMMddHHmmssSSS
KINDS = ("commitlog", "consumequeue", "timerlog", "timerwheel", "timercheck", "checkpoint", "config", "index")


def file_kind(path: Path) -> str:
    """The kind of a store file from its place and name; StoreError when it is none we know."""
    name, parent = path.name, path.parent.name
    if _NAME.match(name):
        if parent == "commitlog":
            return "commitlog"
        if parent == "timerlog":
            return "timerlog"
        if len(path.parents) >= 3 and path.parents[2].name == "consumequeue":
            return "consumequeue"
        head = read_at(path, 4, 4)
        if len(head) == 4 and int.from_bytes(head, "big", signed=True) in (
                MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE):
            return "commitlog"
    if parent == "index" and _INDEX_NAME.match(name):
        return "index"
    if name in ("timerwheel", "timerwheel.gz"):
        return "timerwheel"
    if name == "timercheck":
        return "timercheck"
    if name == "checkpoint":
        return "checkpoint"
    if name.endswith((".json", ".json.bak")) or name in ("timermetrics", "timermetrics.bak", "transactionMetrics",
                                                          "transactionMetrics.bak"):
        return "config"
    raise StoreError("unknown file kind (give a store directory, or a commitlog/, consumequeue/ or timerlog/ "
                     "file, an index/ file, timerwheel, config/timercheck, checkpoint or a config/*.json file)", path)


def _single(path: Path) -> MappedFileQueue:
    size = path.stat().st_size
    start = int(path.name) if _NAME.match(path.name) else 0
    return MappedFileQueue(path.parent, [MappedFile(path, start, size)], size, [])


def dump_file(path: Path | str, config: BrokerConfig | None = None, limit: int | None = None,
              body: str = "text", decompress_body: bool = False) -> dict:
    """The `dump` document of one file (`limit` caps the records/units listed, not the scan)."""
    path = Path(path)
    if not path.exists():
        raise StoreError("no such file or directory", path)
    config = config or BrokerConfig()
    kind = file_kind(path)
    if kind == "index":
        from mqtool.inspect.index import index_file_dump

        return index_file_dump(path, config, limit)
    doc = {"version": JSON_VERSION, "view": "dump", "kind": kind, "file": str(path),
           "size": path.stat().st_size}
    if kind == "commitlog":
        doc.update(_commitlog(path, limit, body, decompress_body))
    elif kind == "consumequeue":
        doc.update(_consumequeue(path, limit))
    elif kind == "timerlog":
        doc.update(_timerlog(path, limit))
    elif kind == "timerwheel":
        doc.update(_timerwheel(path, config, limit))
    elif kind == "timercheck":
        doc["timercheck"] = _page(path, timercheck, TIMERCHECK_SIZE, 56)
    elif kind == "checkpoint":
        doc["checkpoint"] = _page(path, checkpoint, CHECKPOINT_SIZE, 40)
    else:
        doc.update(_config(path))
    doc.setdefault("findings", [])
    return doc


def _commitlog(path: Path, limit, body, decompress_body) -> dict:
    import numpy as np

    from mqtool.inspect.columns import commitlog_chunks
    from mqtool.inspect.records import record_dict
    from mqtool.store.commitlog import CommitLog

    root = path.parent.parent if path.parent.name == "commitlog" else path.parent
    cl = CommitLog(root, _single(path))
    records = []
    total = 0
    for cc in commitlog_chunks(cl, None, verify_crc=True):  # a record is built only when listed
        total += len(cc)
        want = len(cc) if limit is None else max(0, min(len(cc), limit - len(records)))
        if want:
            records += [record_dict(rec, body, decompress_body) for rec in cc.records(np.arange(want))]
    s = next(iter(cl.scans.values()))
    scan = {"start_offset": s.start, "records": s.records, "valid_bytes": s.valid_bytes,
            "stop_reason": s.stop_reason, "trailing_bytes": s.trailing_bytes}
    return {"scan": scan, "record_count": total, "records": records,
            "findings": [f.as_dict() for f in sort_findings(cl.findings)]}


def _consumequeue(path: Path, limit) -> dict:
    from mqtool.store.consumequeue import ConsumeQueue

    topic, qid = path.parents[1].name, int(path.parent.name) if path.parent.name.lstrip("-").isdigit() else -1
    cq = ConsumeQueue(path.parents[3], topic, qid, _single(path))
    units, total = [], 0
    for u in cq.iter_units(cq.first_offset):
        total += 1
        if limit is None or len(units) < limit:
            units.append(u._asdict())
    return {"topic": topic, "queue_id": qid, "first_queue_offset": cq.first_offset, "unit_count": total,
            "units": units}


def _timerlog(path: Path, limit) -> dict:
    from mqtool.store.timer import TimerLog

    tl = TimerLog(path.parent.parent, _single(path))
    units, total = [], 0
    counts = {"normal": 0, "roll": 0, "delete": 0}
    end = tl.queue.min_offset
    for u in tl.iter_units():
        total += 1
        counts[u.kind] += 1
        end = u.pos + u.size
        if limit is None or len(units) < limit:
            units.append({**u._asdict(), "kind": u.kind, "delayed_time_ms": u.delayed_time_ms})
    return {"unit_count": total, "units_by_kind": counts, "end_offset": end, "units": units}


def _timerwheel(path: Path, config: BrokerConfig, limit) -> dict:
    from mqtool.store.timer import TimerWheel

    wheel = TimerWheel.open(path.parent, config.timer_precision_ms)
    slots = []
    total = 0
    for index, s in wheel.iter_slots():
        total += 1
        if limit is None or len(slots) < limit:
            slots.append({"index": index, "time_ms": s.time_ms, "num": s.num, "first_pos": s.first_pos,
                          "last_pos": s.last_pos, "magic": s.magic})
    return {"precision_ms": config.timer_precision_ms, "slot_count": len(wheel.slots),
            "written_slots": total, "slots": slots}


def _page(path: Path, fmt, size: int, minimum: int) -> dict:
    data = read_at(path, 0, size)
    if len(data) < minimum:
        raise StoreError(f"file is {len(data)} bytes, too short (needs {minimum})", path)
    return {k: int(v) for k, v in fmt.parse(data.ljust(size, b"\x00")).items() if not k.startswith("_")}


def _config(path: Path) -> dict:
    text = path.read_bytes().decode("utf-8", "replace")
    base = path.name.removesuffix(".bak")
    try:
        if not text.strip():
            raise ConfigFileError("the file is empty")
        if base == "delayOffset.json":
            d = parse_delay_offsets(text)
            return {"config": "delayOffset", "offset_table": {str(k): v for k, v in d.offset_table.items()},
                    "data_version": _dv(d.data_version)}
        if base == "consumerOffset.json":
            c = parse_consumer_offsets(text)
            return {"config": "consumerOffset",
                    "offset_table": {k: {str(q): o for q, o in v.items()} for k, v in c.offset_table.items()},
                    "data_version": _dv(c.data_version)}
        if base in ("timermetrics", "transactionMetrics"):
            return _metrics(base, text)
        return {"config": base, "content": _jsonable(loads_lenient(text))}
    except ConfigFileError as e:
        raise StoreError(f"unparsable config file: {e}", path) from None


def _metrics(base: str, text: str) -> dict:
    """TimerMetrics / TransactionMetrics: per topic, the count and when it last changed."""
    from mqtool.formats.metrics_json import parse_timer_metrics, parse_transaction_metrics

    m = (parse_timer_metrics if base == "timermetrics" else parse_transaction_metrics)(text)
    return {"config": base, "member": m.member, "data_version": _dv(m.data_version),
            "counts": [{"topic": t, "count": v.count, "time_stamp": v.time_stamp} for t, v in m.counts.items()]}


def _dv(dv) -> dict | None:
    return None if dv is None else {"counter": dv.counter, "state_version": dv.state_version,
                                    "timestamp": dv.timestamp}


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


__all__ = ["KINDS", "dump_file", "file_kind"]
