"""Damaged RocksDB consume queues and config databases (spec §14): findings, never a traceback.

The databases are written by rocksdict (no real RocksDB-mode store exists here) with keys and values that
start from the Java layouts and are then cut, extended or replaced at random; the corrupted-file case
flips bytes of the database's files themselves.
"""

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdbkit import EDIT, MAX_PHY_OFFSET, QUEUES, scratch_store, write_damaged_cq

from mqtool.builder.rocksdb import write_kv_config, write_rocksdb_consume_queues
from mqtool.formats.rocksdb_cq import cq_value, offset_value
from mqtool.inspect.queue import iter_queue, queue_summary
from mqtool.store.findings import Findings
from mqtool.store.rocksdb import read_kv_consumer_offsets, read_kv_subscription_groups, read_kv_topics
from mqtool.store.store import Store

_value = st.one_of(st.binary(max_size=40), st.builds(lambda a, b: cq_value.build(
    {"phy_offset": a, "size": b, "tags_code": 0, "store_time": 0}), st.integers(-2**63, 2**63 - 1),
    st.integers(-2**31, 2**31 - 1)))


def _read_everything(root: Path) -> None:
    s = Store.open(root)
    for topic, qid in s.queue_ids:
        q = s.consume_queue(topic, qid)
        assert q is not None
        list(q.iter_units())
        list(q.scan_columns())
        q.columns(Findings())
        q.unit(q.max_offset - 1)
        q.min_offset(0)
        list(iter_queue(s, topic, qid, limit=20))
        queue_summary(s, topic, qid)
    list(s.findings)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cq=st.lists(st.tuples(st.sampled_from([("T", 0), ("U", 3), ("V", -1)]), st.integers(-3, 2**62), EDIT,
                             _value), max_size=6),
       offsets=st.lists(st.tuples(st.sampled_from(["max", "min"]), EDIT, st.binary(max_size=20)), max_size=4))
def test_damaged_cq_keys_and_values(cq, offsets):
    empty_as = offset_value.build({"phy_offset": 0, "cq_offset": 2**62})  # what an empty value is written as
    with scratch_store() as root:
        write_damaged_cq(root, cq, [(kind, edit, value or empty_as) for kind, edit, value in offsets])
        _read_everything(root)


@settings(max_examples=15, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=6))
def test_corrupted_database_files(flips):
    with scratch_store() as root:
        write_rocksdb_consume_queues(root, QUEUES, max_phy_offset=MAX_PHY_OFFSET)
        files = sorted(p for p in (root / "consumequeue").iterdir() if p.is_file() and p.stat().st_size)
        for at, value in flips:
            p = files[at % len(files)]
            data = bytearray(p.read_bytes())
            data[at % len(data)] = value
            p.write_bytes(bytes(data))
        _read_everything(root)


_BAD_JSON = [b'{"offsetTable":{0:', b'{"offsetTable":{"x":1}}', b'{"readQueueNums":"8"}', b'[]', b'null',
             b'{"a":{}}', b'{"retryMaxTimes":99999999999999}']


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.tuples(st.text(max_size=8), st.one_of(st.binary(max_size=30), st.sampled_from(_BAD_JSON))),
                       max_size=4),
       version=st.one_of(st.none(), st.binary(max_size=30), st.just(b'{"counter":"x"}')))
def test_damaged_config_values(values, version):
    with scratch_store() as root:
        cfg = root / "config"
        entries = dict(values)
        write_kv_config(cfg / "consumerOffsets", entries, version)
        write_kv_config(cfg / "topics", entries, version)
        write_kv_config(cfg / "subscriptionGroups", entries, version, forbidden=entries)
        findings = Findings()
        read_kv_consumer_offsets(root, findings)
        read_kv_topics(root, findings)
        read_kv_subscription_groups(root, findings)
        s = Store.open(root)
        s.config_files.consumer_offsets, s.config_files.topics  # noqa: B018 - reading is the test
        assert all(f.severity in ("warning", "error", "info") for f in [*findings, *s.findings])
