"""fixtures/demo, fixtures/crash and the layout fixtures: deterministic, equal to the committed copy; the demo holds
every message kind."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.builder.crash import write_crash_fixture
from mqtool.builder.demo import T0, T_STOP, demo_config, write_fixtures
from mqtool.builder.fleet_fixture import write_fleet_fixture
from mqtool.builder.layout_fixtures import BUILDERS, write_layout_fixtures
from mqtool.builder.writer import read_records
from mqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.offsets_json import parse_consumer_offsets, parse_delay_offsets
from mqtool.formats.timercheck import timercheck
from mqtool.formats.timerlog import timerlog_unit

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "fixtures"


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under root, by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fixtures")
    write_fixtures(out)
    write_crash_fixture(out)
    write_layout_fixtures(out)  # scripts/make_fixtures.py writes all of them
    write_fleet_fixture(out)
    return out


def test_script_is_deterministic(fresh, tmp_path):
    again = tmp_path / "again"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_fixtures.py"), "--out", str(again)],
                   check=True, capture_output=True)
    assert tree_hashes(again) == tree_hashes(fresh)


def test_committed_fixtures_equal_a_fresh_generation(fresh):
    if not (COMMITTED / "demo").is_dir():
        pytest.fail("fixtures/demo is absent (a defect: it is committed); regenerate it with scripts/make_fixtures.py")
    layouts = tuple(f"{name}/" for name in BUILDERS)
    committed = {k: v for k, v in tree_hashes(COMMITTED).items()
                 if k.startswith(("demo/", "crash/", "fleet/", *layouts)) or k in (
                     "demo.broker.conf", "README.md", "crash.broker.conf", "crash.md", "layouts.md",
                     *(f"{name}.broker.conf" for name in BUILDERS))}
    assert committed == tree_hashes(fresh)


def test_layout_and_file_ends(fresh):
    store = fresh / "demo"
    config = demo_config()
    files = sorted((store / "commitlog").iterdir())
    assert len(files) >= 2 and all(f.stat().st_size == 16384 for f in files)
    assert config.mapped_file_size_consume_queue == 400 and config.mapped_file_size_timer_log == 4096
    records = read_records(store / "commitlog")
    first_end = max(r.end_offset for r in records if r.file == files[0].name)
    data = files[0].read_bytes()
    assert int.from_bytes(data[first_end + 4 : first_end + 8], "big", signed=True) == BLANK_MAGIC_CODE
    assert len(list((store / "consumequeue" / "DemoTopicB" / "1").iterdir())) == 2
    assert all(p.stat().st_size == 400 for p in (store / "consumequeue").rglob("0000*"))
    assert (store / "timerwheel").stat().st_size == 38_707_200
    assert not (store / "broker.conf").exists() and (fresh / "demo.broker.conf").is_file()


def test_every_message_kind_is_present(fresh):
    records = read_records(fresh / "demo" / "commitlog")
    by_label: dict[str, list] = {}
    for r in records:
        by_label.setdefault(r.properties.get("KEYS", r.topic), []).append(r)
    topics = {r.topic for r in records}
    assert {"DemoTopicA", "DemoTopicB", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "%RETRY%GID_demo", "%DLQ%GID_demo"} <= topics
    assert any(r.magic_code == MESSAGE_MAGIC_CODE_V2 and len(r.topic) > 127 for r in records)
    assert any(r.sys_flag & 0x30 == 0x30 for r in records)
    assert any(r.compression == "zlib" for r in records)
    commit = [r for r in records if r.transaction == "commit"]
    assert len(commit) == 1 and commit[0].prepared_transaction_offset == by_label["H1commit"][0].physical_offset
    assert {r.properties["DELAY"] for r in by_label["D20"]} == {"18"}
    delivered = [r for r in by_label["D1a"] if r.topic == "DemoTopicA"]
    assert delivered and {"DELAY", "REAL_TOPIC", "REAL_QID"} <= set(delivered[0].properties)
    assert [r.topic for r in by_label["H4discard"]][-1] == "TRANS_CHECK_MAX_TIME_TOPIC"
    assert [r.body for r in records if r.topic == "RMQ_SYS_TRANS_OP_HALF_TOPIC"] == [b"0,1,"]
    assert all(T0 <= r.store_timestamp <= T_STOP for r in records)


def test_timer_files_and_config(fresh):
    store = fresh / "demo"
    log = (store / "timerlog" / "00000000000000000000").read_bytes()
    units = [timerlog_unit.parse(log[i : i + 52]) for i in range(0, 5 * 52, 52)]
    assert [u.magic for u in units] == [1, 1, 3, 1, 5] and units[4].prev_pos == 156
    assert units[2].delayed_time_delta == 86_400_000  # +2 d 10 h rolled to write time + 1 d
    check = timercheck.parse((store / "config" / "timercheck").read_bytes())
    assert (check.last_read_time_ms, check.last_timer_log_flush_pos, check.last_timer_queue_offset) == (T_STOP, 260, 5)
    delay = parse_delay_offsets((store / "config" / "delayOffset.json").read_text())
    assert delay.offset_table == {1: 3, 3: 1, 18: 0}
    offsets = parse_consumer_offsets((store / "config" / "consumerOffset.json").read_text())
    assert offsets.offset("RMQ_SYS_TRANS_HALF_TOPIC", "CID_RMQ_SYS_TRANS", 0) == 4
    assert offsets.offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", "CID_RMQ_SYS_TRANS", 0) == 1
    assert offsets.offset("DemoTopicA", "GID_demo", 2) == 4
