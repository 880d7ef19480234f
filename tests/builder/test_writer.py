"""StoreWriter: byte-exact rebuild of the real 5.3.1 oracle store, file-end rules, dispatch, extend."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

from mqtool.builder.writer import EMPTY_SLOT, StoreWriter, cq_file_size, read_records
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.checkpoint import checkpoint
from mqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.consumequeue import consumequeue_unit
from mqtool.formats.javahash import java_string_hash
from mqtool.formats.offsets_json import DataVersion, DelayOffsets, parse_delay_offsets
from mqtool.formats.timercheck import timercheck
from mqtool.formats.timerlog import TIMERLOG_BLANK_MAGIC, timerlog_blank, timerlog_unit
from mqtool.formats.timerwheel import SLOTS_TOTAL

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
BASIC = SHARED / "oracle" / "basic-5.3.1"
WHEEL_SHA256 = "d436f088ecf0093a8de296970fcdaa8aee90b793f28aaa408e59ddea5eefb671"
ORACLE_CONFIG = BrokerConfig(mapped_file_size_commitlog=65536, mapped_file_size_consume_queue=1280,
                             mapped_file_size_timer_log=65536)
SMALL = BrokerConfig(mapped_file_size_commitlog=1024, mapped_file_size_consume_queue=100,
                     mapped_file_size_timer_log=200)


def need_oracle() -> None:
    if not (BASIC / "store" / "commitlog").is_dir():
        pytest.skip(f"oracle store not found at {BASIC} (shared data absent)")


def replay(w: StoreWriter, records) -> None:
    """Append records with the same field values and the stored properties strings."""
    for r in records:
        w.append_message(r.topic, r.queue_id, r.body, r.properties_raw, flag=r.flag, sys_flag=r.sys_flag,
                         born_timestamp=r.born_timestamp, born_host=r.born_host, store_timestamp=r.store_timestamp,
                         store_host=r.store_host, reconsume_times=r.reconsume_times,
                         prepared_transaction_offset=r.prepared_transaction_offset)


def files_under(root: Path, *tops: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] in tops}


def summary_lines(prefix: str) -> list[dict[str, int]]:
    """key=value integers of the summary.txt lines starting with `prefix`."""
    text = (BASIC / "summary.txt").read_text()
    return [{k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)}
            for line in text.splitlines() if line.strip().startswith(prefix)]


# --------------------------------------------------------------------- the oracle, byte for byte


@pytest.mark.oracle
def test_rebuild_oracle_commitlog_and_consumequeues(tmp_path):
    need_oracle()
    src = BASIC / "store"
    records = read_records(src / "commitlog")
    assert len(records) == 115
    with StoreWriter(tmp_path / "s", ORACLE_CONFIG) as w:
        replay(w, records)
        assert w.commitlog_end == 96635
    want = files_under(src, "commitlog", "consumequeue")
    got = files_under(tmp_path / "s", "commitlog", "consumequeue")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name


@pytest.mark.oracle
def test_rebuild_oracle_timerlog_wheel_and_checkpoints_from_summary(tmp_path):
    need_oracle()
    units = summary_lines("pos=")
    slots = summary_lines("slotIndex=")
    assert len(units) == 6 and len(slots) == 5
    with StoreWriter(tmp_path / "s", ORACLE_CONFIG) as w:
        for u in units:
            pos = w.append_timerlog_unit(u["prevPos"], u["magic"], u["currWriteTimeMs"], u["delayMs"],
                                         u["offsetPy"], u["sizePy"], u["realTopicHash"], u["reserved"])
            assert pos == u["pos"]
        for s in slots:
            w.wheel.put_slot(s["timeMs"], s["firstPos"], s["lastPos"], s["num"], s["magic"])
        w.write_timercheck(1795362444000, 312, 6, 6, state_version=0, timestamp=1795362444193, counter=11)
        w.last_store_timestamp = 1795362439110
        w.write_checkpoint()
    out, src = tmp_path / "s", BASIC / "store"
    assert (out / "timerlog" / "00000000000000000000").read_bytes() == \
        (src / "timerlog" / "00000000000000000000").read_bytes()
    assert hashlib.sha256((out / "timerwheel").read_bytes()).hexdigest() == WHEEL_SHA256
    assert (out / "config" / "timercheck").read_bytes() == (src / "config" / "timercheck").read_bytes()
    assert (out / "checkpoint").read_bytes() == (src / "checkpoint").read_bytes()


# --------------------------------------------------------------------- CommitLog rules


def _filler_size(w: StoreWriter, topic: str, want: int) -> int:
    """Body length that makes a record of exactly `want` bytes on `topic` (no properties)."""
    return want - w.make_record(topic, 0).total_size


def test_blank_filler_when_size_plus_8_exceeds_remaining(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        first = w.append_message("T", 0, b"x" * _filler_size(w, "T", 500))
        assert first.total_size == 500
        fits = w.append_message("T", 0, b"x" * _filler_size(w, "T", 1024 - 500 - 8))  # size + 8 == remaining
        assert fits.physical_offset == 500
        moved = w.append_message("T", 0, b"x")  # 8 bytes remain: the next record needs a new file
        assert moved.physical_offset == 1024 and moved.file == "00000000000000001024"
    data = (tmp_path / "s" / "commitlog" / "00000000000000000000").read_bytes()
    assert int.from_bytes(data[1016:1020], "big") == 8
    assert int.from_bytes(data[1020:1024], "big", signed=True) == BLANK_MAGIC_CODE
    assert [r.physical_offset for r in read_records(tmp_path / "s" / "commitlog")] == [0, 500, 1024]


def test_record_too_big_for_any_file_is_refused(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w, pytest.raises(ValueError):
        w.append_message("T", 0, b"x" * 1100)


def test_batch_moves_whole_to_next_file(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        w.append_message("T", 0, b"x" * _filler_size(w, "T", 600))
        recs = w.append_batch("T", 1, [(b"a" * 150, ""), (b"b" * 150, "")])  # 2 x 215 + 8 > 424
    assert [r.physical_offset for r in recs] == [1024, 1024 + recs[0].total_size]
    assert [r.queue_offset for r in recs] == [0, 1]


def test_fields_offsets_and_tags_code(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        a = w.append_message("T", 2, b"a", [("TAGS", "TagA")], store_timestamp=5)
        b = w.append_message("T", 2, b"b", "KEYS\x01k\x02", store_timestamp=6)
        c = w.append_message("T", 3, b"c", [("TAGS", "a||b")])
    assert (a.physical_offset_field, a.queue_offset, b.queue_offset, c.queue_offset) == (0, 0, 1, 0)
    assert a.extra["tags_code"] == java_string_hash("TagA") and b.extra["tags_code"] == 0
    assert c.extra["tags_code"] == java_string_hash("a||b")  # multi-tag: hash of the whole string
    assert a.crc_ok and a.computed_size == a.total_size


def test_schedule_topic_tags_code_is_deliver_time(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        r3 = w.append_message("SCHEDULE_TOPIC_XXXX", 2, b"x", [("DELAY", "3")], store_timestamp=1000)
        r99 = w.append_message("SCHEDULE_TOPIC_XXXX", 17, b"x", [("DELAY", "99")], store_timestamp=1000)
    assert r3.extra["tags_code"] == 1000 + 10_000
    assert r99.extra["tags_code"] == 1000 + 7_200_000  # clamped to level 18 (2 h)


def test_prepared_and_rollback_records_are_not_dispatched(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        half = w.append_message("T", 0, b"h", sys_flag=0x4)
        rollback = w.append_message("T", 0, b"r", sys_flag=0xC)
        normal = w.append_message("T", 0, b"n")
        commit = w.append_message("T", 0, b"c", sys_flag=0x8, prepared_transaction_offset=half.physical_offset)
    assert (half.queue_offset, rollback.queue_offset, normal.queue_offset, commit.queue_offset) == (0, 0, 0, 1)
    units = (tmp_path / "s" / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes()
    first, second = (consumequeue_unit.parse(units[i : i + 20]) for i in (0, 20))
    assert first.commitlog_offset == normal.physical_offset and second.commitlog_offset == commit.physical_offset


def test_magic_v2_for_long_topics_and_v6_flags(tmp_path):
    topic = "%RETRY%" + "g" * 121
    with StoreWriter(tmp_path / "s", SMALL) as w:
        rec = w.append_message(topic, 0, b"x", born_host="[2001:db8::5]:1", store_host="[::1]:10911")
    assert rec.magic_code == MESSAGE_MAGIC_CODE_V2 and rec.sys_flag == 0x30
    assert read_records(tmp_path / "s" / "commitlog")[0].topic == topic
    with StoreWriter(tmp_path / "s4", SMALL, "4.9") as w4, pytest.raises(ValueError):
        w4.append_message(topic, 0, b"x")


# --------------------------------------------------------------------- ConsumeQueue rules


def test_consume_queue_rolls_files_and_rounds_size(tmp_path):
    assert cq_file_size(100) == 100 and cq_file_size(410) == 420
    with StoreWriter(tmp_path / "s", SMALL) as w:
        for i in range(6):
            w.append_message("T", 0, b"%d" % i)
    qdir = tmp_path / "s" / "consumequeue" / "T" / "0"
    assert sorted(p.name for p in qdir.iterdir()) == ["00000000000000000000", "00000000000000000100"]
    assert all(p.stat().st_size == 100 for p in qdir.iterdir())


def test_first_unit_at_nonzero_offset_fills_pre_blank(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        rec = w.append_message("T", 0, b"x", queue_offset=7)
        again = w.append_message("T", 0, b"y")
    assert (rec.queue_offset, again.queue_offset) == (7, 8)
    qdir = tmp_path / "s" / "consumequeue" / "T" / "0"
    assert [p.name for p in sorted(qdir.iterdir())] == ["00000000000000000100"]  # file 0 never created
    data = (qdir / "00000000000000000100").read_bytes()
    assert consumequeue_unit.parse(data[0:20]).size == 0x7FFFFFFF  # unit 5: pre-blank
    assert consumequeue_unit.parse(data[20:40]).size == 0x7FFFFFFF  # unit 6
    assert consumequeue_unit.parse(data[40:60]).commitlog_offset == rec.physical_offset
    assert consumequeue_unit.parse(data[60:80]).commitlog_offset == again.physical_offset


# --------------------------------------------------------------------- TimerLog and wheel


def test_timerlog_filler_when_unit_plus_16_exceeds_remaining(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        positions = [w.append_timerlog_unit(-1, 1, 1000, 5000, i, 100, 7) for i in range(4)]
    assert positions == [0, 52, 104, 200]  # at 156 only 44 bytes remain: 16-byte filler
    data = (tmp_path / "s" / "timerlog" / "00000000000000000000").read_bytes()
    blank = timerlog_blank.parse(data[156:172])
    assert blank.remaining == 44 and blank.magic == TIMERLOG_BLANK_MAGIC
    unit = timerlog_unit.parse((tmp_path / "s" / "timerlog" / "00000000000000000200").read_bytes()[:52])
    assert unit.offset_py == 3 and unit.curr_write_time_ms == 1000


def test_wheel_slot_time_is_stored_divided_by_precision(tmp_path):
    cfg = BrokerConfig(timer_precision_ms=100, mapped_file_size_timer_log=4096)
    with StoreWriter(tmp_path / "s", cfg) as w:
        w.wheel.put_slot(1_000_000_050, 52, 104, 2)
        slot = w.wheel.get_slot(1_000_000_000)
        other = w.wheel.get_slot(1_000_000_000 + SLOTS_TOTAL * 2 * 100)  # same index, another time
    raw = (tmp_path / "s" / "timerwheel").read_bytes()
    index = 1_000_000_000 // 100 % (SLOTS_TOTAL * 2)
    assert int.from_bytes(raw[index * 32 : index * 32 + 8], "big") == 10_000_000
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (1_000_000_000, 52, 104, 2)
    assert other == EMPTY_SLOT and len(raw) == 38_707_200


# --------------------------------------------------------------------- checkpoints and config files


def test_checkpoint_timercheck_and_json_bak(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL) as w:
        w.append_message("T", 0, b"x", store_timestamp=1234)
        w.write_checkpoint()
        w.write_timercheck(5000, last_timer_queue_offset=3, counter=2)
        w.write_delay_offsets(DelayOffsets({1: 1}, DataVersion(1, 0, 10)))
        w.write_delay_offsets(DelayOffsets({1: 2}, DataVersion(2, 0, 20)))
    cfg = tmp_path / "s" / "config"
    cp = checkpoint.parse((tmp_path / "s" / "checkpoint").read_bytes())
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp) == (1234, 1234)
    tc = timercheck.parse((cfg / "timercheck").read_bytes())
    got = (tc.last_read_time_ms, tc.last_timer_queue_offset, tc.master_timer_queue_offset, tc.counter)
    assert got == (5000, 3, 3, 2)
    assert parse_delay_offsets((cfg / "delayOffset.json").read_text()).offset_table == {1: 2}
    assert parse_delay_offsets((cfg / "delayOffset.json.bak").read_text()).offset_table == {1: 1}


def test_fresh_writer_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "x").write_text("")
    with pytest.raises(FileExistsError):
        StoreWriter(tmp_path / "s")


# --------------------------------------------------------------------- extend


@pytest.mark.oracle
def test_extend_oracle_copies_gunzips_and_continues(tmp_path):
    need_oracle()
    src = BASIC / "store"
    before = {p: p.stat().st_mtime_ns for p in src.rglob("*")}
    w = StoreWriter.extend(src, tmp_path / "out")
    assert (w.commitlog.file_size, w.cq_size, w.timerlog.file_size) == (65536, 1280, 65536)
    assert (w.commitlog_end, w.timerlog_end, w.last_store_timestamp) == (96635, 312, 1795362439110)
    assert w.next_queue_offset("TopicB", 1) == 72 and w.next_queue_offset("rmq_sys_wheel_timer", 0) == 6
    rec = w.append_message("TopicB", 1, b"after", [("TAGS", "TagA")], store_timestamp=1795362440000)
    slot = w.wheel.get_slot(1795369633000)
    w.close()
    assert (rec.physical_offset, rec.queue_offset) == (96635, 72)
    assert (slot.first_pos, slot.last_pos, slot.num) == (156, 208, 0)
    out = tmp_path / "out"
    with gzip.open(src / "timerwheel.gz") as fh:
        assert (out / "timerwheel").read_bytes() == fh.read()
    assert not (out / "timerwheel.gz").exists()
    unit = (out / "consumequeue" / "TopicB" / "1" / "00000000000000001280").read_bytes()[8 * 20 : 9 * 20]
    assert consumequeue_unit.parse(unit).commitlog_offset == 96635
    assert {p: p.stat().st_mtime_ns for p in src.rglob("*")} == before


def test_extend_stops_at_a_torn_record_and_drops_later_files(tmp_path):
    with StoreWriter(tmp_path / "a", SMALL) as w:
        recs = [w.append_message("T", 0, b"y" * 300, store_timestamp=i) for i in range(6)]
    assert recs[-1].physical_offset >= 1024  # two files
    first = tmp_path / "a" / "commitlog" / "00000000000000000000"
    data = bytearray(first.read_bytes())
    data[recs[1].physical_offset + 8] ^= 0xFF  # BODYCRC of the second record
    first.write_bytes(bytes(data))
    w2 = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert (w2.commitlog_end, w2.last_store_timestamp) == (recs[1].physical_offset, 0)
    assert sorted(p.name for p in (tmp_path / "b" / "commitlog").iterdir()) == ["00000000000000000000"]
    rec = w2.append_message("T", 0, b"z")
    w2.close()
    assert rec.physical_offset == recs[1].physical_offset
    assert rec.queue_offset == 6  # queue offsets come from the ConsumeQueue, as 5.x recovers them


def test_commitlog_start_and_undispatched_records(tmp_path):
    with StoreWriter(tmp_path / "s", SMALL, commitlog_start=2048) as w:
        rec = w.append_message("T", 0, b"x", dispatch=False)
        nxt = w.append_message("T", 0, b"y")
    assert (rec.physical_offset, rec.file, rec.queue_offset, nxt.queue_offset) == (2048, "00000000000000002048", 0, 1)
    data = (tmp_path / "s" / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes()
    # rec never reached the queue; nxt is the queue's first unit, at offset 1: a pre-blank fills unit 0
    assert consumequeue_unit.parse(data[:20]).size == 0x7FFFFFFF
    assert consumequeue_unit.parse(data[20:40]).commitlog_offset == nxt.physical_offset
