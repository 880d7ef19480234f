"""The compiled extension is built by the package's own build and gives the broker's CRC32."""

import zlib

import pytest

from mqtool import _native


@pytest.mark.parametrize("data", [b"", b"a", b"123456789", bytes(range(256)) * 37 + b"tail"])
def test_crc32_is_zlibs(data: bytes) -> None:
    assert _native.crc32(data) == zlib.crc32(data)
    assert _native.crc32(data[5:], _native.crc32(data[:5])) == zlib.crc32(data)


def test_crc32_check_value() -> None:
    """CRC-32's published check value, and the broker's mask of it (UtilAll.crc32)."""
    assert _native.crc32(b"123456789") == 0xCBF43926
    assert _native.crc32(b"123456789") & 0x7FFFFFFF == 0x4BF43926
