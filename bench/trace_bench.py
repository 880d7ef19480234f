"""Trace latency with and without the lookup index on a multi-GiB generated store (issue #9).

    python bench/trace_bench.py                 # 2 GiB CommitLog in 1 GiB files, under /tmp
    python bench/trace_bench.py --gib 4 --repeat 5 --keep

The store is generated under `--dir` (default /tmp/mqtool-trace-bench) and deleted at the end
(`--keep` keeps it); nothing here is ever committed.

- The bulk CommitLog is written by `../shared/bench/make_commitlog.py` (realistic V1 records,
  100 B-2 KB bodies, UNIQ_KEY/KEYS/TAGS properties, correct CRCs; no ConsumeQueues). It is never
  copied or rescanned by Python.
- The traceable messages are appended cheaply: the last bulk file gets a BLANK filler at its end,
  and a `StoreWriter` started at the next file's offset writes only a new tail file (a delay message
  and its delivery, a transaction half, one check put-back, its commit and op record), with their
  ConsumeQueues, offset files and checkpoint. The incremental step appends 1,000 records the same way.

Printed: generation time, index build time (and rows / size), trace latency without the index
(cold: the store's pages evicted from the page cache with `posix_fadvise(DONTNEED)`; warm: median of
`--repeat` runs), with the index (cold, then median of `--repeat` warm runs; each run opens the index
and checks it against the store, as `trace --index` does), the incremental update after 1,000
appended records, and the wall time of the `mqtool trace --index` command (a new process each time:
Python start-up and imports included).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.formats.offsets_json import ConsumerOffsets, DelayOffsets
from mqtool.store import fastscan
from mqtool.store.commitlog import CommitLog
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace
from mqtool.trace.index import build_index, index_finder

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MAKE_COMMITLOG = SHARED / "bench" / "make_commitlog.py"
GEN_EPOCH = 1_700_000_000_000  # make_commitlog.py's first timestamp; +0..2 ms per record, store +0..3 ms
MiB = 1 << 20


# --------------------------------------------------------------------------- the store


def make_bulk(root: Path, mib: float, file_mib: int, seed: int) -> dict:
    """The bulk CommitLog (make_commitlog.py); returns its JSON summary."""
    out = subprocess.run([sys.executable, str(MAKE_COMMITLOG), str(root / "commitlog"), str(mib), str(file_mib),
                          str(seed)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def commitlog_end(root: Path) -> int:
    """Where the last CommitLog file's valid data ends (the column scan of that file only)."""
    cl = CommitLog.open(root)
    last = cl.files[-1]
    end = last.start
    for f, chunk in cl.scan_columns(last.start, verify_crc=False):
        end = f.start + chunk.end
    return end


def append_tail(root: Path, file_size: int, write: Callable[[StoreWriter], None]) -> None:
    """Append records in a new CommitLog file without touching the bulk: BLANK filler, then a writer
    started at the next file's offset in a scratch directory, whose files are moved into the store."""
    end = commitlog_end(root)
    start = end - end % file_size
    if end > start:  # end the current file as doAppend does when a record does not fit
        with (root / "commitlog" / f"{start:020d}").open("r+b") as fh:
            fh.seek(end - start)
            fh.write((file_size - (end - start)).to_bytes(4, "big") + BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True))
        start += file_size
    cfg = replace(BrokerConfig(), mapped_file_size_commitlog=file_size)
    scratch = Path(tempfile.mkdtemp(dir=root.parent)) / "tail"
    with StoreWriter(scratch, cfg, commitlog_start=start) as w:
        write(w)
    for path in sorted(scratch.rglob("*")):
        target = root / path.relative_to(scratch)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif target.exists() and path.parent.name != "config" and path.name != "checkpoint":
            raise FileExistsError(f"{target}: the tail writer would overwrite a file of the store")
        else:
            path.replace(target)
    shutil.rmtree(scratch.parent)


def traceable(t0: int) -> tuple[Callable[[StoreWriter], None], dict[str, str]]:
    """The tail's messages: a delay message delivered and consumed, a transaction committed after a check."""
    keys = {"delayed": "0A0000011F4000000000BE4C00000001", "transaction": "0A0000011F4000000000BE4C00000002"}

    def write(w: StoreWriter) -> None:
        d = b.put_delay_message(w, "TraceBench", 1, b"d", [("UNIQ_KEY", keys["delayed"]), ("KEYS", "bench-delay")],
                                store_timestamp=t0, level=3)
        b.deliver_delayed(w, d, store_timestamp=t0 + 10_004)
        h = b.put_half_message(w, "TraceBench", 2, b"t", [("UNIQ_KEY", keys["transaction"]), ("KEYS", "bench-tx")],
                               store_timestamp=t0 + 100, producer_group="PG_BENCH")
        c = b.put_back_half(w, h, store_timestamp=t0 + 60_100, check_times=1)
        b.commit_half(w, c, store_timestamp=t0 + 60_200)
        b.put_op_message(w, [c.queue_offset], store_timestamp=t0 + 60_300)
        w.write_delay_offsets(DelayOffsets({3: 1}))
        w.write_consumer_offsets(ConsumerOffsets({"TraceBench@GID_BENCH": {1: 1, 2: 0}}))
        w.write_checkpoint(physic_msg_timestamp=t0 + 61_000)

    return write, keys


def generate(root: Path, gib: float, file_mib: int, seed: int) -> tuple[dict[str, str], dict]:
    """The store; returns (label -> UNIQ_KEY to trace, make_commitlog summary)."""
    summary = make_bulk(root, gib * 1024, file_mib, seed)
    file_size = summary["file_size"]
    t0 = GEN_EPOCH + 2 * summary["records"] + 60_000  # after every bulk store timestamp
    write, keys = traceable(t0)
    append_tail(root, file_size, write)
    cl = CommitLog.open(root)
    middle = cl.read(cl.files[summary["files"] // 2].start)  # the first record of the middle bulk file
    return {"bulk (middle)": middle.uniq_key, **keys}, summary


# --------------------------------------------------------------------------- measuring


def evict(*dirs: Path) -> None:
    """Drop the files' pages from the page cache (clean pages only: fsync first). No root needed."""
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file():
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def timed(fn: Callable):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def runs(fn: Callable, n: int) -> tuple[object, list[float]]:
    out, times = None, []
    for _ in range(n):
        out, t = timed(fn)
        times.append(t)
    return out, times


def fmt(times: list[float]) -> str:
    if len(times) == 1:
        return f"{times[0]:.3f} s"
    return f"median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}, n={len(times)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="bulk CommitLog size in GiB (default 2)")
    ap.add_argument("--file-mib", type=int, default=1024, help="CommitLog file size in MiB (default 1024)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5, help="warm runs per measurement (median; default 5)")
    ap.add_argument("--scan-repeat", type=int, default=3, help="warm runs without the index (default 3)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/mqtool-trace-bench"))
    ap.add_argument("--keep", action="store_true", help="keep the generated store and index")
    a = ap.parse_args()
    if not MAKE_COMMITLOG.is_file():
        sys.exit(f"trace_bench: {MAKE_COMMITLOG} not found")
    if a.dir.exists():
        shutil.rmtree(a.dir)
    a.dir.mkdir(parents=True)
    root, ix = a.dir / "store", a.dir / "ix"
    try:
        fastscan.warm_up()
        (targets, summary), t = timed(lambda: generate(root, a.gib, a.file_mib, a.seed))
        store = Store.open(root)
        used = sum(f.path.stat().st_blocks * 512 for f in store.commitlog.files)
        print(f"store: {summary['records']:,} bulk records, {summary['bytes'] / 2**30:.2f} GiB of records in "
              f"{summary['files']} x {summary['file_size'] // MiB} MiB files + 1 tail file "
              f"({used / 2**30:.2f} GiB allocated; unwritten tails are sparse); generated in {t:.1f} s")

        for label, uk in targets.items():
            q = TraceQuery(uniq_key=uk)
            evict(root)
            ts, t_cold = timed(lambda q=q: trace(store, q))
            _, warm = runs(lambda q=q: trace(store, q), a.scan_repeat)
            print(f"trace {label} without index: cold {t_cold:.3f} s, warm {fmt(warm)} -> "
                  f"{[s.stage for s in ts[0].stages]}; {ts[0].verdict.text}")

        stats, t = timed(lambda: build_index(store, ix))
        db = (ix / "trace-index.sqlite").stat().st_size
        print(f"index build: {t:.1f} s ({stats.records:,} records, {stats.rows:,} rows, {db / MiB:.0f} MiB, "
              f"{summary['bytes'] / t / 1e6:.0f} MB/s)")

        def with_index(q):
            finder, _ = index_finder(store, ix)
            try:
                return trace(store, q, finder=finder)
            finally:
                finder.finders[0].index.close()

        for label, uk in targets.items():
            q = TraceQuery(uniq_key=uk)
            evict(root, ix)
            ts, t_cold = timed(lambda q=q: with_index(q))
            _, warm = runs(lambda q=q: with_index(q), a.repeat)
            print(f"trace {label} with index: cold {t_cold:.3f} s, warm {fmt(warm)} -> {ts[0].verdict.text}")

        cli = [sys.executable, "-m", "mqtool", "trace", str(root), "--uniq-key", targets["delayed"], "--index",
               str(ix), "--json"]
        walls = []
        for _ in range(3):
            proc, t = timed(lambda: subprocess.run(cli, capture_output=True, text=True))
            assert proc.returncode == 0, proc.stderr
            walls.append(t)
        print(f"`mqtool trace --uniq-key … --index` command, wall time (new process): {fmt(walls)}")

        def grow(w: StoreWriter) -> None:
            for i in range(1000):
                b.put_message(w, "BenchGrow", 0, b"n", [("UNIQ_KEY", f"0A0000011F4000000000BE4C1{i:07d}"),
                                                        ("KEYS", "grown")], store_timestamp=GEN_EPOCH + 10**10 + i)

        append_tail(root, summary["file_size"], grow)
        grown = Store.open(root)
        (finder, notes), t = timed(lambda: index_finder(grown, ix))
        finder.finders[0].index.close()
        hits = index_finder(grown, ix)[0].by_key("grown")
        print(f"incremental index update after 1,000 appended records: {t:.3f} s ({'; '.join(notes)}); "
              f"--key grown now finds {len(hits)} records")
    finally:
        if not a.keep:
            shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
