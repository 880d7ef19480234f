"""Fixture stores of the production layouts (issue 15): `fixtures/dledger`, `batchcq`, `pop`, `compaction`.

`write_layout_fixtures(dir)` writes each store with its `NAME.broker.conf` beside it and `layouts.md`
(what each holds). Tiny mapped files, fixed timestamps from the demo's `T0`, no randomness: two runs
give identical bytes. Every store is written through the layout builders (`builder/dledger.py`,
`batchcq.py`, `pop.py`, `compaction.py`); the golden files in `tests/golden/` are made from them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mqtool.builder.batchcq import BatchTopics
from mqtool.builder.broker import _record_copy, _to_schedule, deliver_timer, props_map, put_message, serialise
from mqtool.builder.compaction import CompactionLogWriter, write_position_checkpoint
from mqtool.builder.demo import T0, _Client
from mqtool.builder.dledger import DLedgerStoreWriter
from mqtool.builder.pop import put_ack, put_checkpoint
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig, parse_broker_conf
from mqtool.formats.compaction import get_compaction_log_size
from mqtool.formats.config_json import TopicConfig, Topics, dump_topics
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_INNER_NUM,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_TOPIC,
)
from mqtool.formats.offsets_json import DataVersion, DelayOffsets
from mqtool.formats.sysflag import INNER_BATCH
from mqtool.rules.pop import build_cluster_revive_topic

T_STOP = T0 + 20_000  # every layout store stops here (the `--now` of its goldens)
CLUSTER = "DemoCluster"
STORE_HOST = "10.0.0.1:10911"

COMMON_CONF = """\
brokerClusterName=DemoCluster
brokerIP1=10.0.0.1
listenPort=10911
mappedFileSizeConsumeQueue=400
mappedFileSizeTimerLog=4096
timerPrecisionMs=1000
maxHashSlotNum=16
maxIndexNum=64
"""
CONFS = {
    "dledger": "brokerName=broker-dledger\nmappedFileSizeCommitLog=2048\nenableDLegerCommitLog=true\n"
               "dLegerGroup=broker-dledger\ndLegerSelfId=n0\ndLegerPeers=n0-127.0.0.1:40911\n",
    "batchcq": "brokerName=broker-batchcq\nmappedFileSizeCommitLog=4096\n",
    "pop": "brokerName=broker-pop\nmappedFileSizeCommitLog=4096\n",
    "compaction": "brokerName=broker-compaction\nmappedFileSizeCommitLog=4096\ncompactionMappedFileSize=1400\n"
                  "compactionCqMappedFileSize=276\n",
}
DLEDGER_INDEX_FILE_SIZE = 1024  # 32 units of 32 bytes
BCQ_FILE_SIZE = 10 * 46  # 10 BatchCQ units a file
COMPACTION_LOG_SIZE, COMPACTION_CQ_SIZE = 1400, 276
POP_REVIVE = build_cluster_revive_topic(CLUSTER)  # rmq_sys_REVIVE_LOG_DemoCluster
POP_GROUP = "GID_pop"


def conf_text(name: str) -> str:
    return f"# Settings of fixtures/{name} (RocketMQ 5.3.1 names); made by scripts/make_fixtures.py\n" \
           + COMMON_CONF + CONFS[name]


def layout_config(name: str) -> BrokerConfig:
    return parse_broker_conf(conf_text(name), source=f"{name}.broker.conf")


_CLIENT = _Client()


def _props(key: str, tag: str = "TagA", **extra: str) -> dict[str, str]:
    """A client's properties: KEYS, TAGS and a UNIQ_KEY (the demo client's layout; the counter restarts
    in each `write_layout_fixtures`)."""
    return {PROPERTY_KEYS: key, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: _CLIENT.uniq_key(T0), PROPERTY_TAGS: tag,
            **extra}


def build_dledger(store: Path) -> list[MessageRecord]:
    """DLedger mode (term 1): L1..L6 on LedgerTopicA/B; D1 (delay level 1 at +100, delivered to LedgerTopicA/0
    at +1100), D3 (level 3 at +15000, pending at the stop: due +25000); fillers F0..F7 roll the 2048-byte
    data file (a `-1 | remaining` filler ends it). `delayOffset.json` {1: 1, 3: 0}."""
    cfg = layout_config("dledger")
    out: list[MessageRecord] = []
    with DLedgerStoreWriter(store, cfg, "n0", index_file_size=DLEDGER_INDEX_FILE_SIZE) as d:
        w = d.store

        def put(topic: str, qid: int, body: bytes, props: dict[str, str], at: int, **fields) -> MessageRecord:
            fields.setdefault("store_host", STORE_HOST)
            rec = w.make_record(topic, qid, body, _serialise(w, props), store_timestamp=T0 + at, **fields)
            out.append(d.put(rec, term=1))
            return out[-1]

        def delay(key: str, level: int, at: int) -> MessageRecord:
            topic, qid, raw = _to_schedule(w, "LedgerTopicA", 0, _props(key, **{PROPERTY_DELAY_TIME_LEVEL: str(level)}),
                                           None)
            out.append(d.put(w.make_record(topic, qid, f"body of {key}".encode(), raw, store_timestamp=T0 + at,
                                           store_host=STORE_HOST), term=1))
            return out[-1]

        for i in range(4):
            put("LedgerTopicA", i % 2, f"body of L{i + 1}".encode(), _props(f"L{i + 1}"), 10 + i)
        d1 = delay("D1", 1, 100)
        put("LedgerTopicB", 0, b"body of L5", _props("L5", "TagB"), 200)
        props = props_map(d1.properties_raw)  # messageTimeUp: back to REAL_TOPIC/REAL_QID, stale DELAY kept
        put(props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID]), d1.body, props, 1_100,
            **_record_copy(d1))
        delay("D3", 3, 15_000)
        for i in range(8):
            put("LedgerTopicB", 1, f"body of F{i}".encode(), _props(f"F{i}", "TagF"), 16_000 + i)
        put("LedgerTopicA", 1, b"body of L6", _props("L6"), 19_000)
        d.dledger.write_checkpoint()
        d.dledger.write_checkpoint()  # the shutdown flush: checkpoint.bak holds the previous text
        d.dledger.write_currterm(1, "n0")
        w.write_delay_offsets(DelayOffsets({1: 1, 3: 0}, DataVersion(2, 0, T0 + 1_100)))
        w.write_checkpoint(T0 + 19_000, T0 + 19_000, T0 + 19_000)
    return out


def _serialise(w: StoreWriter, props: dict[str, str]) -> str:
    """The broker's re-serialised map (HashMap order), as `put_message` stores it."""
    return serialise(w, props_map(props), None)


def build_batchcq(store: Path) -> list[MessageRecord]:
    """BatchTopic (`queue.type=BatchCQ`, BatchCQ files of 10 units) next to PlainTopic."""
    cfg = layout_config("batchcq")
    out = []
    with StoreWriter(store, cfg) as w:
        bt = BatchTopics(w, ["BatchTopic"], file_size=BCQ_FILE_SIZE)
        for i in range(2):
            out.append(bt.put("PlainTopic", 0, f"plain {i}".encode(), _props(f"P{i + 1}"), store_timestamp=T0 + i,
                              store_host=STORE_HOST))
        for key, num, at in [("B1", 3, 100), ("B2", 0, 200), ("B3", 4, 300), ("B4", 2, 400)]:
            flag, props = (INNER_BATCH, _props(key, **{PROPERTY_INNER_NUM: str(num)})) if num else (0, _props(key))
            out.append(bt.put("BatchTopic", 0, f"batch {key}".encode(), props, sys_flag=flag,
                              store_timestamp=T0 + at, store_host=STORE_HOST, capacity=16))
        out.append(bt.put("BatchTopic", 1, b"batch B5", _props("B5", **{PROPERTY_INNER_NUM: "5"}), sys_flag=INNER_BATCH,
                          store_timestamp=T0 + 500, store_host=STORE_HOST, capacity=16))
        out.append(bt.put("PlainTopic", 0, b"plain 2", _props("P3"), store_timestamp=T0 + 600, store_host=STORE_HOST))
        bt.close()
        topics = Topics({"BatchTopic": TopicConfig("BatchTopic", 2, 2, attributes={"+queue.type": "BatchCQ"}),
                         "PlainTopic": TopicConfig("PlainTopic", 1, 1, attributes={})})
        w.write_config_file("topics.json", dump_topics(topics))
        w.write_checkpoint(T0 + 600, T0 + 600, T0 + 600)
    return out


def build_pop(store: Path) -> list[MessageRecord]:
    """PopTopic/0 (M0..M5) popped by GID_pop: ck1 (offsets 0-2, invisible 60 s) acked (`ack` 0, `bAck` 1-2);
    ck2 (offsets 3-4, invisible 10 s) never acked: delivered to the revive queue at +9210, due at +10200;
    ck3 (offset 5, invisible 60 s) still invisible at the stop."""
    cfg = layout_config("pop")
    out = []
    with StoreWriter(store, cfg) as w:
        for i in range(6):
            out.append(put_message(w, "PopTopic", 0, f"pop {i}".encode(), _props(f"M{i}"), store_timestamp=T0 + i,
                                   store_host=STORE_HOST))
        ck1 = put_checkpoint(w, POP_REVIVE, 0, "PopTopic", POP_GROUP, 0, 0, [0, 1, 2], T0 + 100, 60_000,
                             "broker-pop", store_timestamp=T0 + 100)
        ck2 = put_checkpoint(w, POP_REVIVE, 0, "PopTopic", POP_GROUP, 0, 3, [0, 1], T0 + 200, 10_000,
                             "broker-pop", store_timestamp=T0 + 200)
        ack = put_ack(w, POP_REVIVE, 0, "PopTopic", POP_GROUP, 0, 0, [0], T0 + 100, 60_000, "broker-pop",
                      store_timestamp=T0 + 300)
        back = put_ack(w, POP_REVIVE, 0, "PopTopic", POP_GROUP, 0, 0, [1, 2], T0 + 100, 60_000, "broker-pop",
                       store_timestamp=T0 + 310)
        out += [ck1, ck2, ack, back]
        out.append(deliver_timer(w, ck2, enqueue_ms=T0 + 200, store_timestamp=T0 + 9_210))
        out.append(put_checkpoint(w, POP_REVIVE, 0, "PopTopic", POP_GROUP, 0, 5, [0], T0 + 15_000, 60_000,
                                  "broker-pop", store_timestamp=T0 + 15_000))
        timer_units = w.next_queue_offset(TIMER_TOPIC, 0)
        w.write_timercheck(T0 + 19_000, w.timerlog_end, timer_units, timer_units)
        w.write_checkpoint(T0 + 15_000, T0 + 15_000, T0 + 15_000)
    return out


def build_compaction(store: Path) -> list[MessageRecord]:
    """CompactTopic/0: 10 messages with keys k0..k2 repeated; the first log file was compacted (kept:
    the last of each key among queue offsets 0-5), 6-9 appended after it; the position checkpoint says 6."""
    cfg = layout_config("compaction")
    with StoreWriter(store, cfg) as w:
        recs = [put_message(w, "CompactTopic", 0, f"value {i}".encode(), _props(f"k{i % 3}"),
                            store_timestamp=T0 + 10 * i, store_host=STORE_HOST) for i in range(10)]
        put_message(w, "PlainTopic", 0, b"plain", _props("P1"), store_timestamp=T0 + 200, store_host=STORE_HOST)
        compact = {"+cleanup.policy": "COMPACTION"}
        topics = Topics({"CompactTopic": TopicConfig("CompactTopic", 1, 1, attributes=compact),
                         "PlainTopic": TopicConfig("PlainTopic", 1, 1, attributes={})})
        w.write_config_file("topics.json", dump_topics(topics))
        w.write_checkpoint(T0 + 200, T0 + 200, T0 + 200)
    size = get_compaction_log_size(COMPACTION_LOG_SIZE, COMPACTION_CQ_SIZE)
    last = {r.properties[PROPERTY_KEYS]: r for r in recs[:6]}
    kept = sorted(last.values(), key=lambda r: r.queue_offset)
    with CompactionLogWriter(store, "CompactTopic", 0, COMPACTION_LOG_SIZE, COMPACTION_CQ_SIZE, start=size) as c:
        out = c.write_compacted(0, kept)
        out += [c.append(r) for r in recs[6:]]
    write_position_checkpoint(store, {("CompactTopic", 0): 6})
    return recs + out


BUILDERS = {"dledger": build_dledger, "batchcq": build_batchcq, "pop": build_pop, "compaction": build_compaction}


def readme_text(built: dict[str, list[MessageRecord]]) -> str:
    lines = ["# Layout fixtures (issue 15)", "",
             "Generated by `python scripts/make_fixtures.py` (`mqtool/builder/layout_fixtures.py`); do not edit by "
             "hand. Times from the demo's T0 = 1790000000000; each store stops at T0 + 20000 = 1790000020000 (the "
             "goldens' `--now`). Settings in `NAME.broker.conf` beside each store.", ""]
    for name, build in BUILDERS.items():
        lines += [f"## {name}/", "", (build.__doc__ or "").strip().replace("\n    ", " "), "",
                  "| offset | topic | queue | queue offset | KEYS / tag |", "|---:|---|---:|---:|---|"]
        for r in built[name]:
            label = r.properties.get(PROPERTY_KEYS) or r.properties.get(PROPERTY_TAGS, "")
            lines.append(f"| {r.physical_offset} | {r.topic} | {r.queue_id} | {r.queue_offset} | {label} |")
        lines.append("")
    return "\n".join(lines)


def write_layout_fixtures(fixtures: Path) -> dict[str, list[MessageRecord]]:
    """(Re)write `fixtures/{dledger,batchcq,pop,compaction}`, their `.broker.conf` and `layouts.md`."""
    fixtures.mkdir(parents=True, exist_ok=True)
    _CLIENT.counter = 0
    built = {}
    for name, build in BUILDERS.items():
        if (fixtures / name).exists():
            shutil.rmtree(fixtures / name)
        built[name] = build(fixtures / name)
        (fixtures / f"{name}.broker.conf").write_text(conf_text(name), encoding="latin-1")
    (fixtures / "layouts.md").write_text(readme_text(built), encoding="utf-8")
    return built


__all__ = ["BUILDERS", "POP_REVIVE", "T_STOP", "layout_config", "write_layout_fixtures"]
