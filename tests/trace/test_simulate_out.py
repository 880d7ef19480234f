"""A store written by `mqtool simulate --out` traces the same way as one built directly (issue #9).

The input holds a pending delay message (level 3, 10 s) and a pending timer message (20 s). The
simulator delivers both; the direct store gets the same deliveries from `deliver_delayed` /
`deliver_timer` at the times the broker's rules give, computed here:

- schedule service: a level's first poll is FIRST_DELAY_TIME = 1000 ms after the start, then every
  100 ms; the message is put at the first poll at or after its due time;
- timer: the put rounds TIMER_DELIVER_MS down to the slot TIMER_OUT_MS (an exact multiple moves one
  precision earlier); the dequeue reads a slot once it is before the clock floored to the precision,
  so at slot + precision. TIMER_ENQUEUE_MS is the TimerLog unit's write time.

Both deliveries are appended in the order the simulator puts them, so even the physical offsets agree
and the whole stage list (times, places, details) and the verdict must be equal.
"""

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from trace_stores import CONFIG, T0, props  # noqa: E402

from mqtool.builder import broker as b  # noqa: E402
from mqtool.builder.writer import StoreWriter  # noqa: E402
from mqtool.cli.app import app  # noqa: E402
from mqtool.formats.offsets_json import ConsumerOffsets, DelayOffsets  # noqa: E402
from mqtool.rules.timer import timer_out_ms  # noqa: E402
from mqtool.store.store import Store  # noqa: E402
from mqtool.trace import TraceQuery, trace  # noqa: E402

START = T0 + 1  # the simulator starts at the store's newest store timestamp
DELAY_DUE = T0 + 10_000  # level 3 = 10 s after T0
TIMER_DELIVER = T0 + 20_000
PRECISION = CONFIG.timer_precision_ms
UNTIL = T0 + 60_000


def first_poll_at_or_after(due: int) -> int:
    first = START + 1000
    return first + max(0, -(-(due - first) // 100)) * 100


def timer_delivery() -> int:
    slot = timer_out_ms(TIMER_DELIVER, PRECISION)
    return slot + PRECISION


def write_input(w: StoreWriter):
    d = b.put_delay_message(w, "TopicS", 1, b"d", props("sim-delay", 1), store_timestamp=T0, level=3)
    t = b.put_timer_message(w, "TopicS", 2, b"t", props("sim-timer", 2, TIMER_DELIVER_MS=str(TIMER_DELIVER)),
                            store_timestamp=START)
    w.write_consumer_offsets(ConsumerOffsets({"TopicS@GID_S": {1: 1}}))
    return d, t


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[Store, Store]:
    tmp = tmp_path_factory.mktemp("simout")
    with StoreWriter(tmp / "input", CONFIG) as w:
        write_input(w)
        w.write_delay_offsets(DelayOffsets({3: 0}))
        w.write_timercheck(START, last_timer_queue_offset=1)
        w.write_checkpoint()
    conf = tmp / "broker.conf"  # CONFIG as broker.conf: --out extends the files with these sizes
    conf.write_text(f"mappedFileSizeCommitLog={CONFIG.mapped_file_size_commitlog}\n"
                    f"mappedFileSizeConsumeQueue={CONFIG.mapped_file_size_consume_queue}\n"
                    f"mappedFileSizeTimerLog={CONFIG.mapped_file_size_timer_log}\n"
                    f"timerRollWindowSlot={CONFIG.timer_roll_window_slot}\n"
                    f"transactionCheckMax={CONFIG.transaction_check_max}\n"
                    f"transactionTimeOut={CONFIG.transaction_timeout}\n"
                    f"transactionCheckInterval={CONFIG.transaction_check_interval}\n")
    r = CliRunner().invoke(app, ["simulate", str(tmp / "input"), "--until", str(UNTIL), "--config", str(conf),
                                 "--out", str(tmp / "sim")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    with StoreWriter(tmp / "direct", CONFIG) as w:
        d, t = write_input(w)
        b.deliver_delayed(w, d, store_timestamp=first_poll_at_or_after(DELAY_DUE))
        b.deliver_timer(w, t, enqueue_ms=START // PRECISION * PRECISION, store_timestamp=timer_delivery())
        w.write_delay_offsets(DelayOffsets({3: 1}))
        w.write_timercheck(UNTIL, last_timer_queue_offset=1)
        w.write_checkpoint(physic_msg_timestamp=UNTIL)
    return Store.open(tmp / "sim", CONFIG), Store.open(tmp / "direct", CONFIG)


def test_the_computed_delivery_times():
    assert first_poll_at_or_after(DELAY_DUE) == T0 + 10_001
    assert timer_delivery() == T0 + 20_000


@pytest.mark.parametrize(("key", "stages"), [
    ("sim-delay", ["born", "stored", "parked", "delivered", "consumed"]),
    ("sim-timer", ["born", "stored", "parked", "delivered", "not_consumed"]),
])
def test_simulated_store_traces_like_the_direct_one(stores, key, stages):
    sim, direct = (trace(s, TraceQuery(key=key), as_of=UNTIL) for s in stores)
    assert len(sim) == len(direct) == 1
    sim, direct = sim[0], direct[0]
    assert [s.stage for s in sim.stages] == stages
    assert [s.as_dict() for s in sim.stages] == [s.as_dict() for s in direct.stages]
    assert sim.verdict == direct.verdict
    assert sim.verdict.state == "delivered"
    delivered = next(s for s in sim.stages if s.stage == "delivered")
    assert delivered.time == (first_poll_at_or_after(DELAY_DUE) if key == "sim-delay" else timer_delivery())
    assert [(r.role, r.record.topic, r.record.physical_offset, r.record.properties)
            for r in sim.records] == [(r.role, r.record.topic, r.record.physical_offset, r.record.properties)
                                      for r in direct.records]


def test_without_as_of_both_stores_end_at_until(stores):
    """"Now" is the store's last sign of life: the simulated store's checkpoint says `--until`."""
    sim, direct = (trace(s, TraceQuery(key="sim-timer"))[0] for s in stores)
    assert sim.as_of == direct.as_of == UNTIL
    assert sim.verdict.text == direct.verdict.text
