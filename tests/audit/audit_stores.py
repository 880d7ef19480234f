"""Broken stores for the audit tests: copies of oracle stores with chosen bytes changed.

Imported by the test modules (fixtures are re-exported there); not a conftest, so that the
project-wide `from conftest import ...` keeps meaning tests/conftest.py.
"""

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ORACLE, SHARED, need_oracle

BASIC = ORACLE / "basic-5.3.1" / "store"
PAIR_B = ORACLE / "pair_default" / "B"


def copy_store(src: Path, dst: Path) -> Path:
    """A writable copy (the oracle files are read-only); timerwheel.gz stays gzipped."""
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def body_position(store: Path, offset: int) -> int:
    """File position of the body of the record at a physical offset in commitlog/000...0."""
    buf = (store / "commitlog" / "00000000000000000000").read_bytes()
    sysflag = struct.unpack_from(">i", buf, offset + 36)[0]
    p = offset + 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 12
    return p + 4


@pytest.fixture
def basic_copy(tmp_path) -> Path:
    need_oracle()
    return copy_store(BASIC, tmp_path / "store")


@pytest.fixture
def pair_b_copy(tmp_path) -> Path:
    need_oracle()
    return copy_store(PAIR_B, tmp_path / "store")


@pytest.fixture
def synthetic_store(tmp_path) -> Path:
    """A CommitLog-only store of 5 files of 64 KiB from the shared generator (seed 7)."""
    gen = SHARED / "bench" / "make_commitlog.py"
    if not gen.is_file():
        pytest.skip(f"{gen} is absent: the synthetic CommitLog generator lives in ../shared")
    out = tmp_path / "synthetic"
    subprocess.run([sys.executable, str(SHARED / "bench" / "make_commitlog.py"), str(out / "commitlog"),
                    "0.3", "0.0625", "7"], check=True, capture_output=True)
    return out
