"""What `DefaultMessageStore.load` does to the files when a broker starts (rocketmq-all-5.3.1, 4.9.8).

`DefaultMessageStore.recover`: every ConsumeQueue is recovered first (`ConsumeQueue.recover`), their
largest `offset + size` is `maxPhyOffsetOfConsumeQueue`; then the CommitLog: `recoverNormally` when
the `abort` file is absent (`isTempFileExist`), else `recoverAbnormally`. Both walk records with
`checkMessageAndReturnSize` and stop at the first invalid one (bad magic, computed length != TOTALSIZE,
body CRC mismatch when `checkCRCOnRecover`); a BLANK filler moves on to the next file. Where the walk
stops is the end of valid data (`processOffset`): CommitLog files after it are deleted
(`MappedFileQueue.truncateDirtyFiles`) and, when some queue reaches it, every ConsumeQueue loses its
units at or past it (`truncateDirtyLogicFiles`). The TimerLog is recovered on its own
(`TimerMessageStore.recover` -> `recoverAndRevise`): its units are not checked against the CommitLog.
An abnormal start also destroys index files written after the checkpoint's index time (`IndexService.load`).

Pure functions on plain values (what the store's readers found); the Java name is in each docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.timerlog import TIMERLOG_BLANK_MAGIC, TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import TIMER_BLANK_SLOTS

CHECKPOINT_SAFETY_MS = 3000  # StoreCheckpoint.getMinTimestamp: min -= 1000 * 3


@dataclass(frozen=True)
class FileWalk:
    """One CommitLog file as `checkMessageAndReturnSize` sees it, from the store's record walk.

    `end` is the file position where the structural walk stopped (BLANK filler, invalid record,
    zeros, end of file); `first_crc_error` the position of the first record whose body CRC does not
    match (None: all match, or not checked); `first_magic`/`first_store_timestamp` the first
    record's MAGICCODE and STORETIMESTAMP (what `isMappedFileMatchedRecover` reads).
    """

    start: int
    end: int
    blank: bool
    stop_reason: str
    first_crc_error: int | None = None
    first_magic: int = 0
    first_store_timestamp: int = 0


@dataclass(frozen=True)
class CommitLogRecovery:
    """Where recovery checks from and where valid data ends (`processOffset`)."""

    mode: str  # "normal" | "abnormal"
    check_from: int  # start offset of the first file re-checked
    end: int  # processOffset: the end of valid data
    stop_file: int  # start offset of the file where the walk stopped
    stop_reason: str
    deleted_files: list[int] = field(default_factory=list)  # files wholly past `end`: destroyed


def get_min_timestamp(physic_msg_timestamp: int, logics_msg_timestamp: int) -> int:
    """`StoreCheckpoint.getMinTimestamp`: the older flush time minus 3 s, never below 0."""
    return max(0, min(physic_msg_timestamp, logics_msg_timestamp) - CHECKPOINT_SAFETY_MS)


def get_min_timestamp_index(physic_msg_timestamp: int, logics_msg_timestamp: int, index_msg_timestamp: int) -> int:
    """`StoreCheckpoint.getMinTimestampIndex`: also no later than the index flush time."""
    return min(get_min_timestamp(physic_msg_timestamp, logics_msg_timestamp), index_msg_timestamp)


def recover_min_timestamp(physic: int, logics: int, index: int, message_index_enable: bool = True,
                          message_index_safe: bool = False) -> int:
    """The checkpoint time `isMappedFileMatchedRecover` compares with (index time only when both
    `messageIndexEnable` and `messageIndexSafe`)."""
    if message_index_enable and message_index_safe:
        return get_min_timestamp_index(physic, logics, index)
    return get_min_timestamp(physic, logics)


def is_mapped_file_matched_recover(first_magic: int, first_store_timestamp: int, min_timestamp: int,
                                   v4: bool = False) -> bool:
    """`CommitLog.isMappedFileMatchedRecover`: the file starts with a message stored no later than the
    checkpoint's time (4.9.8 accepts the V1 magic only; the RocksDB-store variant is not modelled)."""
    magics = (MESSAGE_MAGIC_CODE,) if v4 else (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
    if first_magic not in magics or first_store_timestamp == 0:
        return False
    return first_store_timestamp <= min_timestamp


def check_file(walk: FileWalk, check_crc: bool) -> tuple[int, bool, str]:
    """(end, next file?, why) of one file's `checkMessageAndReturnSize` loop: a CRC mismatch (when
    checked) ends the data at that record; a BLANK filler (size 0, success) moves to the next file."""
    if check_crc and walk.first_crc_error is not None and walk.first_crc_error < walk.end:
        return walk.first_crc_error, False, "invalid record: body CRC mismatch (checkCRCOnRecover)"
    return walk.end, walk.blank, walk.stop_reason


def _walk_from(files: Sequence[FileWalk], index: int, check_crc: bool, mode: str) -> CommitLogRecovery:
    check_from = files[index].start
    while True:
        f = files[index]
        end, more, why = check_file(f, check_crc)
        if not more or index + 1 >= len(files):
            process = f.start + end
            if more:
                why = "last file ends with a BLANK filler"
            deleted = [g.start for g in files if g.start > process]
            return CommitLogRecovery(mode, check_from, process, f.start, why, deleted)
        index += 1


def recover_normally(files: Sequence[FileWalk], check_crc: bool = True) -> CommitLogRecovery | None:
    """`CommitLog.recoverNormally`: re-check from the third-last file; None when there are no files."""
    if not files:
        return None
    return _walk_from(files, max(0, len(files) - 3), check_crc, "normal")


def recover_abnormally(files: Sequence[FileWalk], min_timestamp: int, check_crc: bool = True,
                       v4: bool = False) -> CommitLogRecovery | None:
    """`CommitLog.recoverAbnormally`: re-check (and re-dispatch) from the newest file whose first
    record is older than the checkpoint (`isMappedFileMatchedRecover`), else from the first file."""
    if not files:
        return None
    index = 0
    for i in range(len(files) - 1, -1, -1):
        if is_mapped_file_matched_recover(files[i].first_magic, files[i].first_store_timestamp, min_timestamp, v4):
            index = i
            break
    return _walk_from(files, index, check_crc, "abnormal")


def consume_queue_recover(units: Sequence[tuple[int, int]]) -> int:
    """`ConsumeQueue.recover`: the number of valid units (a unit with offset < 0 or size <= 0 ends it).

    `units` are (commitLogOffset, size) in queue order."""
    for i, (offset, size) in enumerate(units):
        if offset < 0 or size <= 0:
            return i
    return len(units)


def max_physic_offset(units: Sequence[tuple[int, int]]) -> int:
    """`ConsumeQueue.getMaxPhysicOffset` after recovery: offset + size of the last valid unit (-1: none)."""
    n = consume_queue_recover(units)
    if n == 0:
        return -1
    offset, size = units[n - 1]
    return offset + size


def needs_truncate_dirty_logic_files(max_phy_offset_of_consume_queue: int, process_offset: int) -> bool:
    """The condition in `recoverNormally`/`recoverAbnormally`: some queue reaches the end of valid data."""
    return max_phy_offset_of_consume_queue >= process_offset


def truncate_dirty_logic_files(offsets: Sequence[int], phy_offset: int) -> int:
    """`ConsumeQueue.truncateDirtyLogicFiles`: the number of units kept (units refer to the CommitLog
    in increasing order, so the first unit at or past `phy_offset` and all after it go)."""
    for i, offset in enumerate(offsets):
        if offset >= phy_offset:
            return i
    return len(offsets)


def timer_recover_begin(last_timer_log_flush_pos: int, last_file_size: int | None) -> int:
    """`TimerMessageStore.recover`: the TimerLog is re-checked from one file size before the flush position."""
    begin = last_timer_log_flush_pos - (last_file_size or 0)
    return max(0, begin)


def is_magic_ok(magic: int) -> bool:
    """`TimerMessageStore.isMagicOK`: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


def recover_and_revise(files: Sequence[tuple[int, Sequence[tuple[int, int]]]], begin_offset: int,
                       blank_magic: int = TIMERLOG_BLANK_MAGIC) -> int:
    """`TimerMessageStore.recoverAndRevise(begin, checkTimerLog=true)`: the TimerLog's end after recovery.

    `files` are (file start, [(size, magic) of each 52-byte step from position 0]) in order; the walk
    starts in the last file whose start <= `begin_offset`, moves to the next file at a BLANK magic and
    stops (truncating there) at a unit with a bad magic or a size other than 52.
    """
    if not files:
        return 0
    index = 0
    for i in range(len(files) - 1, -1, -1):
        if begin_offset >= files[i][0]:
            index = i
            break
    check = files[index][0]
    for start, steps in files[index:]:
        position = 0
        stop = False
        for size, magic in steps:
            if magic == blank_magic:
                break
            if not is_magic_ok(magic) or size != TIMERLOG_UNIT_SIZE:
                stop = True
                break
            position += TIMERLOG_UNIT_SIZE
        check = start + position
        if stop:
            break
    return check


def timer_read_time(last_read_time_ms: int, now_ms: int, precision_ms: int, slots_total: int) -> int:
    """`TimerMessageStore.recover`: `currReadTimeMs` = the checkpoint's read time, but never older than
    the wheel can hold (now - slotsTotal x precision + TIMER_BLANK_SLOTS x precision, now floored)."""
    now = now_ms - now_ms % precision_ms
    return max(last_read_time_ms, now - slots_total * precision_ms + TIMER_BLANK_SLOTS * precision_ms)


def index_files_to_destroy(files: Sequence[tuple[str, int]], index_msg_timestamp: int, last_exit_ok: bool) -> list[str]:
    """`IndexService.load`: after an abnormal exit, index files whose endTimestamp is later than the
    checkpoint's `indexMsgTimestamp` are destroyed (`files`: name and header endTimestamp)."""
    if last_exit_ok:
        return []
    return [name for name, end_ts in files if end_ts > index_msg_timestamp]



def revise_queue_offset(last_unit_queue_offset: int | None, last_timer_queue_offset: int,
                        master_timer_queue_offset: int) -> int:
    """`TimerMessageStore.recover` + `reviseQueueOffset`: the timer queue offset the enqueue resumes at.

    The queue offset of the last recovered TimerLog unit's record + 1; when that record cannot be read
    (-1) the checkpoint's `lastTimerQueueOffset`; never past `masterTimerQueueOffset`."""
    current = last_timer_queue_offset if last_unit_queue_offset is None else last_unit_queue_offset + 1
    return min(current, master_timer_queue_offset)
