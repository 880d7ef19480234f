"""TimerWheel slot (spec §6.3; `TimerWheel`, `Slot`): 32 bytes, time stored as timeMs / precision."""

from construct import Int32sb, Int64sb, Struct

from mqtool.formats import layout

TIMER_WHEEL_TTL_DAY = 7  # TimerMessageStore.TIMER_WHEEL_TTL_DAY
DAY_SECS = 24 * 3600  # TimerMessageStore.DAY_SECS
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # TimerMessageStore.slotsTotal: per wheel half, whatever the precision
TIMER_BLANK_SLOTS = 60  # TimerMessageStore.TIMER_BLANK_SLOTS: slots kept clear of the window's far end

timerwheel_slot = Struct(
    "time_units" / Int64sb,  # timeMs / precisionMs; 0 in a never written slot
    "first_pos" / Int64sb,
    "last_pos" / Int64sb,
    "num" / Int32sb,
    "magic" / Int32sb,  # unused
)

SLOT_SIZE = timerwheel_slot.sizeof()  # 32
SLOT_DTYPE = layout.dtype(timerwheel_slot)  # the numpy view of the wheel


def wheel_length(slots_total: int = SLOTS_TOTAL) -> int:
    """The file size: two wheel halves of 32-byte slots."""
    return slots_total * 2 * SLOT_SIZE


def slot_index(time_ms: int, precision_ms: int, slots_total: int = SLOTS_TOTAL) -> int:
    """`TimerWheel.getSlotIndex`: (timeMs / precision) % (slotsTotal * 2)."""
    return (time_ms // precision_ms) % (slots_total * 2)
