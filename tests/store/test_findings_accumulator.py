"""Readers add findings to the `Findings` accumulator they are given (fixtures/demo, damaged in a copy)."""

import shutil
from pathlib import Path

import pytest

from mqtool.store import fastscan
from mqtool.store.findings import Findings
from mqtool.store.store import Store

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


@pytest.fixture
def damaged(tmp_path) -> tuple[Path, int]:
    """A copy of fixtures/demo whose first record with a body has one body byte flipped; (root, its offset)."""
    root = shutil.copytree(DEMO, tmp_path / "demo")
    f = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(f.read_bytes())
    chunk = next(fastscan.iter_commitlog_chunks(bytes(data), 0, 0, verify_crc=False))
    row = int((chunk.body_len > 0).argmax())
    data[int(chunk.body_pos[row])] ^= 0xFF
    f.write_bytes(bytes(data))
    return root, int(chunk.pos[row])


def test_a_walk_adds_to_the_accumulator_it_is_given(damaged):
    root, offset = damaged
    cl = Store.open(root).commitlog
    acc = Findings()
    n = len(list(cl.iter_records(findings=acc)))
    assert n > 10
    assert [(f.offset, f.check, f.severity) for f in acc] == [(offset, "commitlog.integrity", "error")]
    assert acc[0].message.startswith("body CRC mismatch")
    assert cl.findings is acc  # the latest walk's accumulator
    other = Findings()
    assert sum(len(c) for _f, c in cl.scan_columns(chunk_records=3, findings=other)) == n
    assert other == acc and len(acc) == 1  # the second walk added to its own accumulator only


def test_store_open_adds_listing_findings_to_its_accumulator(tmp_path):
    root = shutil.copytree(DEMO, tmp_path / "demo")
    (root / "commitlog" / "stray.txt").write_text("x")
    acc = Findings()
    store = Store.open(root, findings=acc)
    assert store.findings is acc and acc == []
    store.commitlog  # noqa: B018 - opening the part lists its files
    assert [(f.file, f.check, f.severity) for f in acc] == [("commitlog/stray.txt", "commitlog.files", "info")]
    assert acc.worst() == "info"
