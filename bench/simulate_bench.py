"""Benchmark: >= 1 M delay-level + >= 1 M timer + >= 100 k transactional messages over 3 virtual days.

Two modes (the build is never timed):

- default: the store is built in memory (`MemoryBase`) and `simulate` runs in-process with
  `keep_events=False` (every event is produced and counted, not stored or written);
- `--on-disk`: the same messages are written as a real store by the builder (`StoreWriter` and the
  broker's put rules in `mqtool.builder.broker`: delay messages on SCHEDULE_TOPIC_XXXX, timer messages
  on rmq_sys_wheel_timer not yet enqueued, half messages on the half topic, a timercheck), then the
  whole CLI runs as a child process, `mqtool simulate STORE --until +3d --events FILE --json`, and
  the bench prints its wall time, events/s and the child's peak RSS.

Usage: python bench/simulate_bench.py [--scale 1.0] [--on-disk [--dir DIR] [--keep] [--repeat N]]
"""

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC as SCHEDULE_TOPIC
from mqtool.formats.names import RMQ_SYS_TRANS_HALF_TOPIC as HALF_TOPIC
from mqtool.formats.names import TIMER_TOPIC
from mqtool.simulate.model import MemoryBase, SimMessage
from mqtool.simulate.runner import simulate

DAY = 86_400_000
START = 1_800_000_000_000
BODY = bytes(100)
CONF = "transactionCheckMax=5\n"


def counts(scale: float) -> tuple[int, int, int]:
    return int(1_000_000 * scale), int(1_000_000 * scale), int(100_000 * scale)


def build(scale: float, seed: int = 1) -> MemoryBase:
    rng = random.Random(seed)
    base = MemoryBase()
    levels = BrokerConfig().delay_levels_ms()
    n_delay, n_timer, n_tx = counts(scale)
    for i in range(n_delay):
        level = 1 + i % len(levels)
        ts = START - 60_000 + i * 60_000 // max(1, n_delay)
        m = SimMessage(SCHEDULE_TOPIC, level - 1, {"UNIQ_KEY": f"D{i:08X}", "DELAY": str(level),
                       "REAL_TOPIC": "BenchTopic", "REAL_QID": str(i % 8)}, body_len=100, born_ts=ts, store_ts=ts)
        base.add(m, tags=ts + levels[level - 1])
    for i in range(n_timer):
        out = START + rng.randrange(3 * DAY) // 1000 * 1000
        m = SimMessage(TIMER_TOPIC, 0, {"UNIQ_KEY": f"T{i:08X}", "TIMER_OUT_MS": str(out), "REAL_TOPIC": "BenchTopic",
                       "REAL_QID": str(i % 8)}, body_len=100, born_ts=START - 1000, store_ts=START - 1000)
        base.add(m)
    for i in range(n_tx):
        m = SimMessage(HALF_TOPIC, 0, {"UNIQ_KEY": f"H{i:08X}", "TRAN_MSG": "true", "PGROUP": "PG",
                       "REAL_TOPIC": "TxTopic", "REAL_QID": "0"}, body_len=100, born_ts=START - 120_000,
                       store_ts=START - 120_000)
        base.add(m)
    return base


class FastEncoder:
    """`commitlog_record` / `consumequeue_unit` for the builder, encoded with `struct` (Construct takes
    ~0.5 ms a record: 20 minutes for this store). The first `check` builds of each are compared with
    Construct's bytes, so the store is the one the builder writes."""

    def __init__(self, construct, encode, check: int = 2000) -> None:
        self.construct, self.encode, self.check = construct, encode, check

    def build(self, obj) -> bytes:
        data = self.encode(obj)
        if self.check:
            self.check -= 1
            if data != self.construct.build(obj):
                raise AssertionError(f"fast encoding differs from Construct for {obj}")
        return data

    def __getattr__(self, name):
        return getattr(self.construct, name)


def _fast_encoders():
    from mqtool.formats import commitlog as fc
    from mqtool.formats.consumequeue import CQ_UNIT, consumequeue_unit
    from mqtool.formats.message import _HEAD, _PROPS_LEN, _STORE_TS, _TAIL, _TOPIC_LEN
    from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6

    hosts: dict[str, bytes] = {}

    def host(text: str, v6: bool) -> bytes:
        b = hosts.get(text)
        if b is None:
            b = hosts[text] = (fc.ipv6_host if v6 else fc.ipv4_host).build(text)
        return b

    def record(c) -> bytes:
        m = c["message"]
        if m is None:
            return fc.commitlog_record.build(c)  # a BLANK filler: rare
        sf = m["sys_flag"]
        body, topic, props = m["body"], m["topic"].encode(), m["properties"].encode()
        return b"".join((
            _HEAD.pack(c["total_size"], c["magic_code"], m["body_crc"], m["queue_id"], m["flag"], m["queue_offset"],
                       m["physical_offset"], sf, m["born_timestamp"]),
            host(m["born_host"], bool(sf & BORNHOST_V6)), _STORE_TS.pack(m["store_timestamp"]),
            host(m["store_host"], bool(sf & STOREHOST_V6)),
            _TAIL.pack(m["reconsume_times"], m["prepared_transaction_offset"], len(body)), body,
            _TOPIC_LEN[c["magic_code"]].pack(len(topic)), topic, _PROPS_LEN.pack(len(props)), props))

    def unit(c) -> bytes:
        return CQ_UNIT.pack(c["commitlog_offset"], c["size"], c["tags_code"])

    return FastEncoder(fc.commitlog_record, record), FastEncoder(consumequeue_unit, unit)


def build_on_disk(root: Path, scale: float, seed: int = 1) -> int:
    """The same messages as `build`, written by the builder as a broker would have stored them."""
    from mqtool.builder import writer
    from mqtool.builder.broker import put_delay_message, put_half_message, put_message
    from mqtool.builder.writer import StoreWriter

    writer.commitlog_record, writer.consumequeue_unit = _fast_encoders()

    rng = random.Random(seed)
    config = BrokerConfig.for_version("5.3")
    levels = config.delay_levels_ms()
    object.__setattr__(config, "delay_levels_ms", lambda: levels)  # parsed once, not once per put
    n_delay, n_timer, n_tx = counts(scale)
    n = 0
    with StoreWriter(root, config) as w:
        for i in range(n_delay):
            level = 1 + i % len(levels)
            ts = START - 60_000 + i * 60_000 // max(1, n_delay)
            put_delay_message(w, "BenchTopic", i % 8, BODY, [("UNIQ_KEY", f"D{i:08X}")], level=level,
                              store_timestamp=ts, born_timestamp=ts)
            n += 1
            if n % 65536 == 0:
                w.records.clear()  # the writer remembers its records; the bench does not need them
        for i in range(n_timer):
            out = START + rng.randrange(3 * DAY) // 1000 * 1000
            # a timer message as the put hook stored it (TIMER_OUT_MS, REAL_TOPIC/QID), not yet enqueued
            put_message(w, TIMER_TOPIC, 0, BODY, [("UNIQ_KEY", f"T{i:08X}"), ("TIMER_OUT_MS", str(out)),
                                                  ("REAL_TOPIC", "BenchTopic"), ("REAL_QID", str(i % 8))],
                        store_timestamp=START - 1000, born_timestamp=START - 1000)
            n += 1
            if n % 65536 == 0:
                w.records.clear()
        for i in range(n_tx):
            put_half_message(w, "TxTopic", 0, BODY, [("UNIQ_KEY", f"H{i:08X}"), ("TRAN_MSG", "true")],
                             producer_group="PG", store_timestamp=START - 120_000, born_timestamp=START - 120_000)
            n += 1
            if n % 65536 == 0:
                w.records.clear()
        w.records.clear()
        # the timer service has read nothing of its topic yet: it enqueues every timer during the run
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    (root / "broker.conf").write_text(CONF, encoding="utf-8")
    return n


def run_in_memory(scale: float) -> None:
    t0 = time.perf_counter()
    gc.disable()  # millions of long-lived objects: nothing for the cycle collector to find
    base = build(scale)
    gc.enable()
    t1 = time.perf_counter()
    cfg = BrokerConfig().with_overrides({"transactionCheckMax": "5"})
    c1 = time.process_time()
    r = simulate(None, cfg, START, START + 3 * DAY, None, 1, base=base, keep_events=False,
                 timer_state={"timercheck": None, "units": [], "end": 0})
    t2 = time.perf_counter()
    c2 = time.process_time()
    n = r.summary["events"]
    print(f"built {len(base.messages):,} messages in {t1 - t0:.1f} s")
    print(f"simulated 3 days: {n:,} events, {r.events.by_kind}")
    print(f"wall time {t2 - t1:.1f} s, {n / (t2 - t1):,.0f} events/s "
          f"(CPU time {c2 - c1:.1f} s, {n / max(c2 - c1, 1e-9):,.0f} events/s per CPU second)")


def run_cli(store: Path, events: Path, extra: list[str]) -> tuple[float, float, int, dict]:
    """One whole `mqtool simulate` process: (wall s, CPU s of the child, peak RSS bytes, --json summary)."""
    args = ["simulate", str(store), "--start", str(START), "--until", "+3d", "--config", str(store / "broker.conf"),
            "--seed", "1", "--events", str(events), "--json", *extra]
    cmd = [sys.executable, "-c", "from mqtool.cli.app import main; main()", *args]  # the console script's body
    print("$ mqtool " + " ".join(args), flush=True)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=err)
        # wait4: this child's own rusage (RUSAGE_CHILDREN's maxrss is the largest of every child so far,
        # e.g. the JVM run_all.py ran before)
        _, status, used = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if child.returncode != 0:
        sys.stderr.write(stderr)
        raise SystemExit(f"mqtool simulate exited with {child.returncode}")
    return wall, used.ru_utime + used.ru_stime, used.ru_maxrss * 1024, json.loads(stdout)


def run_on_disk(args: argparse.Namespace) -> None:
    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="simbench-"))
    store = tmp / "store"
    events = tmp / "events.jsonl"
    try:
        if not (store / "broker.conf").exists():
            t0 = time.perf_counter()
            gc.disable()
            n = build_on_disk(store, args.scale)
            gc.enable()
            size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
            print(f"built {n:,} records ({size / 2**20:,.0f} MiB) in {store} in {time.perf_counter() - t0:.0f} s "
                  "(not timed)", flush=True)
        for _ in range(args.repeat):
            wall, cpu, rss, summary = run_cli(store, events, args.extra)
            n = summary["events"]
            print(f"simulated 3 days: {n:,} events {summary['events_by_kind']}")
            print(f"wall {wall:.1f} s, {n / wall:,.0f} events/s (child CPU {cpu:.1f} s), "
                  f"peak RSS {rss / 1e6:,.0f} MB, events file {events.stat().st_size / 1e6:,.0f} MB", flush=True)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--on-disk", action="store_true", help="build a store on disk and time the whole CLI")
    ap.add_argument("--dir", help="work directory (kept; a store already built there is reused)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("extra", nargs="*", help="more `mqtool simulate` options (after --)")
    args = ap.parse_args()
    if args.on_disk:
        os.environ.setdefault("PYTHONHASHSEED", "0")
        run_on_disk(args)
    else:
        run_in_memory(args.scale)


if __name__ == "__main__":
    main()
