"""A decoded CommitLog message, and the fast decoder that the scans use.

`decode_message` reads the same fields as `commitlog.commitlog_record` with `struct` (several times
faster), its fixed-width runs those of that definition (`formats/record_layout.py`, no Construct import);
`tests/formats/test_commitlog_oracle.py` and `test_commitlog_roundtrip.py` prove both give equal values.
"""

import ipaddress
import struct
from dataclasses import dataclass, field
from functools import cached_property

from mqtool.errors import MqtoolError
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.properties import parse_properties
from mqtool.formats.record_layout import (
    AFTER_BORN_HOST,
    AFTER_STORE_HOST,
    BLANK_MAGIC_CODE,
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
    fields_format,
    host_size,
    offset_msg_id,
)
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6, SysFlag


class RecordError(MqtoolError, ValueError):
    """Bytes at a record boundary that are not a record; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class MessageRecord:
    """One CommitLog message. `physical_offset` is where it lies; `physical_offset_field` what it says."""

    physical_offset: int
    total_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset_field: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: str
    file: str = ""
    position: int = 0
    extra: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def magic(self) -> str:
        return "v2" if self.magic_code == MESSAGE_MAGIC_CODE_V2 else "v1"

    @cached_property
    def properties(self) -> dict[str, str]:
        return parse_properties(self.properties_raw)

    @property
    def flags(self) -> SysFlag:
        return SysFlag(self.sys_flag)

    @property
    def transaction(self) -> str:
        return self.flags.transaction

    @property
    def compression(self) -> str | None:
        return self.flags.compression

    @property
    def body_length(self) -> int:
        return len(self.body)

    @cached_property
    def crc_ok(self) -> bool:
        """Body CRC matches; RocketMQ skips the check for an empty body (spec §2.8)."""
        return len(self.body) == 0 or body_crc(self.body) == self.body_crc

    @property
    def computed_size(self) -> int:
        return computed_size(
            self.sys_flag,
            len(self.body),
            len(self.topic.encode("utf-8", "surrogateescape")),
            len(self.properties_raw.encode("utf-8", "surrogateescape")),
            self.magic_code == MESSAGE_MAGIC_CODE_V2,
        )

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(PROPERTY_KEYS, "").split(" ") if k]

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.physical_offset_field)

    @property
    def end_offset(self) -> int:
        return self.physical_offset + self.total_size


# `struct` readers of the record's fixed-width runs (`formats/record_layout.py`: `commitlog_record`'s numbers)
_HEAD = fields_format(HEADER)  # TOTALSIZE .. BORNTIMESTAMP
_STORE_TS = fields_format(AFTER_BORN_HOST)
_TAIL = fields_format(AFTER_STORE_HOST)  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
_TOPIC_LEN = {
    MESSAGE_MAGIC_CODE: fields_format([TOPIC_LENGTH_V1]),
    MESSAGE_MAGIC_CODE_V2: fields_format([TOPIC_LENGTH_V2]),
}
_PROPS_LEN = fields_format([PROPERTIES_LENGTH])
_LEAD = fields_format(HEADER[:2])  # TOTALSIZE, MAGICCODE
_PORT = fields_format([HOST_PORT])
HEAD_FORMAT = _HEAD
HOST_BITS = BORNHOST_V6 | STOREHOST_V6
# BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES .. BODYLENGTH as one unpack, by the SYSFLAG's host bits
# (`sysflag & HOST_BITS`): the runs above joined, for a reader that has checked the record's lengths already (the
# simulator's `MappedBase.read`)
MID_FORMATS = {
    v6: struct.Struct(f">{host_size(v6 & BORNHOST_V6)}s{_STORE_TS.format[1:]}{host_size(v6 & STOREHOST_V6)}s"
                      f"{_TAIL.format[1:]}")
    for v6 in (0, BORNHOST_V6, STOREHOST_V6, HOST_BITS)
}  # fmt: skip


def _host(buf, pos: int, v6: bool) -> tuple[str, int]:
    n = (HOST_SIZE_V6 if v6 else HOST_SIZE_V4) - HOST_PORT_SIZE
    ip = ipaddress.ip_address(bytes(buf[pos : pos + n]))
    port = _PORT.unpack_from(buf, pos + n)[0]
    return (f"[{ip}]:{port}" if v6 else f"{ip}:{port}"), pos + n + HOST_PORT_SIZE


def _need(buf, pos: int, n: int, what: str) -> None:
    if n < 0:
        raise RecordError(f"negative {what} length {n}")
    if pos + n > len(buf):
        raise RecordError(f"{what} runs past the end of the data")


def decode_message(buf, pos: int, base_offset: int = 0) -> MessageRecord:
    """Decode the V1/V2 message at `buf[pos:]`; raises RecordError when it is not one.

    `base_offset` is the global offset of `buf[0]` (a CommitLog file's name).
    BLANK fillers are not messages: callers look at the magic first (`peek_magic`).
    """
    _need(buf, pos, _HEAD.size, "header")
    total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts = _HEAD.unpack_from(buf, pos)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise RecordError(f"bad magic code 0x{magic & 0xFFFFFFFF:08X}")
    p = pos + _HEAD.size
    _need(buf, p, host_size(sysflag & BORNHOST_V6) + _STORE_TS.size + host_size(sysflag & STOREHOST_V6), "header")
    born_host, p = _host(buf, p, bool(sysflag & BORNHOST_V6))
    (store_ts,) = _STORE_TS.unpack_from(buf, p)
    store_host, p = _host(buf, p + _STORE_TS.size, bool(sysflag & STOREHOST_V6))
    _need(buf, p, _TAIL.size, "header")
    reconsume, prepared, body_len = _TAIL.unpack_from(buf, p)
    p += _TAIL.size
    _need(buf, p, body_len, "body")
    body = bytes(buf[p : p + body_len])
    p += body_len
    topic_length = _TOPIC_LEN[magic]
    _need(buf, p, topic_length.size, "topic length")
    (topic_len,) = topic_length.unpack_from(buf, p)
    p += topic_length.size
    _need(buf, p, topic_len, "topic")
    topic = bytes(buf[p : p + topic_len]).decode("utf-8", "surrogateescape")
    p += topic_len
    _need(buf, p, _PROPS_LEN.size, "properties length")
    (props_len,) = _PROPS_LEN.unpack_from(buf, p)
    p += _PROPS_LEN.size
    _need(buf, p, props_len, "properties")
    props = bytes(buf[p : p + props_len]).decode("utf-8", "surrogateescape")
    return MessageRecord(
        physical_offset=base_offset + pos,
        total_size=total,
        magic_code=magic,
        body_crc=crc,
        queue_id=qid,
        flag=flag,
        queue_offset=qoff,
        physical_offset_field=phys,
        sys_flag=sysflag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body=body,
        topic=topic,
        properties_raw=props,
    )


def peek_magic(buf, pos: int) -> tuple[int, int] | None:
    """(TOTALSIZE, MAGICCODE) at pos, or None when fewer than 8 bytes remain."""
    if pos + 8 > len(buf):
        return None
    return _LEAD.unpack_from(buf, pos)


def record_from_container(c, physical_offset: int) -> MessageRecord:
    """The same MessageRecord from a `commitlog_record` parse (the reference path)."""
    m = c.message
    return MessageRecord(
        physical_offset=physical_offset,
        total_size=c.total_size,
        magic_code=c.magic_code,
        body_crc=m.body_crc,
        queue_id=m.queue_id,
        flag=m.flag,
        queue_offset=m.queue_offset,
        physical_offset_field=m.physical_offset,
        sys_flag=m.sys_flag,
        born_timestamp=m.born_timestamp,
        born_host=m.born_host,
        store_timestamp=m.store_timestamp,
        store_host=m.store_host,
        reconsume_times=m.reconsume_times,
        prepared_transaction_offset=m.prepared_transaction_offset,
        body=bytes(m.body),
        topic=m.topic,
        properties_raw=m.properties,
    )


def record_to_container(r: MessageRecord) -> dict:
    """The `commitlog_record` build input for a MessageRecord."""
    return {
        "total_size": r.total_size,
        "magic_code": r.magic_code,
        "message": {
            "body_crc": r.body_crc,
            "queue_id": r.queue_id,
            "flag": r.flag,
            "queue_offset": r.queue_offset,
            "physical_offset": r.physical_offset_field,
            "sys_flag": r.sys_flag,
            "born_timestamp": r.born_timestamp,
            "born_host": r.born_host,
            "store_timestamp": r.store_timestamp,
            "store_host": r.store_host,
            "reconsume_times": r.reconsume_times,
            "prepared_transaction_offset": r.prepared_transaction_offset,
            "body": r.body,
            "topic": r.topic,
            "properties": r.properties_raw,
        },
    }


__all__ = [
    "BLANK_MAGIC_CODE",
    "MessageRecord",
    "RecordError",
    "decode_message",
    "peek_magic",
    "record_from_container",
    "record_to_container",
]
