"""CommitLog record and BLANK filler (spec §2; `CommitLog.checkMessageAndReturnSize`, `MessageDecoder`).

`commitlog_record` parses and builds one entry at a record boundary: a V1 or V2 message, or the
8-byte BLANK filler written at a file's end. Checks (CRC, computed length, physical offset) are not
Construct `Check`s: the store reports a mismatch as a finding instead of failing the parse.
"""

import zlib

from construct import (
    Bytes,
    Error,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    Pass,
    Rebuild,
    Struct,
    Switch,
    len_,
    this,
)

from mqtool.formats import layout
from mqtool.formats.adapters import host_bytes, ipv4_host, ipv6_host
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.formats.text import JavaUtf8, utf8

# ===== §2.2 magic codes (signed Java ints) =====
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, V1: 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, V2: 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, end-of-file filler
BLANK_SIZE = 8  # TOTALSIZE + MAGICCODE of the filler



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


def _message(topic_length):
    """Fields after MAGICCODE; V1 and V2 differ only in the topic length's width."""
    return Struct(
        "body_crc" / Int32sb,
        "queue_id" / Int32sb,
        "flag" / Int32sb,
        "queue_offset" / Int64sb,
        "physical_offset" / Int64sb,
        "sys_flag" / Int32sb,
        "born_timestamp" / Int64sb,
        "born_host" / IfThenElse(this.sys_flag & BORNHOST_V6, ipv6_host, ipv4_host),
        "store_timestamp" / Int64sb,
        "store_host" / IfThenElse(this.sys_flag & STOREHOST_V6, ipv6_host, ipv4_host),
        "reconsume_times" / Int32sb,
        "prepared_transaction_offset" / Int64sb,
        "body_length" / Rebuild(Int32sb, len_(this.body)),
        "body" / Bytes(this.body_length),
        # V1 reads the length as a signed byte: a 128-255 byte topic fails there, as in RocketMQ.
        "topic_length" / Rebuild(topic_length, lambda ctx: len(utf8(ctx.topic))),
        "topic" / JavaUtf8(Bytes(this.topic_length)),
        "properties_length" / Rebuild(Int16sb, lambda ctx: len(utf8(ctx.properties))),
        "properties" / JavaUtf8(Bytes(this.properties_length)),
    )


message_v1 = _message(Int8sb)
message_v2 = _message(Int16sb)


def _total_size(ctx) -> int:
    """TOTALSIZE on build: the filler keeps the size given; a message declares its computed length."""
    if ctx.magic_code == BLANK_MAGIC_CODE:
        return ctx.total_size
    m = ctx.message
    return computed_size(m["sys_flag"], len(m["body"]), len(utf8(m["topic"])), len(utf8(m["properties"])),
                         ctx.magic_code == MESSAGE_MAGIC_CODE_V2)


commitlog_record = Struct(
    "total_size" / Rebuild(Int32sb, _total_size),
    "magic_code" / Int32sb,
    "message" / Switch(
        this.magic_code,
        {MESSAGE_MAGIC_CODE: message_v1, MESSAGE_MAGIC_CODE_V2: message_v2, BLANK_MAGIC_CODE: Pass},
        default=Error,
    ),
)


# ===== fixed-width runs for the fast readers (`decode_message`, the compiled scan kernel), derived above =====
def _runs() -> tuple[list[list[layout.Field]], layout.Field]:
    """The fixed runs of a V1 message and V2's topic length: the versions differ only there."""
    v1, v2 = layout.runs(message_v1), layout.runs(message_v2)
    assert v1[:3] + v1[4:] == v2[:3] + v2[4:] and v1[3][0].name == v2[3][0].name == "topic_length"
    return v1, v2[3][0]


_RUNS, TOPIC_LENGTH_V2 = _runs()
_LEAD = layout.prefix(commitlog_record)  # TOTALSIZE, MAGICCODE
HEADER = _LEAD + layout.shift(_RUNS[0], layout.size(_LEAD))  # TOTALSIZE .. BORNTIMESTAMP, before the hosts
AFTER_BORN_HOST = _RUNS[1]  # STORETIMESTAMP
AFTER_STORE_HOST = _RUNS[2]  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
TOPIC_LENGTH_V1 = _RUNS[3][0]
PROPERTIES_LENGTH = _RUNS[4][0]
HOST_SIZE_V4, HOST_SIZE_V6 = ipv4_host.sizeof(), ipv6_host.sizeof()
HOST_PORT = layout.runs(ipv4_host.subcon)[-1][0]  # after the 4 or 16 address bytes
HOST_PORT_SIZE = HOST_PORT.size

# §2.10: every field but the hosts, body, topic length, topic and properties
FIXED_SIZE = layout.size(HEADER) + layout.size(AFTER_BORN_HOST) + layout.size(AFTER_STORE_HOST) + PROPERTIES_LENGTH.size


# ===== §2.8 body CRC, §2.4 msgId =====
def body_crc(body: bytes) -> int:
    """`UtilAll.crc32(body)`: zlib CRC-32 masked to a non-negative Java int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def offset_msg_id(store_host: str, physical_offset: int) -> str:
    """`MessageDecoder.createMessageId`: hex of STOREHOST (address + port) and the physical offset."""
    return (host_bytes(store_host) + physical_offset.to_bytes(8, "big", signed=True)).hex().upper()


def magic_for_topic(topic: str) -> int:
    """The magic a 5.x broker writes: V2 when the topic has more than 127 characters (spec §2.2)."""
    return MESSAGE_MAGIC_CODE_V2 if len(topic) > 127 else MESSAGE_MAGIC_CODE
