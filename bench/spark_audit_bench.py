#!/usr/bin/env python3
"""Throughput of `spark-audit`: local runner, Spark local[1], local[2], standalone 2 x 1 core.

    python bench/spark_audit_bench.py [--gib 2] [--file-mib 256] [--keep DIR] [--skip-cluster]

Generates a synthetic store (../shared/bench/make_commitlog.py) into a temporary directory (never
committed; deleted at the end unless --keep), reads it once to warm the page cache, then times the
audit of the whole store with each engine. Spark session start-up and the Python workers' start
are excluded: each engine (the local runner too) first audits a tiny store and then the big one
untimed, then the big one is timed (`run_spark_audit`: planning, the Spark job, and the driver's
merge). Prints records/s and MB/s, per Spark run the job's breakdown (distinct Python worker
processes, summed task time, mean tasks running at once, job overhead) and the load average, a
yardstick (the same tasks in two plain processes: what two cores give at that moment), and the
ratios the issue sets targets for (Spark 2 cores >= 1.6 x Spark 1 core; Spark per-core throughput
>= 0.5 x the local runner).
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GENERATOR = ROOT.parent / "shared" / "bench" / "make_commitlog.py"


def generate(out: Path, mib: float, file_mib: float, seed: int = 1) -> dict:
    res = subprocess.run([sys.executable, str(GENERATOR), str(out / "commitlog"), str(mib), str(file_mib), str(seed)],
                         check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


def warm(store: Path) -> None:
    for p in sorted((store / "commitlog").iterdir()):
        with open(p, "rb") as fh:
            while fh.read(1 << 24):
                pass


def line(name: str, secs: float, records: int, nbytes: int) -> dict:
    r = {"engine": name, "seconds": round(secs, 2), "records_per_s": round(records / secs),
         "mb_per_s": round(nbytes / secs / 1e6, 1)}
    print(f"{name:<28} {secs:8.2f} s {r['records_per_s']:>12,} records/s {r['mb_per_s']:>9,.1f} MB/s", flush=True)
    return r


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


def concurrency(tasks: list[dict]) -> dict:
    """Distinct Python worker processes, and how many tasks ran at once on average (task time / wall)."""
    tasks = [t for t in tasks if t]
    if not tasks:
        return {}
    wall = max(t["end"] for t in tasks) - min(t["start"] for t in tasks)
    busy = sum(t["end"] - t["start"] for t in tasks)
    return {"workers": len({t["pid"] for t in tasks}), "task_s": round(busy, 2), "tasks_wall_s": round(wall, 2),
            "mean_parallel": round(busy / wall, 2) if wall else None}


_HALF = """
import sys, time
sys.path.insert(0, {root!r})
from mqtool.audit.plan import plan_audit
from mqtool.audit.tasks import run_task
run_task(plan_audit({tiny!r}).tasks[0])  # load the kernels
tasks = plan_audit({store!r}).tasks[{part}::2]
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
for t in tasks:
    run_task(t)
"""


def two_processes(store: Path, tiny: Path) -> float:
    """Wall time of the CommitLog tasks split over two plain processes started together: the
    machine's own two-core ceiling at this moment (a yardstick only; the engines are above)."""
    procs = [subprocess.Popen([sys.executable, "-c", _HALF.format(root=str(ROOT), tiny=str(tiny), store=str(store),
                                                                    part=i)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in (0, 1)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    t = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.wait()
    return time.perf_counter() - t


def time_spark(master: str, store: Path, tiny: Path, records: int, nbytes: int, conf: dict | None = None) -> dict:
    from mqtool.spark.runner import run_spark_audit, spark_session

    spark = spark_session(master, conf=conf)
    try:
        # start the Python workers (every core), import numba/numpy, load the kernels, and let each
        # worker run big tasks once (its first big task is ~0.3 s slower: fresh memory) - not timed
        run_spark_audit(spark, tiny)
        run_spark_audit(spark, store)
        timings: dict = {}
        before = load()
        t = time.perf_counter()
        rep = run_spark_audit(spark, store, timings=timings)
        secs = time.perf_counter() - t
        assert rep["summary"]["commitlog"]["records"] == records, rep["summary"]["commitlog"]
        conc = concurrency(timings["tasks"])
        extra = {"partitions": rep["engine"]["partitions"], "plan_s": round(timings["plan_s"], 2),
                 "job_s": round(timings["job_s"], 2), "finish_s": round(timings["finish_s"], 2),
                 **conc, "job_overhead_s": round(timings["job_s"] - conc.get("tasks_wall_s", 0), 2),
                 "load_before": before, "load_after": load()}
        print(f"    {extra}", flush=True)
        return line(f"spark {master}" + (" (2 workers x 1 core)" if master.startswith("spark://") else ""),
                    secs, records, nbytes) | extra
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--file-mib", type=float, default=256)
    ap.add_argument("--keep", type=Path, help="generate into (or reuse) this directory and keep it")
    ap.add_argument("--skip-cluster", action="store_true")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mqtool-bench-"))
    store, tiny = base / "store", base / "tiny"
    try:
        if not (store / "commitlog").is_dir():
            t = time.perf_counter()
            info = generate(store, args.gib * 1024, args.file_mib)
            print(f"generated {info} in {time.perf_counter() - t:.1f} s", flush=True)
        if not (tiny / "commitlog").is_dir():
            generate(tiny, 1, 0.25, 2)
        warm(store)
        from mqtool.audit.runner import run_local
        from mqtool.store import fastscan
        from mqtool.store.mapped_files import map_file

        fastscan.warm_up()
        run_local(tiny)  # load the kernels (not timed)
        t = time.perf_counter()
        for p in sorted((store / "commitlog").iterdir()):  # the fast path alone: verify only, one core
            with map_file(p) as buf:
                for _chunk in fastscan.iter_commitlog_chunks(buf, 0, 0, True):
                    pass
        verify_s = time.perf_counter() - t
        run_local(store)  # the same warm-up as the Spark engines get (not timed)
        before = load()
        t = time.perf_counter()
        rep = run_local(store)
        secs = time.perf_counter() - t
        records, nbytes = rep["summary"]["commitlog"]["records"], rep["summary"]["commitlog"]["bytes"]
        line("fastscan verify only (1 core)", verify_s, records, nbytes)
        results = [line("local runner (1 process)", secs, records, nbytes) | {"load_before": before,
                                                                           "load_after": load()}]
        ceiling = line("tasks in 2 plain processes", two_processes(store, tiny), records, nbytes)
        results.append(time_spark("local[1]", store, tiny, records, nbytes))
        results.append(time_spark("local[2]", store, tiny, records, nbytes))
        if not args.skip_cluster:
            from mqtool.spark.cluster import StandaloneCluster

            with StandaloneCluster(base / "cluster", workers=2, cores=1, memory="2g") as c:
                results.append(time_spark(c.url, store, tiny, records, nbytes,
                                          {"spark.executor.memory": "1g", "spark.executor.cores": "1",
                                           "spark.cores.max": "2"}))
        by = {r["engine"].split(" (")[0]: r["records_per_s"] for r in results}
        local, one, two = by["local runner"], by["spark local[1]"], by["spark local[2]"]
        print(f"\nrecords: {records:,}  bytes: {nbytes:,}  files: {rep['summary']['commitlog']['files']}")
        print(f"Spark local[2] / local[1]            = {two / one:.2f}  (target >= 1.6)")
        print(f"Spark per core (local[2] / 2) / local = {two / 2 / local:.2f}  (target >= 0.5)")
        print(f"Spark local[1] / local runner         = {one / local:.2f}")
        print(f"2 plain processes / local runner      = {ceiling['records_per_s'] / local:.2f}  (this machine's "
              "2-core ceiling now)")
        cl = [r for r in results if r["engine"].startswith("spark spark://")]
        if cl:
            print(f"standalone 2x1 / local[1]             = {cl[0]['records_per_s'] / one:.2f}")
        print(json.dumps(results))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
