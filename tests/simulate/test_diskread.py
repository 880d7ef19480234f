"""`MappedBase` answers every read of the simulator exactly as `DiskBase` (tests/reference_base.py: the store's
own readers):
on every store RocketMQ wrote, on the demo fixture and on a store torn by a crash."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_base import DiskBase

from conftest import FIXTURES
from mqtool.builder.crash import build_crash, crash_config
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.model import SimMessage
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


def test_oracle_stores_read_the_same(oracle_sim_store):
    assert _same_reads(oracle_sim_store[1]) > 0


def test_demo_fixture_reads_the_same():
    from mqtool.formats.broker_conf import load_broker_conf

    assert _same_reads(Store.open(FIXTURES / "demo", load_broker_conf(FIXTURES / "demo.broker.conf"))) > 30


def test_torn_store_reads_the_same(torn_store):
    assert _same_reads(torn_store) > 0


@pytest.mark.parametrize("size", [1, 1 << 15])
def test_cache_is_bounded(size):
    store = Store.open(FIXTURES / "demo", BrokerConfig())
    base = MappedBase(store, cache_messages=size)
    for topic, qid in store.queue_ids:
        for _off, (phys, _s, _t) in base.cq_units(topic, qid, base.cq_min(topic, qid), base.cq_max(topic, qid)):
            assert base.message(phys).phys == phys
    assert len(base.cache) <= size  # nothing kept beyond the bound
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


def _small_files_store(root):
    """~100 records in 16 KiB CommitLog files (some with IPv6 hosts, one with UTF-8 properties)."""
    from mqtool.builder.broker import put_message
    from mqtool.builder.writer import StoreWriter
    from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6

    config = BrokerConfig.for_version("5.3").with_overrides({"mappedFileSizeCommitLog": 16 << 10})
    with StoreWriter(root, config) as w:
        for i in range(300):
            fields = {}
            if i % 9 == 4:
                fields = {"sys_flag": BORNHOST_V6 | STOREHOST_V6, "born_host": "[::1]:7", "store_host": "[fe80::1]:1"}
            props = [("UNIQ_KEY", f"U{i:05d}"), ("KEYS", "clé ü" if i % 13 == 5 else f"k{i}")]
            put_message(w, "WinTopic", i % 3, b"b" * (i * 37 % 700), props, store_timestamp=1000 + i, **fields)
        w.write_checkpoint()
    return Store.open(root, config)


def _walk_reads(store: Store, order: list[int]) -> None:
    """Every read of `MappedBase` in `order` (window hits, misses, walks back) equals a fresh base's
    read by `DiskBase`: messages, property maps and the light read."""
    ref, fast = DiskBase(store), MappedBase(store, cache_messages=1)
    try:
        for p in order:
            m = ref.message(p)
            assert _fields(fast.message_once(p)) == _fields(m), p
            assert fast.props(p) == (None if m is None else m.props), p
            light = fast.read(p, False, True)
            assert light is None or light == (m.props, m.body_len, m.sys_flag), p
    finally:
        fast.close()


def test_window_reads_across_files(tmp_path):
    store = _small_files_store(tmp_path / "s")
    assert len(store.commitlog.queue.files) > 5
    phys = sorted(u[0] for t, q in store.queue_ids for _o, u in DiskBase(store).cq_units(t, q, 0, 1 << 20))
    order = [p + d for p in phys for d in (0, 1)] + phys[::-1] + phys[::3]
    _walk_reads(store, order)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_window_reads_in_any_order(tmp_path_factory, data):
    root = tmp_path_factory.getbasetemp() / "window-store"
    store = (
        Store.open(root, BrokerConfig.for_version("5.3").with_overrides({"mappedFileSizeCommitLog": 16 << 10}))
        if root.exists()
        else _small_files_store(root)
    )
    phys = sorted(u[0] for t, q in store.queue_ids for _o, u in DiskBase(store).cq_units(t, q, 0, 1 << 20))
    steps = data.draw(st.lists(st.tuples(st.integers(0, len(phys) - 1), st.integers(-3, 3)), max_size=60))
    _walk_reads(store, [phys[i] + d for i, d in steps])


def test_reads_after_close_reopen_the_files(tmp_path):
    store = _small_files_store(tmp_path / "s")
    phys = sorted(u[0] for t, q in store.queue_ids for _o, u in DiskBase(store).cq_units(t, q, 0, 1 << 20))
    fast = MappedBase(store, cache_messages=1)
    first = [fast.read(p, False, True) for p in phys[:20]]
    fast.close()
    assert [fast.read(p, False, True) for p in phys[:20]] == first and all(first)
    fast.close()
