"""Benchmark: >= 1 M delay-level + >= 1 M timer + >= 100 k transactional messages over 3 virtual days.

Builds the store synthetically in memory (`MemoryBase`: 1 M delay messages spread over the 18 levels,
1 M timers due at random whole seconds over the 3 days, 100 k never-answered half messages), runs
`simulate` with `keep_events=False` (every event is produced and counted, not stored, and delivered
records are not kept), and prints the wall time, the process CPU time and events/s. The build is
not timed. Usage: python bench/simulate_bench.py [--scale 1.0]
"""

import argparse
import gc
import random
import time

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.model import HALF_TOPIC, SCHEDULE_TOPIC, TIMER_TOPIC, MemoryBase, SimMessage
from mqtool.simulate.runner import simulate

DAY = 86_400_000
START = 1_800_000_000_000


def build(scale: float, seed: int = 1) -> MemoryBase:
    rng = random.Random(seed)
    base = MemoryBase()
    levels = BrokerConfig().delay_levels_ms()
    n_delay, n_timer, n_tx = int(1_000_000 * scale), int(1_000_000 * scale), int(100_000 * scale)
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    gc.disable()  # millions of long-lived objects: nothing for the cycle collector to find
    base = build(args.scale)
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


if __name__ == "__main__":
    main()
