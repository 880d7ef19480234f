"""`trace` and `inspect messages` by key through the broker's IndexFiles give exactly what the scan
gives, on the demo store, the oracle stores and a store whose newest records were never indexed."""

from __future__ import annotations

import random

import pytest
from indexkit import CASES

from conftest import FIXTURES, need_oracle
from mqtool.builder.demo import T0, demo_config
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf
from mqtool.formats.names import PROPERTY_KEYS
from mqtool.inspect.messages import MessageQuery, find_messages, iter_messages
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace
from mqtool.trace.core import select_finder
from mqtool.trace.find import ScanFinder

DEMO = FIXTURES / "demo"
ORACLES = [c for c in CASES if c.name in ("basic-5.3.1", "pair_default/B", "pair-4.9/B", "batchcq-5.3.1")]


def _keys(store: Store, n: int | None = None) -> list[tuple[str, str, str]]:
    """(kind, topic, value) of the records' KEYS words and UNIQ_KEYs; a seeded sample of n when given."""
    out = set()
    for r in store.commitlog.iter_records():
        out.update(("key", r.topic, k) for k in r.keys)
        if r.uniq_key:
            out.add(("uniq_key", r.topic, r.uniq_key))
    out = sorted(out)
    return out if n is None or len(out) <= n else random.Random(7).sample(out, n)


def _traces(store: Store, query: TraceQuery, finder) -> list[dict]:
    docs = [t.as_dict(lambda r: {"offset": r.physical_offset}) for t in trace(store, query, finder=finder)]
    for d in docs:
        d["query"].pop("lookup", None)
    return docs


def _same_either_way(store: Store, keys, expect_source: str) -> None:
    for kind, topic, value in keys:
        query = TraceQuery(**{kind: value})
        finder, used, _ = select_finder(store, query)
        assert used == expect_source
        assert _traces(store, query, finder) == _traces(store, query, ScanFinder(store)), (kind, value)
        for q in (MessageQuery(**{kind: value}), MessageQuery(**{kind: value}, topic=topic),
                  MessageQuery(**{kind: value}, limit=1)):
            source, rows = find_messages(store, q)
            assert source == expect_source
            assert [r.physical_offset for r in rows] == [r.physical_offset for r in iter_messages(store, q)], q


def test_demo_every_key():
    store = Store.open(DEMO, load_broker_conf(FIXTURES / "demo.broker.conf"))
    keys = _keys(store)
    assert {k for k, _, _ in keys} == {"key", "uniq_key"}
    _same_either_way(store, keys, "indexfile")


@pytest.mark.parametrize("case", ORACLES, ids=[c.name for c in ORACLES])
def test_oracle_stores(case):
    need_oracle()
    conf = BrokerConfig(raw={"maxHashSlotNum": str(case.hash_slot_num), "maxIndexNum": str(case.index_num)})
    store = Store.open(case.store, conf)
    _same_either_way(store, _keys(store, 25), "indexfile")


def test_unindexed_tail_is_scanned(tmp_path):
    """Records appended by a writer without the index geometry are not in index/: the lookup says
    "indexfile+scan" and still finds them."""
    conf = BrokerConfig(mapped_file_size_commitlog=16384, mapped_file_size_consume_queue=400,
                        mapped_file_size_timer_log=4096)
    w = StoreWriter.extend(DEMO, tmp_path / "s", conf)
    late = w.append_message("DemoTopicA", 0, b"x", [(PROPERTY_KEYS, "order-1001 late")], store_timestamp=T0 + 30_000)
    w.close()
    store = Store.open(tmp_path / "s", demo_config())
    source, rows = find_messages(store, MessageQuery(key="order-1001"))
    assert source == "indexfile+scan"
    assert [r.physical_offset for r in rows] == [228, 7462, 10571, late.physical_offset]
    _same_either_way(store, [("key", "DemoTopicA", "order-1001"), ("key", "DemoTopicA", "late")], "indexfile+scan")


def test_no_index_means_scan(tmp_path):
    with StoreWriter(tmp_path / "s", BrokerConfig()) as w:
        w.append_message("T", 0, b"x", [(PROPERTY_KEYS, "k1")], store_timestamp=T0)
    store = Store.open(tmp_path / "s")
    assert select_finder(store, TraceQuery(key="k1"))[1] == "scan"
    source, rows = find_messages(store, MessageQuery(key="k1"))
    assert source == "scan" and [r.physical_offset for r in rows] == [0]
