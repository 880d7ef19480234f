#!/usr/bin/env python3
"""Scan-speed benchmark: mqtool's fast scans side by side with the JVM baseline, same files, one run.

    python bench/scan_bench.py [--mib 1024] [--file-mib 1024] [--fixed-mib 256] [--repeat 3]
                               [--rss-mib N] [--keep] [--json]

Generates into a temporary directory under /tmp (deleted at the end unless --keep):
- a CommitLog of MIB MiB (`shared/bench/make_commitlog.py`, realistic V1 records),
- a ConsumeQueue and a TimerLog of FIXED MiB each (standard 6,000,000 B / 100 MiB files) and a
  standard-size TimerWheel (1,209,600 slots),
then compiles `shared/bench/CommitLogScan.java` with javac into a temporary directory and runs it
(verify and decode, first run and best of --repeat), and measures mqtool on the same files:

- verify: walk, every header field, topic/properties lengths, computed length, PHYSICALOFFSET, body
  CRC (`CommitLog.scan_columns`, what `--verify` and the integrity audit use);
- decode → Arrow: all of that plus body, topic, hosts and parsed properties as Arrow columns
  (`CommitLog.iter_batches`, what Spark executors and --parquet use);
- decode → Python objects: `CommitLog.iter_records` with the properties parsed (the views);
- ConsumeQueue / TimerLog / TimerWheel column scans (find the written end, read every field).

Then the peak RSS of an `inspect overview`-like streaming pass over the store in a fresh process.
MB = 10^6 bytes. Every file is read once before timing (page cache warm for both sides); "first" is
the first timed run of each scan, "best" the best of --repeat. Peak RSS is the child's own VmHWM.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
sys.path.insert(0, str(PROJECT))

MiB = 1 << 20


# ----------------------------------------------------------------- data
def make_store(root: Path, mib: float, file_mib: float, fixed_mib: float) -> dict:
    """The CommitLog via make_commitlog.py; CQ, TimerLog and TimerWheel written with numpy."""
    out = subprocess.run([sys.executable, str(SHARED / "bench/make_commitlog.py"), str(root / "commitlog"),
                          str(mib), str(file_mib)], check=True, capture_output=True, text=True)
    info = json.loads(out.stdout)
    rng = np.random.default_rng(1)
    # ConsumeQueue: one queue, standard 6,000,000-byte files (300,000 units), the last one partly written
    from mqtool.formats.consumequeue import CQ_DTYPE
    from mqtool.formats.timerlog import TIMERLOG_DTYPE, timerlog_blank
    from mqtool.formats.timerwheel import SLOT_DTYPE

    cq_dir = root / "consumequeue/BenchTopic/0"
    cq_dir.mkdir(parents=True)
    units = int(fixed_mib * MiB) // 20
    per_file = 300_000
    cq = np.zeros(units, CQ_DTYPE)
    sizes = rng.integers(100, 2300, units)
    cq["commitlog_offset"] = np.cumsum(sizes) - sizes
    cq["size"] = sizes
    cq["tags_code"] = rng.integers(-(2**31), 2**31, units)
    for i, lo in enumerate(range(0, units, per_file)):
        part = cq[lo : lo + per_file].tobytes()
        (cq_dir / f"{i * per_file * 20:020d}").write_bytes(part.ljust(per_file * 20, b"\0"))
    # TimerLog: 100 MiB files of 52-byte units and the 16-byte end filler
    tl_dir = root / "timerlog"
    tl_dir.mkdir()
    file_size = 100 * MiB
    per_tl = (file_size - 16) // 52
    n_tl = int(fixed_mib * MiB) // 52
    tl = np.zeros(n_tl, TIMERLOG_DTYPE)
    tl["size"] = 52
    tl["prev_pos"] = -1
    tl["magic"] = 1
    tl["curr_write_time_ms"] = 1_700_000_000_000 + np.arange(n_tl) // 10
    tl["delayed_time_delta"] = rng.integers(0, 86_400_000, n_tl)
    tl["offset_py"] = np.arange(n_tl) * 300
    tl["size_py"] = 300
    for i, lo in enumerate(range(0, n_tl, per_tl)):
        part = tl[lo : lo + per_tl].tobytes()
        if lo + per_tl < n_tl:
            part += timerlog_blank.build({"remaining": file_size - len(part), "zero": 0})
        (tl_dir / f"{i * file_size:020d}").write_bytes(part.ljust(file_size, b"\0"))
    # TimerWheel: 2 x 604800 slots, a third of them written
    slots = np.zeros(2 * 604800, SLOT_DTYPE)
    used = rng.random(len(slots)) < 0.33
    slots["time_units"][used] = 1_700_000_000 + np.flatnonzero(used)
    slots["first_pos"][used] = 52 * np.flatnonzero(used)
    slots["last_pos"][used] = slots["first_pos"][used] + 52
    slots["num"][used] = 2
    (root / "timerwheel").write_bytes(slots.tobytes())
    (root / "config").mkdir()
    return {"commitlog": info, "cq_units": units, "timerlog_units": n_tl, "wheel_slots": len(slots)}


def drop_caches_hint(root: Path) -> None:
    """Read every file once so that both sides start from the page cache."""
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(16 * MiB):
                    pass


# ----------------------------------------------------------------- JVM
def run_jvm(classes: Path, mode: str, commitlog: Path, repeat: int) -> dict:
    p = subprocess.run(["java", "-cp", str(classes), "CommitLogScan", "--mode", mode, "--repeat", str(repeat),
                        str(commitlog)], check=True, capture_output=True, text=True)
    res = json.loads(p.stdout.strip().splitlines()[-1])
    runs = [float(line.split()[2]) for line in p.stderr.splitlines() if line.startswith("run ")]
    res["first_seconds"] = runs[0]
    return res


# ----------------------------------------------------------------- mqtool
def timed(fn, repeat: int) -> tuple[float, float, tuple]:
    """(first seconds, best seconds, result of the last run)."""
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return times[0], min(times), result


def mq_verify(root: Path):
    from mqtool.store.commitlog import CommitLog

    log = CommitLog.open(root)
    n = b = 0
    for _f, chunk in log.scan_columns(verify_crc=True):
        n += len(chunk)
        b += int(chunk.total_size.sum())
    assert not log.findings, log.findings[:3]
    return n, b


def mq_arrow(root: Path):
    from mqtool.store.commitlog import CommitLog

    log = CommitLog.open(root)
    n = b = 0
    for batch in log.iter_batches(verify_crc=True):
        n += batch.num_rows
        b += int(np.asarray(batch.column("total_size")).sum())
    return n, b


def mq_objects(root: Path):
    from mqtool.store.commitlog import CommitLog

    log = CommitLog.open(root)
    n = b = 0
    for rec in log.iter_records(verify_crc=True):
        rec.properties  # noqa: B018 - parse them, as the JVM's decode mode does
        n += 1
        b += rec.total_size
    return n, b


def mq_cq(root: Path):
    from mqtool.store.consumequeue import ConsumeQueue

    q = ConsumeQueue.open(root, "BenchTopic", 0)
    n = b = 0
    for _first, units in q.scan_columns():
        n += len(units)
        b += int(units["size"].sum()) + int(units["commitlog_offset"][-1:].sum()) + int(units["tags_code"].min())
        del units
    return n, n * 20


def mq_timerlog(root: Path):
    from mqtool.store.timer import TimerLog

    tl = TimerLog.open(root)
    n = 0
    for _start, units in tl.scan_columns():
        n += len(units)
        int((units["curr_write_time_ms"] + units["delayed_time_delta"]).max())
        int(units["offset_py"][-1:].sum())
        del units
    return n, n * 52


def mq_timerwheel(root: Path):
    import mmap

    from mqtool.store import fastscan

    with open(root / "timerwheel", "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        slots = fastscan.timerwheel_slots(mm)
        used = slots["time_units"] != 0
        n = int(used.sum())
        int(slots["num"][used].sum())
        del slots
        return n, len(mm)


OVERVIEW = r"""
import sys, time
from collections import Counter
sys.path.insert(0, sys.argv[2])
from mqtool.store.store import Store
mode = sys.argv[3]
store = Store.open(sys.argv[1])
per_queue, bytes_, first_ts, last_ts = Counter(), 0, None, None
t = time.perf_counter()
if mode == "columns":
    for _f, c in store.commitlog.scan_columns(verify_crc=True):
        q = c.queue_id
        per_queue.update(dict(zip(*[x.tolist() for x in __import__("numpy").unique(q, return_counts=True)])))
        bytes_ += int(c.total_size.sum())
else:
    for r in store.commitlog.iter_records(verify_crc=True):
        per_queue[r.queue_id] += 1
        bytes_ += r.total_size
for cq in store.consume_queues():
    for _first, units in cq.scan_columns():
        del units
# VmHWM: this process's own peak (ru_maxrss would include the parent's RSS inherited at fork/exec)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(hwm * 1024, time.perf_counter() - t, bytes_)
"""


def startup_cost() -> tuple[float, float]:
    """A fresh process: seconds to import the scanner (numpy) and to load the extension's kernels."""
    code = ("import time; t = time.perf_counter(); import mqtool.store.fastscan as f; i = time.perf_counter() - t;"
            "t = time.perf_counter(); f.warm_up(); print(i, time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=PROJECT)
    first, second = out.stdout.split()
    return float(first), float(second)


def peak_rss(root: Path, mode: str) -> tuple[int, float]:
    out = subprocess.run([sys.executable, "-c", OVERVIEW, str(root), str(PROJECT), mode], check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), float(out[1])


# ----------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=float, default=1024, help="CommitLog size in MiB (default 1024)")
    ap.add_argument("--file-mib", type=float, default=1024, help="CommitLog file size in MiB (default 1024)")
    ap.add_argument("--fixed-mib", type=float, default=256, help="ConsumeQueue and TimerLog size in MiB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the generated store (its path is printed)")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON document")
    args = ap.parse_args(argv)
    if not shutil.which("javac"):
        print("scan_bench: javac not found (Java 17 needed for the baseline)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="mqtool-bench-", dir="/tmp"))
    try:
        root = work / "store"
        t = time.perf_counter()
        data = make_store(root, args.mib, args.file_mib, args.fixed_mib)
        data["generate_seconds"] = round(time.perf_counter() - t, 1)
        drop_caches_hint(root)
        classes = work / "classes"
        subprocess.run(["javac", "-d", str(classes), str(SHARED / "bench/CommitLogScan.java")], check=True)

        from mqtool import _native
        from mqtool.store import fastscan

        fastscan.warm_up()
        imported, jit_load = startup_cost()

        results = {"machine": machine(), "data": data, "crc": _native.CRC32_IMPLEMENTATION,
                   "import_seconds": round(imported, 3), "jit_load_seconds": round(jit_load, 3), "scans": {}}
        jvm = {m: run_jvm(classes, m, root / "commitlog", args.repeat) for m in ("verify", "decode")}
        scans = [
            ("verify", mq_verify, "verify"),
            ("decode_arrow", mq_arrow, "decode"),
            ("decode_objects", mq_objects, "decode"),
            ("consumequeue", mq_cq, None),
            ("timerlog", mq_timerlog, None),
            ("timerwheel", mq_timerwheel, None),
        ]
        for name, fn, base in scans:
            first, best, (records, nbytes) = timed(lambda fn=fn: fn(root), args.repeat)
            row = {"records": records, "bytes": nbytes, "first_s": round(first, 4), "best_s": round(best, 4),
                   "first_mb_s": round(nbytes / first / 1e6, 1), "best_mb_s": round(nbytes / best / 1e6, 1),
                   "best_records_s": round(records / best)}
            if base:
                j = jvm[base]
                assert j["records"] == records and j["bytes"] == nbytes, (j, records, nbytes)
                row |= {"jvm_mode": base, "jvm_first_mb_s": round(j["bytes"] / j["first_seconds"] / 1e6, 1),
                        "jvm_best_mb_s": j["mb_per_s"],
                        "ratio_first": round(j["first_seconds"] / first, 2),
                        "ratio_best": round(j["seconds"] / best, 2)}
            results["scans"][name] = row
        for mode in ("columns", "objects"):
            rss, secs = peak_rss(root, mode)
            results[f"overview_peak_rss_{mode}"] = {"bytes": rss, "mb": round(rss / 1e6, 1), "seconds": round(secs, 2),
                                                   "store_mib": args.mib}
        if args.keep:
            results["kept"] = str(root)
        print(json.dumps(results, indent=1) if args.json else render(results))
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "?")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return {"cpu": cpu, "cores": os.cpu_count(), "python": sys.version.split()[0], "numpy": np.__version__,
            "java": java}


def render(r: dict) -> str:
    lines = [f"machine: {r['machine']}", f"data: {r['data']}", f"crc32: {r['crc']}; import {r['import_seconds']} s, "
             f"kernels load {r['jit_load_seconds']} s (once per process)", "",
             f"{'scan':<16}{'records':>10}{'MB':>8}{'first MB/s':>12}{'best MB/s':>11}{'rec/s':>11}"
             f"{'JVM first':>11}{'JVM best':>10}{'x first':>9}{'x best':>8}"]
    for name, s in r["scans"].items():
        lines.append(f"{name:<16}{s['records']:>10}{s['bytes'] / 1e6:>8.0f}{s['first_mb_s']:>12.0f}"
                     f"{s['best_mb_s']:>11.0f}{s['best_records_s']:>11}"
                     + (f"{s['jvm_first_mb_s']:>11.0f}{s['jvm_best_mb_s']:>10.0f}{s['ratio_first']:>9}"
                        f"{s['ratio_best']:>8}" if "jvm_mode" in s else ""))
    for mode in ("columns", "objects"):
        o = r[f"overview_peak_rss_{mode}"]
        lines.append(f"overview-like pass ({mode}) over {o['store_mib']} MiB: peak RSS {o['mb']} MB, {o['seconds']} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
