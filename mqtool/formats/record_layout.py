"""The CommitLog record's fixed-width fields as plain numbers: what the fast readers need, without Construct.

`formats/commitlog.py`'s `commitlog_record` (a Construct Struct) is the definition; the scan, `decode_message`
and `messages` read records through these numbers, so a command that only walks the CommitLog does not import
Construct (~25 ms of every start). `tests/formats/test_record_layout.py` derives each run from the Struct
(`formats/layout.py`) and proves it equal to the one written here, so the two cannot drift apart.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass

from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6


@dataclass(frozen=True)
class Field:
    """One fixed-width field: its name in the Struct, byte offset, width and `struct` code (`>i` ...)."""

    name: str
    offset: int
    size: int
    fmt: str


def size(fs: list[Field]) -> int:
    """Bytes from the first field's start to the last field's end."""
    return fs[-1].offset + fs[-1].size - fs[0].offset if fs else 0


def shift(fs: list[Field], by: int) -> list[Field]:
    """The fields moved `by` bytes (a nested Struct's fields at its place in the outer one)."""
    return [Field(f.name, f.offset + by, f.size, f.fmt) for f in fs]


def fields_format(fs: list[Field], total: int | None = None) -> struct.Struct:
    """The big-endian `struct.Struct` reading the fields in order (gaps, and up to `total` bytes, as pad bytes)."""
    parts, pos = [], fs[0].offset if fs else 0
    for f in fs:
        if f.offset > pos:
            parts.append(f"{f.offset - pos}x")
        parts.append(f.fmt.lstrip("<>=!"))
        pos = f.offset + f.size
    if total is not None and total > pos:
        parts.append(f"{total - pos}x")
    return struct.Struct(">" + "".join(parts))


# ===== §2.2 magic codes (signed Java ints) =====
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, V1: 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, V2: 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, end-of-file filler
BLANK_SIZE = 8  # TOTALSIZE + MAGICCODE of the filler

# ===== the fixed-width runs of `commitlog_record`, split where a field's size depends on the data =====
HEADER = [  # TOTALSIZE .. BORNTIMESTAMP, before the hosts
    Field("total_size", 0, 4, ">l"),
    Field("magic_code", 4, 4, ">l"),
    Field("body_crc", 8, 4, ">l"),
    Field("queue_id", 12, 4, ">l"),
    Field("flag", 16, 4, ">l"),
    Field("queue_offset", 20, 8, ">q"),
    Field("physical_offset", 28, 8, ">q"),
    Field("sys_flag", 36, 4, ">l"),
    Field("born_timestamp", 40, 8, ">q"),
]
AFTER_BORN_HOST = [Field("store_timestamp", 0, 8, ">q")]
AFTER_STORE_HOST = [  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
    Field("reconsume_times", 0, 4, ">l"),
    Field("prepared_transaction_offset", 4, 8, ">q"),
    Field("body_length", 12, 4, ">l"),
]
TOPIC_LENGTH_V1 = Field("topic_length", 0, 1, ">b")  # a signed byte: a 128-255 byte topic fails, as in RocketMQ
TOPIC_LENGTH_V2 = Field("topic_length", 0, 2, ">h")
PROPERTIES_LENGTH = Field("properties_length", 0, 2, ">h")
HOST_SIZE_V4, HOST_SIZE_V6 = 8, 20  # address bytes + port
HOST_PORT = Field("port", 0, 4, ">l")  # after the 4 or 16 address bytes
HOST_PORT_SIZE = HOST_PORT.size

# §2.10: every field but the hosts, body, topic length, topic and properties
FIXED_SIZE = size(HEADER) + size(AFTER_BORN_HOST) + size(AFTER_STORE_HOST) + PROPERTIES_LENGTH.size


def host_size(v6: bool) -> int:
    """Stored bytes of a host: 4 or 16 address bytes plus a 4-byte port."""
    return HOST_SIZE_V6 if v6 else HOST_SIZE_V4


def hosts_size(sys_flag: int) -> int:
    """Stored bytes of the born and the store host a SYSFLAG declares (two IPv4 hosts: 16)."""
    if not sys_flag & (BORNHOST_V6 | STOREHOST_V6):
        return 2 * HOST_SIZE_V4
    return host_size(bool(sys_flag & BORNHOST_V6)) + host_size(bool(sys_flag & STOREHOST_V6))


def computed_size(sys_flag: int, body_len: int, topic_len: int, props_len: int, v2: bool) -> int:
    """`calMsgLength`: the length a record with these parts must declare in TOTALSIZE."""
    return FIXED_SIZE + hosts_size(sys_flag) + body_len + (2 if v2 else 1) + topic_len + props_len


# ===== §2.8 body CRC, §2.4 msgId =====
def body_crc(body: bytes) -> int:
    """`UtilAll.crc32(body)`: zlib CRC-32 masked to a non-negative Java int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def host_bytes(text: str) -> bytes:
    """The stored bytes of an `ip:port` host (used for msgId and builders)."""
    h, _, port = text.rpartition(":")
    return ipaddress.ip_address(h.strip("[]")).packed + int(port).to_bytes(4, "big", signed=True)


def offset_msg_id(store_host: str, physical_offset: int) -> str:
    """`MessageDecoder.createMessageId`: hex of STOREHOST (address + port) and the physical offset."""
    return (host_bytes(store_host) + physical_offset.to_bytes(8, "big", signed=True)).hex().upper()
