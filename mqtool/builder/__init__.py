"""Store builder: writes real-layout RocketMQ stores from Python objects (tests, fixtures, simulator output).

`StoreWriter` (writer.py) appends bytes through the `mqtool.formats` Construct definitions;
`mqtool.builder.broker` mirrors the broker's put-time rewrites on top of it; `demo.py` makes
`fixtures/demo`.
"""

from mqtool.builder.broker import (
    PutRejected,
    commit_half,
    deliver_delayed,
    deliver_timer,
    discard_half,
    enqueue_timer,
    put_back_half,
    put_batch,
    put_delay_message,
    put_half_message,
    put_message,
    put_op_message,
    put_timer_cancel,
    put_timer_message,
    send_back,
)
from mqtool.builder.writer import Slot, StoreWriter

__all__ = [
    "PutRejected", "Slot", "StoreWriter", "commit_half", "deliver_delayed", "deliver_timer", "discard_half",
    "enqueue_timer", "put_back_half", "put_batch", "put_delay_message", "put_half_message", "put_message",
    "put_op_message", "put_timer_cancel", "put_timer_message", "send_back",
]
