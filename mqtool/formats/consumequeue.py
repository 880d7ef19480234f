"""ConsumeQueue unit (spec §3; `ConsumeQueue.putMessagePositionInfo`): 20 bytes per message."""

from construct import Int32sb, Int64sb, Struct

from mqtool.formats import layout

consumequeue_unit = Struct(
    "commitlog_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,  # String.hashCode() of TAGS; deliver time for SCHEDULE_TOPIC_XXXX
)

CQ_UNIT_SIZE = consumequeue_unit.sizeof()  # 20
CQ_DTYPE = layout.dtype(consumequeue_unit)  # the numpy view of a file's units
CQ_UNIT = layout.struct_format(consumequeue_unit)  # one unit by `struct`
CQ_PRE_BLANK_SIZE = 0x7FFFFFFF  # ConsumeQueue#fillPreBlank: (0, Integer.MAX_VALUE, 0) units before a late first unit


def is_empty_unit(offset: int, size: int, tags_code: int) -> bool:
    """A pre-allocated, never written unit: it marks the end of a queue's data."""
    return offset == 0 and size == 0 and tags_code == 0
