"""The event log writes `json`'s bytes: the compiled kernel (`mqtool._native.event_lines`) equals the
plain-Python formatting (`eventlines.lines`, json one line dict at a time) on generated batches and on
real runs, every entry point of `EventLog` writes the lines json writes, and without the extension the
same bytes come from Python after one warning."""

import io
import json
import subprocess
import sys

import orjson
import pytest
from eventrows import put_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ORACLE, PROJECT, copy_with_wheel, need_oracle
from mqtool import _native
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.simulate import eventlines
from mqtool.simulate.eventlines import KEYS, Kind, Table
from mqtool.simulate.events import EventLog
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store

# every code point (surrogates too), and the texts a formatter could split at
text = st.one_of(
    st.text(st.characters(min_codepoint=0, max_codepoint=sys.maxunicode), max_size=12),
    st.sampled_from(["a,b", '},{"time":1', "%b", "%s%%", "],[", '"', "\\", "\udc80", "T", "\u2028"]),
)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), text)
plain_value = st.one_of(scalar, st.dictionaries(text, st.integers(-(1 << 63), (1 << 63) - 1), max_size=3))
detail_keys = st.lists(text.filter(lambda k: k not in KEYS), max_size=3, unique=True).map(tuple)
small = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 63), (1 << 64) - 1),
    st.text(st.characters(min_codepoint=0, max_codepoint=sys.maxunicode, exclude_categories=("Cs",)), max_size=8),
    st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
)


def _reference(kinds: list[Kind], batches: list[tuple]) -> bytes:
    """json's lines, written here without the module: the dict of each event in the line's key order."""
    out = b""
    for b in batches:
        k = kinds[b[0]]
        for row in zip(*b[1:], strict=True):
            d = {"time": row[0], "service": k.service, "event": k.event, **dict(zip(k.names[1:], row[1:], strict=True))}
            out += json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"
    return out


def _kernel(kinds: list[Kind], batches: list[tuple], out_size: int = 1 << 16):
    import numpy as np

    table = Table(kinds)
    out = np.empty(out_size, np.uint8)
    n = _native.event_lines(
        np.frombuffer(orjson.dumps(batches), np.uint8),
        table.pieces,
        table.poff,
        table.kfirst,
        np.empty(64 * table.widest, np.int64),
        out,
    )
    return n if n < 0 else out[:n].tobytes()


@st.composite
def blocks(draw, value=small):
    """Kinds of every service and event, batches of 1..4 events of them."""
    kinds = [
        Kind(
            i,
            draw(st.sampled_from(["timer", "schedule", 's%b,"'])),
            draw(st.sampled_from(["deliver", "roll"])),
            draw(detail_keys),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    batches = []
    for _ in range(draw(st.integers(1, 6))):
        k = draw(st.sampled_from(kinds))
        n = draw(st.integers(1, 4))
        batches.append((k.id, *(draw(st.lists(value, min_size=n, max_size=n)) for _ in k.names)))
    return kinds, batches


@settings(max_examples=150, deadline=None)
@given(blocks())
def test_the_kernel_writes_what_the_plain_formatting_writes(block):
    kinds, batches = block
    want = _reference(kinds, batches)
    assert eventlines.lines(batches, kinds) == want
    assert _kernel(kinds, batches) == want
    assert _kernel(kinds, batches, len(want) - 1) == eventlines.TOO_SMALL  # never past the end of `out`


def test_the_kernel_by_hand():
    """Commas, brackets and quotes inside strings, a nested dict, escapes, a 64-bit integer, None."""
    deliver, roll = Kind(0, "timer", "deliver", ("x",)), Kind(1, "timer", "roll", ())
    batches = [
        (0, [5, 5], ['a,]"b', "c"], [1, 0], [None, "K"], [2, 4], [3, None], [{"k": 1, "j": 2}, True]),
        (1, [7], ["q\n\u00e9"], [2], ["\\"], [(1 << 64) - 1], [-(1 << 63)]),
    ]
    assert _kernel([deliver, roll], batches).decode().splitlines() == [
        '{"time":5,"service":"timer","event":"deliver","topic":"a,]\\"b","queue_id":1,"uniq_key":null,'
        '"physical_offset":2,"new_physical_offset":3,"x":{"k":1,"j":2}}',
        '{"time":5,"service":"timer","event":"deliver","topic":"c","queue_id":0,"uniq_key":"K",'
        '"physical_offset":4,"new_physical_offset":null,"x":true}',
        '{"time":7,"service":"timer","event":"roll","topic":"q\\n\u00e9","queue_id":2,"uniq_key":"\\\\",'
        '"physical_offset":18446744073709551615,"new_physical_offset":-9223372036854775808}',
    ]


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"[",
        b"{}",
        b"[[0,[1]]",
        b"[[9,[1],[2],[3],[4],[5],[6]]]",
        b"[[0,[1,2],[1]]]",
        b"[[0,[1],[1,2],[1],[1],[1],[1]]]",
        b"[[0,[1,2],[1],[1],[1],[1],[1]]]",
        b"[[0,[1],[1],[1],[1],[1]]]",
        b"[[x]]",
        b'[[0,["a],[1],[1],[1],[1],[1]]]',
        b"[[0,[1],[1],[1],[1],[1],[1],[1]]]",
    ],
)
def test_damaged_text_is_refused_not_read_past(text):
    import numpy as np

    table = Table([Kind(0, "timer", "roll", ())])
    got = _native.event_lines(
        np.frombuffer(text, np.uint8),
        table.pieces,
        table.poff,
        table.kfirst,
        np.empty(64 * table.widest, np.int64),
        np.empty(1 << 12, np.uint8),
    )
    assert got == eventlines.MALFORMED


@st.composite
def calls(draw):
    """Calls of both entry points: ("batch" | "rows" (`batch` of rows at one time) | "timed_rows" (each row's own
    time) | "emit", args)."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        time = draw(st.integers(0, 1 << 62))
        service = draw(st.sampled_from(["timer", "schedule", "s%b,"]))
        event = draw(st.sampled_from(["deliver", "roll"]))
        keys = draw(detail_keys)
        how = draw(st.sampled_from(["batch", "rows", "timed_rows", "emit"]))
        value = st.one_of(plain_value, st.floats()) if how == "emit" else plain_value
        n = 1 if how == "emit" else draw(st.integers(1, 5))
        rows = draw(st.lists(st.tuples(*[value] * (5 + len(keys))), min_size=n, max_size=n))
        times = [time + i * draw(st.integers(0, 2)) for i in range(n)] if how == "timed_rows" else [time] * n
        out.append((how, time, times, service, event, rows, keys))
    return out


def _play(log: EventLog, script) -> list[dict]:
    """Run the calls on `log`; the line dicts json would have written, in order."""
    want = []
    for how, time, times, service, event, rows, keys in script:
        for t, r in zip(times, rows, strict=True):
            want.append(
                {**dict(zip(KEYS, (t, service, event, *r[:5]), strict=True)), **dict(zip(keys, r[5:], strict=True))}
            )
        if how == "batch":
            columns = list(map(list, zip(*rows, strict=True)))
            at = time if len(set(times)) == 1 and len(times) > 1 else times
            log.batch(at, service, event, *columns[:5], **dict(zip(keys, columns[5:], strict=True)))
        elif how == "rows":
            put_rows(log, time, service, event, list(rows), keys)
        elif how == "timed_rows":
            put_rows(log, None, service, event, [(t, *r) for t, r in zip(times, rows, strict=True)], keys)
        else:
            log.emit(time, service, event, *rows[0][:5], **dict(zip(keys, rows[0][5:], strict=True)))
    log.flush()
    return want


def _json_bytes(want: list[dict]) -> bytes:
    return b"".join(
        json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n" for d in want
    )


@settings(max_examples=120, deadline=None)
@given(calls())
def test_every_entry_point_writes_jsons_bytes_through_the_buffer_and_as_text(script):
    raw = io.BytesIO()
    binary = io.TextIOWrapper(raw, encoding="utf-8")
    want = _play(EventLog(sink=binary, hold=False), script)
    text = io.StringIO()  # no byte buffer: the text, decoded, formatted on this thread
    _play(EventLog(sink=text, hold=False), script)
    held = EventLog(sink=io.StringIO(), hold=True)
    _play(held, script)
    binary.flush()
    assert raw.getvalue() == _json_bytes(want)
    assert text.getvalue() == _json_bytes(want).decode("utf-8", "surrogatepass")
    assert held.jsonl() == text.getvalue() and len(held) == len(want)


def test_a_batch_takes_columns_numpy_arrays_and_one_value_for_all():
    import numpy as np

    sink = io.StringIO()
    log = EventLog(sink=sink, hold=True)
    log.batch(
        np.array([5, 6], np.int64),
        "timer",
        "deliver",
        "T",
        (0, 1),
        ["a", None],
        np.array([10, 20]),
        slot=7,
    )
    log.batch(9, "broker", "restart")
    log.flush()
    assert sink.getvalue().splitlines() == [
        '{"time":5,"service":"timer","event":"deliver","topic":"T","queue_id":0,"uniq_key":"a",'
        '"physical_offset":10,"new_physical_offset":null,"slot":7}',
        '{"time":6,"service":"timer","event":"deliver","topic":"T","queue_id":1,"uniq_key":null,'
        '"physical_offset":20,"new_physical_offset":null,"slot":7}',
        '{"time":9,"service":"broker","event":"restart","topic":null,"queue_id":null,"uniq_key":null,'
        '"physical_offset":null,"new_physical_offset":null}',
    ]
    assert [type(e.time) for e in log] == [int, int, int] and log.by_kind == {"deliver": 2, "restart": 1}
    counted = EventLog(keep=False)
    counted.tally("deliver", 3)
    counted.tally("deliver")
    counted.batch([1, 2], "timer", "deliver")  # not kept: only counted
    assert counted.by_kind == {"deliver": 6} and len(counted) == 6
    with pytest.raises(ValueError, match="a column of 3 values in a batch of 2"):
        log.batch([1, 2], "timer", "deliver", ["a", "b", "c"])


def test_values_orjson_refuses_or_writes_otherwise_are_written_by_json_in_their_place():
    sink = io.StringIO()
    log = EventLog(sink=sink, hold=False)
    put_rows(log, 5, "schedule", "persist", [("S", None, None, None, None, {1: 5, "2": 6})], ("offsets",))
    log.emit(6, "broker", "clock_jump", delta_ms=1e16, clock=[1, 2.5])
    put_rows(
        log, 7, "timer", "deliver", [("T", 1 << 64, "\udcff", 1, 2, True), ("T", 0, "K", 3, 4, False)], ("direct",)
    )
    log.batch(8, "timer", "roll", "T", 0, "K", 1, 2)
    log.flush()
    assert sink.getvalue().splitlines() == [
        '{"time":5,"service":"schedule","event":"persist","topic":"S","queue_id":null,"uniq_key":null,'
        '"physical_offset":null,"new_physical_offset":null,"offsets":{"1":5,"2":6}}',
        '{"time":6,"service":"broker","event":"clock_jump","topic":null,"queue_id":null,"uniq_key":null,'
        '"physical_offset":null,"new_physical_offset":null,"delta_ms":1e+16,"clock":[1,2.5]}',
        '{"time":7,"service":"timer","event":"deliver","topic":"T","queue_id":18446744073709551616,'
        '"uniq_key":"\udcff","physical_offset":1,"new_physical_offset":2,"direct":true}',
        '{"time":7,"service":"timer","event":"deliver","topic":"T","queue_id":0,"uniq_key":"K",'
        '"physical_offset":3,"new_physical_offset":4,"direct":false}',
        '{"time":8,"service":"timer","event":"roll","topic":"T","queue_id":0,"uniq_key":"K",'
        '"physical_offset":1,"new_physical_offset":2}',
    ]


def _pair(name: str, tmp_path):
    """A run of the pair's A store to B's stop with B's check rounds, its lines written through a byte buffer
    (the kernel on the writer thread) and its events held (`jsonl`: json's lines)."""
    pair = ORACLE / name
    m = json.loads((pair / "B.manifest.json").read_text())
    cfg = load_broker_conf(pair / "broker.conf")
    st = Store.open(copy_with_wheel(pair / "A", tmp_path / name), cfg)
    raw = io.BytesIO()
    sink = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    r = simulate(
        st,
        cfg,
        m["T_restartMs"],
        m["T_stopMs"] + 3 * 86_400_000,
        parse_scenario({"transaction": {"check_at": m["checkRounds"]}}, m["T_restartMs"]),
        1,
        "4.9" if name == "pair-4.9" else "5.3",
        sink=sink,
        hold_events=True,
    )
    sink.flush()
    return raw.getvalue(), r.events.jsonl().encode("utf-8", "surrogatepass")


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["pair_default", "pair-4.9"])
def test_real_runs_lines_are_jsons(name, tmp_path):
    need_oracle()
    got, want = _pair(name, tmp_path)
    assert got == want and want.count(b"\n") > 20


WITHOUT_EXTENSION = """
import io, sys, warnings
sys.modules["mqtool._native"] = None  # what a machine without a compiler has
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from mqtool.simulate.events import EventLog
    logs = [EventLog(sink=io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) for _ in range(2)]
print(len(caught), caught[0].category.__name__, "the simulator's event log" in str(caught[0].message), flush=True)
log = logs[0]
for i in range(5000):
    log.batch(i, "timer", "deliver", "T,]", i, "K\\u00e9", i, None, x=1 << 64 if i == 7 else True)
log.flush()
sys.stdout.buffer.write(log.sink.buffer.getvalue())
"""


def test_without_the_extension_python_writes_the_same_lines_after_one_warning():
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTENSION],
        capture_output=True,
        check=True,
        cwd=PROJECT,
        env={"PYTHONPATH": str(PROJECT), "PATH": "/usr/bin:/bin"},
    ).stdout
    head, lines = out.split(b"\n", 1)
    assert head == b"1 RuntimeWarning True"
    want = [
        {
            "time": i,
            "service": "timer",
            "event": "deliver",
            "topic": "T,]",
            "queue_id": i,
            "uniq_key": "K\u00e9",
            "physical_offset": i,
            "new_physical_offset": None,
            "x": 1 << 64 if i == 7 else True,
        }
        for i in range(5000)
    ]
    assert lines == _json_bytes(want)
