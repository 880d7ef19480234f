"""checkpoint (spec §8; `StoreCheckpoint`): flush timestamps as longs at the start of a 4 KiB page."""

from construct import Int64sb, Padding, Struct

CHECKPOINT_SIZE = 4096

checkpoint = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
    "master_flushed_offset" / Int64sb,
    "confirm_phy_offset" / Int64sb,  # 5.x
    Padding(CHECKPOINT_SIZE - 40),
)
