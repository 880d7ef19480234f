"""POP records built into the revive topic, read back by `store.pop` (no real POP store exists in ../shared/oracle:
the bodies and properties follow 5.3.1's PopMessageProcessor / AckMessageProcessor, spec §15)."""

import json

import pytest

from mqtool.builder.broker import deliver_timer, put_message
from mqtool.builder.pop import put_ack, put_checkpoint
from mqtool.builder.writer import StoreWriter
from mqtool.formats.names import TIMER_TOPIC
from mqtool.rules.pop import build_cluster_revive_topic
from mqtool.store.findings import Findings
from mqtool.store.pop import read_store_pop
from mqtool.store.store import Store

T = 1_700_000_000_000
REVIVE = build_cluster_revive_topic("DefaultCluster")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("pop") / "store"
    with StoreWriter(root) as w:
        for i in range(3):
            put_message(w, "TopicP", 0, b"m%d" % i, [("TAGS", "a")], store_timestamp=T + i)
        ck = put_checkpoint(w, REVIVE, 1, "TopicP", "G", 0, 0, [0, 1, 2], T + 10, 60_000, "broker-a",
                            store_timestamp=T + 10)
        ack = put_ack(w, REVIVE, 1, "TopicP", "G", 0, 0, [0], T + 10, 60_000, "broker-a", store_timestamp=T + 20)
        back = put_ack(w, REVIVE, 1, "TopicP", "G", 0, 0, [1, 2], T + 10, 60_000, "broker-a",
                       store_timestamp=T + 30)
        deliver_timer(w, ck, enqueue_ms=T + 10, store_timestamp=T + 59_010)
        deliver_timer(w, ack, enqueue_ms=T + 20, store_timestamp=T + 60_010)
    return root, ck, ack, back


def test_bodies_and_properties_as_the_broker_writes_them(store):
    _root, ck, ack, back = store
    assert ck.topic == TIMER_TOPIC and ck.properties["REAL_TOPIC"] == REVIVE and ck.properties["REAL_QID"] == "1"
    assert ck.properties["TIMER_DELIVER_MS"] == str(T + 10 + 60_000 - 1000)  # revive time - ackTimeInterval
    assert ck.properties["UNIQ_KEY"] == f"TopicP@0@0@G@{T + 10}@broker-a@ck"
    assert json.loads(ck.body) == {"bm": 0, "bn": "broker-a", "c": "G", "d": [0, 1, 2], "it": 60000, "n": 3,
                                   "pt": T + 10, "q": 0, "reviveTime": T + 60_010, "ro": 0, "so": 0, "t": "TopicP"}
    assert list(json.loads(ck.body)) == sorted(json.loads(ck.body))  # fastjson writes fields sorted
    assert ack.properties["TAGS"] == "ack" and json.loads(ack.body)["ao"] == 0
    assert back.properties["TAGS"] == "bAck" and json.loads(back.body)["aol"] == [1, 2]


def test_the_reader_pairs_them(store):
    root = store[0]
    fs = Findings()
    state = read_store_pop(Store.open(root), fs, now_ms=T + 60_020)
    assert not fs
    [c] = state.checks
    assert (c.record.stage, c.record.revive_queue_id, c.record.revive_queue_offset) == ("revive", 1, 0)
    assert c.acked == {0, 1, 2} and c.status == "acked" and not state.orphan_acks
    assert [(r.tag, r.stage) for r in c.acks] == [("ack", "revive"), ("bAck", "timer")]
