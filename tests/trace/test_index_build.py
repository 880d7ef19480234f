"""The index build through the column scan (`batch_refs`) against the per-record reference (`record_refs`)."""

import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from trace_stores import CONFIG, T0, build_paths, props  # noqa: E402

from mqtool.builder import broker as b  # noqa: E402
from mqtool.builder.writer import StoreWriter  # noqa: E402
from mqtool.store.store import Store  # noqa: E402
from mqtool.trace.index import INDEX_FILE, TraceIndex, build_index, record_refs  # noqa: E402

SMALL = replace(CONFIG, mapped_file_size_commitlog=4096)


def reference_rows(store: Store) -> list[tuple[str, str, int]]:
    return sorted((k, v, rec.physical_offset) for rec in store.commitlog.iter_records(verify_crc=False)
                  for k, v in record_refs(rec))


def index_rows(directory: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(directory / INDEX_FILE) as c:
        return sorted(c.execute("SELECT kind, value, offset FROM refs"))


def test_every_kind_of_row_as_the_reference(tmp_path):
    store = Store.open(build_paths(tmp_path / "store"), CONFIG)
    stats = build_index(store, tmp_path / "ix")
    rows = index_rows(tmp_path / "ix")
    assert rows == reference_rows(store)
    assert {k for k, _, _ in rows} == {"u", "k", "o", "d", "p", "h"}
    assert stats.rows == len(rows) and stats.records == 27
    last = list(store.commitlog.iter_records(verify_crc=False))[-1]
    with TraceIndex.open(tmp_path / "ix") as ix:
        assert ix.indexed_end == last.end_offset
        assert (ix.get("last_offset"), ix.get("last_crc"), ix.get("last_store_ts")) == (
            str(last.physical_offset), str(last.body_crc), str(last.store_timestamp))


def test_growth_into_a_new_file_is_indexed_incrementally(tmp_path):
    def put(w, n, first):
        for i in range(first, first + n):
            b.put_message(w, "TopicA", 0, b"x" * 100, props(f"k{i} shared", i), store_timestamp=T0 + i)

    with StoreWriter(tmp_path / "a", SMALL) as w:
        put(w, 20, 0)
    build_index(Store.open(tmp_path / "a", SMALL), tmp_path / "ix")
    with StoreWriter.extend(tmp_path / "a", tmp_path / "b", SMALL) as w:
        put(w, 20, 20)
    grown = Store.open(tmp_path / "b", SMALL)
    assert len(grown.commitlog.files) > len(Store.open(tmp_path / "a", SMALL).commitlog.files)
    with TraceIndex.open(tmp_path / "ix") as ix:
        assert ix.status(grown) == "grown"
        stats = ix.update(grown)
        assert (stats.records, stats.rebuilt, stats.total_records) == (20, False, 40)
        assert ix.status(grown) == "current"
    assert index_rows(tmp_path / "ix") == reference_rows(grown)
