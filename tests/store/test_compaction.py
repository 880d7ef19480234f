"""The compaction store reader against the compaction log RocketMQ 5.3.1 wrote, and damaged copies."""

import base64
import json
from pathlib import Path

import pytest

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.batchcq import batchcq_unit
from mqtool.formats.commitlog import commitlog_record
from mqtool.formats.compaction import (
    END_UNIT_BYTES,
    dump_position_checkpoint,
    get_compaction_log_size,
    parse_position_checkpoint,
)
from mqtool.formats.message import record_from_container
from mqtool.store.compaction import (
    CompactionQueue,
    compaction_summary,
    discover_compaction_queues,
    has_compaction,
    read_position_checkpoint,
)
from mqtool.store.findings import Findings

SRC = ORACLE / "compaction-5.3.1"
LOG0 = "compaction/compactionLog/CompactT/0/00000000000000000000"
CQ5520 = "compaction/compactionCq/CompactT/0/00000000000000005520"


@pytest.fixture(scope="module")
def real():
    need_oracle()
    return ([json.loads(line) for line in (SRC / "records.jsonl").open()],
            json.loads((SRC / "store-meta.json").read_text()))


@pytest.fixture
def copy(tmp_path) -> Path:
    need_oracle()
    return copy_with_wheel(SRC / "store", tmp_path / "store")


def _read(root: Path):
    findings = Findings()
    q = CompactionQueue.open(root, "CompactT", 0, findings)
    records, units = q.check(findings)
    return q, records, units, findings


def test_every_record_is_what_rocketmq_decoded(real):
    expected, _meta = real
    q, records, _units, findings = _read(SRC / "store")
    assert findings == []
    messages = [e for e in expected if e["kind"] == "message"]
    assert len(records) == len(messages) == 9
    for r, e in zip(records, messages, strict=True):
        got = {"file": r.file, "positionInFile": r.position, "physicalOffset": r.physical_offset,
               "msgMagicCode": r.magic_code, "storeSize": r.total_size, "topic": r.topic, "queueId": r.queue_id,
               "queueOffset": r.queue_offset, "flag": r.flag, "sysFlag": r.sys_flag,
               "bornTimestamp": r.born_timestamp, "storeTimestamp": r.store_timestamp, "bornHost": r.born_host,
               "storeHost": r.store_host, "bodyCRC": r.body_crc, "reconsumeTimes": r.reconsume_times,
               "preparedTransactionOffset": r.prepared_transaction_offset, "properties": r.properties,
               "bodyLength": r.body_length, "bodyBase64": base64.b64encode(r.body).decode(), "msgId": r.msg_id}
        assert got == {k: e[k] for k in got}
        assert r.physical_offset_field == r.physical_offset  # PHYSICALOFFSET rewritten to the log offset
    # the BLANK record of the file closed on full, and the compacted file's zero tail (no BLANK)
    blanks = [e for e in expected if e["kind"] == "blank"]
    ends = [e for e in q.ends.values() if e.kind == "blank"]
    assert [(e.file, e.position, e.start + e.position, e.size) for e in ends] == [
        (b["file"], b["positionInFile"], b["physicalOffset"], b["totalSize"]) for b in blanks]
    assert q.ends[LOG0].kind == "zeros" and q.ends[LOG0].position == 1298


def test_construct_definition_reads_the_same_records(real):
    """The compaction log's records are `commitlog_record`s: the reference parse equals the fast reader."""
    _q, records, _units, _f = _read(SRC / "store")
    for r in records:
        data = (SRC / "store" / r.file).read_bytes()[r.position:r.position + r.total_size]
        c = commitlog_record.parse(data)
        ref = record_from_container(c, r.physical_offset)
        ref.file, ref.position = r.file, r.position
        assert ref == r
        assert commitlog_record.build(c) == data


def test_every_unit_is_a_raw_unit_rocketmq_wrote(real):
    _expected, meta = real
    _q, _records, units, _f = _read(SRC / "store")
    raw = [u for u in meta["final"]["compactionCqRawUnits"] if u["size"] > 0]
    assert [(u.file.rsplit("/", 1)[1], u.position, u.commitlog_offset, u.size, u.tags_code, u.store_time,
             u.queue_offset, u.batch_size, u.compacted_offset) for u in units] == [
        (r["cqFile"], r["unitPos"], r["physicalOffset"], r["size"], r["tagsCode"], r["storeTime"],
         r["msgBaseOffset"], r["batchSize"], r["compactedOffset"]) for r in raw]
    # what DefaultMessageStore.getMessage returned for CompactT/0 (served from the compaction store)
    assert [u.queue_offset for u in units] == [m["queueOffset"] for m in meta["getMessageCompactT0"]]
    assert [u.queue_offset for u in units] == [11, 13, 14, 16, 17, 18, 19, 20, 21]
    assert (meta["final"]["cqMinOffsetInQueue"], meta["final"]["cqMaxOffsetInQueue"]) == (
        units[0].queue_offset, units[-1].queue_offset + 1)


def test_the_end_unit_is_the_one_rocketmq_wrote(real):
    _expected, meta = real
    end = [r for r in meta["final"]["compactionCqRawUnits"] if r["size"] == 0]
    assert len(end) == 1 and end[0]["cqFile"] == "00000000000000005520"
    data = (SRC / "store" / CQ5520).read_bytes()
    assert data[end[0]["unitPos"]:end[0]["unitPos"] + 46] == END_UNIT_BYTES
    assert batchcq_unit.parse(END_UNIT_BYTES).commitlog_offset == -1


def test_discovery_summary_and_file_size():
    need_oracle()
    root = SRC / "store"
    assert has_compaction(root) and not has_compaction(ORACLE / "basic-5.3.1/store")
    assert discover_compaction_queues(root) == [("CompactT", 0)]
    findings = Findings()
    (row,) = compaction_summary(root, findings, {("CompactT", 0): 22})
    assert row == {"topic": "CompactT", "queue_id": 0, "log_files": 3, "cq_files": 3, "records": 9, "units": 9,
                   "min_queue_offset": 11, "max_queue_offset": 21, "compacted_to": None, "transient": [],
                   "in_commitlog": 22}
    assert findings == []
    # README: compactionMappedFileSize=1400, compactionCqMappedFileSize=276 -> 1380-byte log files
    q = CompactionQueue.open(root, "CompactT", 0, findings)
    assert get_compaction_log_size(1400, 276) == 1380 == q.log_file_size
    assert get_compaction_log_size(100 * 1024 * 1024, 10 * 1024 * 1024) == 10 * (10 * 1024 * 1024 // 46 * 46)


def test_position_checkpoint(copy, real):
    """The file was deleted from the oracle (README); its in-memory map was {"CompactT_0": 16}."""
    _expected, meta = real
    assert read_position_checkpoint(copy, Findings()) is None
    want = {tuple(k.rsplit("_", 1)): v for k, v in meta["final"]["positionMgrQueueOffsetMap"].items()}
    want = {(t, int(q)): v for (t, q), v in want.items()}
    text = dump_position_checkpoint(want)
    assert text == '{"empty":false,"queueOffsetMap":{"CompactT_0":16}}'
    (copy / "compaction/position-checkpoint").write_text(text)
    assert read_position_checkpoint(copy, Findings()) == {("CompactT", 0): 16}
    assert parse_position_checkpoint('{"queueOffsetMap":{"a_b_3":7},"empty":false}') == {("a_b", 3): 7}
    assert parse_position_checkpoint("") == {}
    (copy / "compaction/position-checkpoint").write_text("{not json")
    findings = Findings()
    assert read_position_checkpoint(copy, findings) is None
    assert [f.severity for f in findings] == ["error"]


def test_damaged_unit_and_record_are_findings(copy):
    cq = copy / "compaction/compactionCq/CompactT/0/00000000000000000000"
    data = bytearray(cq.read_bytes())
    data[46 + 28:46 + 36] = (12).to_bytes(8, "big")  # unit 2's msgBaseOffset 13 -> 12 (record says 13)
    data[4 * 46:4 * 46 + 8] = (99).to_bytes(8, "big")  # garbage after the last unit of the compacted file
    cq.write_bytes(bytes(data))
    log = copy / LOG0
    data = bytearray(log.read_bytes())
    data[292 + 200] ^= 0xFF  # a body byte of the record at 292: its CRC no longer matches
    log.write_bytes(bytes(data))
    _q, records, units, findings = _read(copy)
    assert len(records) == 9 and len(units) == 9
    got = sorted((f.file.rsplit("/", 1)[1], f.offset, f.severity, f.message.split(":")[0].split(" (")[0])
                 for f in findings)
    assert got == [
        ("00000000000000000000", 46, "error", "unit disagrees with its record"),
        ("00000000000000000000", 184, "error", "invalid unit; the broker's recovery ends the file here"),
        ("00000000000000000000", 292, "error", "body CRC mismatch"),
    ]


def test_missing_cq_file_and_stray_names(copy):
    (copy / "compaction/compactionCq/CompactT/0/00000000000000006900").unlink()
    (copy / "compaction/compactionLog/CompactT/0/compacting").mkdir()
    (copy / "compaction/compactionLog/CompactT/0/notes.txt").write_text("x")
    findings = Findings()
    q = CompactionQueue.open(copy, "CompactT", 0, findings)
    assert q.transient == ["compacting"]
    records, units = q.check(findings)
    assert len(records) == 9 and len(units) == 8
    assert sorted((f.severity, f.file.rsplit("/", 1)[1], " ".join(f.message.split()[:6])) for f in findings) == [
        ("info", "notes.txt", "ignoring unknown file notes.txt"),
        ("warning", "00000000000000006900", "compaction-log file has no compaction CQ"),
        ("warning", "00000000000000006900", "record at queue offset 21 has"),
    ]
