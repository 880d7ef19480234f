"""`mqtool.rules.recovery` against hand-worked cases of CommitLog/ConsumeQueue/TimerLog recovery (5.3.1)."""

from mqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.timerlog import TIMERLOG_BLANK_MAGIC
from mqtool.rules import recovery as r

SIZE = 1000


def walk(i: int, end: int, blank: bool = True, ts: int = 0, crc: int | None = None, magic=MESSAGE_MAGIC_CODE):
    return r.FileWalk(i * SIZE, end, blank, "blank filler" if blank else "unwritten (zero) tail", crc, magic, ts)


FILES = [walk(0, 990, ts=100), walk(1, 980, ts=200), walk(2, 970, ts=300), walk(3, 960, ts=400),
         walk(4, 400, blank=False, ts=500, crc=250)]


def test_min_timestamp_is_the_older_flush_minus_three_seconds():
    assert r.get_min_timestamp(10_000, 8_000) == 5_000
    assert r.get_min_timestamp(1_000, 2_000) == 0  # never negative
    assert r.get_min_timestamp_index(10_000, 8_000, 4_000) == 4_000
    assert r.recover_min_timestamp(10_000, 8_000, 4_000) == 5_000  # messageIndexSafe=false by default
    assert r.recover_min_timestamp(10_000, 8_000, 4_000, message_index_safe=True) == 4_000


def test_matched_recover_needs_a_message_magic_and_an_old_enough_first_record():
    assert r.is_mapped_file_matched_recover(MESSAGE_MAGIC_CODE, 300, 300)
    assert not r.is_mapped_file_matched_recover(MESSAGE_MAGIC_CODE, 301, 300)
    assert not r.is_mapped_file_matched_recover(BLANK_MAGIC_CODE, 100, 300)
    assert not r.is_mapped_file_matched_recover(MESSAGE_MAGIC_CODE, 0, 300)  # storeTimestamp 0
    assert r.is_mapped_file_matched_recover(MESSAGE_MAGIC_CODE_V2, 100, 300)
    assert not r.is_mapped_file_matched_recover(MESSAGE_MAGIC_CODE_V2, 100, 300, v4=True)


def test_normal_recovery_starts_at_the_third_last_file():
    rec = r.recover_normally(FILES, check_crc=False)
    assert (rec.mode, rec.check_from, rec.end, rec.stop_file) == ("normal", 2000, 4400, 4000)
    assert rec.deleted_files == []


def test_crc_check_ends_the_data_at_the_first_bad_body():
    rec = r.recover_normally(FILES, check_crc=True)
    assert rec.end == 4250
    assert "CRC" in rec.stop_reason


def test_abnormal_recovery_starts_at_the_newest_file_older_than_the_checkpoint():
    rec = r.recover_abnormally(FILES, min_timestamp=250, check_crc=True)
    assert (rec.mode, rec.check_from, rec.end) == ("abnormal", 1000, 4250)
    # nothing old enough: the first file
    assert r.recover_abnormally(FILES, min_timestamp=50).check_from == 0


def test_a_torn_middle_file_deletes_every_later_file():
    files = [walk(0, 990, ts=1), walk(1, 500, blank=False, ts=2), walk(2, 990, ts=3), walk(3, 100, blank=False, ts=4)]
    rec = r.recover_abnormally(files, min_timestamp=10**12)
    # the last file whose first record is old enough is file 3; only the walk from there counts
    assert (rec.check_from, rec.end) == (3000, 3100)
    rec = r.recover_normally(files)  # from file 1: stops at its torn record
    assert (rec.check_from, rec.end, rec.deleted_files) == (1000, 1500, [2000, 3000])


def test_no_files_no_recovery():
    assert r.recover_normally([]) is None
    assert r.recover_abnormally([], 0) is None


def test_consume_queue_recovery_and_truncation():
    units = [(0, 100), (100, 120), (220, 90), (310, 0), (400, 10)]
    assert r.consume_queue_recover(units) == 3  # size 0 ends the queue
    assert r.max_physic_offset(units) == 310
    assert r.max_physic_offset([]) == -1
    assert r.needs_truncate_dirty_logic_files(310, 310)  # ">=": called, truncates nothing
    assert not r.needs_truncate_dirty_logic_files(309, 310)
    offsets = [0, 100, 220]
    assert r.truncate_dirty_logic_files(offsets, 310) == 3
    assert r.truncate_dirty_logic_files(offsets, 220) == 2
    assert r.truncate_dirty_logic_files(offsets, 0) == 0


def test_timerlog_recovery_stops_at_a_bad_unit_and_crosses_fillers():
    ok = (52, 1)
    blank = (16, TIMERLOG_BLANK_MAGIC)
    files = [(0, [ok, ok, blank]), (200, [ok, (52, 3), (0, 0)])]
    assert r.timer_recover_begin(250, 200) == 50
    assert r.timer_recover_begin(100, 200) == 0
    assert r.recover_and_revise(files, 50) == 304  # file 0 ends at its filler; file 1: 2 units
    files[1] = (200, [ok, (52, 0x10), ok])  # a magic with a high bit: stop
    assert r.recover_and_revise(files, 250) == 252
    assert r.recover_and_revise([], 0) == 0


def test_timer_read_time_is_capped_by_the_wheel_length():
    assert r.timer_read_time(5_000, 10_500, 1000, 604_800) == 5_000
    now = 10**12 + 500
    assert r.timer_read_time(0, now, 1000, 604_800) == 10**12 - 604_800_000 + 60_000


def test_index_files_newer_than_the_checkpoint_are_destroyed_after_a_crash():
    files = [("20240101000000000", 100), ("20240102000000000", 250)]
    assert r.index_files_to_destroy(files, 200, last_exit_ok=False) == ["20240102000000000"]
    assert r.index_files_to_destroy(files, 200, last_exit_ok=True) == []


def test_timer_enqueue_resumes_after_the_last_units_record():
    assert r.revise_queue_offset(6, 5, 10) == 7
    assert r.revise_queue_offset(None, 5, 10) == 5  # the record is gone: the checkpoint's offset
    assert r.revise_queue_offset(12, 5, 10) == 10  # capped by masterTimerQueueOffset
