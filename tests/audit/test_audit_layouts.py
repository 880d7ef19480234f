"""The audit on DLedger and BatchCQ stores (RocketMQ 5.3.1 / DLedger 0.3.1.2 oracles and damaged copies):
clean stores give no finding and every record; damage gives the layout's findings."""

import json
import shutil
import struct
from pathlib import Path

import jsonschema
import pytest

import mqtool
from conftest import ORACLE, need_oracle
from mqtool.audit.runner import run_local


def copy(tmp_path, name: str):
    need_oracle()
    root = tmp_path / "store"
    shutil.copytree(ORACLE / name / "store", root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return root


def patch(path, at: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(data)


@pytest.mark.parametrize("name,records,end,split", [("dledger-5.3.1", 42, 30025, 0), ("dledger-5.3.1", 42, 30025, 4096),
                                                    ("batchcq-5.3.1", 30, 13447, 0)])
def test_clean_layout_stores_audit_clean(name, records, end, split):
    need_oracle()
    report = run_local(ORACLE / name / "store", split_bytes=split)
    schema = json.loads((Path(mqtool.__file__).parent / "schemas" / "audit-report.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(report)))
    assert report["findings"] == []
    cl = report["summary"]["commitlog"]
    assert (cl["records"], cl["max_offset"], cl["recovery_end"]) == (records, end, end)


def test_dledger_damage_is_found(tmp_path):
    root = copy(tmp_path, "dledger-5.3.1")
    data1 = root / "dledger-n0" / "data" / f"{16384:020d}"
    patch(data1, 8, struct.pack(">q", 99))  # the first entry of file 2: index 99
    report = run_local(root)
    got = {(f["check"], f["file"]) for f in report["findings"] if f["severity"] == "error"}
    assert ("dledger.integrity", "dledger-n0/data/00000000000000016384") in got


def test_batch_unit_disagreeing_with_its_record_is_found(tmp_path):
    root = copy(tmp_path, "batchcq-5.3.1")
    patch(root / "batchconsumequeue" / "BatchTopic" / "1" / f"{0:020d}", 46 + 36, struct.pack(">h", 9))
    report = run_local(root)
    msgs = [(f["check"], f["topic"], f["queue_id"], f["message"]) for f in report["findings"]
            if f["severity"] == "error"]
    assert ("batchconsumequeue.integrity", "BatchTopic", 1,
            "unit base/batch 4/9 != record's INNER_BASE/INNER_NUM 4/10") in msgs
