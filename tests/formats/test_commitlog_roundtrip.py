"""Generated records survive build -> parse, through both decoders (V1/V2, IPv4/IPv6, empty bodies)."""

import struct

import pytest
from construct import ConstructError
from hypothesis import given, settings
from hypothesis import strategies as st
from recordkit import draw_flags_and_topic, ipv4, ipv6

from mqtool.formats.commitlog import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    body_crc,
    commitlog_record,
    offset_msg_id,
)
from mqtool.formats.compression import compress, decompress
from mqtool.formats.message import RecordError, decode_message, record_from_container
from mqtool.formats.properties import build_properties
from mqtool.formats.sysflag import SysFlag

port = st.integers(0, 65535)
text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1,
               max_size=20)


@st.composite
def records(draw):
    born_v6, store_v6, sys_flag, v2, topic = draw_flags_and_topic(draw, 1, 200, 40)
    body = draw(st.binary(max_size=300))
    props = build_properties(draw(st.lists(st.tuples(text, text), max_size=6)))
    host = lambda v6: f"{draw(ipv6 if v6 else ipv4)}:{draw(port)}"  # noqa: E731
    return {
        "total_size": 0, "magic_code": MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE,
        "message": {
            "body_crc": body_crc(body), "queue_id": draw(st.integers(0, 1023)), "flag": draw(st.integers(-5, 5)),
            "queue_offset": draw(st.integers(0, 2**40)), "physical_offset": draw(st.integers(0, 2**40)),
            "sys_flag": sys_flag, "born_timestamp": draw(st.integers(0, 2**45)), "born_host": host(born_v6),
            "store_timestamp": draw(st.integers(0, 2**45)), "store_host": host(store_v6),
            "reconsume_times": draw(st.integers(0, 16)), "prepared_transaction_offset": draw(st.integers(0, 2**40)),
            "body": body, "topic": topic, "properties": props,
        },
    }


@settings(max_examples=200)
@given(records())
def test_build_parse_round_trip(rec):
    data = commitlog_record.build(rec)
    c = commitlog_record.parse(data)
    assert c.total_size == len(data)
    assert commitlog_record.build(c) == data
    fast = decode_message(data, 0, 4096)
    assert fast == record_from_container(c, 4096)
    assert fast.computed_size == fast.total_size == len(data)
    assert fast.crc_ok
    assert fast.topic == rec["message"]["topic"]
    assert fast.properties_raw == rec["message"]["properties"]
    assert fast.magic == ("v2" if rec["magic_code"] == MESSAGE_MAGIC_CODE_V2 else "v1")
    assert len(fast.msg_id) == (56 if rec["message"]["sys_flag"] & 0x20 else 32)


def test_blank_filler_is_eight_bytes():
    data = commitlog_record.build({"total_size": 507, "magic_code": BLANK_MAGIC_CODE, "message": None})
    assert data == struct.pack(">ii", 507, BLANK_MAGIC_CODE)


def test_unknown_magic_fails_both_decoders():
    data = struct.pack(">ii", 100, 0x12345678) + bytes(92)
    with pytest.raises(ConstructError):
        commitlog_record.parse(data)
    with pytest.raises(RecordError, match="bad magic code 0x12345678"):
        decode_message(data, 0)


def test_v1_topic_of_128_bytes_does_not_decode():
    """V1 reads the topic length as a signed byte: 128 reads as -128, as in RocketMQ (spec §2.2)."""
    rec = {"total_size": 0, "magic_code": MESSAGE_MAGIC_CODE_V2, "message": {
        "body_crc": 0, "queue_id": 0, "flag": 0, "queue_offset": 0, "physical_offset": 0, "sys_flag": 0,
        "born_timestamp": 0, "born_host": "1.2.3.4:5", "store_timestamp": 0, "store_host": "1.2.3.4:5",
        "reconsume_times": 0, "prepared_transaction_offset": 0, "body": b"", "topic": "t" * 128,
        "properties": ""}}
    data = bytearray(commitlog_record.build(rec))
    data[4:8] = struct.pack(">i", MESSAGE_MAGIC_CODE)  # claim V1 over a 2-byte length 0x0080
    data = bytes(data[:-132]) + b"\x80" + b"t" * 128 + b"\x00\x00"  # the topic as V1: length byte 0x80
    with pytest.raises(RecordError, match="negative topic length -128"):
        decode_message(data, 0)


def test_msg_id_is_store_host_and_offset():
    # values from basic-5.3.1: 192.168.1.10:10911 at physical offset 251
    assert offset_msg_id("192.168.1.10:10911", 251) == "C0A8010A00002A9F00000000000000FB"
    assert offset_msg_id("[::1]:10911", 0) == "0" * 31 + "1" + "00002A9F" + "0" * 16


@pytest.mark.parametrize("codec,type_bits", [("zlib", 0x000), ("lz4", 0x100), ("zstd", 0x200), ("zlib", 0x300)])
def test_sysflag_compression_and_bodies(codec, type_bits):
    flags = SysFlag(0x1 | type_bits | 0x8)
    assert flags.compression == codec  # type 0 is zlib too (CompressionType.findByValue(0))
    assert flags.transaction == "commit"
    body = "déjà vu ".encode() * 50
    assert decompress(compress(body, codec), codec) == body
    assert SysFlag(type_bits).compression is None  # not compressed without the COMPRESSED bit
