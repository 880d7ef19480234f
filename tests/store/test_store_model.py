"""The read-only store model on real stores, and on stores we damage: findings, never crashes."""

import shutil
import struct
from pathlib import Path

import pytest

from conftest import ORACLE, ORACLE_STORES, need_oracle
from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.store.errors import StoreError
from mqtool.store.store import Store


def writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_every_cq_unit_resolves_to_its_record(name):
    need_oracle()
    store = Store.open(ORACLE / ORACLE_STORES[name][0])
    units = 0
    for cq in store.consume_queues():
        for u in cq.iter_units():
            r = store.commitlog.read(u.commitlog_offset)
            assert (r.topic, r.queue_id, r.queue_offset, r.total_size) == (
                cq.topic, cq.queue_id, u.queue_offset, u.size), (name, cq.topic, cq.queue_id, u)
            units += 1
    assert units > 20


@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_oracle_commitlog_scans_clean(name):
    need_oracle()
    store = Store.open(ORACLE / ORACLE_STORES[name][0])
    records = list(store.commitlog.iter_records())
    jsonl = (ORACLE / ORACLE_STORES[name][1]).read_text().splitlines()
    assert len(records) == sum('"blank"' not in line for line in jsonl)
    assert store.commitlog.findings == []
    assert store.findings == []


def test_basic_store_layout():
    need_oracle()
    store = Store.open(ORACLE / "basic-5.3.1/store")
    log = store.commitlog
    assert [f.name for f in log.files] == ["00000000000000000000", "00000000000000065536"]
    assert log.queue.file_size == 65536
    list(log.iter_records())
    first = log.scans["commitlog/00000000000000000000"]
    assert (first.stop_reason, first.valid_bytes, first.records) == ("blank filler", 65029, 83)
    assert log.max_offset() == 96257 + 378
    q = store.consume_queue("TopicB", 1)
    assert (q.first_offset, q.max_offset, q.queue.file_size) == (0, 72, 1280)
    assert q.unit(64).commitlog_offset == 68509  # second CQ file
    assert store.consume_queue("SCHEDULE_TOPIC_XXXX", 17).max_offset == 2
    assert store.consume_queue("NoSuchTopic", 0) is None
    units = list(store.timerlog.iter_units())
    assert [u.kind for u in units] == ["normal", "normal", "roll", "normal", "delete", "normal"]
    assert store.timer_wheel.get_slot(1795369633000)[:4] == (1795369633000, 156, 208, 0)
    assert store.timer_wheel.get_slot(1795369634000).empty  # a slot whose stored time differs reads empty
    assert len(list(store.timer_wheel.iter_slots())) == 5
    assert store.timercheck.last_timer_log_flush_pos == 312
    assert store.config_files.delay_offsets is None  # the schedule service never ran


@pytest.fixture
def damaged(tmp_path) -> Path:
    need_oracle()
    return writable_copy(ORACLE / "basic-5.3.1/store", tmp_path / "store")


def scan(root: Path):
    store = Store.open(root)
    records = list(store.commitlog.iter_records())
    return store, records, [(f.file, f.offset, f.severity) for f in store.commitlog.findings]


def test_crc_mismatch_is_a_finding_and_the_scan_goes_on(damaged):
    f = damaged / "commitlog/00000000000000000000"
    data = bytearray(f.read_bytes())
    body_at = 251 + 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4  # second record's body
    data[body_at] ^= 0xFF
    f.write_bytes(bytes(data))
    store, records, findings = scan(damaged)
    assert len(records) == 115
    assert findings == [("commitlog/00000000000000000000", 251, "error")]
    assert "body CRC mismatch" in store.commitlog.findings[0].message


def test_torn_tail_stops_the_file_with_a_finding(damaged):
    f = damaged / "commitlog/00000000000000065536"
    data = bytearray(f.read_bytes())
    data[96257 - 65536 + 4 : 96257 - 65536 + 8] = b"\x00\x00\x00\x07"  # last record's magic destroyed
    f.write_bytes(bytes(data))
    store, records, findings = scan(damaged)
    assert len(records) == 114
    assert findings == [("commitlog/00000000000000065536", 96257, "error")]
    assert "bad magic code 0x00000007" in store.commitlog.findings[0].message
    s = store.commitlog.scans["commitlog/00000000000000065536"]
    assert s.stop_reason.startswith("invalid record") and s.trailing_bytes == 378


def test_size_mismatch_and_physical_offset(damaged):
    f = damaged / "commitlog/00000000000000000000"
    data = bytearray(f.read_bytes())
    data[502 + 28 : 502 + 36] = struct.pack(">q", 12345)  # PHYSICALOFFSET of the third record
    data[753 : 757] = struct.pack(">i", 999)  # TOTALSIZE of the fourth
    f.write_bytes(bytes(data))
    store, records, findings = scan(damaged)
    assert findings[:2] == [("commitlog/00000000000000000000", 502, "error"),
                            ("commitlog/00000000000000000000", 753, "error")]
    assert "PHYSICALOFFSET field 12345 != position 502" in store.commitlog.findings[0].message
    assert "TOTALSIZE 999 != computed length 263" in store.commitlog.findings[1].message
    assert len(records) == 3 + 32  # file 0 stops at 753; file 1 (32 records) is read whole


def test_missing_middle_file_is_a_gap(damaged, tmp_path):
    log = damaged / "commitlog"
    (log / "00000000000000065536").rename(log / "00000000000000131072")
    shutil.copy(log / "00000000000000000000", log / "00000000000000262144")
    store = Store.open(damaged)
    msgs = [f.message for f in store.commitlog.queue.findings]
    assert any("gap: next file should start at 00000000000000065536" in m for m in msgs)
    assert any("gap: next file should start at 00000000000000196608" in m for m in msgs)


def test_short_last_file_and_blank(damaged):
    f = damaged / "commitlog/00000000000000065536"
    f.write_bytes(f.read_bytes()[:2000])
    store, records, findings = scan(damaged)
    assert len(records) == 83 + 2  # two 991-byte records fit in 2000 bytes, the third is cut
    assert ("commitlog/00000000000000065536", 65536 + 1982, "error") in findings
    assert any("shorter" in x.message for x in store.commitlog.queue.findings)
    head = (damaged / "commitlog/00000000000000000000").read_bytes()[65029:65037]
    assert struct.unpack(">ii", head) == (507, BLANK_MAGIC_CODE)


def test_user_errors(tmp_path):
    with pytest.raises(StoreError, match="no such directory"):
        Store.open(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        Store.open(tmp_path / "file")
    with pytest.raises(StoreError, match="not a RocketMQ store"):
        Store.open(tmp_path)


def test_read_only_copy_opens(tmp_path):
    need_oracle()
    root = writable_copy(ORACLE / "pair_default/B", tmp_path / "ro")
    for p in root.rglob("*"):
        p.chmod(0o555 if p.is_dir() else 0o444)
    store = Store.open(root)
    assert len(list(store.commitlog.iter_records())) > 40
    assert store.config_files.delay_offsets.offset_table == {1: 2, 2: 1, 3: 2, 5: 1, 6: 1, 18: 0}
    assert store.config_files.consumer_offsets.offset("RMQ_SYS_TRANS_HALF_TOPIC", "CID_RMQ_SYS_TRANS", 0) == 14
