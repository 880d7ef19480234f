"""store/compare.py on generated files: regions, unaligned edges, short and missing files."""

from pathlib import Path

import numpy as np

from mqtool.store import compare
from mqtool.store.compare import compare_queues
from mqtool.store.mapped_files import open_queue

SIZE = 1 << 16


def _queue(root: Path, files: dict[int, bytes]):
    d = root / "commitlog"
    d.mkdir(parents=True)
    for start, data in files.items():
        (d / f"{start:020d}").write_bytes(data)
    return open_queue(d, SIZE, "commitlog", root)


def _data(seed: int, n: int = SIZE) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_equal_and_unaligned_ranges(tmp_path: Path):
    a = {0: _data(1), SIZE: _data(2)}
    qa, qb = _queue(tmp_path / "a", a), _queue(tmp_path / "b", a)
    for lo, hi in ((0, 2 * SIZE), (3, 2 * SIZE - 5), (SIZE - 7, SIZE + 9), (5, 6), (9, 9)):
        d = compare_queues(qa, qb, lo, hi)
        assert (d.first, d.differing_bytes, d.compared_bytes) == (None, 0, max(0, hi - lo))


def test_regions_are_merged_within_the_gap(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(compare, "BLOCK", 4096)  # differences spread over several blocks
    base = bytearray(_data(3))
    other = bytearray(base)
    for p in (10, 11, 40, 5000, 5001 + compare.REGION_GAP + 1, 4095, 4096):
        other[p] ^= 0xFF
    qa, qb = _queue(tmp_path / "a", {0: bytes(base)}), _queue(tmp_path / "b", {0: bytes(other)})
    d = compare_queues(qa, qb, 0, SIZE)
    assert d.differing_bytes == 7
    assert d.regions == [
        [10, 41],
        [4095, 4097],
        [5000, 5001],
        [5001 + compare.REGION_GAP + 1, 5001 + compare.REGION_GAP + 2],
    ]
    assert compare_queues(qa, qb, 12, 40).regions == []  # the range between two differences
    assert compare_queues(qa, qb, 12, 41).regions == [[40, 41]]


def test_a_missing_or_short_file_differs(tmp_path: Path):
    a = {0: _data(4), SIZE: _data(5), 2 * SIZE: _data(6)}
    b = {0: a[0], 2 * SIZE: a[2 * SIZE][:100]}  # the middle file is missing, the last is short
    qa, qb = _queue(tmp_path / "a", a), _queue(tmp_path / "b", b)
    d = compare_queues(qa, qb, 0, 3 * SIZE)
    assert d.regions == [[SIZE, 2 * SIZE], [2 * SIZE + 100, 3 * SIZE]]
    assert d.differing_bytes == 2 * SIZE - 100


def test_region_list_is_capped(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(compare, "MAX_REGIONS", 3)
    base = bytearray(_data(7))
    other = bytearray(base)
    for p in range(0, SIZE, 1000):
        other[p] ^= 1
    d = compare_queues(_queue(tmp_path / "a", {0: bytes(base)}), _queue(tmp_path / "b", {0: bytes(other)}), 0, SIZE)
    assert len(d.regions) == 3 and d.more_regions and d.differing_bytes == len(range(0, SIZE, 1000))
