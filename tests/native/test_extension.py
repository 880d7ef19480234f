"""The compiled extension is built by the package's own build and gives the broker's CRC32 (zlib's values):
by VPCLMULQDQ / PCLMULQDQ folding where the CPU has it (lengths from 256 / 64 bytes), by slicing-by-8 tables
elsewhere; every path is checked here."""

import platform
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool import _native


@pytest.mark.parametrize("data", [b"", b"a", b"123456789", bytes(range(256)) * 37 + b"tail"])
def test_crc32_is_zlibs(data: bytes) -> None:
    assert _native.crc32(data) == zlib.crc32(data)
    assert _native.crc32(data[5:], _native.crc32(data[:5])) == zlib.crc32(data)


def test_crc32_check_value() -> None:
    """CRC-32's published check value, and the broker's mask of it (UtilAll.crc32)."""
    assert _native.crc32(b"123456789") == 0xCBF43926
    assert _native.crc32(b"123456789") & 0x7FFFFFFF == 0x4BF43926


def test_crc32_every_length_and_offset_is_zlibs() -> None:
    """Every length 0..300 from every start 0..15 (the folding paths take 64 and 256 bytes and more; their
    lanes are 16 bytes wide, so starts and lengths cover every alignment and every tail), and the tables."""
    data = bytes((i * 131 + 7) % 251 for i in range(316))
    for start in range(16):
        for n in range(301):
            piece = data[start : start + n]
            want = zlib.crc32(piece)
            assert (_native.crc32(piece), _native.crc32_tables(piece)) == (want, want), (start, n)
            assert _native.crc32(piece, 0xDEADBEEF) == zlib.crc32(piece, 0xDEADBEEF)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=5000), st.integers(0, 63), st.integers(0, 2**32 - 1))
def test_crc32_random_bytes_offsets_and_seeds_are_zlibs(data: bytes, offset: int, seed: int) -> None:
    piece = memoryview(data)[min(offset, len(data)) :]
    want = zlib.crc32(piece, seed)
    assert _native.crc32(piece, seed) == _native.crc32_tables(piece, seed) == want
    cut = len(piece) // 3
    assert _native.crc32(piece[cut:], _native.crc32(piece[:cut], seed)) == want  # continued, as zlib's


def test_crc32_uses_carry_less_multiplication_where_the_cpu_has_it() -> None:
    """256 bytes and more: VPCLMULQDQ (AVX2) where the CPU has it, else PCLMULQDQ, else the tables."""
    flags = set(open("/proc/cpuinfo").read().split()) if sys.platform == "linux" else set()
    x86 = platform.machine() == "x86_64"
    clmul = x86 and {"pclmulqdq", "sse4_1"} <= flags
    expected = "vpclmul" if clmul and {"vpclmulqdq", "avx2"} <= flags else "pclmul" if clmul else "slice8"
    assert _native.CRC32_IMPLEMENTATION == expected
