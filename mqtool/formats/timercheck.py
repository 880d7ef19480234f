"""config/timercheck (spec §6.9; `TimerCheckpoint`): longs at fixed positions of a 4 KiB page."""

from construct import Int64sb, Padding, Struct

TIMERCHECK_SIZE = 4096

timercheck = Struct(
    "last_read_time_ms" / Int64sb,
    "last_timer_log_flush_pos" / Int64sb,
    "last_timer_queue_offset" / Int64sb,
    "master_timer_queue_offset" / Int64sb,
    "state_version" / Int64sb,  # dataVersion.stateVersion
    "timestamp" / Int64sb,  # dataVersion.timestamp
    "counter" / Int64sb,  # dataVersion.counter
    Padding(TIMERCHECK_SIZE - 56),
)
