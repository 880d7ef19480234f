"""`EventLog.record_rows` (each row with its own time) writes the bytes a `record_batch` call per row's
time writes, and its watchers read the same columns, also among `record_batch` calls of other layouts
and `record` lines, and through the slow way (a comma in a value, a nested dict)."""

import io

from eventrows import put_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.simulate.events import EventLog

KEYS = ("slot", "due", "direct", "queue_offset")
COLUMNS = (
    "time",
    "service",
    "event",
    "topic",
    "queue_id",
    "uniq_key",
    "physical_offset",
    "new_physical_offset",
    "slot",
    "due",
    "direct",
    "queue_offset",
    "level",
)
text = st.one_of(st.text(max_size=6), st.sampled_from(["a,b", "%b", '},{"time":1', "\udc80", "é"]))
value = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 40), 1 << 40), text)
row = st.tuples(*[value] * 9)
detail = st.dictionaries(text.filter(lambda k: k not in COLUMNS[:8]), value, max_size=2)  # no line key


@st.composite
def scripts(draw):
    """Groups of timer rows at one time each (`record_rows` gets runs of them in one call), with schedule
    `record_batch` calls (another layout: "level") and `record` lines between the runs."""
    out = []
    time = draw(st.integers(0, 1 << 50))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["rows", "rows", "batch", "record"]))
        time += draw(st.integers(0, 3))
        if kind == "rows":
            groups = draw(
                st.lists(st.tuples(st.integers(0, 2), st.lists(row, min_size=1, max_size=3)), min_size=1, max_size=3)
            )
            out.append(("rows", time, groups))
            time += sum(g[0] for g in groups)
        elif kind == "batch":
            out.append(("batch", time, draw(st.lists(st.tuples(*[value] * 6), min_size=1, max_size=3))))
        else:
            out.append(("record", time, draw(st.tuples(*[value] * 5)), draw(detail)))
    return out


def _log():
    sink = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogatepass", newline="")
    log = EventLog(sink=sink)
    seen = {"deliver": [], "roll": []}
    for kind, cols in seen.items():
        log.watch_columns(kind, lambda c, cols=cols: cols.append({k: c[k] for k in COLUMNS}))
    return log, sink, seen


def _play(script, timed: bool):
    log, sink, seen = _log()
    for c in script:
        if c[0] == "rows":
            t = c[1]
            if timed:
                rows = []
                for dt, group in c[2]:
                    t += dt
                    rows += [(t, *r) for r in group]
                put_rows(log, None, "timer", "deliver", rows, KEYS)
            else:
                for dt, group in c[2]:
                    t += dt
                    put_rows(log, t, "timer", "deliver", list(group), KEYS)
        elif c[0] == "batch":
            put_rows(log, c[1], "schedule", "deliver", list(c[2]), ("level",))
        else:
            log.batch(c[1], "schedule", "deliver", *c[2], **c[3])
    log.flush()
    return sink.buffer.getvalue(), seen, log.by_kind


def _flat(batches):
    return {k: [v for b in batches for v in b[k]] for k in COLUMNS}


@settings(max_examples=150, deadline=None)
@given(scripts())
def test_record_rows_equals_a_record_batch_per_time(script):
    lines, seen, counts = _play(script, True)
    want_lines, want, want_counts = _play(script, False)
    assert lines == want_lines
    assert _flat(seen["deliver"]) == _flat(want["deliver"])
    assert counts == want_counts


def test_record_rows_lines_and_columns_by_hand():
    log, sink, seen = _log()
    put_rows(log, 5, "schedule", "deliver", [("S", 1, "k0", 10, 20, 2)], ("level",))
    put_rows(
        log,
        None,
        "timer",
        "deliver",
        [(7, "T", 0, "k1", 1, 2, 100, 101, False, 3), (9, "T", 1, None, 3, 4, 200, 201, False, 4)],
        KEYS,
    )
    put_rows(log, None, "timer", "roll", [(9, "T", 2, "k2", 5, 6, 300, 1)], ("slot", "roll_times"))
    log.flush()
    assert sink.buffer.getvalue().decode().splitlines() == [
        '{"time":5,"service":"schedule","event":"deliver","topic":"S","queue_id":1,"uniq_key":"k0",'
        '"physical_offset":10,"new_physical_offset":20,"level":2}',
        '{"time":7,"service":"timer","event":"deliver","topic":"T","queue_id":0,"uniq_key":"k1",'
        '"physical_offset":1,"new_physical_offset":2,"slot":100,"due":101,"direct":false,"queue_offset":3}',
        '{"time":9,"service":"timer","event":"deliver","topic":"T","queue_id":1,"uniq_key":null,'
        '"physical_offset":3,"new_physical_offset":4,"slot":200,"due":201,"direct":false,"queue_offset":4}',
        '{"time":9,"service":"timer","event":"roll","topic":"T","queue_id":2,"uniq_key":"k2",'
        '"physical_offset":5,"new_physical_offset":6,"slot":300,"roll_times":1}',
    ]
    d = _flat(seen["deliver"])
    assert d["time"] == [5, 7, 9] and d["service"] == ["schedule", "timer", "timer"]
    assert d["topic"] == ["S", "T", "T"] and d["uniq_key"] == ["k0", "k1", None]
    assert d["due"] == [None, 101, 201] and d["level"] == [2, None, None]
    r = _flat(seen["roll"])
    assert r["time"] == [9] and r["uniq_key"] == ["k2"] and r["slot"] == [300]
    assert log.by_kind == {"deliver": 3, "roll": 1}


def test_record_rows_held_events_carry_each_rows_time():
    log = EventLog()  # held: a SimEvent per row
    put_rows(
        log,
        None,
        "timer",
        "deliver",
        [(7, "T", 0, "k1", 1, 2, 100, 101, False, 3), (9, "T", 1, "k2", 3, 4, 200, 201, True, 4)],
        KEYS,
    )
    assert [(e.time, e.uniq_key, e.detail["due"], e.detail["direct"]) for e in log] == [
        (7, "k1", 101, False),
        (9, "k2", 201, True),
    ]
