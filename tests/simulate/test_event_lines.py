"""The event log's fast paths write json's bytes: line dicts to orjson a batch at a time, `record_batch`
rows through one bytes template, and the watchers fed columns count what a call per event counted."""

import io
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mqtool.simulate.events as events_mod
from mqtool.formats.names import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRANS_HALF_TOPIC
from mqtool.simulate.events import _JSON, _KEYS, EventLog, SimEvent
from mqtool.simulate.invariants import InvariantCheck, check_invariants
from mqtool.simulate.tally import DeliveryTally

# every code point (surrogates too), and the texts the fast paths split or format at
text = st.one_of(st.text(st.characters(min_codepoint=0, max_codepoint=sys.maxunicode), max_size=12),
                 st.sampled_from(["a,b", '},{"time":1', "%b", "%s%%", "],[", '"', "\\", "\udc80", "T"]))
scalar = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), text)
plain_value = st.one_of(scalar, st.dictionaries(text, st.integers(-(1 << 63), (1 << 63) - 1), max_size=3))
detail_keys = st.lists(text.filter(lambda k: k not in _KEYS), max_size=3, unique=True).map(tuple)


@st.composite
def calls(draw):
    """("record", time, service, event, row, keys, plain) or ("batch", time, service, event, rows, keys)."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        time = draw(st.integers(0, 1 << 62))
        service = draw(st.sampled_from(["timer", "schedule", "s%b,"]))
        event = draw(st.sampled_from(["deliver", "roll"]))
        keys = draw(detail_keys)
        value = plain_value if draw(st.booleans()) else scalar
        row = st.tuples(*[value] * (5 + len(keys)))
        if draw(st.booleans()):
            out.append(("batch", time, service, event, draw(st.lists(row, max_size=5)), keys))
        else:
            plain = draw(st.booleans())
            r = draw(st.tuples(*[plain_value if plain else st.one_of(plain_value, st.floats())] * (5 + len(keys))))
            out.append(("record", time, service, event, r, keys, plain))
    return out


def _play(log: EventLog, script) -> list[dict]:
    """Run the calls on `log`; the line dicts json would have written, in order."""
    want = []
    for c in script:
        rows = c[4] if c[0] == "batch" else [c[4]]
        for r in rows:
            want.append({**dict(zip(_KEYS, (c[1], c[2], c[3], *r[:5]), strict=True)),
                         **dict(zip(c[5], r[5:], strict=True))})
        if c[0] == "batch":
            log.record_batch(c[1], c[2], c[3], list(c[4]), c[5])
        else:
            log.record(c[1], c[2], c[3], *c[4][:5], dict(zip(c[5], c[4][5:], strict=True)), c[6])
    log.flush()
    return want


def _json_bytes(want: list[dict]) -> bytes:
    return b"".join(_JSON.encode(d).encode("utf-8", "surrogatepass") + b"\n" for d in want)


@settings(max_examples=150, deadline=None)
@given(calls(), st.sampled_from([1, 2, 4096]))
def test_lines_are_jsons_bytes_through_the_buffer_and_as_text(script, flush_lines):
    old = events_mod._FLUSH_LINES
    events_mod._FLUSH_LINES = flush_lines
    try:
        raw = io.BytesIO()
        binary = io.TextIOWrapper(raw, encoding="utf-8")
        want = _play(EventLog(sink=binary, hold=False), script)
        text = io.StringIO()  # no byte buffer: the text, decoded
        _play(EventLog(sink=text, hold=False), script)
        columns = []
        watched = EventLog(sink=io.StringIO(), hold=False)
        watched.watch_columns("deliver", columns.append)
        _play(watched, script)
    finally:
        events_mod._FLUSH_LINES = old
    binary.flush()
    assert raw.getvalue() == _json_bytes(want)
    assert text.getvalue() == _json_bytes(want).decode("utf-8", "surrogatepass")
    delivered = [d for d in want if d["event"] == "deliver"]
    for key in ("time", "service", "topic", "uniq_key", "physical_offset", "slot"):
        got = [v for cols in columns for v in cols[key]]
        assert got == [d.get(key) for d in delivered]
    assert sum(map(len, columns)) == len(delivered)


def test_a_batch_with_a_comma_or_a_nested_dict_goes_row_by_row_and_later_batches_too():
    sink = io.StringIO()
    log = EventLog(sink=sink, hold=False)
    log.record_batch(5, "schedule", "persist", [("S", None, None, None, None, {"1": 5, "2": 6})], ("offsets",))
    log.record_batch(6, "timer", "deliver", [("T,1", 0, "K", 1, 2, True), ("T", 1, "K2", 3, None, False)], ("direct",))
    log.record_batch(7, "schedule", "persist", [("S", None, None, None, None, {"1": 7})], ("offsets",))
    log.record_batch(8, "timer", "deliver", [("T", 1 << 64, "\udcff", 1, 2, True)], ("direct",))
    log.flush()
    assert sink.getvalue().splitlines() == [
        '{"time":5,"service":"schedule","event":"persist","topic":"S","queue_id":null,"uniq_key":null,'
        '"physical_offset":null,"new_physical_offset":null,"offsets":{"1":5,"2":6}}',
        '{"time":6,"service":"timer","event":"deliver","topic":"T,1","queue_id":0,"uniq_key":"K",'
        '"physical_offset":1,"new_physical_offset":2,"direct":true}',
        '{"time":6,"service":"timer","event":"deliver","topic":"T","queue_id":1,"uniq_key":"K2",'
        '"physical_offset":3,"new_physical_offset":null,"direct":false}',
        '{"time":7,"service":"schedule","event":"persist","topic":"S","queue_id":null,"uniq_key":null,'
        '"physical_offset":null,"new_physical_offset":null,"offsets":{"1":7}}',
        '{"time":8,"service":"timer","event":"deliver","topic":"T","queue_id":18446744073709551616,'
        '"uniq_key":"\udcff","physical_offset":1,"new_physical_offset":2,"direct":true}']
    assert log.count == 5 and log.by_kind == {"persist": 2, "deliver": 3}


def test_record_batch_copies_the_rows_the_caller_reuses():
    sink = io.StringIO()
    log = EventLog(sink=sink, hold=False)
    seen = []
    log.watch_columns("deliver", lambda cols: seen.extend(cols["uniq_key"]))
    rows = [("T", 0, "K0", 1, 2)]
    log.record_batch(1, "timer", "deliver", rows, ())
    rows[0] = ("T", 0, "K1", 1, 2)
    log.record_batch(2, "timer", "deliver", rows, ())
    log.flush()
    assert seen == ["K0", "K1"] and '"uniq_key":"K0"' in sink.getvalue().splitlines()[0]


def _deliver(t, service, topic, key, phys, due):
    return SimEvent(t, service, "deliver", topic, 0, key, phys, phys + 1, {} if due is None else {"due": due})


HISTORY = [
    _deliver(10, "timer", "T", "A", 1, 5), _deliver(10, "schedule", "T", "A", 2, 20),  # early: schedule
    _deliver(11, "timer", "T", "A", 3, 30),  # early: timer, after the schedule one
    _deliver(12, "schedule", RETRY_GROUP_TOPIC_PREFIX + "g", "R", 7, 1),
    _deliver(13, "schedule", RETRY_GROUP_TOPIC_PREFIX + "g", "R", 7, 1),  # the same parked record twice
    _deliver(14, "schedule", RETRY_GROUP_TOPIC_PREFIX + "g", "R", 8, 1),
    _deliver(15, "transaction", "T", "A", 9, None), _deliver(16, "timer", RMQ_SYS_TRANS_HALF_TOPIC, "H", 4, 1),
    _deliver(17, "timer", "U", None, 5, None), _deliver(18, "timer", "U", "", 6, 1),
    SimEvent(19, "timer", "roll", "T", 0, "A", 3, 4, {}), _deliver(20, "timer", "U", "", 6, 1),
]


@pytest.mark.parametrize("split", [0, 3, 6, len(HISTORY)])
def test_watchers_fed_columns_count_what_they_counted_event_by_event(split):
    """Each event (record) or each run of one service and kind (record_batch), the first `split` one way."""
    start, until = 0, 40
    one = DeliveryTally(start, until)
    for e in HISTORY:
        if e.event == "deliver":
            one(e)
    log = EventLog(sink=io.StringIO(), hold=False)
    many = DeliveryTally(start, until)
    log.watch_columns("deliver", many.columns)
    check = InvariantCheck([]).watch(log)
    for i, e in enumerate(HISTORY):
        if i < split:
            log.record(e.time, e.service, e.event, e.topic, e.queue_id, e.uniq_key, e.physical_offset,
                       e.new_physical_offset, e.detail, True)
        else:
            keys = tuple(e.detail)
            log.record_batch(e.time, e.service, e.event, [(e.topic, e.queue_id, e.uniq_key, e.physical_offset,
                                                           e.new_physical_offset, *e.detail.values())], keys)
    log.flush()
    assert many.per_topic == one.per_topic == {"T": 4, "U": 3, RETRY_GROUP_TOPIC_PREFIX + "g": 3}
    assert many.timeline_list() == one.timeline_list()
    assert many.duplicates() == one.duplicates() == 5  # A 3 times more (the transaction's too), R twice; "" not
    problems = check_invariants(check, [], {})
    assert problems == check_invariants(HISTORY, [], {}) == [
        "schedule delivered A at 10, before its due time 20", "timer delivered A at 11, before its due time 30",
        "schedule delivered R@7 2 times without a fault", "timer delivered  2 times without a fault"]


def test_record_lines_wait_in_their_place_among_many_batches_and_one_comma_goes_alone():
    """`record`'s finished lines (a `%` in them) between 200 calls, one of whose values has a comma."""
    sink = io.StringIO()
    log = EventLog(sink=sink, hold=False)
    want = []
    for i in range(200):
        topic = "T,x" if i == 137 else "T"
        log.record_batch(i, "timer", "deliver", [(topic, 0, f"K{i}", i, None, True)], ("direct",))
        want.append({"time": i, "service": "timer", "event": "deliver", "topic": topic, "queue_id": 0,
                     "uniq_key": f"K{i}", "physical_offset": i, "new_physical_offset": None, "direct": True})
        if i % 50 == 7:
            log.emit_plain(i, "schedule", "persist", "100%s", offsets={"%b": i, "2": 1})
            want.append({"time": i, "service": "schedule", "event": "persist", "topic": "100%s", "queue_id": None,
                         "uniq_key": None, "physical_offset": None, "new_physical_offset": None,
                         "offsets": {"%b": i, "2": 1}})
    log.flush()
    assert sink.getvalue().encode() == _json_bytes(want) and len(want) == 204
    assert [t.slow for t in log._templates.values()] == [True]  # found: its kind goes row by row from there


@settings(max_examples=150, deadline=None)
@given(calls(), st.sampled_from([1, 2, 4096]))
def test_lines_formatted_by_the_writer_threads_compiled_code_are_jsons_bytes(script, flush_lines):
    """After `_NATIVE_AFTER` lines the blocks go to the writer thread as orjson's text (`eventlines`)."""
    old = events_mod._FLUSH_LINES, events_mod._NATIVE_AFTER
    events_mod._FLUSH_LINES, events_mod._NATIVE_AFTER = flush_lines, 0
    try:
        raw = io.BytesIO()
        binary = io.TextIOWrapper(raw, encoding="utf-8")
        log = EventLog(sink=binary, hold=False)
        log.record_batch(0, "timer", "roll", [("T", 0, "K", 1, 2)], ())  # the first block: the Python way
        log.flush()
        want = [dict(zip(_KEYS, (0, "timer", "roll", "T", 0, "K", 1, 2), strict=True))] + _play(log, script)
    finally:
        events_mod._FLUSH_LINES, events_mod._NATIVE_AFTER = old
    binary.flush()
    assert log._native is not None
    assert raw.getvalue() == _json_bytes(want)


def test_the_compiled_formatter_by_hand():
    """Commas, brackets and quotes inside strings, a nested dict, a `record_rows` row's own time, a line
    dict: each value's text where its template puts it."""
    from mqtool.simulate.eventlines import Table, formatter

    deliver = events_mod._Template("timer", "deliver", ("x",), False, 0)
    roll = events_mod._Template("timer", "roll", (), True, 1)
    import orjson

    text = orjson.dumps([[5, deliver, [['a,]"b', 1, None, 2, 3, {"k": 1, "j": '"]'}], ["c", 0, "K", 4, None, True]]],
                         {"time": 1, "a": "}"}, [None, roll, [[7, "q", 2, "\u00e9", 8, 9]]]])
    got = bytes(formatter().format(text, 4, Table([deliver, roll])))
    assert got.decode().splitlines() == [
        '{"time":5,"service":"timer","event":"deliver","topic":"a,]\\"b","queue_id":1,"uniq_key":null,'
        '"physical_offset":2,"new_physical_offset":3,"x":{"k":1,"j":"\\"]"}}',
        '{"time":5,"service":"timer","event":"deliver","topic":"c","queue_id":0,"uniq_key":"K",'
        '"physical_offset":4,"new_physical_offset":null,"x":true}',
        '{"time":1,"a":"}"}',
        '{"time":7,"service":"timer","event":"roll","topic":"q","queue_id":2,"uniq_key":"\u00e9",'
        '"physical_offset":8,"new_physical_offset":9}']
