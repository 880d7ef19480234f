"""`batchread`: the gathers of header fields from the bytes of many records (the signed big-endian
integers `struct` reads, at any position, clipped into the bytes: the caller masks the rest), and
`read_records`/`read_props` answering what the per-message read answers whether a span is read
(`pread`) or mapped (a sparse one)."""

import bisect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate import batchread
from mqtool.simulate.batchread import read_props, read_records
from mqtool.simulate.diskread import MappedBase
from mqtool.store.store import Store


@settings(max_examples=80, deadline=None)
@given(st.binary(min_size=4, max_size=64), st.lists(st.integers(-8, 80), min_size=1, max_size=20),
       st.sampled_from([1, 2, 4]))
def test_be_reads_signed_big_endian_integers(data, at, n):
    got = batchread._be(np.frombuffer(data, np.uint8), np.asarray(at, np.int64), n).tolist()
    want = [int.from_bytes(data[p:p + n], "big", signed=True) for p in (min(max(q, 0), len(data) - n) for q in at)]
    assert got == want


def test_be_known_values():
    data = bytes([0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x80, 0x7F])
    a = np.frombuffer(data, np.uint8)
    assert batchread._be(a, np.asarray([0, 3, 5]), 4).tolist() == [-2, -33521537, -33521537]  # 5 is clipped to 3
    assert batchread._be(a, np.asarray([4, 5]), 2).tolist() == [128, -32641]
    assert batchread._be(a, np.asarray([5, 6, -1]), 1).tolist() == [-128, 127, -1]


def _records_same(store: Store) -> tuple[int, int]:
    """`read_records` and `read_props` answer what the per-message light read answers, for every
    queue's units (and a byte next to them), whether the span is read or mapped. Returns (records the
    batch answered, records it must answer): a batch answers every record of a queue that lies in one
    CommitLog file and leaves every record of a queue spread over more files to the per-message read
    (`_scan`); a byte off, nothing is a record."""
    fast = MappedBase(store, cache_messages=4)
    n = want = 0
    try:
        for topic, qid in store.queue_ids:
            units = [u for _o, u in fast.cq_units(topic, qid, fast.cq_min(topic, qid), fast.cq_max(topic, qid))]
            files = {bisect.bisect_right(fast._starts, u[0]) for u in units}
            for shift in (0, 1, -1):
                phys = [u[0] + shift for u in units]
                sizes = [u[1] for u in units]
                for got, props, p in zip(read_records(fast, phys, sizes), read_props(fast, phys, sizes), phys,
                                         strict=True):
                    assert (got is None) == (props is None), (topic, qid, p)
                    light = fast._read(p, False, True)
                    assert (light is not None) == (shift == 0), (topic, qid, p)
                    want += shift == 0 and len(files) == 1
                    if got is not None:
                        assert got == light and props == got[0], (topic, qid, p)
                        n += 1
    finally:
        fast.close()
    return n, want


@pytest.mark.parametrize("sparse", [0, 1 << 40])
def test_read_records_on_oracle_stores(oracle_sim_store, sparse, monkeypatch):
    monkeypatch.setattr(batchread, "SPARSE", sparse)  # 0: every span mapped; 1 << 40: every span read
    name, store = oracle_sim_store
    n, want = _records_same(store)
    assert n == want and (want == 19 if name == "basic-5.3.1" else want > 0)  # basic: 19 of its 115 queued


@pytest.mark.parametrize("sparse", [0, 1 << 40])
def test_read_records_on_a_torn_store(torn_store, sparse, monkeypatch):
    monkeypatch.setattr(batchread, "SPARSE", sparse)
    n, want = _records_same(torn_store)
    assert n == want == 6


def test_a_sparse_span_is_mapped_and_closed(tmp_path, monkeypatch):
    """Records far apart (one in eight of a queue, ~4.5 KB apart): the span is mapped, the answers
    are those of a read span, and the mapping is closed once the properties are decoded."""
    from mqtool.builder.broker import put_message
    from mqtool.builder.writer import StoreWriter

    config = BrokerConfig.for_version("5.3")
    with StoreWriter(tmp_path / "s", config) as w:
        for i in range(400):
            put_message(w, "Sparse" if i % 8 == 0 else "Filler", 0, b"f" * 500, [("UNIQ_KEY", f"U{i}")],
                        store_timestamp=1000 + i)
        w.write_checkpoint()
    store = Store.open(tmp_path / "s", config)
    fast = MappedBase(store)
    units = [u for _o, u in fast.cq_units("Sparse", 0, 0, 100)]
    phys, sizes = [u[0] for u in units], [u[1] for u in units]
    assert (phys[-1] - phys[0]) > batchread.SPARSE * len(phys) * 0.9
    monkeypatch.setattr(batchread, "SPARSE", 1024)
    closed = []
    real_close = batchread._close
    monkeypatch.setattr(batchread, "_close", lambda buf: (closed.append(type(buf).__name__), real_close(buf)))
    mapped = read_records(fast, phys, sizes)
    assert closed == ["mmap"]
    assert [r[0]["UNIQ_KEY"] for r in mapped] == [f"U{i}" for i in range(0, 400, 8)]
    monkeypatch.setattr(batchread, "SPARSE", 1 << 40)
    assert read_records(fast, phys, sizes) == mapped and closed == ["mmap", "bytes"]
    fast.close()
