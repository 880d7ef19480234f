"""The BatchConsumeQueue reader against the store RocketMQ 5.3.1 wrote, and damaged copies."""

import json
import struct
from pathlib import Path

import pytest

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.message import decode_message
from mqtool.store.batchcq import (
    BatchConsumeQueue,
    check_unit_against_record,
    discover_batch_queues,
    set_batch_size_if_needed,
)
from mqtool.store.findings import Findings

SRC = ORACLE / "batchcq-5.3.1"
Q0 = "batchconsumequeue/BatchTopic/0/00000000000000000000"


@pytest.fixture(scope="module")
def meta():
    need_oracle()
    return json.loads((SRC / "store-meta.json").read_text())


@pytest.fixture
def copy(tmp_path) -> Path:
    need_oracle()
    return copy_with_wheel(SRC / "store", tmp_path / "store")


def _commitlog(root: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted((root / "commitlog").iterdir()))


def test_every_unit_is_what_the_store_returned(meta):
    root = SRC / "store"
    assert discover_batch_queues(root) == [("BatchTopic", 0), ("BatchTopic", 1)]
    queues = [q for q in meta["consumeQueues"] if q["cqType"] == "BatchCQ"]
    assert len(queues) == 2
    for q in queues:
        fs = Findings()
        bcq = BatchConsumeQueue.open(root, q["topic"], q["queueId"])
        units = list(bcq.iter_units(fs))
        assert [(u.queue_offset, u.commitlog_offset, u.size, u.tags_code, u.batch_size, u.compacted_offset)
                for u in units] == [(u["queueOffset"], u["physicalOffset"], u["size"], u["tagsCode"], u["batchNum"],
                                     u["compactedOffset"]) for u in q["units"]]
        assert bcq.offsets(fs) == (q["minOffsetInQueue"], q["maxOffsetInQueue"])
        assert [u.position for u in units] == [46 * i for i in range(len(units))]
        assert fs == []


def test_units_agree_with_their_records_inner_num_and_inner_base(meta):
    root = SRC / "store"
    data = _commitlog(root)
    fs = Findings()
    batches = set()
    for topic, qid in discover_batch_queues(root):
        for u in BatchConsumeQueue.open(root, topic, qid).iter_units(fs):
            rec = decode_message(data, u.commitlog_offset)
            check_unit_against_record(u, topic, qid, rec, fs)
            batches.add(u.batch_size)
            assert rec.store_timestamp == u.store_time
    assert fs == []
    assert batches == {1, 4, 7, 10}


def test_set_batch_size_if_needed():
    assert set_batch_size_if_needed({"INNER_NUM": "7", "INNER_BASE": "9"}, 9) == (9, 7)
    assert set_batch_size_if_needed({"INNER_NUM": "7"}, 3) == (3, 1)  # INNER_BASE missing: defaults
    assert set_batch_size_if_needed({}, 16) == (16, 1)
    assert set_batch_size_if_needed({"INNER_NUM": "70000", "INNER_BASE": "1"}, 2) == (2, 1)  # not a short


def test_a_unit_that_disagrees_with_its_record(meta):
    root = SRC / "store"
    data = _commitlog(root)
    u = next(BatchConsumeQueue.open(root, "BatchTopic", 1).iter_units(Findings()))
    fs = Findings()
    check_unit_against_record(u._replace(batch_size=5, size=1), "BatchTopic", 1, decode_message(data, 289), fs)
    assert [(f.file, f.offset, f.topic, f.queue_id) for f in fs] == [
        ("batchconsumequeue/BatchTopic/1/00000000000000000000", 0, "BatchTopic", 1)] * 2
    assert "INNER_BASE/INNER_NUM 0/4" in fs[1].message
    fs = Findings()
    check_unit_against_record(u, "BatchTopic", 0, decode_message(data, 289), fs)
    assert len(fs) == 1 and "belongs to BatchTopic/1" in fs[0].message


# ----------------------------------------------------------------------------- damaged copies
def _patch(root: Path, rel: str, at: int, data: bytes) -> None:
    with open(root / rel, "r+b") as fh:
        fh.seek(at)
        fh.write(data)


def test_invalid_unit_ends_the_queue_with_a_finding(copy):
    _patch(copy, Q0, 3 * 46 + 8, struct.pack(">i", -5))  # unit 3's size
    fs = Findings()
    units = list(BatchConsumeQueue.open(copy, "BatchTopic", 0).iter_units(fs))
    assert len(units) == 3
    assert [(f.file, f.offset, f.severity, f.topic, f.queue_id) for f in fs] == [(Q0, 138, "error", "BatchTopic", 0)]
    assert "size -5" in fs[0].message


def test_base_offset_gap_and_commitlog_order(copy):
    _patch(copy, Q0, 5 * 46 + 28, struct.pack(">q", 1000))  # unit 5's msgBaseOffset
    _patch(copy, Q0, 8 * 46, struct.pack(">q", 10))  # unit 8's CommitLog offset goes backwards
    fs = Findings()
    assert len(list(BatchConsumeQueue.open(copy, "BatchTopic", 0).iter_units(fs))) == 12
    got = [(f.offset, f.message.split(" ")[0]) for f in fs]
    assert got == [(230, "msgBaseOffset"), (276, "msgBaseOffset"), (368, "CommitLog")]


def test_torn_unit_at_a_truncated_end(copy):
    with open(copy / Q0, "r+b") as fh:
        fh.truncate(12 * 46 - 10)
    fs = Findings()
    assert len(list(BatchConsumeQueue.open(copy, "BatchTopic", 0).iter_units(fs))) == 11
    torn = [f for f in fs if f.check == "batchconsumequeue.integrity"]
    assert [(f.file, f.offset) for f in torn] == [(Q0, 11 * 46)] and "torn unit: 36 bytes" in torn[0].message


def test_a_missing_middle_file_is_a_finding(copy):
    d = copy / "batchconsumequeue/BatchTopic/0"
    (d / f"{920 * 2:020d}").write_bytes(bytes(920))
    fs = Findings()
    list(BatchConsumeQueue.open(copy, "BatchTopic", 0).iter_units(fs))
    assert any("gap" in f.message and f.topic == "BatchTopic" and f.queue_id == 0 for f in fs)


def test_the_numpy_view_is_derived_from_the_construct_unit():
    import numpy as np

    from mqtool.formats.batchcq import batchcq_unit
    from mqtool.store.batchcq import BCQ_DTYPE

    # BatchConsumeQueue.MSG_TAG_OFFSET_INDEX .. MSG_COMPACT_OFFSET_INDEX
    assert [BCQ_DTYPE.fields[n][1] for n in ("tags_code", "store_time", "msg_base_offset", "batch_size",
                                              "compacted_offset")] == [12, 20, 28, 36, 38]
    unit = {"commitlog_offset": 7, "size": 300, "tags_code": -2, "store_time": 1795458522669,
            "msg_base_offset": 40, "batch_size": 10, "compacted_offset": -1, "reserved": 0}
    row = np.frombuffer(batchcq_unit.build(unit), BCQ_DTYPE)[0]
    assert {k: int(row[k]) for k in unit} == unit
