#!/usr/bin/env python3
"""Throughput of `spark-audit`: local runner, Spark local[1], local[2], standalone 2 x 1 core.

    python bench/spark_audit_bench.py [--gib 2] [--file-mib 256] [--keep DIR] [--skip-cluster]

Generates a synthetic store (../shared/bench/make_commitlog.py) into a temporary directory (never
committed; deleted at the end unless --keep), reads it once to warm the page cache, then times the
audit of the whole store with each engine. Spark session start-up and the first job's Python
worker start are excluded: each session first audits a tiny store, then the big one is timed
(`run_spark_audit`: planning, the Spark job, and the driver's merge). Prints records/s and MB/s,
and the ratios the issue sets targets for (Spark 2 cores >= 1.6 x Spark 1 core; Spark per-core
throughput >= 0.5 x the local runner).
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


def time_spark(master: str, store: Path, tiny: Path, records: int, nbytes: int, conf: dict | None = None) -> dict:
    from mqtool.spark.runner import run_spark_audit, spark_session

    spark = spark_session(master, conf=conf)
    try:
        run_spark_audit(spark, tiny)  # start the Python workers, import numpy/pyarrow (not timed)
        t = time.perf_counter()
        rep = run_spark_audit(spark, store)
        secs = time.perf_counter() - t
        assert rep["summary"]["commitlog"]["records"] == records, rep["summary"]["commitlog"]
        return line(f"spark {master}" + (" (2 workers x 1 core)" if master.startswith("spark://") else ""),
                    secs, records, nbytes) | {"partitions": rep["engine"]["partitions"]}
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

        t = time.perf_counter()
        rep = run_local(store)
        secs = time.perf_counter() - t
        records, nbytes = rep["summary"]["commitlog"]["records"], rep["summary"]["commitlog"]["bytes"]
        results = [line("local runner (1 process)", secs, records, nbytes)]
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
        cl = [r for r in results if r["engine"].startswith("spark spark://")]
        if cl:
            print(f"standalone 2x1 / local[1]             = {cl[0]['records_per_s'] / one:.2f}")
        print(json.dumps(results))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
