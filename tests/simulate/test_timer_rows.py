"""A plain timer delivery from the row kept beside its unit (`timerrows.DeliveryRows`, `TimerDequeue.deliver_row`):
no second read of the record, yet the same event log, byte for byte, as the per-message walk
(`reference_timer`) on stores where rows and the read they stand in for both happen (UNIQ_KEYs of every
form, none, non-ASCII values, IPv6 hosts, TIMER_ENQUEUE_MS/TIMER_DEQUEUE_MS already set, cancels in a
slot, rolled re-puts in the spool or in the overlay); the row's size is `StoreModel.reput_size`'s."""

import io
import json

import numpy as np
import pytest
from reference_timer import use_reference

from mqtool.builder.broker import put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate.model import MemoryBase, StoreModel
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.timerdequeue import TimerDequeue
from mqtool.simulate.timerrows import DeliveryRows, delivery_size
from mqtool.simulate.timerunits import TimerUnits
from mqtool.store.store import Store

START = 1_800_000_000_000
DAY = 86_400_000
N = 240


def _uniq_key(i: int) -> str | None:
    """Six forms: prefix + hex digits, 32 hex digits, lower-case (no row), none, decimal, '%' in the prefix."""
    return [f"T{i:08X}", f"7F00000100002A9F{i:016X}", f"id-{i}-abc", None, f"D{i}", f"P%{i:04d}"][i % 6]


def _build(root):
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(root, config) as w:
        for i in range(N):
            out = START + 60_000 + (i // 3 * 7_919_000) % (3 * DAY)  # 3 a slot over 3 days: a third roll
            props = [("REAL_TOPIC", "BenchTopic"), ("REAL_QID", str(i % 4)), ("TIMER_OUT_MS", str(out))]
            uk = _uniq_key(i)
            if uk is not None:
                props.append(("UNIQ_KEY", uk))
            if i % 5 == 1:
                props.append(("KEYS", "clé ünï"))  # non-ASCII: the UTF-8 length counts
            if i % 7 == 2:  # set by an earlier dequeue: replaced, not added
                props += [("TIMER_ENQUEUE_MS", "17"), ("TIMER_DEQUEUE_MS", "1799999999999")]
            fields = {}
            if i % 11 == 4:
                fields = {
                    "sys_flag": BORNHOST_V6 | STOREHOST_V6,
                    "born_host": "[::1]:7",
                    "store_host": "[fe80::1]:10911",
                }
            put_message(
                w,
                TIMER_TOPIC,
                0,
                b"x" * (i % 9),
                props,
                store_timestamp=START - 1000,
                born_timestamp=START - 1000,
                **fields,
            )
            if i % 30 == 17 and uk is not None:  # a cancel in its target's slot: that slot is read
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
                        ("TIMER_DEL_UNIQKEY", uk),
                    ],
                    store_timestamp=START - 1000,
                    born_timestamp=START - 1000,
                )
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, batch, monkeypatch, scenario=None):
    """(event lines, result, the source offsets `TimerDequeue.deliver` delivered from a row)."""
    use_reference(monkeypatch, not batch)
    rows = []
    deliver = TimerDequeue.deliver

    def spy(self, write, due, phys, meta, hi, lo, slot_time):
        done = deliver(self, write, due, phys, meta, hi, lo, slot_time)
        if done:
            rows.append(phys)
        return done

    monkeypatch.setattr(TimerDequeue, "deliver", spy)
    sink = io.StringIO()
    res = simulate(store, config, START, START + 3 * DAY, scenario, seed=1, sink=sink)
    return sink.getvalue(), res, rows


def _events(log: str, event: str) -> list[dict]:
    return [e for e in map(json.loads, log.splitlines()) if e["service"] == "timer" and e["event"] == event]


@pytest.mark.parametrize("jump", [False, True])
def test_row_deliveries_equal_the_per_message_walk(tmp_path, monkeypatch, jump):
    store, config = _build(tmp_path / "s")
    # a clock jump: no spool (a fault), the rolled re-puts wait in the overlay (`StoreModel.messages`)
    sc = parse_scenario({"faults": [{"kind": "clock_jump", "at": 1000, "delta": "+90s"}]}, START) if jump else None
    per_msg, r1, rows1 = _run(store, config, False, monkeypatch, sc)
    assert rows1 == []
    batched, r2, rows = _run(store, config, True, monkeypatch, sc)
    assert batched == per_msg
    assert r2.summary == r1.summary and r2.violations == r1.violations
    delivered = {e["physical_offset"]: e for e in _events(per_msg, "deliver")}
    cancels = _events(per_msg, "cancel")
    rolls = _events(per_msg, "roll")
    # 8 cancels (i % 30 == 17, each with a UNIQ_KEY) meet their targets; the rest are delivered, a roll's
    # re-put at the end of its way
    assert len(cancels) == 8 and len(delivered) == N - 8 and len(rolls) > 0
    assert set(rows) <= set(delivered) and len(set(rows)) == len(rows)
    row_keys = {delivered[p]["uniq_key"] for p in rows}
    # every form of UNIQ_KEY but the lower-case one (which a row cannot hold: the record is put) came from a row
    for form in (0, 1, 3, 4, 5):
        assert any(row_keys & {_uniq_key(i)} for i in range(form, N, 6)), form
    form2 = {e["uniq_key"] for e in delivered.values()} & {_uniq_key(i) for i in range(2, N, 6)}
    assert len(form2) == 40 and not row_keys & form2
    # rolled re-puts (past the store's end) were delivered from their rows too
    end = store.commitlog.max_offset()
    assert any(p >= end for p in rows) and any(p < end for p in rows)
    # a slot with a cancel is delivered from rows too (made of the records read for the cancel check)
    cancelled_slots = {e["slot"] for e in cancels}
    assert any(delivered[p]["slot"] in cancelled_slots for p in rows)
    # put: each queue's first re-put (`append` learns the queue) and the 40 of a lower-case UNIQ_KEY
    first: dict[tuple, str] = {}
    for e in _events(per_msg, "deliver"):
        first.setdefault((e["topic"], e["queue_id"]), e["uniq_key"])
    assert len(first) == 4 and len(set(first.values()) - form2) == 3
    assert len(delivered) - len(rows) == 40 + 3 == 43


def _rows(model):
    return DeliveryRows(lambda: model.capacity)


@pytest.mark.parametrize("trailing", [True, False])
def test_row_size_is_reput_size(trailing):
    """The size `TimerDequeue.deliver` computes from a row is `StoreModel.reput_size` of the converted map."""
    model = StoreModel(MemoryBase(), capacity=128 if trailing else 16, trailing_separator=trailing)
    t = _rows(model)
    cases = [
        ({"REAL_TOPIC": "BenchTopic", "REAL_QID": "3", "UNIQ_KEY": "T0000000A", "TIMER_OUT_MS": "1800000060000"}, 0, 0),
        ({"UNIQ_KEY": "AC1100015F2C18B4AAC2", "REAL_TOPIC": "Tö", "REAL_QID": "0", "KEYS": "clé ünï"}, 5, 0),
        (
            {"REAL_TOPIC": "B", "TIMER_ENQUEUE_MS": "17", "TIMER_DEQUEUE_MS": "ü9", "TIMER_ROLL_TIMES": "2"},
            300,
            BORNHOST_V6,
        ),
        ({"REAL_TOPIC": "B", "REAL_QID": "x", "UNIQ_KEY": "0"}, 1, BORNHOST_V6 | STOREHOST_V6),
    ]
    for props, body_len, sys_flag in cases:
        x = t.of_props(props, body_len, sys_flag)
        assert x[0] != 0
        assert t.uniq_key(x) == props.get("UNIQ_KEY")
        for enq, now, fixed in ((1800000000000, 1800000001000, 91), (5, 17, 100)):
            new = dict(props)
            new["TIMER_ENQUEUE_MS"] = str(enq)
            new["TIMER_DEQUEUE_MS"] = str(now)
            want = model.reput_size(new, fixed, sys_flag, body_len)
            meta, _hi, _lo = x
            assert model.plain_reput_size(delivery_size(meta, enq, now), fixed) == want


def test_uniq_key_forms_and_refusals():
    t = _rows(StoreModel(MemoryBase()))
    base = {"REAL_TOPIC": "T", "REAL_QID": "1"}
    kept = [
        "7F000001000018B4AAC2A1B2C3D4E5F6",
        "T0000000A",
        "0",
        "AB%C01",
        "TFFFFFFFFFFFFFFFFFFFF",
        "ÄB12",
        "12345678901234567890",
        "id-7F",
    ]
    for uk in kept:
        x = t.of_props({**base, "UNIQ_KEY": uk}, 0, 0)
        assert x[0] != 0 and t.uniq_key(x) == uk, uk
    assert t.of_props({**base, "UNIQ_KEY": "7F000001000018B4AAC2A1B2C3D4E5F6"}, 0, 0)[0] >> 32 & 3 == 1
    for refused in (
        {**base, "UNIQ_KEY": "abc"},
        {**base, "UNIQ_KEY": ""},
        {"REAL_QID": "1"},
        {**base, "TIMER_DEL_UNIQKEY": "K"},
        {**base, "REAL_QID": "-1"},
        {**base, "REAL_QID": str(1 << 20)},
    ):
        assert t.of_props(refused, 0, 0) == (0, 0, 0), refused
    assert t.of_props(base, 0, 0)[0] >> 32 & 3 == 0  # no UNIQ_KEY: a row, the delivery's key is null
    assert t.of_props(base, 1 << 29, 0) == (0, 0, 0)  # a size past the row's range


def test_unit_rows_are_cleared_by_a_plain_write():
    units = TimerUnits(52 * 100)
    read = units.reader(lambda _pos: None)
    units.put(104, (1, 2, 3, 4, 5, 6, 7), (5, 6, 7))
    assert read(104) == (1, 2, 3, 4, 5, 6, 7, 5, 6, 7) and read(52) is None and read(5200 + 104) is None
    units[104] = (1, 2, 3, 4, 5, 6, 7)
    assert read(104) == (1, 2, 3, 4, 5, 6, 7, 0, 0, 0)
    units.put_run(
        [0, 52, 104],
        np.arange(21, dtype=np.int64).reshape(3, 7),
        np.array([[1, 2, 3], [0, 0, 0], [9, 8, 2**64 - 1]], np.uint64),
    )
    assert [read(p)[7:] for p in (0, 52, 104)] == [(1, 2, 3), (0, 0, 0), (9, 8, 2**64 - 1)]
    assert units.get(104) == (14, 15, 16, 17, 18, 19, 20)
    units.put_run([52, 104], np.zeros((2, 7), np.int64) - 1, np.zeros((2, 3), np.uint64))
    assert read(104) == (-1,) * 7 + (0, 0, 0) and read(0)[7:] == (1, 2, 3)


def test_a_unit_of_magic_0_is_held_and_read_back():
    """A row of magic 0 in the columns is none written; a damaged store's unit of magic 0 is still held."""
    units = TimerUnits(52 * 100)
    read = units.reader(units.get)  # as `TimerState.read_row` falls back to `TimerState.unit`
    units.put(104, (1, 0, 3, 4, 5, 6, 7))
    assert units.get(104) == (1, 0, 3, 4, 5, 6, 7) and read(104) == (1, 0, 3, 4, 5, 6, 7, 0, 0, 0)
    units.put(104, (1, 2, 3, 4, 5, 6, 7), (5, 6, 7))
    assert read(104) == (1, 2, 3, 4, 5, 6, 7, 5, 6, 7)
    units.put(104, (1, 0, 3, 4, 5, 6, 8))
    assert units.get(104) == (1, 0, 3, 4, 5, 6, 8) and units.get(52) is None and units.get(-52) is None
