"""A RocksDB consume queue (spec §14) is read like file ConsumeQueues by the audit, `message`, `delay`,
`trace` and the messages view, and reading it never changes a byte of the store.

No store written by a real RocksDB-mode broker exists here: the oracle store basic-5.3.1 (RocketMQ 5.3.1) is
copied with its ConsumeQueues moved into a database `builder/rocksdb.py` writes from the same units, so
every queue-based answer must be the file store's answer (file names and byte offsets aside).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

from typer.testing import CliRunner

from mqtool.audit.runner import run_local
from mqtool.cli.app import app
from mqtool.formats.rocksdb_cq import build_cq_key, cq_value
from mqtool.inspect.messages import message_at
from mqtool.store.findings import Findings
from mqtool.store.store import Store

SCHEDULE_OFFSET = 3158  # a SCHEDULE_TOPIC_XXXX record of basic-5.3.1 (queue 0, level 1)
SCHEDULE_UNIQ = "FD00000000000000000000000000000238075FFD2B276F88C307000D"


def _snapshot(path) -> dict:
    out = {}
    for d, dirs, files in os.walk(path):
        out[d] = (os.stat(d).st_mtime_ns, sorted(dirs), sorted(files))
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[p] = (os.stat(p).st_mtime_ns, hashlib.sha256(fh.read()).hexdigest())
    return out


def _cli(*args) -> str:
    """stdout of `mqtool ARGS` run in this process (the CLI a user runs, without a new interpreter's start)."""
    r = CliRunner().invoke(app, list(map(str, args)))
    assert r.exit_code == 0, r.output
    return r.stdout


def _queue_findings(report: dict) -> list[tuple]:
    return sorted((f["check"], f["severity"], f["topic"], f["queue_id"], f["message"]) for f in report["findings"])


def test_the_audit_reads_rocksdb_queues_like_files(rocksdb_stores):
    plain, rocks = rocksdb_stores
    want, got = run_local(plain), run_local(rocks)
    assert (
        got["summary"]["consumequeues"]
        == want["summary"]["consumequeues"]
        == {"queues": 11, "units": 115, "bad_units": 0}
    )
    assert got["summary"]["topics"] == want["summary"]["topics"]
    assert got["summary"]["schedule"] == want["summary"]["schedule"]
    assert _queue_findings(got) == _queue_findings(want)


def test_audit_findings_for_a_damaged_rocksdb_queue(rocksdb_stores, tmp_path):
    from rocksdict import Options, Rdict

    _plain, rocks = rocksdb_stores
    root = tmp_path / "store"
    shutil.copytree(rocks, root)
    s = Store.open(root)
    units = list(s.consume_queue("TopicB", 1).iter_units())
    assert len(units) > 10
    db = Rdict(str(root / "consumequeue"), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)})
    del db[build_cq_key("TopicB", 1, 3)]  # a gap: the broker's range query stops there
    u = units[5]  # unit 5 points at unit 6's record
    db[build_cq_key("TopicB", 1, 5)] = cq_value.build(
        {"phy_offset": units[6].commitlog_offset, "size": units[6].size, "tags_code": 0, "store_time": 0}
    )
    db[build_cq_key("TopicB", 1, 7)] = b"\x01" * 11  # not 28 bytes
    db.close()
    (root / "consumequeue" / "rocksdict-config.json").unlink(missing_ok=True)
    got = [
        (f["severity"], f["file"], f["offset"], f["message"])
        for f in run_local(root)["findings"]
        if (f["topic"], f["queue_id"]) == ("TopicB", 1)
    ]
    assert ("error", "consumequeue", None, "unwritten (zero) unit before written ones: the queue has a hole") in got
    assert (
        "error",
        "consumequeue",
        None,
        f"unit 5 points to CommitLog offset {units[6].commitlog_offset}, a "
        f"record of another queue offset 6 (unit is 5)",
    ) in got
    assert ("error", "consumequeue", None, "CQ value at offset 7 is 11 bytes, not 28") in got
    assert sum(m.startswith("unwritten (zero) unit") for *_x, m in got) == 2  # offsets 3 and 7
    assert u.queue_offset == 5


def test_message_delay_and_trace_look_up_the_rocksdb_unit(rocksdb_stores):
    plain, rocks = rocksdb_stores
    doc = message_at(Store.open(rocks), SCHEDULE_OFFSET)["consume_queue"]
    assert doc == message_at(Store.open(plain), SCHEDULE_OFFSET)["consume_queue"]
    assert doc["points_back"] and doc["unit"]["commitlog_offset"] == SCHEDULE_OFFSET
    for args in (
        ["inspect", "{}", "delay", "--json", "--now", "1795462444000"],
        ["trace", "{}", "--uniq-key", SCHEDULE_UNIQ, "--json"],
        ["inspect", "{}", "messages", "--topic", "TopicB", "--queue-id", "1", "--json"],
    ):
        want = _cli(*[a.format(plain) for a in args]).replace(str(plain), "STORE")
        got = _cli(*[a.format(rocks) for a in args]).replace(str(rocks), "STORE")
        assert got == want and got.strip()
    trace = [json.loads(line) for line in _cli("trace", rocks, "--uniq-key", SCHEDULE_UNIQ, "--json").splitlines()]
    assert any("delay" in json.dumps(e) for e in trace)


def test_reading_never_changes_the_store(rocksdb_stores, tmp_path):
    _plain, rocks = rocksdb_stores
    root = tmp_path / "store"
    shutil.copytree(rocks, root)
    for p in (root / "consumequeue").iterdir():  # what the writer left: reading must not make them again
        if p.name == "LOCK" or p.name.startswith("LOG"):
            p.unlink()
    before = _snapshot(root)
    for args in (
        ["inspect", root, "--now", "1795462444000"],
        ["inspect", root, "queue", "--topic", "TopicB", "--queue-id", "1", "--json"],
        ["inspect", root, "message", "--offset", SCHEDULE_OFFSET],
        ["trace", root, "--uniq-key", SCHEDULE_UNIQ],
    ):
        r = subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True, text=True)
        assert r.returncode in (0, 1) and not r.stderr.strip().startswith("Traceback"), (args, r.stderr)
    run_local(root)
    assert _snapshot(root) == before  # no LOCK, LOG, rocksdict-config.json; not a byte, not an mtime
    assert not any(p.name == "LOCK" or p.name.startswith("LOG") for p in (root / "consumequeue").iterdir())


def test_queue_reader_members(rocksdb_stores):
    plain, rocks = rocksdb_stores
    fq, rq = Store.open(plain).consume_queue("TopicB", 1), Store.open(rocks).consume_queue("TopicB", 1)
    assert (rq.first_offset, rq.max_offset, rq.min_offset(0)) == (fq.first_offset, fq.max_offset, fq.min_offset(0))
    assert rq.unit(10) == fq.unit(10) and rq.unit(rq.max_offset) is None and rq.unit(-1) is None
    assert list(rq.iter_units(60)) == list(fq.iter_units(60))
    got = [(first, u.tolist()) for first, u in rq.scan_columns(2)]
    want = [(first, u.tolist()) for first, u in fq.scan_columns(2)]
    assert [x for _f, b in got for x in b] == [x for _f, b in want for x in b] and got[0][0] == want[0][0] == 2
    assert rq.findings == [] and rq.queue.files == []
    findings = Findings()
    first, off, _size, _tags, written = rq.columns(findings)
    assert (first, len(off), bool(written.all())) == (0, fq.max_offset, True) and findings == []
