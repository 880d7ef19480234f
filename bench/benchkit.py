"""What the whole-process benches share: a generated store (`shared/bench/make_commitlog.py`) and a
warm page cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
SHARED = PROJECT.parent / "shared"


def make_store(root: Path, mib: int) -> int:
    """A CommitLog of `mib` MiB under root/commitlog (64 MiB files; one 1 GiB file from 1024 MiB up):
    the number of records written."""
    file_mib = 1024 if mib >= 1024 else 64
    out = subprocess.run([sys.executable, str(SHARED / "bench/make_commitlog.py"), str(root / "commitlog"),
                          str(mib), str(file_mib)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["records"]


def warm(root: Path) -> None:
    """Read every CommitLog file once, so both sides of a comparison find it in the page cache."""
    for f in (root / "commitlog").iterdir():
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
