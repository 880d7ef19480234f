"""`epochFileCheckpoint`: controller mode's epoch entries (RocketMQ 5.3.1 `EpochFileCache` through
`CheckpointFile`), a text file in the store root.

Layout (`CheckpointFile#write`, lines ended by `System.lineSeparator()`): the number of entries, the CRC
(`UtilAll.crc32`, masked to a non-negative int) of the entry lines with their line ends, then one line per
entry `epoch-startOffset` (`EpochEntrySerializer#toLine`). `MixAll.string2File` keeps the previous content
as `.bak`; `CheckpointFile#read` falls back to it when the file is missing, empty or unreadable. A CRC of 0
is not checked (`NOT_CHECK_CRC_MAGIC_CODE`).
"""

from __future__ import annotations

import zlib

EPOCH_FILE = "epochFileCheckpoint"  # MessageStoreConfig#getStorePathEpochFile
NOT_CHECK_CRC = 0  # CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE


class EpochFileError(ValueError):
    """The file is not what `CheckpointFile#read` accepts (it throws an IOException and tries the .bak)."""


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF


def parse_epoch_file(text: str) -> list[tuple[int, int]]:
    """(epoch, startOffset) per entry; EpochFileError where `CheckpointFile#read` fails."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise EpochFileError("fewer than the two header lines (count, crc)")
    try:
        expected, crc = int(lines[0]), int(lines[1])
    except ValueError as e:
        raise EpochFileError(f"header is not two integers: {e}") from None
    entries = []
    for line in lines[2:]:
        parts = line.split("-")
        if len(parts) == 2:  # EpochEntrySerializer#fromLine: anything else is skipped
            try:
                entries.append((int(parts[0]), int(parts[1])))
            except ValueError as e:
                raise EpochFileError(f"entry {line!r}: {e}") from None
    if len(entries) != expected:
        raise EpochFileError(f"expect {expected} entries, only found {len(entries)} entries")
    body = "".join(line + "\n" for line in lines[2:])
    if crc != NOT_CHECK_CRC and _crc(body) != crc:
        raise EpochFileError(f"entries crc32 not match, file={crc}, truth={_crc(body)}")
    return entries


def build_epoch_file(entries: list[tuple[int, int]]) -> str:
    """`CheckpointFile#write`'s text for (epoch, startOffset) entries (Linux line ends)."""
    body = "".join(f"{epoch}-{start}\n" for epoch, start in entries)
    return f"{len(entries)}\n{_crc(body)}\n{body}"
