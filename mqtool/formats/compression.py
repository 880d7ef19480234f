"""Compressed message bodies (spec §2.9): zlib stream, LZ4 frame, zstd frame.

The body CRC covers the compressed bytes, so decompression only happens when asked for.
"""

import zlib

from mqtool.errors import MqtoolError


class DecompressError(MqtoolError, ValueError):
    """A compressed body that its codec rejects."""


def decompress(body: bytes, codec: str) -> bytes:
    """The plain body for a codec name from `SysFlag.compression`."""
    try:
        if codec == "zlib":
            return zlib.decompress(body)
        if codec == "lz4":
            import lz4.frame

            return lz4.frame.decompress(body)
        if codec == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompress(body, max_output_size=1 << 30)
    except Exception as e:  # each codec raises its own type; callers want one
        raise DecompressError(f"{codec} body does not decompress: {e}") from e
    raise DecompressError(f"unknown compression {codec}")


def compress(body: bytes, codec: str) -> bytes:
    """The stored body for a codec (builders and tests)."""
    if codec == "zlib":
        return zlib.compress(body)
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.compress(body)
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(body)
    raise ValueError(f"unknown compression {codec}")
