#!/usr/bin/env python3
"""`spark-audit FLEET` on N stores of 1 GiB: in process (`--local`) and on a Spark standalone cluster.

    python bench/fleet_bench.py [--stores 10] [--mib 1024] [--dir DIR] [--workers 2]

Generates one synthetic store (../shared/bench/make_commitlog.py, 256 MiB files) under DIR (kept, reused when
there), makes a fleet of N directory links to it (no broker.conf: N broker groups, every UNIQ_KEY on all of
them, so the cross-store check does the most work it can), warms the page cache, then times whole processes as
a user runs them: one store `--local`, the fleet `--local`, and the fleet on a standalone cluster of
`--workers` 1-core workers started here (`mqtool.spark.cluster`; its start is not timed, the job's session
start is). Prints wall seconds, peak RSS of the process, and the ratios fleet / (N x one store).
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spark_audit_bench import generate, load, warm  # noqa: E402

from mqtool.spark.cluster import StandaloneCluster  # noqa: E402


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS MB) of one whole process, waited for with wait4 (its own rusage only)."""
    with tempfile.TemporaryFile() as errfile:  # a file, not a pipe: a pipe's reader would have to keep up
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errfile, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        errfile.seek(0)
        err = errfile.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: findings (a fleet of copies has duplicate-key warnings)
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss // 1024


def fleet_of(store: Path, fleet: Path, n: int) -> None:
    fleet.mkdir(exist_ok=True)
    for i in range(n):
        link = fleet / f"b{i}"
        if not link.exists():
            link.symlink_to(store, target_is_directory=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stores", type=int, default=10)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/mqtool-fleet-bench"))
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    store, fleet = a.dir / "store", a.dir / f"fleet{a.stores}"
    if not (store / "commitlog").is_dir():
        store.mkdir(parents=True, exist_ok=True)
        generate(store, a.mib, 256)
    fleet_of(store, fleet, a.stores)
    warm(store)
    mq = [sys.executable, "-m", "mqtool", "spark-audit"]
    print(f"{a.stores} stores of {a.mib} MiB (links to one store), load {load()}", flush=True)
    one = timed(mq + [str(store), "--local"])
    print(f"one store --local            {one[0]:7.1f} s wall {one[1]:7.1f} s CPU {one[2]:6} MB", flush=True)
    loc = timed(mq + [str(fleet), "--local"])
    print(f"fleet --local                {loc[0]:7.1f} s wall {loc[1]:7.1f} s CPU {loc[2]:6} MB  "
          f"CPU / ({a.stores} x one) = {loc[1] / (a.stores * one[1]):.2f}", flush=True)
    with StandaloneCluster(a.dir / "cluster", workers=a.workers, cores=1, memory="2g") as cluster:
        cmd = mq + [str(fleet), "--master", cluster.url]
        for k, v in cluster.session_conf().items():
            cmd += ["--conf", f"{k}={v}"]
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
        sa = timed(cmd, env)
    print(f"fleet standalone {a.workers} x 1 core  {sa[0]:7.1f} s wall {'':>16} {sa[2]:6} MB (driver)  "
          f"wall / fleet --local wall = {sa[0] / loc[0]:.2f}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(f"load {load()}; children's peak RSS so far {peak} MB")


if __name__ == "__main__":
    main()
