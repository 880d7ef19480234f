"""`formats/record_layout.py` holds the CommitLog record's fixed-width runs as numbers (so the scan and `messages`
need no Construct); its block is generated from the Construct definition, `commitlog_record`, by
scripts/make_record_layout.py: here it must be what the script writes now, and the numbers the spec's."""

import importlib.util

import pytest

from conftest import PROJECT
from mqtool.formats import commitlog, layout, message, record_layout
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6


def _script():
    spec = importlib.util.spec_from_file_location("make_record_layout", PROJECT / "scripts" / "make_record_layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_record_layout_is_generated_from_the_construct_definition():
    script = _script()
    text = script.TARGET.read_text("utf-8")
    assert script.regenerated(text) == text, "run python scripts/make_record_layout.py"
    derived = commitlog.fast_reader_runs()
    assert {name: getattr(record_layout, name) for name in derived} == derived
    assert record_layout.HOST_PORT_SIZE == derived["HOST_PORT"].size == 4


def test_a_stale_block_is_found():
    """A hand edit inside the block is what the script undoes (the check above can fail)."""
    script = _script()
    text = script.TARGET.read_text("utf-8")
    stale = text.replace('Field("body_length", 12, 4, ">l")', 'Field("body_length", 12, 8, ">q")')
    assert stale != text and script.regenerated(stale) == text


def test_python_source_writes_fields_lists_and_ints():
    f = layout.Field("a", 0, 4, ">l")
    assert layout.python_source({"X": [f], "Y": f, "N": 8}) == (
        'X = [\n    Field("a", 0, 4, ">l"),\n]\nY = Field("a", 0, 4, ">l")\nN = 8\n'
    )


def test_record_layout_numbers_are_the_spec_ones():
    """Spec §2.1 by hand: BORNHOST at 48, hosts of 8 (IPv4) and 20 (IPv6) bytes, 74 fixed bytes (§2.10)."""
    assert layout.size(record_layout.HEADER) == 48
    assert (record_layout.HOST_SIZE_V4, record_layout.HOST_SIZE_V6, record_layout.FIXED_SIZE) == (8, 20, 74)
    assert [f.offset for f in record_layout.AFTER_STORE_HOST] == [0, 4, 12]


def test_commitlog_builds_what_the_layout_reads():
    """A record built by the Struct is read back by the layout's `struct` formats, field by field."""
    rec = {
        "total_size": 0,
        "magic_code": record_layout.MESSAGE_MAGIC_CODE,
        "message": {
            "body_crc": 7, "queue_id": 3, "flag": 1, "queue_offset": 42, "physical_offset": 0, "sys_flag": 0,
            "born_timestamp": 1790000000000, "born_host": "10.0.0.1:1", "store_timestamp": 1790000000001,
            "store_host": "10.0.0.2:10911", "reconsume_times": 2, "prepared_transaction_offset": 5,
            "body": b"hello", "topic": "T", "properties": "a\x01b\x02",
        },
    }  # fmt: skip
    data = commitlog.commitlog_record.build(rec)
    head = record_layout.fields_format(record_layout.HEADER).unpack_from(data, 0)
    assert head == (len(data), record_layout.MESSAGE_MAGIC_CODE, 7, 3, 1, 42, 0, 0, 1790000000000)
    assert len(data) == record_layout.computed_size(0, 5, 1, 4, False)
    tail_at = 48 + 8 + 8 + 8
    assert record_layout.fields_format(record_layout.AFTER_STORE_HOST).unpack_from(data, tail_at) == (2, 5, 5)


@pytest.mark.parametrize(("born", "store", "sys_flag"), [
    ("10.0.0.1:1", "10.0.0.2:10911", 0),
    ("[::1]:1", "10.0.0.2:10911", BORNHOST_V6),
    ("10.0.0.1:1", "[fe80::2]:10911", STOREHOST_V6),
    ("[::1]:1", "[fe80::2]:10911", BORNHOST_V6 | STOREHOST_V6),
])
def test_mid_formats_read_what_the_struct_builds(born, store, sys_flag):
    """`message.MID_FORMATS` (the simulator's one unpack from BORNHOST to BODYLENGTH) for each pair of host
    widths: 8 or 20 bytes each (§2.1), the store time and the tail where the Construct definition put them."""
    rec = {
        "total_size": 0, "magic_code": record_layout.MESSAGE_MAGIC_CODE,
        "message": {
            "body_crc": 7, "queue_id": 3, "flag": 1, "queue_offset": 42, "physical_offset": 0, "sys_flag": sys_flag,
            "born_timestamp": 1790000000000, "born_host": born, "store_timestamp": 1790000000001,
            "store_host": store, "reconsume_times": 2, "prepared_transaction_offset": 5,
            "body": b"hello", "topic": "T", "properties": "",
        },
    }  # fmt: skip
    data = commitlog.commitlog_record.build(rec)
    head = message.HEAD_FORMAT.unpack_from(data, 0)
    mid = message.MID_FORMATS[head[7] & message.HOST_BITS]
    raw_born, store_ts, raw_store, reconsume, prepared, body_len = mid.unpack_from(data, 48)
    sizes = {0: 8, BORNHOST_V6: 20}[sys_flag & BORNHOST_V6], {0: 8, STOREHOST_V6: 20}[sys_flag & STOREHOST_V6]
    assert (len(raw_born), len(raw_store)) == sizes
    assert (store_ts, reconsume, prepared, body_len) == (1790000000001, 2, 5, 5)
    assert data[48 + mid.size : 48 + mid.size + 5] == b"hello"
