"""`MappedBase.props` (the timer's enqueue read: properties only) equals the properties of
`DiskBase.message` (the store's own readers), None where it is None, on every record and next to it:
the stores RocketMQ wrote and a store torn by a crash."""

from reference_base import DiskBase

from mqtool.simulate.diskread import MappedBase
from mqtool.store.store import Store


def _same_props(store: Store) -> int:
    ref, fast = DiskBase(store), MappedBase(store, cache_messages=4)
    n = 0
    try:
        for topic, qid in store.queue_ids:
            for _off, (phys, _size, _tags) in ref.cq_units(topic, qid, ref.cq_min(topic, qid), ref.cq_max(topic, qid)):
                for p in (phys, phys + 1, phys - 1):
                    m = ref.message(p)
                    assert fast.props(p) == (None if m is None else m.props), (topic, qid, p)
                    n += m is not None
        end = ref.max_phys()
        for p in (-1, 0, end, end + 1, 1 << 40):
            m = ref.message(p)
            assert fast.props(p) == (None if m is None else m.props)
    finally:
        fast.close()
    return n


def test_oracle_stores_props_the_same(oracle_sim_store):
    assert _same_props(oracle_sim_store[1]) > 0


def test_torn_store_props_the_same(torn_store):
    assert _same_props(torn_store) > 0
