"""TimerLog unit and its file-end filler (spec §6.4; `TimerMessageStore.doEnqueue`, `TimerLog`)."""

from construct import Const, Int32sb, Int64sb, Struct

from mqtool.formats import layout

MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4


def _java_int(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


# TimerLog.BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8, evaluated with Java int arithmetic.
TIMERLOG_BLANK_MAGIC = _java_int(0xBBCCDDEE ^ (1880681586 + 8))

timerlog_unit = Struct(
    "size" / Int32sb,  # always 52
    "prev_pos" / Int64sb,  # previous unit of the same slot, -1 for the first
    "magic" / Int32sb,  # 1 DEFAULT | 2 ROLL | 4 DELETE
    "curr_write_time_ms" / Int64sb,  # enqueue write time
    "delayed_time_delta" / Int32sb,  # delayedTime - currWriteTimeMs
    "offset_py" / Int64sb,  # CommitLog offset of the timer-topic record
    "size_py" / Int32sb,
    "real_topic_hash" / Int32sb,  # String.hashCode() of REAL_TOPIC, 0 if none
    "reserved" / Int64sb,
)

timerlog_blank = Struct(
    "remaining" / Int32sb,
    "zero" / Int64sb,
    "magic" / Const(TIMERLOG_BLANK_MAGIC, Int32sb),
)

TIMERLOG_UNIT_SIZE = timerlog_unit.sizeof()  # 52
TIMERLOG_BLANK_SIZE = timerlog_blank.sizeof()  # 16
TIMERLOG_DTYPE = layout.dtype(timerlog_unit)  # the numpy view of a file's units
TIMERLOG_UNIT = layout.struct_format(timerlog_unit)  # one unit by `struct`
TIMERLOG_BLANK = layout.struct_format(timerlog_blank)


def unit_kind(magic: int) -> str:
    """`roll`, `delete` (a cancel request) or `normal`; a rolled delete counts as a roll."""
    if magic & MAGIC_ROLL:
        return "roll"
    if magic & MAGIC_DELETE:
        return "delete"
    return "normal"
