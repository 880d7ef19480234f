"""The DLedger audit as tasks and a driver (audit/dledger.py) against the serial walk
(`DLedgerCommitLog.audit`) on the oracle store, damaged copies and a converted store, whole and cut
into slices at entry starts taken from the DLedger index."""

import struct

import pytest
from dledgerkit import make_converted_store

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.audit.plan import CommitLogSlice, plan_audit
from mqtool.audit.runner import run_local
from mqtool.formats.dledger import build_checkpoint
from mqtool.store.dledger import DLedgerCommitLog
from mqtool.store.findings import Findings

SRC = ORACLE / "dledger-5.3.1"
DATA0 = "dledger-n0/data/00000000000000000000"
DATA1 = "dledger-n0/data/00000000000000016384"
INDEX0 = "dledger-n0/index/00000000000000000000"


def _key(f: tuple) -> tuple:
    return (f[0], -1 if f[1] is None else f[1], *f[2:])


def serial(root):
    fs = Findings()
    summary = DLedgerCommitLog.open(root).audit(fs)
    return summary, sorted(((f.file, f.offset, f.check, f.severity, f.message) for f in fs), key=_key)


def tasked(root, split: int):
    report = run_local(root, split_bytes=split)
    got = sorted(((f["file"], f["offset"], f["check"], f["severity"], f["message"]) for f in report["findings"]
                  if f["check"].startswith("dledger.")), key=_key)
    return report["summary"]["dledger"], got


def _patch(root, rel, at, data):
    with open(root / rel, "r+b") as fh:
        fh.seek(at)
        fh.write(data)


DAMAGE = {
    "clean": [],
    "bad magic in file 0": [(DATA0, 3202, struct.pack(">i", 7))],
    "index gap in the data": [(DATA0, 6369 + 8, struct.pack(">q", 11))],
    "index unit disagrees": [(INDEX0, 3 * 32 + 4, struct.pack(">q", 12345))],
    "first entry of file 1 index 99": [(DATA1, 8, struct.pack(">q", 99))],
    "term goes down": [(DATA1, 16, struct.pack(">q", -1))],
    "torn tail": [(DATA1, 30025 - 16384 + 12, b"\x13\x37")],
    "body damage and filler": [(DATA0, 15021 + 4, struct.pack(">i", 99)), (DATA0, 48 + 8, struct.pack(">i", 1)),
                               (DATA0, 749 + 48 + 28, struct.pack(">q", 5))],
}


@pytest.mark.parametrize("split", [0, 4096, 1000])
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_tasks_report_what_the_serial_walk_reports(tmp_path, case, split):
    need_oracle()
    root = copy_with_wheel(SRC / "store", tmp_path / "store")
    for rel, at, data in DAMAGE[case]:
        _patch(root, rel, at, data)
    want_summary, want = serial(root)
    got_summary, got = tasked(root, split)
    assert got == want
    assert got_summary == want_summary
    assert bool(want) == (case != "clean")


def test_truncated_last_entry_and_checkpoint_behind(tmp_path):
    need_oracle()
    root = copy_with_wheel(SRC / "store", tmp_path / "store")
    with open(root / DATA1, "r+b") as fh:
        fh.truncate(29244 - 16384 + 20)  # entry 41 keeps 20 of its 781 bytes
    (root / "dledger-n0/checkpoint").write_text(build_checkpoint(40, 39))
    want_summary, want = serial(root)
    got_summary, got = tasked(root, 4096)
    assert got == want and got_summary == want_summary
    assert got_summary["end_index"] == 40 and got_summary["committed_pos"] == 28522
    assert any("1 index unit(s) past the last entry 40" in f[4] for f in got)


def test_cuts_lie_at_entry_body_starts_from_the_index():
    """4096-byte splits of the 16 KiB data files: each cut is the first entry at or after a multiple of
    4096 (its pos from the DLedger index) + 48, and the DLedger tasks cover the same ranges."""
    need_oracle()
    plan = plan_audit(SRC / "store", split_bytes=4096)
    cl = [t for t in plan.tasks if isinstance(t, CommitLogSlice)]
    starts = [(t.rel, t.begin) for t in cl]
    import json

    pos = [json.loads(x)["dledgerPos"] for x in (SRC / "records.jsonl").read_text().splitlines()]
    want = []
    for name, start in ((DATA0, 0), (DATA1, 16384)):
        want.append((name, 0))
        for t in (4096, 8192, 12288):
            p = min((p for p in pos if p >= start + t), default=None)
            if p is not None and p < start + t + 4096 and p < start + 16384:
                want.append((name, p - start + 48))
    assert starts == want and len(starts) > 4
    dl = [t for t in plan.tasks if type(t).__name__ == "DLedgerSliceTask"]
    assert [(t.rel, t.begin) for t in dl] == [(r, b - 48 if b else 0) for r, b in want]


def test_converted_store(tmp_path):
    """commitlog/ below dividedCommitlogOffset, then DLedger entries: one CommitLog, no finding."""
    root, old, divided, end, _ = make_converted_store(tmp_path)
    report = run_local(root, split_bytes=0)
    want_summary, want = serial(root)
    assert report["summary"]["dledger"] == want_summary
    assert want_summary["divided_commitlog_offset"] == divided and want_summary["entries"] == 3
    assert report["summary"]["commitlog"]["records"] == len(old) + 3
    assert report["summary"]["commitlog"]["max_offset"] == end
