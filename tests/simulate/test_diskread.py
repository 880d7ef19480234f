"""`MappedBase` answers every read of the simulator exactly as `DiskBase` (the store's own readers):
on every store RocketMQ wrote, on the demo fixture and on a store torn by a crash."""

import pytest

from conftest import FIXTURES
from mqtool.builder.crash import build_crash, crash_config
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.model import DiskBase, SimMessage
from mqtool.store.store import Store


def _fields(m: SimMessage | None):
    return None if m is None else {k: getattr(m, k) for k in SimMessage.__slots__}


def _same_reads(store: Store) -> int:
    ref, fast = DiskBase(store), MappedBase(store, cache_messages=4)  # a tiny cache: evictions are exercised
    n = 0
    try:
        for topic, qid in store.queue_ids:
            lo, hi = ref.cq_min(topic, qid), ref.cq_max(topic, qid)
            assert (fast.cq_min(topic, qid), fast.cq_max(topic, qid)) == (lo, hi)
            for off in range(lo - 2, hi + 3):
                assert fast.cq_unit(topic, qid, off) == ref.cq_unit(topic, qid, off), (topic, qid, off)
            for start in (lo, lo + 1, (lo + hi) // 2, hi - 1, hi):
                assert list(fast.cq_units(topic, qid, start, hi + 5)) == list(ref.cq_units(topic, qid, start, hi + 5))
            for _off, (phys, _size, _tags) in ref.cq_units(topic, qid, lo, hi):
                for p in (phys, phys + 1, phys - 1):
                    assert _fields(fast.message(p)) == _fields(ref.message(p)), (topic, qid, p)
                    n += 1
        end = ref.max_phys()
        for p in (-1, 0, end, end + 1, 1 << 40):
            assert _fields(fast.message(p)) == _fields(ref.message(p))
    finally:
        fast.close()
    return n


def test_oracle_stores_read_the_same(oracle_store):
    name, root, _ = oracle_store
    config = BrokerConfig.for_version("4.9" if "4.9" in name else "5.3")
    assert _same_reads(Store.open(root, config)) > 0


def test_demo_fixture_reads_the_same():
    from mqtool.formats.broker_conf import load_broker_conf

    assert _same_reads(Store.open(FIXTURES / "demo", load_broker_conf(FIXTURES / "demo.broker.conf"))) > 30


def test_torn_store_reads_the_same(tmp_path):
    root = tmp_path / "crash"
    build_crash(root)
    assert _same_reads(Store.open(root, crash_config())) > 0


@pytest.mark.parametrize("size", [1, 1 << 15])
def test_cache_is_bounded(size):
    store = Store.open(FIXTURES / "demo", BrokerConfig())
    base = MappedBase(store, cache_messages=size)
    for topic, qid in store.queue_ids:
        for _off, (phys, _s, _t) in base.cq_units(topic, qid, base.cq_min(topic, qid), base.cq_max(topic, qid)):
            assert base.message(phys).phys == phys
    assert len(base._lru) <= size and not base._cache  # nothing kept beyond the bound
    base.close()


def _end_by_records(store: Store):
    """The reference: the last file walked with a `MessageRecord` per record (`_scan_file`)."""
    from mqtool.store.findings import Findings

    cl = store.commitlog
    acc = Findings()
    for _ in cl._scan_file(cl.files[-1], 0, False, acc):
        pass
    scan = cl.scans[cl.rel(cl.files[-1])]
    return cl.files[-1].start + scan.valid_bytes, list(acc), vars(scan).copy()


def test_max_offset_by_columns_equals_the_record_walk(tmp_path):
    from mqtool.store.findings import Findings

    root = tmp_path / "crash"
    build_crash(root)
    stores = [Store.open(root, crash_config()), Store.open(FIXTURES / "demo", BrokerConfig())]
    for store in stores:
        acc = Findings()
        end = store.commitlog.max_offset(acc)
        scan = vars(store.commitlog.scans[store.commitlog.rel(store.commitlog.files[-1])]).copy()
        store.commitlog.scans.clear()
        assert (end, list(acc), scan) == _end_by_records(store)
