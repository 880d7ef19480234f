"""`mqtool inspect STORE messages --json --body none` as whole processes: the column path against the
record path (issue #17), on a store from `shared/bench/make_commitlog.py`.

Each run is its own process, stdout to /dev/null; the two paths alternate run by run and the median
is kept. Prints wall seconds, the child's CPU seconds (user + sys: less sensitive to other load on a
shared machine), records/s, the ratio of the two paths and the load average. The record path is
the same CLI with `jsonlines.fast_query` answering False (what `messages --json` ran before).
It also checks that both paths print the same bytes.

    python3 bench/messages_bench.py --mib 256 --runs 5 --dir /tmp/mqb
"""

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import PROJECT, make_store, warm

RECORD_PATH = ("import sys; from mqtool.inspect import jsonlines; jsonlines.fast_query = lambda q, b: False; "
               "from mqtool.cli.app import main; sys.argv[0] = 'mqtool'; main()")


def run(cmd: list[str], env: dict, digest: bool = False) -> tuple[float, float, str | None]:
    """(wall s, child CPU s, sha256 of stdout when asked)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if digest:
        p = subprocess.run(cmd, capture_output=True, env=env)
        h = hashlib.sha256(p.stdout).hexdigest()
    else:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        h = None
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--record-runs", type=int, default=1, help="runs of the (slow) record path")
    ap.add_argument("--dir", type=Path, help="where to generate the store (kept)")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    work = a.dir or Path(tempfile.mkdtemp(prefix="mqtool-msgbench-"))
    store = work / f"store-{a.mib}"
    records = make_store(store, a.mib) if not store.exists() else None
    warm(store)
    args = ["inspect", str(store), "messages", "--json", "--body", "none"]
    fast = [sys.executable, "-m", "mqtool", *args]
    slow = [sys.executable, "-c", RECORD_PATH, *args]
    load = os.getloadavg()
    _, _, h_fast = run(fast, env, digest=True)  # also compiles the writer on a fresh installation
    _, _, h_slow = run(slow, env, digest=True)
    if records is None:
        records = subprocess.run(fast, capture_output=True, env=env).stdout.count(b"\n")
    res = {"fast": [], "record": []}
    for i in range(max(a.runs, a.record_runs)):
        if i < a.runs:
            res["fast"].append(run(fast, env)[:2])
        if i < a.record_runs:
            res["record"].append(run(slow, env)[:2])
    out = {"mib": a.mib, "records": records, "cpu_count": os.cpu_count(), "load_average_before": load,
           "load_average_after": os.getloadavg(), "same_bytes": h_fast == h_slow}
    for k, v in res.items():
        wall = statistics.median(w for w, _ in v)
        cpu = statistics.median(c for _, c in v)
        out[k] = {"wall_s": wall, "cpu_s": cpu, "records_per_s_wall": records / wall,
                  "records_per_s_cpu": records / cpu, "runs": len(v)}
    out["ratio_wall"] = out["fast"]["records_per_s_wall"] / out["record"]["records_per_s_wall"]
    out["ratio_cpu"] = out["fast"]["records_per_s_cpu"] / out["record"]["records_per_s_cpu"]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
