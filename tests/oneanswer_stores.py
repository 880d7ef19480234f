"""Builder-made stores for the cases of issue #27 that the fixtures and the oracle do not hold.

- `timer_cancels`: timer messages cancelled with and without a roll in between (trace once called the rolled
  one "overdue"), a delivered one and a pending one;
- `retry_backlog`: a consumer group's send-backs waiting in the schedule topic (the retry view's backlog);
- `timer_empty_slot`: a clean shutdown whose TimerLog holds a unit that no wheel slot points at (the
  broker's recovery rebuilds the slot from the TimerLog, so the unit is delivered).
"""

from dataclasses import replace
from pathlib import Path

from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.javahash import java_string_hash

T0 = 1_795_000_000_000
# a roll window of 100 s (timerRollWindowSlot 100 at 1 s precision): a timer 150 s ahead rolls once
CONFIG = replace(
    BrokerConfig(),
    mapped_file_size_commitlog=1 << 20,
    mapped_file_size_consume_queue=1200,
    mapped_file_size_timer_log=1 << 16,
    timer_roll_window_slot=100,
)


def props(key: str, n: int, **more: str) -> list[tuple[str, str]]:
    return [("UNIQ_KEY", f"7F000001000000000000000000{n:06X}"), ("KEYS", key), ("TAGS", "t"), *more.items()]


def timer_cancels(root: Path) -> Path:
    """Now is T0 + 105 s (timercheck read up to there): `rolled` was rolled at T0 + 100 s into the slot of its
    cancel (T0 + 149 s) and is dropped when that slot is read; `plain` was dropped in its own slot (T0 + 89 s),
    read already; `late` was delivered at T0 + 5 s; `wait` (T0 + 190 s) rolls at T0 + 106 s."""
    with StoreWriter(root, CONFIG) as w:
        rolled = b.put_timer_message(
            w, "TopicB", 1, b"v", props("rolled", 1, TIMER_DELIVER_MS=str(T0 + 150_000)), store_timestamp=T0 + 30
        )
        plain = b.put_timer_message(
            w, "TopicB", 0, b"v", props("plain", 2, TIMER_DELIVER_MS=str(T0 + 90_000)), store_timestamp=T0 + 40
        )
        late = b.put_timer_message(
            w, "TopicA", 0, b"v", props("late", 3, TIMER_DELIVER_MS=str(T0 + 5_000)), store_timestamp=T0 + 50
        )
        b.put_message(w, "TopicA", 1, b"x", props("other", 4), store_timestamp=T0 + 60)
        b.deliver_timer(w, late, enqueue_ms=T0, store_timestamp=T0 + 5_010)
        b.put_timer_message(
            w, "TopicA", 2, b"w", props("wait", 5, TIMER_DELIVER_MS=str(T0 + 190_000)), store_timestamp=T0 + 6_000
        )
        b.put_timer_cancel(w, rolled, props("rolled-cancel", 6), store_timestamp=T0 + 60_000)
        b.put_timer_cancel(w, plain, props("plain-cancel", 7), store_timestamp=T0 + 61_000)
        r1 = b.deliver_timer(w, rolled, enqueue_ms=T0, store_timestamp=T0 + 100_050, roll=True)
        b.enqueue_timer(w, r1, T0 + 100_050)
        w.write_timercheck(T0 + 105_000, last_timer_queue_offset=7)
        w.write_checkpoint(physic_msg_timestamp=T0 + 105_000)
    return root


def timer_empty_slot(root: Path) -> Path:
    """Two timers due at T0 + 60 s and T0 + 90 s, both in the TimerLog; only the first one's slot was written
    (the second's unit was appended, its slot never put: the broker rebuilds it when it recovers). A clean
    shutdown at T0 + 10 s."""
    with StoreWriter(root, CONFIG) as w:
        b.put_timer_message(
            w, "TopicA", 0, b"a", props("in-slot", 11, TIMER_DELIVER_MS=str(T0 + 60_000)), store_timestamp=T0 + 10
        )
        lost = b.put_timer_message(
            w,
            "TopicA",
            1,
            b"b",
            props("slot-empty", 12, TIMER_DELIVER_MS=str(T0 + 90_000)),
            store_timestamp=T0 + 20,
            enqueue=False,
        )
        out = int(lost.properties["TIMER_OUT_MS"])
        w.append_timerlog_unit(-1, 0, T0, out - T0, lost.physical_offset, lost.total_size, java_string_hash("TopicA"))
        w.write_timercheck(T0 + 10_000, last_timer_queue_offset=2)
        w.write_checkpoint(physic_msg_timestamp=T0 + 10_000)
    return root


def retry_backlog(root: Path) -> Path:
    """GID_r sent M1 back at T0 + 1 s (reconsume #1: level 3, 10 s) and M2 at T0 + 2 s with level 5 (1 m);
    both wait in SCHEDULE_TOPIC_XXXX for %RETRY%GID_r. The broker stopped at T0 + 3 s. With
    messageDelayLevel=1s 5s 10s, M2's level is gone: it is never delivered."""
    with StoreWriter(root, CONFIG) as w:
        m1 = b.put_message(w, "TopicR", 0, b"m1", props("M1", 21), store_timestamp=T0)
        m2 = b.put_message(w, "TopicR", 0, b"m2", props("M2", 22), store_timestamp=T0 + 10)
        b.send_back(w, m1, "GID_r", store_timestamp=T0 + 1_000)
        b.send_back(w, m2, "GID_r", store_timestamp=T0 + 2_000, delay_level=5)
        w.write_checkpoint(physic_msg_timestamp=T0 + 3_000)
    return root


BUILT = {"timer-cancels": timer_cancels, "timer-empty-slot": timer_empty_slot, "retry-backlog": retry_backlog}
