"""`formats/record_layout.py` writes the CommitLog record's fixed-width runs as numbers (so the scan and `messages`
need no Construct); here each is derived from the Construct definition, `commitlog_record`, and must be equal."""

from mqtool.formats import commitlog, layout, record_layout
from mqtool.formats.adapters import ipv4_host, ipv6_host


def _derived() -> dict:
    """What `formats/layout.py` reads off `commitlog_record`: the runs of a V1 message (V2 differs only in the
    topic length's width), the lead (TOTALSIZE, MAGICCODE), the host sizes and the port."""
    v1, v2 = layout.runs(commitlog.message_v1), layout.runs(commitlog.message_v2)
    assert v1[:3] + v1[4:] == v2[:3] + v2[4:] and v1[3][0].name == v2[3][0].name == "topic_length"
    lead = layout.prefix(commitlog.commitlog_record)
    header = lead + layout.shift(v1[0], layout.size(lead))
    return {
        "HEADER": header,
        "AFTER_BORN_HOST": v1[1],
        "AFTER_STORE_HOST": v1[2],
        "TOPIC_LENGTH_V1": v1[3][0],
        "TOPIC_LENGTH_V2": v2[3][0],
        "PROPERTIES_LENGTH": v1[4][0],
        "HOST_SIZE_V4": ipv4_host.sizeof(),
        "HOST_SIZE_V6": ipv6_host.sizeof(),
        "HOST_PORT": layout.runs(ipv4_host.subcon)[-1][0],
        "FIXED_SIZE": layout.size(header) + layout.size(v1[1]) + layout.size(v1[2]) + v1[4][0].size,
    }


def test_record_layout_equals_the_construct_definition():
    derived = _derived()
    assert {name: getattr(record_layout, name) for name in derived} == derived
    assert record_layout.HOST_PORT_SIZE == derived["HOST_PORT"].size == 4


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
