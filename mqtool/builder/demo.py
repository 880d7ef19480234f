"""The demo fixture: a small 5.x store with every message kind, written through the broker put paths.

`write_fixtures(dir)` makes `dir/demo/` (the store), `dir/demo.broker.conf` (its settings, outside the
store) and `dir/README.md` (what the store holds). Fixed timestamps, no randomness: two runs give
identical bytes. The story, in ms after `T0` (the broker stops at `T_STOP` = T0 + 20 s):
client sends and end-transactions (0-102), delay deliveries (1040-1150), the op batch (3060), a timer
delivery (5010), two transaction check rounds (6000, 12000), a retry delivery (10110), fillers that
roll the CommitLog (13000+), then late sends still pending at the stop (15000-19700).
"""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig, parse_broker_conf
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TIMER_TOPIC,
)
from mqtool.formats.offsets_json import ConsumerOffsets, DataVersion, DelayOffsets, derive_group_topic_map
from mqtool.formats.sysflag import COMPRESSED

T0 = 1_790_000_000_000
T_STOP = T0 + 20_000
TOPIC_A, TOPIC_B = "DemoTopicA", "DemoTopicB"
GROUP = "GID_demo"
LONG_GROUP = "GID_demo_long_" + "x" * 114  # "%RETRY%" + 128 chars: a 135-char topic, stored as V2
CLUSTER = "DemoCluster"
STORE_HOST = "10.0.0.1:10911"
BORN_HOST = "10.0.0.5:51234"
V6_BORN_HOST = "[2001:db8::5]:51234"
V6_STORE_HOST = "[2001:db8::1]:10911"
ZLIB_FLAG = 3 << 8  # CompressionType.ZLIB.getCompressionFlag()
FILLERS = 25

BROKER_CONF = """\
# Settings of fixtures/demo (Java properties, RocketMQ 5.3.1 names); made by scripts/make_fixtures.py
brokerClusterName=DemoCluster
brokerName=broker-demo
brokerIP1=10.0.0.1
listenPort=10911
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
mappedFileSizeCommitLog=16384
mappedFileSizeConsumeQueue=400
mappedFileSizeTimerLog=4096
timerWheelEnable=true
timerPrecisionMs=1000
timerRollWindowSlot=172800
timerMaxDelaySec=259200
messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
transactionTimeOut=3000
transactionCheckInterval=6000
transactionCheckMax=1
transactionOpBatchInterval=3000
maxHashSlotNum=100
maxIndexNum=400
"""


@dataclass(frozen=True)
class Entry:
    """One written record and what it stands for in the story."""

    record: MessageRecord
    note: str


class _Client:
    """A producer: deterministic 32-hex UNIQ_KEYs (IPv4 client layout) and its wire property order."""

    def __init__(self) -> None:
        self.counter = 0

    def uniq_key(self, ts: int) -> str:
        self.counter += 1
        return f"0A0000050D05{0x1E7C0DE5:08X}{(ts - T0) & 0xFFFFFFFF:08X}{self.counter:04X}"

    def props(self, label: str, ts: int, tags: str | None = None, *extra: tuple[str, str]) -> list[tuple[str, str]]:
        pairs = [(PROPERTY_KEYS, label), (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self.uniq_key(ts)),
                 (PROPERTY_WAIT_STORE_MSG_OK, "true")]
        if tags:
            pairs.append((PROPERTY_TAGS, tags))
        return [*pairs, *extra, (PROPERTY_CLUSTER, CLUSTER)]


class DemoBuilder:
    """Writes the demo store step by step and remembers every record with its story note."""

    def __init__(self, store: Path, config: BrokerConfig):
        self.w = StoreWriter(store, config, "5.3")
        self.client = _Client()
        self.entries: list[Entry] = []

    def add(self, rec: MessageRecord, note: str) -> MessageRecord:
        self.entries.append(Entry(rec, note))
        return rec

    def send(self, label: str, topic: str, qid: int, at: int, tags: str | None, note: str, *extra: tuple[str, str],
             body: bytes | None = None, **fields) -> MessageRecord:
        ts = T0 + at
        props = self.client.props(label, ts, tags, *extra)
        data = body if body is not None else f"demo body of {label}".encode()
        rec = b.put_message(self.w, topic, qid, data, props, store_timestamp=ts, born_timestamp=ts - 1,
                            born_host=fields.pop("born_host", BORN_HOST),
                            store_host=fields.pop("store_host", STORE_HOST), **fields)
        return self.add(rec, note)

    def delay(self, label: str, topic: str, qid: int, at: int, level: int, note: str) -> MessageRecord:
        ts = T0 + at
        props = self.client.props(label, ts, f"d{level}", (PROPERTY_DELAY_TIME_LEVEL, str(level)))
        rec = b.put_delay_message(self.w, topic, qid, f"demo body of {label}".encode(), props, store_timestamp=ts,
                                  born_timestamp=ts - 1, born_host=BORN_HOST, store_host=STORE_HOST)
        return self.add(rec, note)

    def timer(self, label: str, topic: str, qid: int, at: int, deliver_in: int, note: str,
              *extra: tuple[str, str]) -> MessageRecord:
        ts = T0 + at
        props = self.client.props(label, ts, "timer", (PROPERTY_TIMER_DELIVER_MS, str(ts + deliver_in)), *extra)
        rec = b.put_timer_message(self.w, topic, qid, f"demo body of {label}".encode(), props, store_timestamp=ts,
                                  born_timestamp=ts - 1, born_host=BORN_HOST, store_host=STORE_HOST,
                                  write_time_ms=T0)
        return self.add(rec, note)

    def half(self, label: str, topic: str, qid: int, at: int, note: str) -> MessageRecord:
        ts = T0 + at
        props = self.client.props(label, ts, "tx", (PROPERTY_TRANSACTION_PREPARED, "true"),
                                  (PROPERTY_PRODUCER_GROUP, "PID_demo_tx"))
        rec = b.put_half_message(self.w, topic, qid, f"demo body of {label}".encode(), props, store_timestamp=ts,
                                 born_timestamp=ts - 1, born_host=BORN_HOST, store_host=STORE_HOST, sys_flag=0x4)
        return self.add(rec, note)


def _normal_sends(d: DemoBuilder) -> dict[str, MessageRecord]:
    """Plain sends on two topics, a batch, a zlib body and an IPv6 client."""
    r = {}
    plan = [("N1", TOPIC_A, 0, "TagA"), ("N2", TOPIC_A, 1, "TagB"), ("N3", TOPIC_A, 2, "TagA"),
            ("N4", TOPIC_A, 3, "TagB"), ("N5", TOPIC_B, 0, "TagA"), ("N6", TOPIC_B, 1, "TagB")]
    for i, (label, topic, qid, tags) in enumerate(plan):
        r[label] = d.send(f"{label} order-{1000 + i}", topic, qid, 10 + i, tags, "normal message, two keys")
    r["N7"] = d.send("N7", TOPIC_A, 0, 16, "TagA", "normal message with a user property", ("color", "blue"))
    r["N8"] = d.send("N8", TOPIC_B, 0, 17, "TagC", "normal message")
    r["N9"] = d.send("N9-notag", TOPIC_B, 1, 18, None, "no TAGS: tagsCode 0")
    items = []
    for i in range(3):
        own = [(PROPERTY_KEYS, f"B{i + 1}"), (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, d.client.uniq_key(T0 + 20)),
               (PROPERTY_WAIT_STORE_MSG_OK, "true"), (PROPERTY_TAGS, "TagBatch")]
        items.append((f"demo batch body {i + 1}".encode(), own))
    batch_props = [(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, d.client.uniq_key(T0 + 20)),
                   (PROPERTY_WAIT_STORE_MSG_OK, "true"), (PROPERTY_CLUSTER, CLUSTER)]
    for rec in b.put_batch(d.w, TOPIC_A, 2, items, batch_props, store_timestamp=T0 + 20, born_timestamp=T0 + 19,
                           born_host=BORN_HOST, store_host=STORE_HOST):
        d.add(rec, "batch of 3 (own properties + the batch's: UNIQ_KEY and WAIT twice)")
    text = b"".join(b"demo compressed line %03d: the quick brown fox jumps over the lazy dog\n" % i for i in range(60))
    r["Z1"] = d.send("Z1-zlib", TOPIC_B, 0, 22, "TagZ", "zlib-compressed body (sysFlag 0x301)",
                     body=zlib.compress(text, 5), sys_flag=COMPRESSED | ZLIB_FLAG)
    r["V6"] = d.send("V6-ipv6", TOPIC_A, 1, 23, "TagV6", "IPv6 born and store hosts (sysFlag 0x30)",
                     born_host=V6_BORN_HOST, store_host=V6_STORE_HOST)
    return r


def _special_sends(d: DemoBuilder, n: dict[str, MessageRecord]) -> dict[str, MessageRecord]:
    """Delay levels, timers, transactions, send-backs: everything written before the deliveries."""
    r = {}
    r["D1a"] = d.delay("D1a", TOPIC_A, 0, 30, 1, "delay level 1 (delivered at +1040)")
    r["D1b"] = d.delay("D1b", TOPIC_B, 1, 31, 1, "delay level 1 (delivered at +1041)")
    d.delay("D18", TOPIC_A, 1, 32, 18, "delay level 18, pending (due +2 h)")
    d.delay("D20", TOPIC_B, 0, 33, 20, "DELAY=20 clamped to 18 (stored DELAY=18), pending")
    r["T5"] = d.timer("T5", TOPIC_A, 3, 40, 5_000, "timer +5 s, delivered at +5010")
    d.timer("T600", TOPIC_B, 0, 41, 600_000, "timer +10 min, pending")
    d.timer("TROLL", TOPIC_A, 0, 42, (2 * 24 + 10) * 3_600_000,
            "timer +2 d 10 h: rolled (TimerLog magic 3, slot at write time + 1 d)")
    victim = d.timer("TV", TOPIC_A, 2, 43, 7_200_000, "timer +2 h, cancelled by TC")
    ts = T0 + 44
    cancel_props = d.client.props("TC-cancel", ts, "timer",
                                  (PROPERTY_TIMER_DELIVER_MS, victim.properties[PROPERTY_TIMER_DELIVER_MS]))
    d.add(b.put_timer_cancel(d.w, victim, cancel_props, store_timestamp=ts, born_timestamp=ts - 1,
                             born_host=BORN_HOST, store_host=STORE_HOST, write_time_ms=T0),
          "cancel of TV (TIMER_DEL_UNIQKEY, magic 5, same slot: num 0)")
    r["H1"] = d.half("H1commit", TOPIC_B, 0, 50, "half message, committed at +60")
    r["H2"] = d.half("H2rollback", TOPIC_B, 1, 51, "half message, rolled back at +61 (op only)")
    r["H4"] = d.half("H4discard", TOPIC_A, 0, 52, "half message, never answered: put back, then discarded")
    d.add(b.commit_half(d.w, r["H1"], store_timestamp=T0 + 60), "commit of H1 (sysFlag 8, prepared offset)")
    d.add(b.send_back(d.w, n["N2"], GROUP, store_timestamp=T0 + 100, store_host=STORE_HOST),
          "GID_demo send-back of N2: retry level 3 on the schedule topic (delivered at +10110)")
    d.add(b.send_back(d.w, n["N3"], GROUP, store_timestamp=T0 + 101, delay_level=-1, store_host=STORE_HOST),
          "GID_demo send-back of N3 with delay level -1: %DLQ%GID_demo")
    r["RN2"] = d.entries[-2].record
    r["RL"] = d.add(b.send_back(d.w, n["N4"], LONG_GROUP, store_timestamp=T0 + 102, delay_level=1,
                                store_host=STORE_HOST),
                    "long-group send-back of N4, level 1 (delivered at +1150 as a V2 record)")
    return r


def _services(d: DemoBuilder, s: dict[str, MessageRecord]) -> None:
    """What the schedule, timer and transaction services wrote while the broker ran."""
    d.add(b.deliver_delayed(d.w, s["D1a"], store_timestamp=T0 + 1040), "D1a delivered (stale DELAY/REAL_*)")
    d.add(b.deliver_delayed(d.w, s["D1b"], store_timestamp=T0 + 1041), "D1b delivered (stale DELAY/REAL_*)")
    d.add(b.deliver_delayed(d.w, s["RL"], store_timestamp=T0 + 1150),
          "long-group retry delivered: %RETRY% topic of 135 chars, magic V2")
    d.add(b.put_op_message(d.w, [s["H1"].queue_offset, s["H2"].queue_offset], store_timestamp=T0 + 3060,
                           broker_host=STORE_HOST), "op message for H1 and H2 (tag d, body \"0,1,\")")
    d.add(b.deliver_timer(d.w, s["T5"], enqueue_ms=T0, dequeue_ms=T0 + 5008, store_timestamp=T0 + 5010),
          "T5 delivered by the timer (TIMER_ENQUEUE_MS/TIMER_DEQUEUE_MS, stale REAL_*)")
    copy = d.add(b.put_back_half(d.w, s["H4"], store_timestamp=T0 + 6000, check_times=1),
                 "check round 1: H4 put back with TRANSACTION_CHECK_TIMES=1")
    d.add(b.deliver_delayed(d.w, s["RN2"], store_timestamp=T0 + 10110), "N2 retry delivered to %RETRY%GID_demo")
    d.add(b.discard_half(d.w, copy, store_timestamp=T0 + 12000),
          "check round 2: H4's copy discarded (times 1 = transactionCheckMax)")
    for i in range(FILLERS):
        d.send(f"F{i:02d}", TOPIC_B, 1, 13_000 + i, "TagF", "filler (rolls the CommitLog and B/1's ConsumeQueue)",
               body=(f"filler {i:02d} " * 40).encode())


def _late_sends(d: DemoBuilder) -> None:
    """Sends just before the stop: pending (D3, H3) or overdue for any restart after +20.7 s (D1c)."""
    d.delay("D3", TOPIC_A, 3, 15_000, 3, "delay level 3, pending at the stop (due +25000)")
    d.half("H3pending", TOPIC_A, 1, 19_000, "half message, unresolved (younger than transactionTimeOut)")
    d.delay("D1c", TOPIC_B, 0, 19_700, 1, "delay level 1 due +20700: overdue at any later restart")


def _config_files(d: DemoBuilder) -> None:
    """delayOffset.json, consumerOffset.json, timercheck and checkpoint as persisted at the stop."""
    w = d.w
    w.write_delay_offsets(DelayOffsets({1: 3, 3: 1, 18: 0}, DataVersion(7, 0, T_STOP - 10)))
    table = {
        f"{TOPIC_A}@{GROUP}": {0: 2, 1: 2, 2: 4, 3: 1},
        f"{TOPIC_B}@{GROUP}": {0: 3, 1: 2},
        f"{b.retry_topic(GROUP)}@{GROUP}": {0: 0},
        f"{RMQ_SYS_TRANS_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}": {0: 4},
        f"{RMQ_SYS_TRANS_OP_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}": {0: 1},
    }
    w.write_consumer_offsets(ConsumerOffsets(table, DataVersion(0, 0, T0 - 5_000), derive_group_topic_map(table)))
    timer_units = w.next_queue_offset(TIMER_TOPIC, 0)
    w.write_timercheck(T_STOP, w.timerlog_end, timer_units, timer_units,
                       state_version=0, timestamp=T_STOP + 100, counter=21)
    w.write_checkpoint()


def demo_config() -> BrokerConfig:
    return parse_broker_conf(BROKER_CONF, source="demo.broker.conf")


def build_demo(store: Path) -> list[Entry]:
    """Write the demo store into an empty directory; returns every record with its note."""
    d = DemoBuilder(store, demo_config())
    try:
        normal = _normal_sends(d)
        special = _special_sends(d, normal)
        _services(d, special)
        _late_sends(d)
        _config_files(d)
    finally:
        d.w.close()
    return d.entries


def _short(topic: str) -> str:
    return topic if len(topic) <= 40 else f"{topic[:24]}…({len(topic)} chars)"


def readme_text(entries: list[Entry]) -> str:
    """fixtures/README.md: how to regenerate, the settings, and one line per record."""
    lines = [
        "# Test fixtures",
        "",
        "Generated by `python scripts/make_fixtures.py` (deterministic: fixed timestamps, no randomness);",
        "do not edit by hand. `tests/builder/test_demo_fixture.py` checks that a fresh run equals these files.",
        "",
        "## demo/ — a small RocketMQ 5.x store with every message kind",
        "",
        "Settings: `demo.broker.conf` (beside the store, not inside it): CommitLog files of 16384 B, ConsumeQueue",
        "files of 400 B (20 units), TimerLog files of 4096 B, default delay levels, timerPrecisionMs 1000,",
        "transactionTimeOut 3000, transactionCheckInterval 6000, transactionCheckMax 1.",
        f"Times: T0 = {T0} ms; the broker stopped at T0 + 20000 = {T_STOP}. Written through",
        "`mqtool.builder.broker` (the broker's put paths), so property strings are in HashMap(128) order,",
        "except the batch records (each message's client string, then the batch's) and the op message",
        "(a `new Message`: HashMap(16) order).",
        "Labels are in each record's `KEYS` (re-put records keep their origin's label).",
        "",
        "| offset | topic | queue | queue offset | KEYS | what |",
        "|---:|---|---:|---:|---|---|",
    ]
    for e in entries:
        r = e.record
        label = r.properties.get(PROPERTY_KEYS, "")
        lines.append(f"| {r.physical_offset} | {_short(r.topic)} | {r.queue_id} | {r.queue_offset} | {label} "
                     f"| {e.note} |")
    lines += [
        "",
        "Also in the store:",
        "- a BLANK filler ends the first CommitLog file; `DemoTopicB/1` has two ConsumeQueue files;",
        "- `timerlog/` (5 units: T5, T600, TROLL, TV, TC) and `timerwheel` (38,707,200 B, mostly zeros);",
        "- `config/delayOffset.json` {1:3, 3:1, 18:0} (D1c, D3, D18, D20 pending);",
        "- `config/consumerOffset.json`: GID_demo on both topics and `%RETRY%GID_demo`, `CID_RMQ_SYS_TRANS`",
        "  half {0:4} and op {0:1};",
        f"- `config/timercheck` (lastReadTimeMs {T_STOP}) and `checkpoint`;",
        "- `index/`: one IndexFile (maxHashSlotNum 100, maxIndexNum 400 in `demo.broker.conf`) holding every",
        "  record's UNIQ_KEY and KEYS words as `IndexService.buildIndex` puts them (rollbacks excluded).",
        "",
    ]
    return "\n".join(lines)


_Built = TypeVar("_Built")


def write_fixture(fixtures: Path, name: str, build: Callable[[Path], _Built], conf: str, readme_name: str,
                  readme: Callable[[_Built], str]) -> _Built:
    """(Re)write `fixtures/NAME` (a store made from scratch by `build`), `NAME.broker.conf` and its readme."""
    fixtures.mkdir(parents=True, exist_ok=True)
    store = fixtures / name
    if store.exists():
        shutil.rmtree(store)
    built = build(store)
    (fixtures / f"{name}.broker.conf").write_text(conf, encoding="latin-1")
    (fixtures / readme_name).write_text(readme(built), encoding="utf-8")
    return built


def write_fixtures(fixtures: Path) -> list[Entry]:
    """(Re)write `fixtures/demo`, `fixtures/demo.broker.conf` and `fixtures/README.md`."""
    return write_fixture(fixtures, "demo", build_demo, BROKER_CONF, "README.md", readme_text)


__all__ = ["BROKER_CONF", "T0", "T_STOP", "Entry", "build_demo", "demo_config", "readme_text", "write_fixture",
           "write_fixtures"]
