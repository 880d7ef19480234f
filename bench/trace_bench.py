"""Trace latency with and without the lookup index on a multi-GiB generated store.

The store is generated on demand under /tmp (never committed): `--gib` GiB of 1 KiB plain records
(each with its own UNIQ_KEY and KEYS), 1 GiB CommitLog files, plus a delay message and its delivery
near the end. Records are stamped from one template (bytes patched in place), so generation runs at
disk speed. Then: trace by UNIQ_KEY with a CommitLog search, build the index, trace with it, append
records and update the index incrementally.

    python bench/trace_bench.py --gib 2
"""

from __future__ import annotations

import argparse
import shutil
import struct
import time
from dataclasses import replace
from pathlib import Path

from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.commitlog import commitlog_record
from mqtool.formats.message import record_to_container
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace
from mqtool.trace.index import build_index, index_finder

T0 = 1_795_000_000_000
FILE = 1 << 30


def uniq(n: int) -> str:
    return f"7F0000010000BENCH{n:015d}".replace("BENCH", "BE4C")


def generate(root: Path, gib: float) -> tuple[str, str]:
    """The store; returns (UNIQ_KEY of a record in the middle, UNIQ_KEY of the delayed message)."""
    cfg = replace(BrokerConfig(), mapped_file_size_commitlog=FILE)
    w = StoreWriter(root, cfg)
    tmpl = w.make_record("BenchTopic", 0, b"x" * 800, [("UNIQ_KEY", uniq(0)), ("KEYS", f"k{0:012d}"),
                                                        ("TAGS", "bench")], store_timestamp=T0)
    raw = bytearray(commitlog_record.build(record_to_container(tmpl)))
    size = len(raw)
    upos = bytes(raw).index(uniq(0).encode())
    kpos = bytes(raw).index(b"k000000000000")
    per_file = FILE // size
    n_total = int(gib * (1 << 30)) // size
    files = -(-n_total // per_file)
    (root / "commitlog").mkdir(parents=True, exist_ok=True)
    n = 0
    for fi in range(files):
        base = fi * FILE
        buf = bytearray(FILE)
        pos = 0
        for _ in range(min(per_file, n_total - n)):
            raw[upos : upos + 32] = uniq(n).encode()
            raw[kpos : kpos + 13] = f"k{n:012d}".encode()
            struct.pack_into(">qq", raw, 20, n, base + pos)  # QUEUEOFFSET, PHYSICALOFFSET
            buf[pos : pos + size] = raw
            pos += size
            n += 1
        if fi + 1 < files:
            struct.pack_into(">ii", buf, pos, FILE - pos, -875286124)  # BLANK filler
        (root / "commitlog" / f"{base:020d}").write_bytes(buf)
    w.close()
    # continue with real put paths for a delayed message near the end
    with StoreWriter.extend(root, root.with_name(root.name + "-x"), cfg) as w2:
        d = b.put_delay_message(w2, "BenchTopic", 1, b"d", [("UNIQ_KEY", uniq(n_total + 1)), ("KEYS", "delayed")],
                                store_timestamp=T0 + 5000, level=3)
        b.deliver_delayed(w2, d, store_timestamp=T0 + 15_000)
        w2.write_checkpoint()
    shutil.rmtree(root)
    root.with_name(root.name + "-x").rename(root)
    return uniq(n_total // 2), uniq(n_total + 1)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/mqtool-trace-bench"))
    ap.add_argument("--keep", action="store_true", help="keep the generated store and index")
    a = ap.parse_args()
    if a.dir.exists():
        shutil.rmtree(a.dir)
    a.dir.mkdir(parents=True)
    root = a.dir / "store"
    (mid, delayed), t_gen = timed(lambda: generate(root, a.gib))
    print(f"generated {a.gib} GiB in {t_gen:.1f} s")
    store = Store.open(root)
    for label, uk in (("middle", mid), ("delayed", delayed)):
        ts, t = timed(lambda uk=uk: trace(store, TraceQuery(uniq_key=uk)))
        print(f"trace {label} without index: {t:.3f} s -> {ts[0].verdict.text}")
    stats, t = timed(lambda: build_index(store, a.dir / "ix"))
    print(f"index build: {t:.1f} s ({stats.records} records, {stats.rows} rows)")
    for label, uk in (("middle", mid), ("delayed", delayed)):
        def run(uk=uk):
            finder, _ = index_finder(store, a.dir / "ix")
            return trace(store, TraceQuery(uniq_key=uk), finder=finder)
        ts, t = timed(run)
        print(f"trace {label} with index: {t:.3f} s -> {ts[0].verdict.text}")
    with StoreWriter.extend(root, a.dir / "grown", store.config) as w:
        for i in range(1000):
            b.put_message(w, "BenchTopic", 2, b"n", [("UNIQ_KEY", uniq(10**9 + i)), ("KEYS", "new")],
                          store_timestamp=T0 + 20_000 + i)
    grown = Store.open(a.dir / "grown")
    (finder, notes), t = timed(lambda: index_finder(grown, a.dir / "ix"))
    print(f"incremental index update: {t:.3f} s ({'; '.join(notes)})")
    if not a.keep:
        shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
