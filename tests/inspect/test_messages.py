"""The messages and message views: filters, the JSON Lines record contract, bodies, checks."""

import base64
import struct

from mqtool.inspect.messages import MessageQuery, iter_messages, message_at, scan_findings
from mqtool.inspect.records import RECORD_KEYS, record_dict
from mqtool.store.store import Store

CONTRACT = ["physical_offset", "file", "position", "total_size", "magic", "body_crc", "crc_ok", "queue_id", "flag",
            "queue_offset", "sys_flag", "transaction", "compression", "born_timestamp", "born_host",
            "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "topic",
            "properties", "uniq_key", "msg_id", "body_length", "body"]


def offsets(store: Store, **q) -> list[int]:
    return [r.physical_offset for r in iter_messages(store, MessageQuery(**q))]


def test_record_keys_are_the_contract_in_order(basic: Store):
    assert list(RECORD_KEYS) == CONTRACT
    first = record_dict(basic.commitlog.read(0))
    assert list(first) == CONTRACT
    assert first["born_host"] == "10.0.0.5:51234" and first["store_host"] == "192.168.1.10:10911"
    assert first["msg_id"] == "C0A8010A00002A9F0000000000000000"  # summary.txt
    assert first["properties"] == {"CLUSTER": "DefaultCluster", "KEYS": "key0 order-1000", "TAGS": "TagA",
                                   "UNIQ_KEY": "FD00000000000000000000000000000238075FFD2B276F88C2440000",
                                   "WAIT": "true"}
    raw = basic.commitlog.read(0).properties_raw  # properties keep the stored order
    assert list(first["properties"]) == [seg.split("\x01")[0] for seg in raw.split("\x02") if seg]
    assert first["body"] == "Hello RocketMQ normal #0" and first["body_length"] == 24
    assert (first["magic"], first["transaction"], first["compression"]) == ("v1", "none", None)


def test_all_115_records_and_the_filters(basic: Store):
    assert len(offsets(basic)) == 115
    assert offsets(basic, topic="TopicA", queue_id=2) == [1518, 2231, 2540, 2849]
    assert offsets(basic, key="key0") == [0]
    assert offsets(basic, key="bkey1") == [2540]  # summary.txt index lookup
    assert offsets(basic, uniq_key="fd00000000000000000000000000000238075ffd2b276f88c2e80001") == [251]
    assert offsets(basic, tag="TagDelay", topic="SCHEDULE_TOPIC_XXXX") == [3158, 3442, 3726, 4013]
    assert offsets(basic, topic="RMQ_SYS_TRANS_HALF_TOPIC") == [6386, 6778]
    assert offsets(basic, from_offset=65000, limit=2) == [65536, 66527]  # the BLANK filler is at 65029
    assert offsets(basic, from_offset=3000, to_offset=3726) == [3158, 3442]
    assert offsets(basic, since_ms=1795362433768, until_ms=1795362433770) == [251, 502]
    assert offsets(basic, limit=0) == []
    assert len(offsets(basic, topic="TopicB", queue_id=1)) == 72


def test_body_modes_and_decompress(demo: Store):
    z = next(iter_messages(demo, MessageQuery(key="Z1-zlib")))
    assert z.compression == "zlib" and z.sys_flag == 0x301
    stored = record_dict(z, "base64")
    assert base64.b64decode(stored["body"]) == z.body and stored["body_length"] == 232
    plain = record_dict(z, "text", decompress_body=True)
    assert plain["body"].startswith("demo compressed line 000") and plain["decompressed_length"] == 4200
    assert record_dict(z, "hex")["body"] == z.body.hex()
    assert record_dict(z, "none")["body"] is None
    v6 = next(iter_messages(demo, MessageQuery(key="V6-ipv6")))
    assert record_dict(v6)["born_host"].startswith("[")
    long = next(iter_messages(demo, MessageQuery(from_offset=9103, limit=1)))
    assert record_dict(long)["magic"] == "v2" and len(long.topic) == 135


def test_message_at_explains_a_delay_message(basic: Store):
    doc = message_at(basic, 3158)
    assert doc["record"]["topic"] == "SCHEDULE_TOPIC_XXXX"
    assert doc["checks"] == {"crc_ok": True, "size_ok": True, "computed_size": 284, "physical_offset_ok": True,
                             "physical_offset_field": 3158}
    assert doc["consume_queue"]["points_back"] and doc["consume_queue"]["unit"]["tags_code"] == 1795362434801
    assert "deliver timestamp 1795362434801" in doc["explain"][0]


def test_message_at_explains_commit_and_half(demo: Store):
    commit = message_at(demo, 7129)
    assert commit["record"]["transaction"] == "commit"
    assert any("its half is at 6082" in line for line in commit["explain"])
    half = message_at(demo, 6082)
    assert half["explain"][0].startswith("half (prepared) message for DemoTopicB")


def test_verify_reports_a_bad_crc(basic_copy):
    cl = basic_copy / "commitlog" / "00000000000000000000"
    data = bytearray(cl.read_bytes())
    struct.pack_into(">i", data, 251 + 8, 12345)  # BODYCRC of the record at 251
    cl.write_bytes(bytes(data))
    store = Store.open(basic_copy)
    rows = list(iter_messages(store, MessageQuery(), verify=True))
    assert len(rows) == 115 and not rows[1].crc_ok
    found = scan_findings(store)
    assert [(f.offset, f.severity) for f in found] == [(251, "error")]
    assert "body CRC mismatch" in found[0].message
