"""The `rocksdb.integrity` audit on randomly damaged RocksDB consume queues: findings, never a traceback.

Databases written by `builder/rocksdb.py` (no real RocksDB-mode store exists here), then keys cut or extended
and values replaced at random, in both column families and on the CHECKPOINT entry."""

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdbkit import EDIT, scratch_store, write_damaged_cq

from mqtool.audit.rocksdb import check_state, read_rocksdb_state
from mqtool.builder.rocksdb import ROCKSDICT_CONFIG
from mqtool.store.findings import Findings
from mqtool.store.store import Store


@settings(max_examples=30, deadline=None)
@given(cq=st.lists(st.tuples(st.sampled_from([("T", 0), ("U", 3), ("V", -1)]), st.integers(-3, 2**62), EDIT,
                             st.binary(max_size=40)), max_size=6),
       offsets=st.lists(st.tuples(st.sampled_from(["max", "min"]), EDIT, st.binary(max_size=20)), max_size=4),
       checkpoint=st.one_of(st.none(), st.binary(max_size=12)))
def test_the_audit_of_damaged_databases_gives_findings(cq, offsets, checkpoint):
    with scratch_store() as root:
        write_damaged_cq(root, cq, offsets, checkpoint)
        (root / "consumequeue" / ROCKSDICT_CONFIG).unlink(missing_ok=True)
        findings = Findings()
        state = read_rocksdb_state(SimpleNamespace(store=Store.open(root)), findings)
        summary = check_state(state, 0, 390, findings)
        assert summary["commitlog_end"] == 390
        assert {f.check for f in findings} <= {"rocksdb.integrity"}
