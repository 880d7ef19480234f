"""Whole processes against their baselines (issue #31), measured side by side in one run:

- `mqtool inspect STORE overview --json` on a 1 GiB CommitLog (`shared/bench/make_commitlog.py`, one
  1 GiB file) against the JVM baseline's verify scan of the same file (`shared/bench/CommitLogScan.java
  --mode verify --repeat 1`: single-threaded; JVM start-up included, as mqtool's Python start-up is);
- `mqtool --help` against `python -c "import typer, rich.console"` (what any Typer + Rich CLI pays).

Each run is its own process, stdout to /dev/null, the two sides alternating run by run; the fastest of
--runs is kept (wall), and the child's CPU seconds (user + sys: less sensitive to other load on a shared
machine) are printed beside. Ratios are baseline / mqtool: >= 1.0 means mqtool is at least as fast for
the scan; for --help, mqtool / baseline (target <= 1.3). The load average is printed before and after.

`--recache` first drops the CommitLog's pages from the page cache (`POSIX_FADV_DONTNEED`) and reads the file
again: the minor faults of a mapped walk depend on the folios the cache holds the file in (550-1,300 a GiB just
after the file is read with large reads, 10,000-16,000 after an hour of other processes' I/O on the same machine:
~0.1 s of CPU for both sides), so runs an hour apart compare.

Python runs with its bytecode cache (as an installed package has it): when PYTHONDONTWRITEBYTECODE is set,
the children get PYTHONPYCACHEPREFIX under the work directory instead, and one untimed run of each
command fills it.

    python3 bench/overview_bench.py --dir /tmp/scanbench          # generates the store there once, keeps it
    python3 bench/overview_bench.py --dir /tmp/scanbench --runs 5 --json
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import PROJECT, SHARED, make_store, warm


def run(cmd: list[str], env: dict | None) -> tuple[float, float]:
    """(wall s, child CPU s) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


MEDIAN_CPU: list[float] = []  # of the latest `side_by_side`, per command: the CPU seconds of its median run


def side_by_side(
    a: list[str], b: list[str], env: dict, runs: int, *others: tuple[list[str], dict]
) -> list[tuple[float, float]]:
    """The fastest (wall, its CPU) of each command over `runs` alternating runs, after one untimed run each;
    `others`: more (command, environment) pairs run in the same rounds. Each command's median CPU seconds go
    to `MEDIAN_CPU` (on a loaded machine the steadier figure: other load stretches wall time, not CPU)."""
    cmds = [(a, env), (b, env), *others]
    for cmd, e in cmds:
        run(cmd, e)
    got: list[list[tuple[float, float]]] = [[] for _ in cmds]
    for _ in range(runs):
        for i, (cmd, e) in enumerate(cmds):
            got[i].append(run(cmd, e))
    MEDIAN_CPU[:] = [sorted(c for _, c in g)[len(g) // 2] for g in got]
    return [min(g) for g in got]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--help-runs", type=int, default=7)
    ap.add_argument("--dir", type=Path, help="where to generate the store (kept); default a temporary one, deleted")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--recache", action="store_true", help="drop the CommitLog from the page cache and read it again")
    ap.add_argument("--compare", type=Path, help="another checkout (e.g. main) whose overview runs in the same rounds")
    args = ap.parse_args()
    args.compare = args.compare and args.compare.resolve()
    work = (args.dir or Path(tempfile.mkdtemp(prefix="mqtool-overview-bench-"))).resolve()
    # the children run in the work directory: `python -m mqtool` puts its working directory first on
    # sys.path, so started inside a checkout every side would run that checkout's mqtool
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    other_env = args.compare and {**env, "PYTHONPATH": str(args.compare.resolve())}
    try:
        store = work / f"store-{args.mib}"
        if not store.exists():
            make_store(store, args.mib)
        if args.recache:
            for f in (store / "commitlog").iterdir():
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        warm(store)
        classes = work / "classes"
        if not (classes / "CommitLogScan.class").exists():
            classes.mkdir(parents=True, exist_ok=True)
            subprocess.run(["javac", "-d", str(classes), str(SHARED / "bench/CommitLogScan.java")], check=True)
        load = os.getloadavg()
        jvm = [
            "java",
            "-cp",
            str(classes),
            "CommitLogScan",
            "--mode",
            "verify",
            "--repeat",
            "1",
            str(store / "commitlog"),
        ]
        mqtool = [sys.executable, "-m", "mqtool", "inspect", str(store), "overview", "--json"]
        others = [(mqtool, other_env)] if args.compare else []
        (jw, jc), (mw, mc), *other = side_by_side(jvm, mqtool, env, args.runs, *others)
        jvm_med, mq_med, *other_med = MEDIAN_CPU
        baseline = [sys.executable, "-c", "import typer, rich.console"]
        mqhelp = [sys.executable, "-m", "mqtool", "--help"]
        (bw, bc), (hw, hc), *other_help = side_by_side(
            baseline, mqhelp, env, args.help_runs, *([(mqhelp, other_env)] if args.compare else [])
        )
        out = {
            "cpu_count": os.cpu_count(),
            "load_average_before": load,
            "load_average_after": os.getloadavg(),
            "commitlog_mib": args.mib,
            "overview": {
                "jvm_wall_s": jw,
                "jvm_cpu_s": jc,
                "mqtool_wall_s": mw,
                "mqtool_cpu_s": mc,
                "ratio_wall": jw / mw,
                "ratio_cpu": jc / mc,
                "jvm_median_cpu_s": jvm_med,
                "mqtool_median_cpu_s": mq_med,
                "ratio_median_cpu": jvm_med / mq_med,
            },
            "help": {
                "typer_rich_wall_s": bw,
                "typer_rich_cpu_s": bc,
                "mqtool_wall_s": hw,
                "mqtool_cpu_s": hc,
                "ratio_wall": hw / bw,
                "ratio_cpu": hc / bc,
            },
        }
        if args.compare:
            (ow, oc), (ohw, _) = other[0], other_help[0]
            out["compare"] = {
                "checkout": str(args.compare),
                "overview_wall_s": ow,
                "overview_cpu_s": oc,
                "overview_ratio_wall": jw / ow,
                "overview_ratio_cpu": jc / oc,
                "overview_median_cpu_s": other_med[0],
                "overview_ratio_median_cpu": jvm_med / other_med[0],
                "help_wall_s": ohw,
                "help_ratio_wall": ohw / bw,
            }
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    o, h = out["overview"], out["help"]
    after = " ".join(f"{x:.2f}" for x in out["load_average_after"])
    print(
        f"load average {' '.join(f'{x:.2f}' for x in load)} -> {after}"
        f" on {out['cpu_count']} cores; fastest of {args.runs} / {args.help_runs} alternating runs"
    )
    print(
        f"overview --json, {args.mib} MiB CommitLog: JVM verify {o['jvm_wall_s']:.2f} s (cpu {o['jvm_cpu_s']:.2f}), "
        f"mqtool {o['mqtool_wall_s']:.2f} s (cpu {o['mqtool_cpu_s']:.2f}): "
        f"JVM / mqtool = {o['ratio_wall']:.2f}x wall, {o['ratio_cpu']:.2f}x cpu (target >= 1.0); median cpu "
        f"JVM {o['jvm_median_cpu_s']:.2f} s, mqtool {o['mqtool_median_cpu_s']:.2f} s: {o['ratio_median_cpu']:.2f}x"
    )
    print(
        f"--help: import typer, rich.console {h['typer_rich_wall_s']:.3f} s, mqtool --help {h['mqtool_wall_s']:.3f} s: "
        f"mqtool / baseline = {h['ratio_wall']:.2f}x wall, {h['ratio_cpu']:.2f}x cpu (target <= 1.3)"
    )
    if "compare" in out:
        c = out["compare"]
        print(
            f"{c['checkout']} in the same rounds: overview "
            f"{c['overview_wall_s']:.2f} s (cpu {c['overview_cpu_s']:.2f}): "
            f"JVM / it = {c['overview_ratio_wall']:.2f}x wall, {c['overview_ratio_cpu']:.2f}x cpu, median cpu "
            f"{c['overview_median_cpu_s']:.2f} s: {c['overview_ratio_median_cpu']:.2f}x; "
            f"--help {c['help_wall_s']:.3f} s ({c['help_ratio_wall']:.2f}x)"
        )


if __name__ == "__main__":
    main()
