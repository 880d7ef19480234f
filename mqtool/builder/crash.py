"""A crash store: a 5.x broker killed (kill -9) at T0 + 9.2 s, for the restart preview's tests.

`build_crash(dir)` writes it through the broker put paths (`mqtool.builder.broker`, the demo's client)
and returns every record by label. The story, in ms after `T0` (the demo's T0):

- sends on CrashTopicA/B (10-11); delay level 1: D1a, D1b, D1c (100-102, delivered 1100-1102) and level 2:
  D2a (200, delivered 5200); `delayOffset.json` was persisted at 1100 with {1: 1, 2: 0}, so D1b, D1c
  and D2a are behind the persisted offsets: a restart delivers them again;
- timers T5 (+5 s, slot 5000, delivered 5010), T8 (+8 s, slot 8000, delivered 8005), T60 (+60 s,
  pending); `config/timercheck` says lastReadTimeMs = 6000: slot 8000 is read again, T8 twice;
- halves H1, H2, H3 (500-502, queue offsets 0-2); H2 committed at 520 and its op "1," at 3060; the check
  round at 6000 put back H1 (copy 3) and H3 (copy 4), the producer committed H1's copy at 6050 (op "3,"
  at 6060); `consumerOffset.json` was persisted at 3000 with half {0: 0}, op {0: 0}: a restart checks
  H1 (already delivered) and H3 again;
- D1d (8100, level 1) delivered at 9100 as record X, whose body was torn (CRC mismatch), then the
  timer message T30 (9200, +30 s) as record Y, torn after its header (TOTALSIZE != computed length);
  T30's TimerLog unit was written: it points into the torn tail;
- fillers (4000-4011) roll the CommitLog (4096-byte files); `checkpoint` physic 9000, logics 8500
  (recovery re-checks from the newest file whose first record is not after 5500); an `abort` file.
"""

from __future__ import annotations

from pathlib import Path

from mqtool.builder import broker as b
from mqtool.builder.demo import T0, DemoBuilder, write_fixture
from mqtool.formats.broker_conf import BrokerConfig, parse_broker_conf
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, TIMER_TOPIC
from mqtool.formats.offsets_json import ConsumerOffsets, DataVersion, DelayOffsets, derive_group_topic_map

TOPIC_A, TOPIC_B = "CrashTopicA", "CrashTopicB"
GROUP = "GID_crash"
T_CRASH = T0 + 9_200
BODY_POS = 92  # where the body starts in a record with IPv4 hosts (spec §2.1)
ABORT_PID = "4242"

BROKER_CONF = """\
# Settings of the crash store (mqtool.builder.crash)
brokerClusterName=DemoCluster
brokerName=broker-crash
mappedFileSizeCommitLog=4096
mappedFileSizeConsumeQueue=400
mappedFileSizeTimerLog=4096
timerPrecisionMs=1000
transactionTimeOut=3000
transactionCheckInterval=6000
transactionCheckMax=5
checkCRCOnRecover=true
"""


def crash_config() -> BrokerConfig:
    return parse_broker_conf(BROKER_CONF, source="crash.broker.conf")


def _story(d: DemoBuilder) -> dict[str, MessageRecord]:
    r: dict[str, MessageRecord] = {}
    r["N1"] = d.send("N1", TOPIC_A, 0, 10, "TagA", "normal")
    r["N2"] = d.send("N2", TOPIC_B, 0, 11, "TagB", "normal")
    for label, topic, qid, at in (("D1a", TOPIC_A, 0, 100), ("D1b", TOPIC_B, 0, 101), ("D1c", TOPIC_A, 1, 102)):
        r[label] = d.delay(label, topic, qid, at, 1, "delay level 1")
    r["D2a"] = d.delay("D2a", TOPIC_B, 1, 200, 2, "delay level 2")
    r["T5"] = d.timer("T5", TOPIC_A, 2, 300, 5_000, "timer +5 s")
    r["T8"] = d.timer("T8", TOPIC_B, 0, 301, 8_000, "timer +8 s")
    r["T60"] = d.timer("T60", TOPIC_A, 3, 302, 60_000, "timer +60 s, pending")
    for label, topic, qid, at in (("H1", TOPIC_A, 0, 500), ("H2", TOPIC_B, 1, 501), ("H3", TOPIC_A, 1, 502)):
        r[label] = d.half(label, topic, qid, at, "half message")
    r["H2commit"] = d.add(b.commit_half(d.w, r["H2"], store_timestamp=T0 + 520), "H2 committed")
    for label, at in (("D1a", 1100), ("D1b", 1101), ("D1c", 1102)):
        r[label + "@"] = d.add(b.deliver_delayed(d.w, r[label], store_timestamp=T0 + at), f"{label} delivered")
    r["op1"] = d.add(b.put_op_message(d.w, [r["H2"].queue_offset], store_timestamp=T0 + 3060), "op for H2")
    for i in range(12):
        d.send(f"F{i:02d}", TOPIC_B, 1, 4_000 + i, "TagF", "filler", body=(f"filler {i:02d} " * 25).encode())
    r["T5@"] = d.add(b.deliver_timer(d.w, r["T5"], enqueue_ms=T0, dequeue_ms=T0 + 5008, store_timestamp=T0 + 5010),
                     "T5 delivered")
    r["D2a@"] = d.add(b.deliver_delayed(d.w, r["D2a"], store_timestamp=T0 + 5200), "D2a delivered")
    r["H1copy"] = d.add(b.put_back_half(d.w, r["H1"], store_timestamp=T0 + 6000, check_times=1), "H1 put back")
    r["H3copy"] = d.add(b.put_back_half(d.w, r["H3"], store_timestamp=T0 + 6001, check_times=1), "H3 put back")
    r["H1commit"] = d.add(b.commit_half(d.w, r["H1copy"], store_timestamp=T0 + 6050), "H1's copy committed")
    r["op2"] = d.add(b.put_op_message(d.w, [r["H1copy"].queue_offset], store_timestamp=T0 + 6060),
                     "op for H1's copy")
    r["T8@"] = d.add(b.deliver_timer(d.w, r["T8"], enqueue_ms=T0, dequeue_ms=T0 + 8003, store_timestamp=T0 + 8005),
                     "T8 delivered")
    r["D1d"] = d.delay("D1d", TOPIC_B, 1, 8_100, 1, "delay level 1")
    r["X"] = d.add(b.deliver_delayed(d.w, r["D1d"], store_timestamp=T0 + 9_100), "D1d delivered, body torn")
    r["Y"] = d.timer("T30", TOPIC_A, 0, 9_200, 30_000, "timer +30 s, torn after its header")
    return r


def _config_files(d: DemoBuilder, r: dict[str, MessageRecord]) -> None:
    w = d.w
    w.write_delay_offsets(DelayOffsets({1: 1, 2: 0}, DataVersion(3, 0, T0 + 1_100)))
    table = {f"{RMQ_SYS_TRANS_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}": {0: 0},
             f"{RMQ_SYS_TRANS_OP_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}": {0: 0},
             f"{TOPIC_A}@{GROUP}": {0: 1}}
    w.write_consumer_offsets(ConsumerOffsets(table, DataVersion(0, 0, T0 + 3_000), derive_group_topic_map(table)))
    units = w.next_queue_offset(TIMER_TOPIC, 0)
    w.write_timercheck(T0 + 6_000, w.timerlog_end, units, units, timestamp=T0 + 6_000, counter=6)
    w.write_checkpoint(T0 + 9_000, T0 + 8_500)
    (w.root / "abort").write_text(ABORT_PID)


def _tear(store: Path, file_size: int, x: MessageRecord, y: MessageRecord) -> None:
    """X: one body byte flipped (its CRC no longer matches); Y: zeros after the header (a torn page)."""
    for rec, how in ((x, "flip"), (y, "zero")):
        path = store / "commitlog" / f"{rec.physical_offset - rec.physical_offset % file_size:020d}"
        pos = rec.physical_offset % file_size + BODY_POS
        with open(path, "r+b") as fh:
            fh.seek(pos)
            if how == "flip":
                byte = fh.read(1)
                fh.seek(pos)
                fh.write(bytes([byte[0] ^ 0xFF]))
            else:
                fh.write(bytes(rec.total_size - BODY_POS))


def build_crash(store: Path) -> dict[str, MessageRecord]:
    """Write the crash store into an empty directory; returns its records by label (X, Y: the torn ones)."""
    config = crash_config()
    d = DemoBuilder(store, config)
    try:
        r = _story(d)
        _config_files(d, r)
    finally:
        d.w.close()
    _tear(store, config.mapped_file_size_commitlog, r["X"], r["Y"])
    return r


def crash_readme(records: dict[str, MessageRecord]) -> str:
    """`fixtures/crash.md`: the story (this module's docstring) and every labelled record."""
    story = __doc__.split("\n\n", 1)[1].strip()
    rows = "".join(f"| {label} | {r.physical_offset} | {r.total_size} | {r.topic} | {r.queue_id} | {r.queue_offset} | "
                   f"+{r.store_timestamp - T0} |\n" for label, r in sorted(records.items(),
                                                                      key=lambda kv: kv[1].physical_offset))
    return (f"# fixtures/crash — a store left by kill -9\n\n"
            f"Generated by `python scripts/make_fixtures.py` (`mqtool/builder/crash.py`, deterministic); do not edit "
            f"by hand. Settings: `crash.broker.conf`. T0 = {T0} ms; the broker was killed at T0 + "
            f"{T_CRASH - T0} = {T_CRASH}.\n\n{story}\n\n"
            "| label | offset | size | topic | queue | queue offset | stored (ms after T0) |\n"
            "|---|---:|---:|---|---:|---:|---:|\n" + rows)


def write_crash_fixture(fixtures: Path) -> dict[str, MessageRecord]:
    """(Re)write `fixtures/crash`, `fixtures/crash.broker.conf` and `fixtures/crash.md`."""
    return write_fixture(fixtures, "crash", build_crash, BROKER_CONF, "crash.md", crash_readme)


__all__ = ["ABORT_PID", "BROKER_CONF", "T_CRASH", "build_crash", "crash_config", "crash_readme",
           "write_crash_fixture"]
