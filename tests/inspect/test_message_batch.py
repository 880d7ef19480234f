"""`inspect STORE message` on BatchCQ records (issue 27): the BatchConsumeQueue unit is looked up (it said
"no ConsumeQueue directory"), and an INNER_BATCH record's body is unpacked into its messages
(`MessageDecoder.decodeMessages`) instead of printed as bytes."""

import json

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from mqtool.builder.batchcq import BatchTopics
from mqtool.builder.layout_fixtures import STORE_HOST, layout_config
from mqtool.builder.writer import StoreWriter
from mqtool.cli.app import app
from mqtool.formats.batchbody import BatchBodyError, decode_messages, encode_messages
from mqtool.formats.names import PROPERTY_INNER_NUM, PROPERTY_KEYS, PROPERTY_TAGS
from mqtool.formats.sysflag import INNER_BATCH
from mqtool.inspect.messages import message_at
from mqtool.store.store import Store

T0 = 1790000000000
# encodeMessages([(flag 0, "hello", KEYS=k1), (flag 3, "", no properties)]), read field by field:
# fmt: off
ENCODED = bytes.fromhex(
    "00000023" "00000000" "00000000" "00000000" "00000005" "68656c6c6f" "0008" "4b455953016b3102"  # 35 bytes
    "00000016" "00000000" "00000000" "00000003" "00000000" "0000")  # 22 bytes
# fmt: on


def test_decode_messages_reads_the_batch_encoding():
    assert encode_messages([(0, b"hello", "KEYS\x01k1\x02"), (3, b"", "")]) == ENCODED
    assert decode_messages(ENCODED) == [
        {"flag": 0, "properties": {"KEYS": "k1"}, "body": b"hello"},
        {"flag": 3, "properties": {}, "body": b""},
    ]
    with pytest.raises(BatchBodyError, match=r"^at byte 35: inner message 1 runs past the body's end \(56 bytes\)$"):
        decode_messages(ENCODED[:-1])


@pytest.fixture(scope="module")
def batch_store(tmp_path_factory):
    """BatchTopic/0: a plain record at 0 (queue offset 0), then a real INNER_BATCH record of three
    messages (INNER_BASE 1, INNER_NUM 3) whose body is the client's batch encoding with binary bodies."""
    store = tmp_path_factory.mktemp("bcq") / "store"
    inner = [
        (0, bytes([0, 1, 2, 27, 91, 50, 74]), f"{PROPERTY_KEYS}\x01i0\x02{PROPERTY_TAGS}\x01TagA\x02"),
        (0, b"second", f"{PROPERTY_KEYS}\x01i1\x02"),
        (7, b"third", ""),
    ]
    with StoreWriter(store, layout_config("batchcq")) as w:
        bt = BatchTopics(w, ["BatchTopic"], file_size=460)
        plain = bt.put("BatchTopic", 0, b"plain", {PROPERTY_KEYS: "P"}, store_timestamp=T0, store_host=STORE_HOST)
        batch = bt.put(
            "BatchTopic",
            0,
            encode_messages(inner),
            {PROPERTY_KEYS: "B", PROPERTY_INNER_NUM: "3"},
            sys_flag=INNER_BATCH,
            store_timestamp=T0 + 1,
            store_host=STORE_HOST,
            capacity=16,
        )
        bt.close()
    return store, plain, batch


def test_message_on_an_inner_batch_record_shows_its_messages(batch_store):
    store, plain, batch = batch_store
    doc = message_at(Store.open(store), batch.physical_offset)
    assert doc["inner_batch"] == {
        "base": 1,
        "inner_num": 3,
        "count_matches": True,
        "error": None,
        "messages": [
            {
                "queue_offset": 1,
                "flag": 0,
                "properties": {"KEYS": "i0", "TAGS": "TagA"},
                "body_length": 7,
                "body": "\x00\x01\x02\x1b[2J",
            },
            {"queue_offset": 2, "flag": 0, "properties": {"KEYS": "i1"}, "body_length": 6, "body": "second"},
            {"queue_offset": 3, "flag": 7, "properties": {}, "body_length": 5, "body": "third"},
        ],
    }
    assert doc["consume_queue"] == {
        "topic": "BatchTopic",
        "queue_id": 0,
        "queue_offset": 1,
        "batch": True,
        "points_back": True,
        "unit": {
            "queue_offset": 1,
            "commitlog_offset": batch.physical_offset,
            "size": batch.total_size,
            "tags_code": 0,
            "store_time": T0 + 1,
            "batch_size": 3,
            "compacted_offset": -1,
        },
    }
    assert "inner_batch" not in message_at(Store.open(store), plain.physical_offset)


def test_message_text_prints_the_inner_messages_not_the_bytes(batch_store):
    store, _, batch = batch_store
    r = CliRunner().invoke(app, ["inspect", str(store), "message", "--offset", str(batch.physical_offset)])
    assert r.exit_code == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x00" not in r.stdout  # no terminal control from a binary body
    assert "Inner messages (INNER_BATCH body, 3 message(s))" in r.stdout
    assert "\\x00\\x01\\x02\\x1b[2J" in r.stdout
    assert "no ConsumeQueue directory" not in r.stdout


def test_fixture_batch_records_find_their_batch_consume_queue_unit():
    """fixtures/batchcq: B2 (offset 530) is a plain record at queue offset 3 of BatchTopic/0; B1 (336) is
    INNER_BATCH with INNER_NUM 3 but a text body the builder wrote, which is no batch encoding."""
    store = Store.open(FIXTURES / "batchcq")
    b2 = message_at(store, 530)["consume_queue"]
    assert (b2["queue_offset"], b2["points_back"], b2["unit"]["batch_size"], b2["batch"]) == (3, True, 1, True)
    b1 = message_at(store, 336)
    assert b1["consume_queue"]["unit"]["commitlog_offset"] == 336 and b1["consume_queue"]["points_back"]
    assert b1["inner_batch"] == {
        "base": 0,
        "inner_num": 3,
        "messages": [],
        "count_matches": False,
        "error": "not a batch encoding (MessageDecoder.decodeMessages throws at byte 0: "
        "inner message 0 runs past the body's end (8 bytes))",
    }


def test_message_json_validates(tmp_path):
    import jsonschema

    from mqtool.inspect import load_schema

    r = CliRunner().invoke(app, ["inspect", str(FIXTURES / "batchcq"), "message", "--offset", "336", "--json"])
    assert r.exit_code == 0
    jsonschema.Draft202012Validator(load_schema("message")).validate(json.loads(r.stdout))
