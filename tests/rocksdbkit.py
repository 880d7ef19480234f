"""RocksDB consume queues damaged at random (the fuzz tests of the store readers and of the audit)."""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import strategies as st

from mqtool.builder.rocksdb import write_rocksdb_consume_queues
from mqtool.formats.rocksdb_cq import build_checkpoint_key, build_cq_key, build_offset_key

QUEUES = {("T", 0): (0, [(0, 100, 1, 10), (100, 100, 2, 11), (200, 100, 3, 12)]), ("U", 3): (5, [(300, 90, 0, 13)])}
MAX_PHY_OFFSET = 390  # the end of QUEUES' last unit
EDIT = st.tuples(st.integers(0, 80), st.binary(max_size=12))  # (cut, tail) of a key


def damage(data: bytes, cut: int, tail: bytes) -> bytes:
    return data[: cut % (len(data) + 1)] + tail


@contextmanager
def scratch_store() -> Iterator[Path]:
    """A store directory to write, removed afterwards (hypothesis runs many examples in one test:
    pytest's tmp_path would be shared between them)."""
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-fuzz-"))
    try:
        yield tmp / "store"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_damaged_cq(root: Path, cq: list, offsets: list, checkpoint: bytes | None = None) -> None:
    """QUEUES as a RocksDB consume queue under `root`, then the entries `cq` (((topic, qid), queue offset,
    (cut, tail), value)) and `offsets` ((kind, (cut, tail), value)) put under their keys cut and
    extended by `damage`, and the CHECKPOINT entry replaced by `checkpoint` when it is given."""
    from rocksdict import Options, Rdict

    write_rocksdb_consume_queues(root, QUEUES, max_phy_offset=MAX_PHY_OFFSET)
    db = Rdict(str(root / "consumequeue"), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)})
    for (topic, qid), qoff, (cut, tail), value in cq:
        db[damage(build_cq_key(topic, qid, qoff), cut, tail) or b"\x00"] = value
    cf = db.get_column_family("offset")
    for kind, (cut, tail), value in offsets:
        cf[damage(build_offset_key("T", 0, kind), cut, tail) or b"\x00"] = value
    if checkpoint is not None:
        cf[build_checkpoint_key()] = checkpoint
    db.close()
