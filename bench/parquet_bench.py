"""`mqtool inspect STORE messages --format parquet --output FILE` as whole processes: the Arrow column
path against the record path and the `--json` column path (issue #17), on a store from
`shared/bench/make_commitlog.py`.

Each run is its own process; the three commands alternate run by run and the median is kept. Prints
wall seconds, the child's CPU seconds (user + sys: less sensitive to other load on a shared
machine), its peak RSS, records/s and the ratios, with the load average. The record path is the same
CLI with `parquet.fast_query` answering False (what `--format parquet` ran before). It checks that
both Parquet files hold the same table (read back with pyarrow).

    python3 bench/parquet_bench.py --mib 256 --runs 3 --body none --dir /tmp/mqpq
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import PROJECT, make_store, warm

RECORD_PATH = ("import sys; from mqtool.inspect import parquet; parquet.fast_query = lambda q: False; "
               "from mqtool.cli.app import main; sys.argv[0] = 'mqtool'; main()")


def run(cmd: list[str], env: dict) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one child process, stdout to /dev/null."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{err.decode()[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--record-runs", type=int, default=1, help="runs of the (slow) record path")
    ap.add_argument("--body", default="none", help="--body of every command")
    ap.add_argument("--dir", type=Path, help="where to generate the store (kept)")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    work = a.dir or Path(tempfile.mkdtemp(prefix="mqtool-pqbench-"))
    store = work / f"store-{a.mib}"
    records = make_store(store, a.mib) if not store.exists() else None
    warm(store)
    args = ["inspect", str(store), "messages", "--body", a.body]
    fast_out, slow_out = work / "columns.parquet", work / "records.parquet"
    cmds = {
        "parquet_columns": [sys.executable, "-m", "mqtool", *args, "--format", "parquet", "--output", str(fast_out)],
        "parquet_records": [sys.executable, "-c", RECORD_PATH, *args, "--format", "parquet", "--output",
                            str(slow_out)],
        "json_columns": [sys.executable, "-m", "mqtool", *args, "--json"],
    }
    load = os.getloadavg()
    res: dict[str, list] = {k: [] for k in cmds}
    for i in range(max(a.runs, a.record_runs)):
        for k, cmd in cmds.items():
            if i < (a.record_runs if k == "parquet_records" else a.runs):
                res[k].append(run(cmd, env))
    import pyarrow.parquet as pq

    fast, slow = pq.read_table(fast_out), pq.read_table(slow_out)
    if records is None:
        records = fast.num_rows
    out = {"mib": a.mib, "records": records, "body": a.body, "cpu_count": os.cpu_count(),
           "load_average_before": load, "load_average_after": os.getloadavg(),
           "same_table": fast.equals(slow), "rows": fast.num_rows, "parquet_bytes": fast_out.stat().st_size}
    for k, v in res.items():
        wall = statistics.median(w for w, _, _ in v)
        cpu = statistics.median(c for _, c, _ in v)
        out[k] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(max(r for *_, r in v)),
                  "records_per_s_wall": round(records / wall), "records_per_s_cpu": round(records / cpu),
                  "runs": len(v)}
    for k in ("parquet_records", "json_columns"):
        out[f"columns_vs_{k}_wall"] = round(out[k]["wall_s"] / out["parquet_columns"]["wall_s"], 2)
        out[f"columns_vs_{k}_cpu"] = round(out[k]["cpu_s"] / out["parquet_columns"]["cpu_s"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
