"""The timer's steps over runs of units (`TimerEnqueue.take` for the store's units and the roll re-puts,
`TimerDequeue.deliver` and `TimerRolls.keep` with their events written by one `EventLog.batch` a run, the chain
walked by `rules.timer.walk_chain` over `TimerUnits.reader`) write the same event log, byte for byte, and the same
summary as the per-message walk (`reference_timer`) on a store whose cancels meet their targets in a
slot, some of them rolled, with a TimerLog of small files (fillers inside a batch)."""

import io

import numpy as np
import pytest
from reference_timer import use_reference

from mqtool.builder.broker import put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.simulate import timerenqueue, timerstate
from mqtool.simulate.runner import simulate
from mqtool.simulate.timerenqueue import TimerEnqueue
from mqtool.simulate.timerunits import TimerUnits
from mqtool.store.store import Store
from simkit import Built, S, config, run

START = 1_800_000_000_000
DAY = 86_400_000


def _build(root, n=240):
    config = BrokerConfig.for_version("5.3").with_overrides({"mappedFileSizeTimerLog": 4096})
    with StoreWriter(root, config) as w:
        for i in range(n):
            out = START + 60_000 + (i // 3 * 7_919_000) % (3 * DAY)  # 3 a slot, over 3 days: some roll
            props = [
                ("UNIQ_KEY", f"T{i:05d}"),
                ("REAL_TOPIC", "BenchTopic"),
                ("REAL_QID", str(i % 4)),
                ("TIMER_OUT_MS", str(out)),
            ]
            put_message(
                w, TIMER_TOPIC, 0, b"x" * (i % 7), props, store_timestamp=START - 1000, born_timestamp=START - 1000
            )
            if i % 3 == 2:  # a cancel in the slot of its target, the slot's newest (5.3.1 matches the bare UNIQ_KEY)
                put_message(
                    w,
                    TIMER_TOPIC,
                    0,
                    b"",
                    [
                        ("UNIQ_KEY", f"C{i:05d}"),
                        ("REAL_TOPIC", "BenchTopic"),
                        ("REAL_QID", "0"),
                        ("TIMER_OUT_MS", str(out)),
                        ("TIMER_DEL_UNIQKEY", f"T{i:05d}"),
                    ],
                    store_timestamp=START - 1000,
                    born_timestamp=START - 1000,
                )
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, batch, monkeypatch):
    use_reference(monkeypatch, not batch)
    sink = io.StringIO()
    res = simulate(store, config, START, START + 3 * DAY, None, seed=1, sink=sink)
    return sink.getvalue(), res


@pytest.mark.parametrize("small", [False, True])
def test_batch_paths_equal_the_per_message_walk_with_cancels_rolls_and_small_timerlog_files(
    tmp_path, monkeypatch, small
):
    store, config = _build(tmp_path / "s")
    if small:  # batches cut short: the enqueue's runs, a slot's waiting events
        monkeypatch.setattr(timerenqueue, "ENQUEUE_BATCH", 7)
        monkeypatch.setattr(timerstate, "PENDING_EVENTS", 3)
    many = []
    real = TimerEnqueue.take

    def spy(self, phys, *a):
        many.append(len(phys))
        return real(self, phys, *a)

    monkeypatch.setattr(TimerEnqueue, "take", spy)
    per_msg, r1 = _run(store, config, False, monkeypatch)
    assert many == []
    batched, r2 = _run(store, config, True, monkeypatch)
    assert batched == per_msg
    assert r2.summary == r1.summary and r2.violations == r1.violations
    # 80 cancels meet their targets after two deliveries of their slot; rolled ones are re-put (rolled
    # cancels too) and enqueued again by the batch; 4096-byte TimerLog files hold 78 units: a batch
    # of 320 crosses four of them
    assert per_msg.count('"event":"cancel"') == 80
    assert per_msg.count('"event":"roll"') > 0 and sum(many) == 320 + per_msg.count('"event":"roll"')
    assert many[0] == (7 if small else 320) and (max(many) <= 7) == small


def test_put_run_equals_unit_by_unit_writes_on_and_off_the_grid():
    for start, n in ((0, 5), (52 * 17, 3), (1040 - 52 * 2, 4), (7, 3), (52 * 4100, 2)):
        a, b = TimerUnits(1040), TimerUnits(1040)  # 20 units a file: (1040 - 104, 4) crosses into the next
        for t in (a, b):
            t[52] = (9, 9, 9, 9, 9, 9, 9)  # one written before
        rows = np.arange(n * 7, dtype=np.int64).reshape(n, 7) - 3 * 2**40
        a.put_run([start + 52 * j for j in range(n)], rows, np.zeros((n, 3), np.uint64))
        for j, unit in enumerate(rows.tolist()):
            b[start + 52 * j] = tuple(unit)
        positions = [start + 52 * j for j in range(n)] + [52, 0, 104, 1040]
        assert [a.get(p) for p in positions] == [b.get(p) for p in positions]


def test_reader_gives_the_units_walk_chain_walks_whatever_prev_pos_does():
    from mqtool.rules.timer import LOOP, walk_chain
    from mqtool.simulate.timerunits import PREV_POS

    units = TimerUnits(1040)
    units[0] = (-1, 1, 0, 5, 100, 10, 0)
    units[104] = (0, 1, 0, 5, 200, 10, 0)
    units[1040 + 52] = (104, 3, 0, 5, 300, 10, 0)  # across files
    odd = {7: (-1, 1, 0, 5, 700, 10, 0)}  # a unit not held in the columns: the fallback's
    read = units.reader(odd.get)
    w = walk_chain(1040 + 52, read, PREV_POS)
    assert [(p, u[:7]) for p, u in w.units] == [(p, units.get(p)) for p in (1092, 104, 0)]
    units[156] = (208, 1, 0, 5, 400, 10, 0)  # points forward: the walk goes on
    units[208] = (7, 1, 0, 5, 500, 10, 0)
    w = walk_chain(156, read, PREV_POS)
    assert [p for p, _ in w.units] == [156, 208, 7] and w.units[-1][1] == (*odd[7], 0, 0, 0) and not w.broken
    units[0] = (156, 1, 0, 5, 100, 10, 0)  # 156 -> 208 -> 7 is fine; 104 -> 0 -> 156 -> 208 -> 7 too
    units[7 + 1040] = (104, 1, 0, 5, 100, 10, 0)
    units[208] = (1040 + 7, 1, 0, 5, 500, 10, 0)  # off the grid of its file: a fallback miss
    assert walk_chain(156, read, PREV_POS).stop_pos == 1047
    units[208] = (104, 1, 0, 5, 500, 10, 0)  # 156 -> 208 -> 104 -> 0 -> 156: a loop after a forward step
    w = walk_chain(156, read, PREV_POS)
    assert [p for p, _ in w.units] == [156, 208, 104, 0] and (w.stop, w.stop_pos) == (LOOP, 156)
    assert walk_chain(-1, read, PREV_POS).units == []


def test_a_put_refused_with_service_not_available_is_tried_again_at_once_then_every_half_precision():
    """`TimerDequeuePutMessageService.run` at 5.3.1: after `doPut`'s PUT_NEED_RETRY it puts again at once, then
    sleeps 500 ms (precision 1000) after each put of its loop, the one that works too. Slot S+2000 is read at
    S+3000; puts are refused until S+3200: tries at 3000, 3000 and 3500 (it works), the next message at 4000."""
    b = Built()
    b.timer(S + 2000, S - 1000)
    b.timer(S + 2000, S - 1000)
    fault = {"kind": "put_failure", "from": 0, "until": 3200, "service": "timer", "status": "SERVICE_NOT_AVAILABLE"}
    r = run(b, S, S + 10_000, {"faults": [fault]})
    got = [(e.time - S, e.event, e.uniq_key) for e in r.events if e.service == "timer" and e.event != "enqueue"]
    assert got == [
        (3000, "put_failed", "UK0001"),
        (3000, "put_failed", "UK0001"),
        (3500, "deliver", "UK0001"),
        (4000, "deliver", "UK0002"),
    ]


def _timer_events(faults: list[tuple[int, int, str]], cfg: BrokerConfig | None = None) -> list[tuple]:
    """Two timer messages due in slot S+2000 (read at S+3000), puts refused in the windows [from, until)."""
    b = Built()
    b.timer(S + 2000, S - 1000)
    b.timer(S + 2000, S - 1000)
    windows = [{"kind": "put_failure", "from": lo, "until": hi, "service": "timer", "status": status}
               for lo, hi, status in faults]
    r = run(b, S, S + 10_000, {"faults": windows}, cfg=cfg)
    return [(e.time - S, e.event, e.uniq_key) + ((e.detail["attempt"], e.detail["given_up"])
                                                 if e.event == "put_failed" else ())
            for e in r.events if e.service == "timer" and e.event != "enqueue"]


def _failed(uk: str, times: list[int], given_up_at: int | None = None) -> list[tuple]:
    """`put_failed` events of one message at `times`, numbered from 1 (`given_up` on the one at `given_up_at`)."""
    return [(t, "put_failed", uk, i, i == given_up_at) for i, t in enumerate(times, 1)]


@pytest.mark.parametrize(("faults", "want"), [
    # 5.3.1's doPut counts its 50 ms retries inside one call; a PUT_NEED_RETRY ends the call and `run` calls it
    # anew, with three retries of its own. UNKNOWN_ERROR at 3000 (retried at 3050); SERVICE_NOT_AVAILABLE at 3050
    # (call 1 ends; call 2 at once, refused again; call 3 after 500 ms); UNKNOWN_ERROR at 3550, 3600 and 3650, the
    # third retry at 3700 works. The loop's 500 ms sleep after call 3: the second message at 4200.
    ([(0, 3050, "UNKNOWN_ERROR"), (3050, 3100, "SERVICE_NOT_AVAILABLE"), (3100, 3700, "UNKNOWN_ERROR")],
     _failed("UK0001", [3000, 3050, 3050, 3550, 3600, 3650]) + [(3700, "deliver", "UK0001"),
                                                                (4200, "deliver", "UK0002")]),
    # doPut returns PUT_NO_RETRY after its third retry whatever that put answered: SERVICE_NOT_AVAILABLE there
    # gives the message up (not `run`'s retry loop). The second message meets the same refusal as its first put:
    # PUT_NEED_RETRY, again at once, then 500 ms later it works (3650).
    ([(0, 3150, "UNKNOWN_ERROR"), (3150, 3300, "SERVICE_NOT_AVAILABLE")],
     _failed("UK0001", [3000, 3050, 3100, 3150], given_up_at=4) + _failed("UK0002", [3150, 3150])
     + [(3650, "deliver", "UK0002")]),
], ids=["retries-per-call", "no-look-after-third-retry"])
def test_doput_retries(faults, want):
    assert _timer_events(faults) == want


def test_the_dequeue_waits_for_should_start_time():
    """`TimerDequeueGetService.run` (5.3.1) waits in 1 s steps while now < shouldStartTime = the start +
    disappearTimeAfterStart (-1 by default: no wait, the slot read at 3000 as above). With 4.5 s it first reads at
    S+5000, the first step past S+4500: both messages of slot S+2000 are delivered then."""
    assert _timer_events([]) == [(3000, "deliver", "UK0001"), (3000, "deliver", "UK0002")]
    got = _timer_events([], config(disappearTimeAfterStart=4500))
    assert got == [(5000, "deliver", "UK0001"), (5000, "deliver", "UK0002")]
    assert _timer_events([], config(disappearTimeAfterStart=2000)) == _timer_events([])  # S+2000: read at 3000
