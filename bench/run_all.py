#!/usr/bin/env python3
"""Every whole-process comparison of issue 17 in one invocation, each printed as a ratio.

    python bench/run_all.py [--mib 256 1024] [--runs 5] [--dir DIR] [--only startup overview messages]
                            [--base TREE] [--no-scipy] [--json]

- start-up: `mqtool --help` and a usage error against `python -c "import typer, rich.console"`;
- `mqtool inspect STORE overview --json` on generated stores of each --mib (`shared/bench/
  make_commitlog.py`; 64 MiB files, one 1 GiB file from 1024 MiB up) against the JVM baseline
  `shared/bench/CommitLogScan.java --mode verify` run as a whole process (compiled once with javac);
- `mqtool inspect STORE messages --json --body none` on the smallest store: records/s;
- `mqtool simulate STORE --until +3d --events FILE --json` on the store of `bench/simulate_bench.py
  --on-disk` (1 M delay + 1 M timer + 100 k half messages at `--sim-scale 1`; built once under --dir,
  not timed: about 20 minutes at full scale): wall, CPU, events/s and peak RSS against the issue's
  absolute targets (< 60 s, < 1 GB).

Every command runs as its own process, with the project's bytecode compiled first (as an installed
package has it); the pairs alternate run by run and the median of --runs is kept, so a loaded
machine slows both sides alike: read the ratios, not the seconds. Stores are generated under --dir
(default a temporary directory, deleted at the end) and read once first so that both sides find them
in the page cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import PROJECT, SHARED, make_store, warm

NOW = ["--now", "1790000020000"]
PARTS = ("startup", "overview", "messages", "simulate")
SIM_DAYS_TARGET_S, SIM_RSS_TARGET = 60.0, 1e9


def timed(cmd: list[str], env: dict, ok=(0, 1)) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def side_by_side(cmds: dict[str, tuple[list[str], tuple]], runs: int, env: dict) -> dict[str, float]:
    """Median wall seconds of each command (and `<name>_cpu`, median CPU seconds), the commands
    alternating within each round."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, (cmd, ok) in cmds.items():
            wall, used = timed(cmd, env, ok)
            times[k].append(wall)
            cpu[k].append(used)
    return {**{k: statistics.median(v) for k, v in times.items()},
            **{f"{k}_cpu": statistics.median(v) for k, v in cpu.items()}}


def run_simulate(root: Path, scale: float, env: dict) -> dict:
    """One whole `mqtool simulate` process on the simulate bench's store (built under root once)."""
    sys.path.insert(0, str(PROJECT / "bench"))
    import simulate_bench as sb

    store = root / "store"
    count = root / "records.txt"  # beside the store, not in it
    if not (store / "broker.conf").exists():
        count.write_text(str(sb.build_on_disk(store, scale)))
    records = int(count.read_text()) if count.exists() else None
    os.environ.update(env)  # the child runs this project's code, bytecode compiled, like the others
    wall, cpu, rss, summary = sb.run_cli(store, root / "events.jsonl", [])
    return {"scale": scale, "records": records or 0, "events": summary["events"], "seconds": wall, "cpu": cpu,
            "events_per_s": summary["events"] / wall, "peak_rss": rss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", type=Path, help="where to generate the stores (kept)")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON document")
    ap.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS),
                    help="run only these comparisons (default: all)")
    ap.add_argument("--base", type=Path, metavar="TREE",
                    help="also time the overview of another copy of the project (e.g. `git archive REV` "
                         "unpacked), side by side: before/after ratios from the same run")
    ap.add_argument("--sim-scale", type=float, default=1.0,
                    help="scale of the simulate bench store (1 = 2.1 M records, the issue's size)")
    ap.add_argument("--no-scipy", action="store_true",
                    help="skip the overview variant with numba's scipy import (a third process per round)")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    # As installed (pip writes bytecode): with PYTHONDONTWRITEBYTECODE set, as in some sessions, every
    # process compiled each of mqtool's ~60 modules from source (0.2-0.6 s of each run), which
    # measured the compiler, not mqtool.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for tree in [PROJECT, *([a.base] if a.base else [])]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "mqtool")], check=True, env=env)
    py, mq = sys.executable, [sys.executable, "-m", "mqtool"]
    work = a.dir or Path(tempfile.mkdtemp(prefix="mqtool-bench-"))
    results: dict = {"cores": os.cpu_count(), "load_average_at_start": os.getloadavg()[0], "runs": a.runs}
    try:
        if "startup" in a.only:
            s = side_by_side({"import": ([py, "-c", "import typer, rich.console"], (0,)),
                              "help": ([*mq, "--help"], (0,)),
                              "usage_error": ([*mq, "inspect", str(PROJECT / "fixtures/demo"), "nope"], (2,))},
                             a.runs, env)
            results["startup"] = {**s, "help_x_import": s["help"] / s["import"],
                                  "usage_error_x_import": s["usage_error"] / s["import"]}
        results["overview"] = []
        classes = work / "jvm"
        if "overview" in a.only:
            subprocess.run(["javac", "-d", str(classes), str(SHARED / "bench/CommitLogScan.java")], check=True)
        for mib in a.mib if {"overview", "messages"} & set(a.only) else []:
            store = work / f"store-{mib}"
            info = {"records": make_store(store, mib) if not store.exists() else None}
            warm(store)
            if "overview" not in a.only:
                continue
            cmds = {
                "jvm_verify": (["java", "-cp", str(classes), "CommitLogScan", "--mode", "verify",
                                str(store / "commitlog")], (0,)),
                "mqtool_overview": ([*mq, "inspect", str(store), "overview", "--json", *NOW], (0, 1)),
            }
            if a.base:
                # run from the base tree: `python -m` puts the working directory first on sys.path
                cmds["base_overview"] = (["env", "-C", str(a.base.resolve()), f"PYTHONPATH={a.base.resolve()}", py,
                                          "-m", "mqtool", "inspect", str(store), "overview", "--json", *NOW], (0, 1))
            if not a.no_scipy:
                # the same command in a process that imported scipy first: numba then checks scipy's
                # BLAS as it did before fastscan hid scipy from it (the start-up this saves)
                cmds["mqtool_overview_scipy"] = (
                    [py, "-c", "import sys, scipy.linalg; from mqtool.cli.app import main; sys.argv[0] = 'mqtool'; "
                     "main()", "inspect", str(store), "overview", "--json", *NOW], (0, 1))
            s = side_by_side(cmds, a.runs, env)
            results["overview"].append({"mib": mib, "records": info["records"], **s,
                                        "load_average": os.getloadavg()[0],
                                        "jvm_over_mqtool": s["jvm_verify"] / s["mqtool_overview"]})
        if "messages" in a.only:
            small = work / f"store-{min(a.mib)}"
            records = next((o["records"] for o in results["overview"] if o["mib"] == min(a.mib)), None)
            s = side_by_side({"messages": ([*mq, "inspect", str(small), "messages", "--json", "--body", "none"],
                                           (0, 1))}, a.runs, env)
            if records is None:  # a store kept from an earlier run (--dir): count the lines once
                out = subprocess.run([*mq, "inspect", str(small), "messages", "--json", "--body", "none"],
                                     capture_output=True, env=env, check=True).stdout
                records = out.count(b"\n")
            results["messages"] = {"mib": min(a.mib), "records": records, "seconds": s["messages"],
                                   "records_per_s": records / s["messages"]}
        if "simulate" in a.only:
            results["simulate"] = run_simulate(work / f"simulate-{a.sim_scale:g}", a.sim_scale, env)
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=2))
        return
    print(f"cores {results['cores']}, load average at start {results['load_average_at_start']:.1f}, "
          f"median of {a.runs} alternating runs (wall; CPU = user + system of the process)")
    st = results.get("startup")
    if st:
        print(f"mqtool --help        {st['help']:.3f} s = {st['help_x_import']:.2f} x import typer, rich.console "
              f"({st['import']:.3f} s)   target <= 1.6")
        print(f"usage error          {st['usage_error']:.3f} s = {st['usage_error_x_import']:.2f} x import")
    for o in results["overview"]:
        line = (f"overview {o['mib']:>5} MiB  mqtool {o['mqtool_overview']:.3f} s "
                f"(CPU {o['mqtool_overview_cpu']:.3f}), "
                f"JVM verify {o['jvm_verify']:.3f} s (CPU {o['jvm_verify_cpu']:.3f}): "
                f"JVM/mqtool = {o['jvm_over_mqtool']:.2f}, load {o['load_average']:.1f}")
        if "base_overview" in o:
            line += (f"  (--base: {o['base_overview']:.3f} s, CPU {o['base_overview_cpu']:.3f}, JVM/base = "
                     f"{o['jvm_verify'] / o['base_overview']:.2f})")
        if "mqtool_overview_scipy" in o:
            line += (f"  (with numba's scipy import: {o['mqtool_overview_scipy']:.3f} s, "
                     f"{o['jvm_verify'] / o['mqtool_overview_scipy']:.2f})")
        print(line)
    m = results.get("messages")
    if m:
        print(f"messages --json --body none, {m['mib']} MiB: {m['records']} records in {m['seconds']:.2f} s = "
              f"{m['records_per_s']:,.0f} records/s")
    sim = results.get("simulate")
    if sim:
        print(f"simulate 3 days, scale {sim['scale']:g} ({sim['records']:,} records): {sim['events']:,} events in "
              f"{sim['seconds']:.1f} s wall (CPU {sim['cpu']:.1f} s) = {sim['events_per_s']:,.0f} events/s, "
              f"peak RSS {sim['peak_rss'] / 1e6:,.0f} MB   target < {SIM_DAYS_TARGET_S:.0f} s, "
              f"< {SIM_RSS_TARGET / 1e6:,.0f} MB")

if __name__ == "__main__":
    main()
