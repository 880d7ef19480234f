"""BatchConsumeQueue units as RocketMQ 5.3.1's BatchConsumeQueue wrote them (oracle), and round trips."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ORACLE, need_oracle
from mqtool.formats.batchcq import BCQ_UNIT_SIZE, INVALID_POS, batchcq_unit, is_valid_unit

STORE = ORACLE / "batchcq-5.3.1"


@pytest.fixture(scope="module")
def oracle():
    need_oracle()
    meta = json.loads((STORE / "store-meta.json").read_text())
    recs = {r["physicalOffset"]: r for r in map(json.loads, (STORE / "records.jsonl").read_text().splitlines())}
    return meta, recs


def test_unit_size_and_field_positions():
    assert batchcq_unit.sizeof() == BCQ_UNIT_SIZE == 46
    raw = batchcq_unit.build({"commitlog_offset": 1, "size": 2, "tags_code": 3, "store_time": 4,
                              "msg_base_offset": 5, "batch_size": 6, "compacted_offset": 7, "reserved": 8})
    # BatchConsumeQueue.MSG_TAG_OFFSET_INDEX 12, MSG_STORE_TIME_OFFSET_INDEX 20, MSG_BASE_OFFSET_INDEX 28,
    # MSG_BATCH_SIZE_INDEX 36, MSG_COMPACT_OFFSET_INDEX 38
    assert raw[12:20] == (3).to_bytes(8, "big") and raw[20:28] == (4).to_bytes(8, "big")
    assert raw[28:36] == (5).to_bytes(8, "big") and raw[36:38] == (6).to_bytes(2, "big")
    assert raw[38:42] == (7).to_bytes(4, "big") and raw[42:46] == (8).to_bytes(4, "big")


def test_every_unit_matches_the_store_and_its_record(oracle):
    meta, recs = oracle
    queues = [q for q in meta["consumeQueues"] if q["cqType"] == "BatchCQ"]
    assert [(q["topic"], q["queueId"], len(q["units"])) for q in queues] == [("BatchTopic", 0, 12),
                                                                            ("BatchTopic", 1, 12)]
    for q in queues:
        data = (STORE / f"store/batchconsumequeue/{q['topic']}/{q['queueId']}/00000000000000000000").read_bytes()
        assert len(data) == 920
        for k, want in enumerate(q["units"]):
            raw = data[k * 46 : (k + 1) * 46]
            u = batchcq_unit.parse(raw)
            assert (u.msg_base_offset, u.commitlog_offset, u.size, u.tags_code, u.batch_size, u.compacted_offset) == (
                want["queueOffset"], want["physicalOffset"], want["size"], want["tagsCode"], want["batchNum"],
                want["compactedOffset"])
            assert u.compacted_offset == INVALID_POS and u.reserved == 0
            rec = recs[u.commitlog_offset]
            assert u.store_time == rec["storeTimestamp"] and u.size == rec["storeSize"]
            assert is_valid_unit(u.commitlog_offset, u.size, u.msg_base_offset, u.batch_size)
            assert batchcq_unit.build(u) == raw
        assert set(data[len(q["units"]) * 46 :]) == {0}


def test_validity_follows_recover():
    assert is_valid_unit(0, 1, 0, 1)
    assert not is_valid_unit(0, 0, 0, 0)  # unwritten
    assert not is_valid_unit(-1, 10, 0, 1)
    assert not is_valid_unit(5, 10, -3, 1)
    assert not is_valid_unit(5, 10, 3, 0)


i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(off=i64, size=i32, tags=i64, t=i64, base=i64, batch=i16, comp=i32, res=i32)
def test_unit_round_trip(off, size, tags, t, base, batch, comp, res):
    unit = {"commitlog_offset": off, "size": size, "tags_code": tags, "store_time": t, "msg_base_offset": base,
            "batch_size": batch, "compacted_offset": comp, "reserved": res}
    raw = batchcq_unit.build(unit)
    assert len(raw) == 46
    assert dict((k, v) for k, v in batchcq_unit.parse(raw).items() if not k.startswith("_")) == unit
    assert batchcq_unit.build(batchcq_unit.parse(raw)) == raw
