"""`store/native.py`: the kernels' object code cached by numba's compile and loaded through llvmlite.

The scan results of the native engine are proved equal to the Construct definitions in
`test_fastscan.py` (every case runs under it); here: the cache file is never trusted when stale or
damaged, concurrent first runs leave one whole file, and object code that would need numba's
runtime (an allocation, the Python API) is refused at build time.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mqtool.store import native

REPO = Path(__file__).resolve().parents[2]
GROUP, SPEC, SOURCES = "test-host-keys", "u1[:] i8[:] i8[:]", ("mqtool/store/native.py",)
# Two stored hosts: 10.0.0.1:10911 and 192.168.1.20:8080 (address bytes, then the big-endian port).
HOSTS = bytes([10, 0, 0, 1, 0, 0, 0x2A, 0x9F, 192, 168, 1, 20, 0, 0, 0x1F, 0x90])
WANT = [(0x0A000001 << 32) | 10911, ((0xC0A80114 << 32) | 8080) - (1 << 64)]  # an int64: wraps like Java


def _entries(calls: list):
    def entries():
        from mqtool.store import kernels

        calls.append(1)
        return {"host_keys": kernels.c_entry(kernels._host_keys, SPEC)}

    return entries


def _host_keys(lib) -> list[int]:
    out = np.zeros(2, np.int64)
    lib.kernel("host_keys", SPEC, lambda: pytest.fail("fell back to numba"))(
        np.frombuffer(HOSTS, np.uint8), np.array([0, 8]), out)
    return out.tolist()


def _load(monkeypatch, calls: list):
    monkeypatch.delitem(native._loaded, GROUP, raising=False)
    lib = native.load(GROUP, _entries(calls), SOURCES)
    assert lib is not None, native.errors.get(GROUP)
    return lib


@pytest.mark.parametrize("damage", ["flip a byte of the code", "truncate", "another key", "garbage", "empty"])
def test_a_damaged_or_stale_cache_file_is_compiled_again_never_loaded(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("MQTOOL_CACHE_DIR", str(tmp_path))
    calls: list = []
    assert _host_keys(_load(monkeypatch, calls)) == WANT and calls == [1]  # a miss: compiled, written
    (path,) = tmp_path.glob(f"{GROUP}-*.o")
    good = path.read_bytes()
    assert _host_keys(_load(monkeypatch, calls)) == WANT and calls == [1]  # a hit: not compiled
    head, _, code = good.partition(b"\n\n")
    lines = head.split(b"\n")
    bad = {
        "flip a byte of the code": head + b"\n\n" + code[:100] + bytes([code[100] ^ 0x40]) + code[101:],
        "truncate": good[: len(good) - 7],
        "another key": b"\n".join([lines[0], b"0" * 64, *lines[2:]]) + b"\n\n" + code,
        "garbage": b"\x7fELF not a cache file",
        "empty": b"",
    }[damage]
    assert native.read_cache(path, native.cache_key(GROUP, SOURCES)) is not None
    path.write_bytes(bad)
    assert native.read_cache(path, native.cache_key(GROUP, SOURCES)) is None
    assert _host_keys(_load(monkeypatch, calls)) == WANT and calls == [1, 1]  # compiled again
    assert native.read_cache(path, native.cache_key(GROUP, SOURCES)) is not None  # and rewritten whole


def test_two_first_runs_at_once_leave_one_whole_file(tmp_path):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_native as t; from mqtool.store import native; "
            "lib = native.load(t.GROUP, t._entries([]), t.SOURCES); print(t._host_keys(lib) == t.WANT)")
    env = {**os.environ, "MQTOOL_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    runs = [subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent)], env=env, cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in runs:
        out, err = p.communicate(timeout=600)
        assert out.strip() == "True", err[-2000:]
    files = sorted(f.name for f in tmp_path.iterdir())
    assert len(files) == 1 and files[0].startswith(GROUP + "-") and files[0].endswith(".o")  # no temporary left
    assert native.read_cache(tmp_path / files[0], native.cache_key(GROUP, SOURCES)) is not None


def test_object_code_that_needs_numbas_runtime_is_refused():
    """The check can fail: a kernel that allocates needs NRT (and the Python API to raise)."""
    from numba import njit

    from mqtool.store import kernels

    @njit
    def allocates(n):
        return np.zeros(n, np.int64).sum()

    with pytest.raises(RuntimeError, match="NRT_"):
        native.build(lambda: {"allocates": kernels.c_entry(allocates, "i8 -> i8")})


def test_an_unwritable_cache_directory_leaves_the_scan_to_numba(tmp_path, monkeypatch):
    """Compiling in every process would cost seconds each: without a cache the dispatchers are used."""
    from mqtool.store import fastscan

    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("MQTOOL_CACHE_DIR", str(blocker / "cache"))  # under a file: mkdir fails
    monkeypatch.delitem(native._loaded, GROUP, raising=False)
    calls: list = []
    assert native.load(GROUP, _entries(calls), SOURCES) is None and calls == []
    assert "not writable" in native.errors[GROUP]
    monkeypatch.setattr(fastscan, "_native", None)
    monkeypatch.setattr(fastscan, "_walk", None)
    monkeypatch.setitem(native._loaded, "scan", None)  # what load() gives here for the scan kernels
    demo = (REPO / "fixtures/demo/commitlog/00000000000000000000").read_bytes()
    monkeypatch.setattr(fastscan, "ENGINE", None)
    monkeypatch.setattr(fastscan, "_python_left", 0)  # past the CPython budget: the compiled walk
    chunks = list(fastscan.iter_commitlog_chunks(demo))
    assert fastscan.compiled_walk() is fastscan.kernels()._commitlog_kernel
    assert sum(len(c) for c in chunks) == 46 and chunks[-1].end == 16037  # the demo's first file
