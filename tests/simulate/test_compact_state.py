"""The compact state of long runs: TimerLog units in columns, the
release of re-puts nobody reads again, and orjson event lines equal to json's."""

import json

from eventrows import put_rows

from mqtool.formats.names import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC as CHECK_MAX
from mqtool.formats.names import RMQ_SYS_TRANS_HALF_TOPIC as HALF
from mqtool.simulate.events import EventLog
from mqtool.simulate.model import MemoryBase, SimMessage, StoreModel
from mqtool.simulate.timerunits import TimerUnits


def test_timer_units_round_trip_on_and_off_the_grid():
    units = TimerUnits(1040)  # 20 units a file
    a = (-1, 1, 1000, 2000, 4096, 180, -123456789)
    b = (0, 3, 2**40, 2**41 + 7, 2**33, 2**31 - 1, -(2**31))
    units.put(0, a)
    units.put(1040 + 52 * 19, b)  # the last unit of the second file
    units.put(7, a)  # off the 52-byte grid: kept aside
    assert units.get(0) == a and units.get(1040 + 52 * 19) == b and units.get(7) == a
    assert units.get(52) is None and units.get(1040) is None and units.get(-52) is None and units.get(104) is None
    units.put(0, b)  # a position written again holds the last unit
    assert units.get(0) == b
    for pos in range(52, 52 * 5000, 52):  # grows past one block of columns
        units.put(pos, (pos, 1, 2, 3, 4, 5, 6))
    assert units.get(52 * 4999) == (52 * 4999, 1, 2, 3, 4, 5, 6) and units.get(0) == b


def test_event_lines_are_jsons_bytes():
    class Sink:
        text = ""

        def write(self, s):
            self.text += s

    sink = Sink()
    log = EventLog(sink=sink, hold=True)
    log.emit(1, "timer", "enqueue", 'T\u2028é"\\\x00\x1f\x7f', 0, "K", 2**63 - 1, None, roll=True, cancel=False)
    log.emit(2, "schedule", "persist", "S", None, None, None, None, offsets={"1": 5})  # nested: json's own
    log.emit(3, "timer", "deliver", "T", 1, "\udcff", 2**64, None, due=1.5)  # surrogate, 65-bit int, float
    log.flush()
    assert sink.text == log.jsonl()  # the kernel's lines are json's
    assert json.loads(sink.text.split("\n")[0])["topic"] == 'T\u2028é"\\\x00\x1f\x7f'


def test_release_drops_kept_repeats_only_when_releasing():
    for releasing in (False, True):
        model = StoreModel(MemoryBase(), keep_messages=False)
        model.releasing = releasing
        src = SimMessage(HALF, 0, {"UNIQ_KEY": "H"}, body_len=1)
        puts = [model.append(src.derive(src.topic, 0, {"UNIQ_KEY": f"H{i}"}), 10 * i).message for i in range(4)]
        model.release_below(HALF, 0, 2)
        kept = [model.message(m.phys) is m for m in puts]
        assert kept == ([True] * 4 if not releasing else [False, False, True, True])
        gone = model.append(src.derive(CHECK_MAX, 0, {"UNIQ_KEY": "H"}), 50).message
        assert (model.message(gone.phys) is gone) is (not releasing)  # nobody reads the discard topic
        model.release(puts[3].phys)
        assert (model.message(puts[3].phys) is None) is releasing


def test_spooled_timer_repeats_read_back_equal_and_released():
    from mqtool.formats.names import TIMER_TOPIC
    from mqtool.simulate.spool import RecordSpool

    model = StoreModel(MemoryBase(), keep_messages=False)
    model.releasing, model.spool = True, RecordSpool()
    src = SimMessage(TIMER_TOPIC, 0, {"UNIQ_KEY": "T\udcff", "TIMER_OUT_MS": "9"}, body=b"\x00b", born_ts=5)
    put = model.append(src.derive(TIMER_TOPIC, 0, {"UNIQ_KEY": "T\udcff", "TIMER_ROLL_TIMES": "1"}), 7, "timer").message
    back = model.message(put.phys)
    assert back is not put and len(model.messages) == 0 and len(model.spool) == 1
    assert [getattr(back, f) for f in SimMessage.__slots__] == [getattr(put, f) for f in SimMessage.__slots__]
    assert list(back.props) == ["UNIQ_KEY", "TIMER_ROLL_TIMES"] and back.body == b"\x00b" and back.store_ts == 7
    model.release(put.phys)
    assert model.message(put.phys) is None and len(model.spool) == 0
    model.spool.close()


def test_a_batch_of_rows_writes_what_a_batch_a_row_writes():
    class Sink:
        text = ""

        def write(self, s):
            self.text += s

    rows = [
        ("T", 0, "K0", 100, 200, 5, True),
        (None, None, None, 7, None, 6, False),
        ('T\u2028"', 3, "\udcff", 2**64, 9, -1, True),
    ]
    keys = ("slot", "direct")
    one, many = EventLog(sink=Sink(), hold=True), EventLog(sink=Sink(), hold=True)
    seen: list[tuple] = []
    many.watch_columns("deliver", lambda cols: seen.extend(zip(cols["topic"], cols["slot"], strict=True)))
    for r in rows:
        one.batch(42, "timer", "deliver", *r[:5], **dict(zip(keys, r[5:], strict=True)))
    put_rows(many, 42, "timer", "deliver", rows, keys)
    one.flush()
    many.flush()
    assert many.sink.text == one.sink.text
    assert many.sink.text.split("\n")[1] == (
        '{"time":42,"service":"timer","event":"deliver","topic":null,"queue_id":null,'
        '"uniq_key":null,"physical_offset":7,"new_physical_offset":null,"slot":6,"direct":false}'
    )
    assert seen == [("T", 5), (None, 6), ('T\u2028"', -1)] and len(many) == 3 and many.by_kind == {"deliver": 3}
    counted = EventLog(keep=False)
    put_rows(counted, 1, "timer", "enqueue", rows, keys)
    assert len(counted) == 3 and counted.by_kind == {"enqueue": 3} and not counted.events
