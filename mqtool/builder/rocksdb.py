"""Write RocksDB consume queues and config databases as a 5.2+ broker lays them out (spec §14).

There is no store written by a real RocksDB-mode broker here: these writers put keys and values built by
the `formats/rocksdb_cq.py` and `formats/rocksdb_config.py` definitions (from the Java source) through
rocksdict, with the column families the Java code names and its compression (LZ4, ZSTD at the bottom
level for the CQ family; none for the offset and config families). Only for new directories.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from mqtool.formats.rocksdb_config import (
    FORBIDDEN_COLUMN_FAMILY,
    KV_DATA_VERSION_COLUMN_FAMILY,
    KV_DATA_VERSION_KEY,
)
from mqtool.formats.rocksdb_cq import (
    MAX,
    MIN,
    OFFSET_COLUMN_FAMILY,
    build_checkpoint_key,
    build_cq_key,
    build_offset_key,
    checkpoint_value,
    cq_value,
    offset_value,
)

ROCKSDICT_CONFIG = "rocksdict-config.json"  # what rocksdict writes into every directory it opens
CqRow = tuple[int, int, int, int]  # (commitlog offset, size, tags code, store time)


def _options(compressed: bool):
    from rocksdict import DBCompressionType, Options

    o = Options(raw_mode=True)
    o.create_if_missing(True)
    o.create_missing_column_families(True)
    if compressed:
        o.set_compression_type(DBCompressionType.lz4())
        o.set_bottommost_compression_type(DBCompressionType.zstd())
    else:
        o.set_compression_type(DBCompressionType.none())
    return o


def _new(path: Path, families: Iterable[str], compressed_default: bool):
    from rocksdict import Rdict

    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"{path} is not empty: the builder never writes into an existing store")
    path.mkdir(parents=True, exist_ok=True)
    db = Rdict(str(path), _options(compressed_default))
    return db, {n: db.create_column_family(n, _options(False)) for n in families}


def _close(db, path: Path) -> None:
    """Close, and drop the file rocksdict adds (a broker's database has none)."""
    db.close()
    (path / ROCKSDICT_CONFIG).unlink(missing_ok=True)


def write_rocksdb_consume_queues(root: Path, queues: Mapping[tuple[str, int], tuple[int, list[CqRow]]],
                                 max_phy_offset: int | None = None) -> Path:
    """`STORE/consumequeue/` as `RocksDBConsumeQueueStore` leaves it: per (topic, queue id) its first queue
    offset and rows; the offset family gets each queue's max and min entry and the CHECKPOINT entry."""
    path = root / "consumequeue"
    db, cfs = _new(path, [OFFSET_COLUMN_FAMILY], True)
    offsets = cfs[OFFSET_COLUMN_FAMILY]
    try:
        for (topic, qid), (first, rows) in queues.items():
            for i, (phy, size, tags, store_time) in enumerate(rows):
                db[build_cq_key(topic, qid, first + i)] = cq_value.build(
                    {"phy_offset": phy, "size": size, "tags_code": tags, "store_time": store_time})
            if rows:
                offsets[build_offset_key(topic, qid, MAX)] = offset_value.build(
                    {"phy_offset": rows[-1][0], "cq_offset": first + len(rows) - 1})
                offsets[build_offset_key(topic, qid, MIN)] = offset_value.build(
                    {"phy_offset": rows[0][0], "cq_offset": first})
        if max_phy_offset is not None:
            offsets[build_checkpoint_key()] = checkpoint_value.build({"max_phy_offset": max_phy_offset})
        db.flush()
        offsets.flush()
    finally:
        _close(db, path)
    return path


def write_kv_config(path: Path, entries: Mapping[str, bytes], data_version: bytes | None = None,
                    forbidden: Mapping[str, bytes] | None = None) -> Path:
    """One config database (`ConfigRocksDBStorage`): entries in `default`, the data version JSON under
    `kvDataVersionKey` in `kvDataVersion`, forbidden entries in `forbidden`."""
    db, cfs = _new(path, [KV_DATA_VERSION_COLUMN_FAMILY, FORBIDDEN_COLUMN_FAMILY], False)
    try:
        for k, v in entries.items():
            db[k.encode()] = v
        if data_version is not None:
            cfs[KV_DATA_VERSION_COLUMN_FAMILY][KV_DATA_VERSION_KEY] = data_version
        for k, v in (forbidden or {}).items():
            cfs[FORBIDDEN_COLUMN_FAMILY][k.encode()] = v
        db.flush()
        for cf in cfs.values():
            cf.flush()
    finally:
        _close(db, path)
    return path


def rocksdb_copy_of(src: Path, dest: Path) -> Path:
    """A copy of the file-queue store `src` at `dest` (new) in RocksDB consume queue mode: every file and
    directory but `consumequeue/`, whose units (from each queue's first unit still in the CommitLog, with
    the record's store time) become a RocksDB consume queue, CHECKPOINT = the CommitLog's max offset."""
    import shutil

    from mqtool.store.store import Store

    s = Store.open(src)
    queues = {}
    for cq in s.consume_queues():
        first = cq.min_offset(0)
        queues[(cq.topic, cq.queue_id)] = (first, [
            (u.commitlog_offset, u.size, u.tags_code, s.commitlog.read(u.commitlog_offset).store_timestamp)
            for u in cq.iter_units(first)])
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("consumequeue"))
    write_rocksdb_consume_queues(dest, queues, max_phy_offset=s.commitlog.max_offset())
    return dest
