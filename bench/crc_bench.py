#!/usr/bin/env python3
"""CRC32 throughput: the extension's `mq_crc32` against what the scan used before it, side by side.

    python bench/crc_bench.py [--mib 256] [--repeat 7] [--json]

Compares, on the same random buffer (the walk calls `mq_crc32` once a body from C, so no Python call
overhead is in the scan's figure; bodies of 256 / 64 bytes and more take the folding paths):
- `mqtool._native.crc32`: VPCLMULQDQ / PCLMULQDQ folding where the CPU has it (`CRC32_IMPLEMENTATION`), and its
  slicing-by-8 tables alone (`crc32_tables`, what a CPU without PCLMULQDQ runs);
- zlib-ng's `zng_crc32` through ctypes (what `store/native.py` bound into the numba kernels);
- CPython's `zlib.crc32` (the system zlib).
GB/s = 10^9 bytes a second, best of --repeat; the ratios are the extension's speed over each other's. Each
figure is taken on the thread's CPU clock (`time.thread_time`: what a shared machine's other load does not
stretch; wall-clock figures are printed beside), over the whole buffer (memory-bound) and over 1 MiB of it again
and again (cache-hot: the implementation's own speed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mqtool import _native  # noqa: E402


def _zlib_ng():
    """zng_crc32 through ctypes, as `store/native.py` loaded it; None when zlib-ng is not installed."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return None
    fn = ctypes.CDLL(zlib_ng.__file__).zng_crc32
    fn.restype, fn.argtypes = ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32]
    return fn


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best thread CPU seconds, best wall seconds) of `repeat` calls."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        t, w = time.thread_time(), time.perf_counter()
        fn()
        cpu, wall = min(cpu, time.thread_time() - t), min(wall, time.perf_counter() - w)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = os.urandom(args.mib << 20)
    ng = _zlib_ng()
    buf = ctypes.create_string_buffer(data, len(data)) if ng else None
    addr = ctypes.addressof(buf) if ng else 0
    want = zlib.crc32(data)
    assert _native.crc32(data) == _native.crc32_tables(data) == want
    if ng:
        assert ng(0, addr, len(data)) == want
    whole = {
        f"mqtool._native ({_native.CRC32_IMPLEMENTATION})": lambda: _native.crc32(data),
        "mqtool._native (slice8 tables)": lambda: _native.crc32_tables(data),
        "zlib-ng zng_crc32 (ctypes)": (lambda: ng(0, addr, len(data))) if ng else None,
        "zlib.crc32": lambda: zlib.crc32(data),
    }
    hot = memoryview(data)[: 1 << 20]
    rounds = len(data) >> 20
    cases = {
        f"mqtool._native ({_native.CRC32_IMPLEMENTATION}), cache-hot 1 MiB": (
            lambda: [_native.crc32(hot) for _ in range(rounds)],
            rounds << 20,
        ),
    }
    results = {"load": os.getloadavg(), "bytes": len(data), "whole": {}, "wall": {}, "cases": {}}
    for name, fn in whole.items():
        if fn is not None:
            cpu, wall = _best(fn, args.repeat)
            results["whole"][name], results["wall"][name] = len(data) / cpu / 1e9, len(data) / wall / 1e9
    for name, (fn, nbytes) in cases.items():
        results["cases"][name] = nbytes / _best(fn, args.repeat)[0] / 1e9
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(
        f"load average {results['load'][0]:.2f} {results['load'][1]:.2f} {results['load'][2]:.2f}; "
        f"{args.mib} MiB random bytes; GB/s of thread CPU time (wall in brackets), best of {args.repeat}"
    )
    rows = results["whole"]
    ours = next(iter(rows.values()))
    for name, gbs in rows.items():
        print(f"  {name:38s} {gbs:7.2f} GB/s ({results['wall'][name]:5.2f})   extension / this = {ours / gbs:5.2f}x")
    for name, gbs in results["cases"].items():
        print(f"  {name}: {gbs:.2f} GB/s")


if __name__ == "__main__":
    main()
