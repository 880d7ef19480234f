"""The batch reader (`batchread`) on real stores: `propscan`'s kernel equals its reference row for row on the oracle
stores and a torn one, and the entry points (`read_plain`, with `sources` or not, `scan_plain`) answer what the
per-message light read answers, whether a span is read (`pread`) or mapped (a sparse one)."""

import bisect
from pathlib import Path

from conftest import sibling
from mqtool.builder.broker import put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.properties import parse_properties
from mqtool.simulate import batchread
from mqtool.simulate.diskread import MappedBase
from mqtool.store import propscan, recordfiles
from mqtool.store.store import Store

WANTED = ("UNIQ_KEY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS")

_kernel = sibling(str(Path(__file__).parents[1] / "store" / "test_propscan.py"), "test_propscan")
_both, _templates_of = _kernel._both, _kernel._templates_of


def batch_records(base: MappedBase, phys: list[int], sizes: list[int]) -> list[tuple | None]:
    """(properties map, BODYLENGTH, SYSFLAG) of each record the batch reader takes, None where it leaves the
    record to the per-message read: what `MappedBase.read(phys, False, True)` answers."""
    scanned = batchread.scan_plain(base, phys, sizes, ())
    if scanned is None:
        return [None] * len(phys)
    buf, out, _answers = scanned
    try:
        rows = out.tolist()
        return [
            None
            if row[propscan.STATUS] < 0
            else (
                parse_properties(
                    buf[row[propscan.PROPS_START] : row[propscan.PROPS_END]].decode("utf-8", "surrogateescape")
                ),
                row[propscan.BODY_LENGTH],
                row[propscan.SYSFLAG],
            )
            for row in rows
        ]
    finally:
        batchread.close(buf)


# ----- the oracle stores and the torn one -----
def _file_bytes(store: Store) -> list[tuple[int, bytes]]:
    return [(f.start, f.path.read_bytes()) for f in store.commitlog.queue.files]


def _kernel_on_store(store: Store) -> int:
    """Kernel == reference over every queue's records (and a byte beside each), file by file; the rows the
    checks pass equal the light read. Returns the records matched by a template."""
    fast = MappedBase(store, cache_messages=4)
    files = _file_bytes(store)
    starts = [s for s, _b in files]
    matched = 0
    try:
        for topic, qid in store.queue_ids:
            units = [u for _o, u in fast.cq_units(topic, qid, fast.cq_min(topic, qid), fast.cq_max(topic, qid))]
            for shift in (0, 1, -1):
                by_file: dict[int, list[int]] = {}
                for u in units:
                    i = bisect.bisect_right(starts, u[0] + shift) - 1
                    if i >= 0:
                        by_file.setdefault(i, []).append(u[0] + shift)
                for i, phys in by_file.items():
                    start, data = files[i]
                    strings = [
                        fast.read(p, True).props_raw.encode("utf-8", "surrogateescape")
                        for p in phys
                        if fast.read(p, True) is not None
                    ]
                    out = _both(data, [p - start for p in phys], 0, len(data), len(data), _templates_of(strings))
                    for p, row in zip(phys, out.tolist(), strict=True):
                        light = fast.read(p, False, True)
                        assert (row[propscan.STATUS] >= 0) == (light is not None), (topic, qid, p)
                        if light is not None:
                            raw = data[row[propscan.PROPS_START] : row[propscan.PROPS_END]]
                            assert parse_properties(raw.decode("utf-8", "surrogateescape")) == light[0]
                            assert [row[propscan.BODY_LENGTH], row[propscan.SYSFLAG]] == list(light[1:])
                            assert row[propscan.QUEUE_ID] == qid
                            assert data[row[propscan.TOPIC_START] : row[propscan.TOPIC_END]] == topic.encode()
                            matched += row[propscan.STATUS] == 1
    finally:
        fast.close()
    return matched


def test_kernel_equals_reference_on_oracle_stores(oracle_sim_store):
    name, store = oracle_sim_store
    matched = _kernel_on_store(store)
    assert matched > 0, name


def test_kernel_equals_reference_on_a_torn_store(torn_store):
    assert _kernel_on_store(torn_store) > 0


# ----- the entry points against the light read -----
def _entry_points_same(store: Store) -> tuple[int, int]:
    """`batch_records` and `read_plain` (with `sources` or not) answer what the light read answers for every queue's
    units (and a byte beside them). Returns (records the batch answered, records of queues in one file)."""
    fast = MappedBase(store, cache_messages=4)
    n = want = 0
    try:
        for topic, qid in store.queue_ids:
            units = [u for _o, u in fast.cq_units(topic, qid, fast.cq_min(topic, qid), fast.cq_max(topic, qid))]
            files = {bisect.bisect_right(fast.files.starts, u[0]) for u in units}
            for shift in (0, 1, -1):
                phys, sizes = [u[0] + shift for u in units], [u[1] for u in units]
                plain = batchread.read_plain(fast, phys, sizes, WANTED)
                sources = batchread.read_plain(fast, phys, sizes, WANTED, sources=True)
                for got, pl, src, p in zip(batch_records(fast, phys, sizes), plain, sources, phys, strict=True):
                    light = fast.read(p, False, True)
                    assert (light is not None) == (shift == 0), (topic, qid, p)
                    want += shift == 0 and len(files) == 1
                    values = light and tuple(
                        None if w not in light[0] else light[0][w].encode("utf-8", "surrogateescape") for w in WANTED
                    )
                    # `read_plain` reads a queue over several files by runs, and matches the record that makes a
                    # template (`read_plain` gives its map)
                    assert src is None or light is not None and src[:2] == (topic.encode(), qid) and src[3] == values
                    if got is None:
                        assert pl is None
                        continue
                    assert got == light, (topic, qid, p)
                    n += 1
                    assert pl == light or pl[1] == values
                    assert src is None or src[2:] == pl or pl == light
    finally:
        fast.close()
    return n, want


def test_entry_points_on_oracle_stores(oracle_sim_store):
    name, store = oracle_sim_store
    n, want = _entry_points_same(store)
    assert n == want and (want == 19 if name == "basic-5.3.1" else want > 0)  # basic: 19 of its 115 queued


def test_entry_points_on_a_torn_store(torn_store):
    n, want = _entry_points_same(torn_store)
    assert n == want == 6


def test_a_sparse_span_is_mapped(tmp_path):
    """Records far apart (one in eight of a queue, ~4.5 KB apart): `MAP_FROM` of them are mapped, fewer are
    read; the answers are the same."""
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(tmp_path / "s", config) as w:
        for i in range(8 * recordfiles.MAP_FROM + 8):
            put_message(
                w,
                "Sparse" if i % 8 == 0 else "Filler",
                0,
                b"f" * 500,
                [("UNIQ_KEY", f"U{i}")],
                store_timestamp=1000 + i,
            )
        w.write_checkpoint()
    store = Store.open(tmp_path / "s", config)
    fast = MappedBase(store)
    units = [u for _o, u in fast.cq_units("Sparse", 0, 0, recordfiles.MAP_FROM + 1)]
    phys, sizes = [u[0] for u in units], [u[1] for u in units]
    assert (phys[-1] - phys[0]) > recordfiles.SPARSE * len(phys)
    scanned = batchread.scan_plain(fast, phys, sizes, ("UNIQ_KEY",))
    assert type(scanned[0]).__name__ == "mmap"
    batchread.close(scanned[0])
    mapped = batchread.read_plain(fast, phys, sizes, ("UNIQ_KEY",))
    few = batchread.read_plain(fast, phys[:8], sizes[:8], ("UNIQ_KEY",))
    values = [r[1] if len(r) == 2 else r[0]["UNIQ_KEY"].encode() for r in mapped]  # the first may make the template
    assert values == [f"U{i}".encode() for i in range(0, 8 * len(phys), 8)]
    assert few[1:] == mapped[1:8]
    fast.close()
