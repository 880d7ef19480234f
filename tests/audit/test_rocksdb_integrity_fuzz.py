"""The `rocksdb.integrity` audit on randomly damaged RocksDB consume queues: findings, never a traceback.

Databases written by `builder/rocksdb.py` (no real RocksDB-mode store exists here), then keys cut or extended
and values replaced at random, in both column families and on the CHECKPOINT entry."""

import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.audit.rocksdb import check_state, read_rocksdb_state
from mqtool.builder.rocksdb import ROCKSDICT_CONFIG, write_rocksdb_consume_queues
from mqtool.formats.rocksdb_cq import build_checkpoint_key, build_cq_key, build_offset_key
from mqtool.store.findings import Findings
from mqtool.store.store import Store

QUEUES = {("T", 0): (0, [(0, 100, 1, 10), (100, 100, 2, 11), (200, 100, 3, 12)]), ("U", 3): (5, [(300, 90, 0, 13)])}
_edit = st.tuples(st.integers(0, 80), st.binary(max_size=12))


def _damage(data: bytes, cut: int, tail: bytes) -> bytes:
    return data[: cut % (len(data) + 1)] + tail


@settings(max_examples=30, deadline=None)
@given(cq=st.lists(st.tuples(st.sampled_from([("T", 0), ("U", 3), ("V", -1)]), st.integers(-3, 2**62), _edit,
                             st.binary(max_size=40)), max_size=6),
       offsets=st.lists(st.tuples(st.sampled_from(["max", "min"]), _edit, st.binary(max_size=20)), max_size=4),
       checkpoint=st.one_of(st.none(), st.binary(max_size=12)))
def test_the_audit_of_damaged_databases_gives_findings(cq, offsets, checkpoint):
    from rocksdict import Options, Rdict

    tmp = Path(tempfile.mkdtemp(prefix="mqtool-fuzz-"))
    try:
        root = tmp / "store"
        write_rocksdb_consume_queues(root, QUEUES, max_phy_offset=390)
        db = Rdict(str(root / "consumequeue"), Options(raw_mode=True),
                   column_families={"offset": Options(raw_mode=True)})
        for (topic, qid), qoff, (cut, tail), value in cq:
            db[_damage(build_cq_key(topic, qid, qoff), cut, tail) or b"\x00"] = value
        cf = db.get_column_family("offset")
        for kind, (cut, tail), value in offsets:
            cf[_damage(build_offset_key("T", 0, kind), cut, tail) or b"\x00"] = value
        if checkpoint is not None:
            cf[build_checkpoint_key()] = checkpoint
        db.close()
        (root / "consumequeue" / ROCKSDICT_CONFIG).unlink(missing_ok=True)
        findings = Findings()
        state = read_rocksdb_state(SimpleNamespace(store=Store.open(root)), findings)
        summary = check_state(state, 0, 390, findings)
        assert summary["commitlog_end"] == 390
        assert {f.check for f in findings} <= {"rocksdb.integrity"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
