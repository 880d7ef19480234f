"""CommitLog record and BLANK filler (spec §2; `CommitLog.checkMessageAndReturnSize`, `MessageDecoder`).

`commitlog_record` parses and builds one entry at a record boundary: a V1 or V2 message, or the
8-byte BLANK filler written at a file's end. Checks (CRC, computed length, physical offset) are not
Construct `Check`s: the store reports a mismatch as a finding instead of failing the parse.
"""

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
from mqtool.formats.adapters import ipv4_host, ipv6_host
from mqtool.formats.record_layout import (  # the numbers the fast readers use: generated from the Struct below
    AFTER_BORN_HOST,
    AFTER_STORE_HOST,
    BLANK_MAGIC_CODE,
    BLANK_SIZE,
    FIXED_SIZE,
    HEADER,
    HOST_PORT,
    HOST_PORT_SIZE,
    HOST_SIZE_V4,
    HOST_SIZE_V6,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTIES_LENGTH,
    TOPIC_LENGTH_V1,
    TOPIC_LENGTH_V2,
    body_crc,
    computed_size,
    host_size,
    hosts_size,
    offset_msg_id,
)
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.formats.text import JavaUtf8, utf8


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
    return computed_size(
        m["sys_flag"],
        len(m["body"]),
        len(utf8(m["topic"])),
        len(utf8(m["properties"])),
        ctx.magic_code == MESSAGE_MAGIC_CODE_V2,
    )


commitlog_record = Struct(
    "total_size" / Rebuild(Int32sb, _total_size),
    "magic_code" / Int32sb,
    "message"
    / Switch(
        this.magic_code,
        {MESSAGE_MAGIC_CODE: message_v1, MESSAGE_MAGIC_CODE_V2: message_v2, BLANK_MAGIC_CODE: Pass},
        default=Error,
    ),
)


def fast_reader_runs() -> dict:
    """The fixed-width runs the fast readers need, read off `commitlog_record` (a V1 message; V2 differs only in the
    topic length's width): what `scripts/make_record_layout.py` writes into `record_layout.py`'s generated block, so
    the scan and `messages` read them without importing Construct."""
    v1, v2 = layout.runs(message_v1), layout.runs(message_v2)
    assert v1[:3] + v1[4:] == v2[:3] + v2[4:] and v1[3][0].name == v2[3][0].name == "topic_length"
    lead = layout.prefix(commitlog_record)  # TOTALSIZE, MAGICCODE
    header = lead + layout.shift(v1[0], layout.size(lead))
    return {
        "HEADER": header,  # TOTALSIZE .. BORNTIMESTAMP, before the hosts
        "AFTER_BORN_HOST": v1[1],  # STORETIMESTAMP
        "AFTER_STORE_HOST": v1[2],  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
        "TOPIC_LENGTH_V1": v1[3][0],
        "TOPIC_LENGTH_V2": v2[3][0],
        "PROPERTIES_LENGTH": v1[4][0],
        "HOST_SIZE_V4": ipv4_host.sizeof(),
        "HOST_SIZE_V6": ipv6_host.sizeof(),
        "HOST_PORT": layout.runs(ipv4_host.subcon)[-1][0],  # after the 4 or 16 address bytes
        # §2.10: every field but the hosts, body, topic length, topic and properties
        "FIXED_SIZE": layout.size(header) + layout.size(v1[1]) + layout.size(v1[2]) + v1[4][0].size,
    }


def magic_for_topic(topic: str) -> int:
    """The magic a 5.x broker writes: V2 when the topic has more than 127 characters (spec §2.2)."""
    return MESSAGE_MAGIC_CODE_V2 if len(topic) > 127 else MESSAGE_MAGIC_CODE


# the record_layout names this module has always offered (the Construct-free readers import them from there)
__all__ = [
    "AFTER_BORN_HOST",
    "AFTER_STORE_HOST",
    "BLANK_MAGIC_CODE",
    "BLANK_SIZE",
    "FIXED_SIZE",
    "HEADER",
    "HOST_PORT",
    "HOST_PORT_SIZE",
    "HOST_SIZE_V4",
    "HOST_SIZE_V6",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "PROPERTIES_LENGTH",
    "TOPIC_LENGTH_V1",
    "TOPIC_LENGTH_V2",
    "body_crc",
    "computed_size",
    "host_size",
    "hosts_size",
    "offset_msg_id",
    "commitlog_record",
    "fast_reader_runs",
    "magic_for_topic",
    "message_v1",
    "message_v2",
]
