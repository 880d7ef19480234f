"""`batchread`'s gathers of header fields from the bytes of many records: the signed big-endian
integers `struct` reads, at any position (clipped into the bytes; the caller masks the rest)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.simulate import batchread


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
