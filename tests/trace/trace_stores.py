"""Builder-made stores for the trace tests: one small store holding every path of issue #9."""

from dataclasses import replace
from pathlib import Path

from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.offsets_json import ConsumerOffsets, DelayOffsets

T0 = 1_795_000_000_000
CONFIG = replace(BrokerConfig(), mapped_file_size_commitlog=1 << 20, mapped_file_size_consume_queue=1200,
                 mapped_file_size_timer_log=1 << 16, timer_roll_window_slot=100, transaction_check_max=2,
                 transaction_timeout=6000, transaction_check_interval=30000)


def props(key: str, n: int, **more) -> list[tuple[str, str]]:
    return [("UNIQ_KEY", f"7F000001000000000000000000{n:06X}"), ("KEYS", key), ("TAGS", "t"), *more.items()]


def build_paths(root: Path) -> Path:
    """Every path; the store's last activity is T0 + 300 s (checkpoint)."""
    with StoreWriter(root, CONFIG) as w:
        # plain, consumed by GID_A, not by GID_B
        b.put_message(w, "TopicA", 0, b"x", props("plain", 1), store_timestamp=T0)
        b.put_message(w, "TopicA", 0, b"x", props("plain2", 2), store_timestamp=T0 + 1)
        # delay: delivered, and still waiting
        d1 = b.put_delay_message(w, "TopicA", 1, b"d", props("delay-done", 3), store_timestamp=T0 + 10, level=3)
        b.put_delay_message(w, "TopicA", 1, b"d", props("delay-wait", 4), store_timestamp=T0 + 11, level=18)
        b.deliver_delayed(w, d1, store_timestamp=T0 + 10_050)
        # timer rolled twice then delivered (roll window 100 s)
        t = b.put_timer_message(w, "TopicB", 0, b"t", props("timer-roll", 5, TIMER_DELIVER_MS=str(T0 + 250_000)),
                                store_timestamp=T0 + 20)
        r1 = b.deliver_timer(w, t, enqueue_ms=T0, store_timestamp=T0 + 100_050, roll=True)
        b.enqueue_timer(w, r1, T0 + 100_050)
        r2 = b.deliver_timer(w, r1, enqueue_ms=T0 + 100_000, store_timestamp=T0 + 200_050, roll=True)
        b.enqueue_timer(w, r2, T0 + 200_050)
        b.deliver_timer(w, r2, enqueue_ms=T0 + 200_000, store_timestamp=T0 + 250_040)
        # timer cancelled
        victim = b.put_timer_message(w, "TopicB", 1, b"v", props("timer-victim", 6,
                                     TIMER_DELIVER_MS=str(T0 + 60_000)), store_timestamp=T0 + 30)
        b.put_timer_cancel(w, victim, props("timer-cancel", 7), store_timestamp=T0 + 31)
        # transactions: committed after two checks, rolled back, discarded, pending
        h1 = b.put_half_message(w, "TxTopic", 0, b"h", props("tx-commit", 8), store_timestamp=T0 + 40,
                                producer_group="PG")
        h2 = b.put_half_message(w, "TxTopic", 0, b"h", props("tx-rollback", 9), store_timestamp=T0 + 41,
                                producer_group="PG")
        h3 = b.put_half_message(w, "TxTopic", 0, b"h", props("tx-discard", 10), store_timestamp=T0 + 42,
                                producer_group="PG")
        b.put_half_message(w, "TxTopic", 0, b"h", props("tx-pending", 11), store_timestamp=T0 + 250_000,
                           producer_group="PG")
        b.put_op_message(w, [h2.queue_offset], store_timestamp=T0 + 50)
        c1 = b.put_back_half(w, h1, store_timestamp=T0 + 30_040, check_times=1)
        c3 = b.put_back_half(w, h3, store_timestamp=T0 + 30_041, check_times=1)
        c1b = b.put_back_half(w, c1, store_timestamp=T0 + 60_040, check_times=2)
        c3b = b.put_back_half(w, c3, store_timestamp=T0 + 60_041, check_times=2)
        b.commit_half(w, c1b, store_timestamp=T0 + 60_100)
        b.put_op_message(w, [c1b.queue_offset], store_timestamp=T0 + 61_000)
        b.discard_half(w, c3b, store_timestamp=T0 + 90_041)
        # retry then DLQ
        orig = b.put_message(w, "TopicC", 0, b"r", props("retry-dlq", 12), store_timestamp=T0 + 70)
        sched = b.send_back(w, orig, "GID_C", store_timestamp=T0 + 1_000)
        retry = b.deliver_delayed(w, sched, store_timestamp=T0 + 11_000)
        b.send_back(w, retry, "GID_C", store_timestamp=T0 + 12_000, delay_level=-1)
        w.write_consumer_offsets(ConsumerOffsets({"TopicA@GID_A": {0: 1}, "TopicA@GID_B": {0: 0},
                                                  "%RETRY%GID_C@GID_C": {0: 1}}))
        w.write_delay_offsets(DelayOffsets({3: 1, 18: 0}))
        w.write_timercheck(T0 + 300_000, last_timer_queue_offset=6)
        w.write_checkpoint(physic_msg_timestamp=T0 + 300_000)
    return root
