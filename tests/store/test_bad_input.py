"""Issue 27, bad input: damaged store files the broker reads are findings (file, offset, reason), never
silence. Each store is a copy of one RocketMQ 5.3.1 wrote (basic-5.3.1: ConsumeQueue files of 1,280 B)
or of the demo fixture, with one file damaged."""

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.broker_conf import parse_broker_conf
from mqtool.inspect.overview import overview
from mqtool.store.store import Store

NOW = 1795462444000
BASIC = ORACLE / "basic-5.3.1" / "store"


@pytest.fixture
def basic(tmp_path) -> Path:
    need_oracle()
    return copy_with_wheel(BASIC, tmp_path / "basic")


def errors(doc: dict) -> list[tuple]:
    return [(f["file"], f["offset"], f["message"]) for f in doc["findings"] if f["severity"] == "error"]


def test_a_consume_queue_file_cut_to_1000_bytes_is_an_error(basic):
    """MappedFileQueue.load refuses a file whose length is not mappedFileSizeConsumeQueue: the broker does not
    start. The length comes from the store's other ConsumeQueue files (all 1,280 B) or from broker.conf."""
    cq = basic / "consumequeue" / "TopicB" / "0" / "00000000000000000000"
    cq.write_bytes(cq.read_bytes()[:1000])
    want = [
        (
            "consumequeue/TopicB/0/00000000000000000000",
            1000,
            "file is 1000 bytes, not 1280: MappedFileQueue.load "
            "refuses a file of another length, the broker does not start",
        )
    ]
    assert errors(overview(Store.open(basic), NOW)) == want
    conf = parse_broker_conf("mappedFileSizeConsumeQueue=1270\n")  # rounded up to whole 20-byte units: 1280
    assert errors(overview(Store.open(basic, conf), NOW)) == want


def test_consume_queue_files_longer_than_broker_conf_says(tmp_path):
    """broker.conf decides when it sets the size: the demo's 400-byte files against a 6,000,000 B setting."""
    store = Store.open(FIXTURES / "demo", parse_broker_conf("mappedFileSizeConsumeQueue=6000000\n"))
    q = store.consume_queue("DemoTopicA", 0)
    assert [(f.file, f.offset, f.severity) for f in q.findings] == [
        ("consumequeue/DemoTopicA/0/00000000000000000000", 400, "error")
    ]
    assert q.max_offset == 3  # the units are read all the same


def test_a_10_byte_checkpoint_is_short_not_absent(basic):
    """StoreCheckpoint maps a 4 KiB page and reads five longs: the missing bytes read as 0."""
    cp = basic / "checkpoint"
    head = cp.read_bytes()[:10]
    cp.write_bytes(head)
    store = Store.open(basic)
    doc = overview(store, NOW)
    assert errors(doc) == [
        (
            "checkpoint",
            10,
            "file is 10 bytes, shorter than the 40 StoreCheckpoint reads: the "
            "broker maps a 4096-byte page and reads the missing bytes as 0",
        )
    ]
    assert doc["checkpoint"]["physic_msg_timestamp"] == int.from_bytes(head[:8], "big")
    assert doc["checkpoint"]["logics_msg_timestamp"] == int.from_bytes(head[8:10] + bytes(6), "big")
    assert doc["checkpoint"]["confirm_phy_offset"] == 0


def test_an_empty_timercheck_is_a_finding(basic):
    (basic / "config" / "timercheck").write_bytes(b"")
    doc = overview(Store.open(basic), NOW)
    assert errors(doc) == [
        ("config/timercheck", 0, "file is empty: the broker maps a 4096-byte page and reads the missing bytes as 0")
    ]
    assert doc["timer"]["checkpoint"]["last_read_time_ms"] == 0


def test_a_store_of_a_timercheck_alone(tmp_path):
    """No CommitLog: the layout line says so (it printed Python's None for the first and last file)."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "timercheck").write_bytes((FIXTURES / "demo" / "config" / "timercheck").read_bytes())
    doc = overview(Store.open(tmp_path), NOW)
    assert doc["files"]["commitlog"]["files"] == 0 and doc["finding_counts"]["error"] == 0
    assert doc["timer"]["checkpoint"]["last_read_time_ms"] == 1790000020000
    assert "None" not in json.dumps(doc)


def test_restart_refuses_what_the_overview_finds_and_nothing_else(basic):
    """One answer: without broker.conf the CommitLog's file size is what its files show (65,536 B here), so a
    healthy store is not "refused" by the restart preview (it compared with the 1 GiB default); a cut last file
    is refused there and an error in the overview."""
    from mqtool.store.findings import Findings
    from mqtool.store.recovery import recovery_plan

    assert recovery_plan(Store.open(basic), Findings())["commitlog"]["load_refused"] == []
    last = basic / "commitlog" / "00000000000000065536"
    last.write_bytes(last.read_bytes()[:5000])
    store = Store.open(basic)
    assert recovery_plan(store, Findings())["commitlog"]["load_refused"] == [
        "commitlog/00000000000000065536 is 5000 bytes, mappedFileSizeCommitLog is 65536"
    ]
    assert [(f.file, f.offset, f.severity) for f in store.file_findings() if f.check == "commitlog.files"] == [
        ("commitlog/00000000000000065536", 5000, "error")
    ]
