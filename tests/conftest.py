"""Shared fixtures: where ../shared lies, and read-only stores made from the oracle."""

import gzip
import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests draw the same examples every run (a CI failure reproduces, and no new example fails a landing at
# random), with no check on time (a per-example deadline, the "too slow" health check: two cores shared by the
# xdist workers and Spark, and time is not what they test). `HYPOTHESIS_PROFILE=explore` draws new examples each
# run, as many as each test asks for.
settings.register_profile("ci", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared"
ORACLE = SHARED / "oracle"
FIXTURES = PROJECT / "fixtures"

# Every store RocketMQ wrote for us, with its decoding beside it.
ORACLE_STORES = {
    "basic-5.3.1": ("basic-5.3.1/store", "basic-5.3.1/commitlog.jsonl"),
    "pair_default/A": ("pair_default/A", "pair_default/A.commitlog.jsonl"),
    "pair_default/B": ("pair_default/B", "pair_default/B.commitlog.jsonl"),
    "pair-4.9/A": ("pair-4.9/A", "pair-4.9/A.commitlog.jsonl"),
    "pair-4.9/B": ("pair-4.9/B", "pair-4.9/B.commitlog.jsonl"),
}


def need_oracle() -> None:
    if not ORACLE.is_dir():
        pytest.skip(f"../shared/oracle is absent ({ORACLE}): conformance with RocketMQ not checked")


@pytest.fixture(params=sorted(ORACLE_STORES))
def oracle_store(request) -> tuple[str, Path, Path]:
    """(name, store dir, commitlog.jsonl) for each oracle store."""
    need_oracle()
    store, jsonl = ORACLE_STORES[request.param]
    return request.param, ORACLE / store, ORACLE / jsonl


def copy_with_wheel(src: Path, dst: Path) -> Path:
    """A writable temporary copy of a store with its gzipped timerwheel restored."""
    shutil.copytree(src, dst)
    gz = dst / "timerwheel.gz"
    if gz.exists():
        with gzip.open(gz) as f, open(dst / "timerwheel", "wb") as out:
            shutil.copyfileobj(f, out)
        gz.unlink()
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def sibling(test_file: str, name: str):
    """The test module `name` beside `test_file` (its store builders, odd records), loaded by path as a
    module of its own: pytest imports test modules by importlib, so `import name` would not find it."""
    here = Path(test_file)
    spec = importlib.util.spec_from_file_location(f"_{here.stem}_{name}", here.with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rocksdb_stores(tmp_path_factory) -> tuple[Path, Path]:
    """(basic-5.3.1 with file ConsumeQueues, the same store with its consume queues moved into RocksDB by
    `builder/rocksdb.py`): one pair a module, to read, never to write."""
    from mqtool.builder.rocksdb import rocksdb_copy_of

    need_oracle()
    base = tmp_path_factory.mktemp("rocks")
    plain = base / "plain"
    shutil.copytree(ORACLE / "basic-5.3.1" / "store", plain, ignore=shutil.ignore_patterns("timerwheel.gz"))
    return plain, rocksdb_copy_of(plain, base / "rocks")


@pytest.fixture(scope="session")
def basic_store(tmp_path_factory) -> Path:
    """basic-5.3.1 with its timerwheel un-gzipped, as a broker would have left it."""
    need_oracle()
    return copy_with_wheel(ORACLE / "basic-5.3.1/store", tmp_path_factory.mktemp("oracle") / "basic")
