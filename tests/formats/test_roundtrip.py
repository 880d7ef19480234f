"""Every Construct Struct in mqtool.formats survives parse -> build -> parse on generated data, and the
fast readers' layouts derived from them (numpy dtypes, struct formats, kernel offsets) read the same values."""

import numpy as np
import pytest
from formats.roundtrip import CASES, commitlog_record_bytes, fixed_bytes, format_structs, roundtrip
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats import layout
from mqtool.formats.commitlog import (
    AFTER_BORN_HOST,
    AFTER_STORE_HOST,
    BLANK_MAGIC_CODE,
    HEADER,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    TOPIC_LENGTH_V1,
    TOPIC_LENGTH_V2,
    commitlog_record,
    host_size,
)
from mqtool.formats.consumequeue import CQ_DTYPE, CQ_UNIT, consumequeue_unit
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.formats.timerlog import TIMERLOG_BLANK, TIMERLOG_DTYPE, TIMERLOG_UNIT, timerlog_blank, timerlog_unit
from mqtool.formats.timerwheel import SLOT_DTYPE, timerwheel_slot
from mqtool.store import fastscan

FIXED = {  # the derived layouts the fast readers use: Struct, numpy dtype, struct format
    "consumequeue_unit": (consumequeue_unit, CQ_DTYPE, CQ_UNIT),
    "timerlog_unit": (timerlog_unit, TIMERLOG_DTYPE, TIMERLOG_UNIT),
    "timerlog_blank": (timerlog_blank, None, TIMERLOG_BLANK),
    "timerwheel_slot": (timerwheel_slot, SLOT_DTYPE, None),
}


def test_every_struct_has_a_roundtrip_case():
    """A Struct added to mqtool.formats without a line in `roundtrip.CASES` fails here."""
    assert sorted(format_structs()) == sorted(CASES)


@pytest.mark.parametrize("key", sorted(CASES))
def test_roundtrip(key):
    fmt = format_structs()[key]

    @settings(max_examples=60, deadline=None)
    @given(CASES[key]())
    def run(data):
        roundtrip(fmt, data)

    run()


@pytest.mark.parametrize("name", sorted(FIXED))
def test_derived_dtype_and_struct_read_what_construct_parses(name):
    fmt, dtype, fmt_struct = FIXED[name]
    names = [f.name for f in layout.fields(fmt)]
    if dtype is not None:
        assert dtype.names == tuple(names) and dtype.itemsize == fmt.sizeof()
    if fmt_struct is not None:
        assert fmt_struct.size == fmt.sizeof()

    @settings(max_examples=100, deadline=None)
    @given(st.lists(CASES[next(k for k in CASES if k.endswith("." + name))](), min_size=1, max_size=4))
    def run(units):
        data = b"".join(units)
        parsed = [fmt.parse(u) for u in units]
        if dtype is not None:
            view = np.frombuffer(data, dtype)
            assert [tuple(int(v) for v in row) for row in view.tolist()] == [tuple(p[k] for k in names)
                                                                             for p in parsed]
        if fmt_struct is not None:
            assert [fmt_struct.unpack_from(data, i * fmt.sizeof()) for i in range(len(units))] == [
                tuple(p[k] for k in names) for p in parsed]

    run()


def test_fixed_dtype_values():
    """Hand-checked: the TimerLog unit's offsets and the wheel slot's names (spec §6.3, §6.4)."""
    assert layout.offsets(timerlog_unit) == {
        "size": 0, "prev_pos": 4, "magic": 12, "curr_write_time_ms": 16, "delayed_time_delta": 24,
        "offset_py": 28, "size_py": 36, "real_topic_hash": 40, "reserved": 44}
    assert SLOT_DTYPE.names == ("time_units", "first_pos", "last_pos", "num", "magic")
    assert CQ_UNIT.size == 20 and CQ_DTYPE.fields["tags_code"][1] == 12
    assert layout.struct_format(timerwheel_slot).format == ">qqqll"


def test_commitlog_header_offsets_are_the_spec_ones():
    """Spec §2.1: TOTALSIZE 0, MAGICCODE 4, BODYCRC 8, QUEUEID 12, FLAG 16, QUEUEOFFSET 20,
    PHYSICALOFFSET 28, SYSFLAG 36, BORNTIMESTAMP 40, BORNHOST at 48."""
    assert layout.offsets(HEADER) == {
        "total_size": 0, "magic_code": 4, "body_crc": 8, "queue_id": 12, "flag": 16, "queue_offset": 20,
        "physical_offset": 28, "sys_flag": 36, "born_timestamp": 40}
    assert layout.size(HEADER) == 48
    assert dict(zip(fastscan.LAYOUT_NAMES, fastscan.LAYOUT, strict=True)) == {
        "total_size": 0, "magic_code": 4, "body_crc": 8, "queue_id": 12, "flag": 16, "queue_offset": 20,
        "physical_offset": 28, "sys_flag": 36, "born_timestamp": 40, "header_size": 48, "address_v4": 4,
        "address_v6": 16, "port_size": 4, "store_timestamp_size": 8, "reconsume_times": 0,
        "prepared_transaction_offset": 4, "body_length": 12, "tail_size": 16, "topic_length_v1": 1,
        "topic_length_v2": 2, "properties_length": 2, "fixed_size": 74}


@settings(max_examples=150, deadline=None)
@given(commitlog_record_bytes())
def test_every_kernel_offset_reads_the_parsed_field(data):
    """Each offset the kernel uses, applied to a generated record, reads the value Construct parses."""
    c = commitlog_record.parse(data)

    def read(pos: int, f: layout.Field) -> int:
        return int.from_bytes(data[pos + f.offset : pos + f.offset + f.size], "big", signed=True)

    assert [read(0, f) for f in HEADER[:2]] == [c.total_size, c.magic_code]
    if c.magic_code == BLANK_MAGIC_CODE:
        return
    m = c.message
    assert [read(0, f) for f in HEADER[2:]] == [m[f.name] for f in HEADER[2:]]
    p = layout.size(HEADER) + host_size(bool(m.sys_flag & BORNHOST_V6))
    assert [read(p, f) for f in AFTER_BORN_HOST] == [m.store_timestamp]
    p += layout.size(AFTER_BORN_HOST) + host_size(bool(m.sys_flag & STOREHOST_V6))
    assert [read(p, f) for f in AFTER_STORE_HOST] == [m.reconsume_times, m.prepared_transaction_offset,
                                                      len(m.body)]
    p += layout.size(AFTER_STORE_HOST) + len(m.body)
    tl = TOPIC_LENGTH_V1 if c.magic_code == MESSAGE_MAGIC_CODE else TOPIC_LENGTH_V2
    assert read(p, tl) == len(m.topic.encode("utf-8", "surrogateescape"))
    p += tl.size + read(p, tl)
    assert read(p, PROPERTIES_LENGTH) == len(m.properties.encode("utf-8", "surrogateescape"))
    scan = fastscan.scan_commitlog_file(data, 0, verify_crc=False)  # the kernel, run with `fastscan.LAYOUT`
    assert len(scan) == 1 and scan.end == len(data)
    assert [int(scan.cols[fastscan.COLUMNS.index(k), 0]) for k in ("queue_id", "queue_offset", "sys_flag",
                                                                   "store_timestamp", "prepared_transaction_offset")] \
        == [m.queue_id, m.queue_offset, m.sys_flag, m.store_timestamp, m.prepared_transaction_offset]
    assert (int(scan.body_len[0]), int(scan.topic_len[0]), int(scan.props_len[0])) == (
        len(m.body), len(m.topic.encode("utf-8", "surrogateescape")),
        len(m.properties.encode("utf-8", "surrogateescape")))


def test_fixed_bytes_leaves_padding_zero():
    from mqtool.formats.checkpoint import checkpoint

    @settings(max_examples=5, deadline=None)
    @given(fixed_bytes(checkpoint))
    def run(data):
        assert len(data) == 4096 and data[40:] == bytes(4056)

    run()
