"""`mqtool inspect STORE messages --json --body none` as whole processes: the column path against the
record path (issue #17), on a store from `shared/bench/make_commitlog.py`.

Each run is its own process, stdout to /dev/null; the two paths alternate run by run and the median
is kept. Prints wall seconds, the child's CPU seconds (user + sys: less sensitive to other load on a
shared machine), records/s, the ratio of the two paths and the load average. The record path is
the same CLI with `jsonlines.fast_query` answering False (what `messages --json` ran before).
It also checks that both paths print the same bytes. Python runs with its bytecode cache, as in
overview_bench.py (PYTHONPYCACHEPREFIX under the work directory when PYTHONDONTWRITEBYTECODE is set; the
untimed first run of each command fills it). `--compare DIR` also runs the column path of
another checkout (e.g. main) in the same rounds, and checks its bytes too; `--record-runs 0` leaves
the (slow) record path out.

    python3 bench/messages_bench.py --mib 256 --runs 5 --dir /tmp/mqb
    python3 bench/messages_bench.py --mib 256 --runs 7 --record-runs 0 --compare /work/main --dir /tmp/mqb
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
    ap.add_argument("--compare", type=Path, help="another checkout whose column path runs in the same rounds")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    other_env = a.compare and {**os.environ, "PYTHONPATH": str(a.compare.resolve())}
    work = (a.dir or Path(tempfile.mkdtemp(prefix="mqtool-msgbench-"))).resolve()
    # the children run in the work directory: `python -m mqtool` puts its working directory first on
    # sys.path, so started inside a checkout every side would run that checkout's mqtool
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    for e in (env, other_env):  # as overview_bench.py: bytecode cached (an installed package has it)
        if e and e.pop("PYTHONDONTWRITEBYTECODE", None):
            e["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    store = work / f"store-{a.mib}"
    records = make_store(store, a.mib) if not store.exists() else None
    warm(store)
    args = ["inspect", str(store), "messages", "--json", "--body", "none"]
    fast = [sys.executable, "-m", "mqtool", *args]
    slow = [sys.executable, "-c", RECORD_PATH, *args]
    load = os.getloadavg()
    _, _, h_fast = run(fast, env, digest=True)  # also compiles the writer on a fresh installation
    h_slow = run(slow, env, digest=True)[2] if a.record_runs else None
    h_other = run(fast, other_env, digest=True)[2] if a.compare else None
    if records is None:
        records = subprocess.run(fast, capture_output=True, env=env).stdout.count(b"\n")
    res = {"fast": [], "record": [], "compare": []}
    for i in range(max(a.runs, a.record_runs)):
        if i < a.runs:
            res["fast"].append(run(fast, env)[:2])
            if a.compare:
                res["compare"].append(run(fast, other_env)[:2])
        if i < a.record_runs:
            res["record"].append(run(slow, env)[:2])
    out = {"mib": a.mib, "records": records, "cpu_count": os.cpu_count(), "load_average_before": load,
           "load_average_after": os.getloadavg()}
    if a.record_runs:
        out["same_bytes"] = h_fast == h_slow
    if a.compare:
        out["compare_dir"], out["compare_same_bytes"] = str(a.compare), h_fast == h_other
    for k, v in res.items():
        if not v:
            continue
        wall = statistics.median(w for w, _ in v)
        cpu = statistics.median(c for _, c in v)
        out[k] = {"wall_s": wall, "cpu_s": cpu, "records_per_s_wall": records / wall,
                  "records_per_s_cpu": records / cpu, "runs": len(v)}
    for other, suffix in (("record", ""), ("compare", "_compare")):  # this checkout's speed-up over the other
        if other in out:
            out[f"ratio_wall{suffix}"] = out["fast"]["records_per_s_wall"] / out[other]["records_per_s_wall"]
            out[f"ratio_cpu{suffix}"] = out["fast"]["records_per_s_cpu"] / out[other]["records_per_s_cpu"]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
