"""mqtool/output.py: orjson's JSON Lines equal json's bytes; Parquet holds the values --json prints."""

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mqtool.cli.app import app
from mqtool.output import fast_line, json_line, parquet_schema, write_jsonl

REPO = Path(__file__).resolve().parents[1]
DEMO = str(REPO / "fixtures" / "demo")
GOLDEN_LINES = sorted((REPO / "tests" / "golden").glob("*.jsonl"))

# every code point: control characters, quotes, backslashes, U+2028/9, non-BMP; surrogates too
text = st.text(st.characters(min_codepoint=0, max_codepoint=sys.maxunicode), max_size=40)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), text)
row = st.dictionaries(text, st.one_of(scalar, st.dictionaries(text, st.one_of(st.none(), text), max_size=4),
                                      st.lists(st.one_of(st.none(), st.booleans(), st.integers(), text), max_size=4)),
                      max_size=8)


def _reference(r) -> bytes | None:
    """json's line as bytes, or None when it cannot be UTF-8 (a lone surrogate: today's write fails too)."""
    try:
        return json_line(r).encode("utf-8")
    except UnicodeEncodeError:
        return None


@settings(max_examples=200, deadline=None)
@given(row)
def test_fast_line_is_json_line_or_declines(r):
    got = fast_line(r)
    if got is not None:
        assert got == _reference(r)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["topic", "body", "k"]), text, min_size=1))
def test_fast_line_takes_every_valid_string(r):
    """orjson writes the row itself (it does not hand it to json) unless a string holds a surrogate."""
    if _reference(r) is not None:
        assert fast_line(r) == _reference(r)


@pytest.mark.parametrize("r", [
    {"x": 1e16}, {"x": 0.1}, {"x": float("nan")}, {"p": {"k": 1.5}}, {"l": [2.0]},  # floats: json's repr
    {"x": 1 << 64}, {"x": -(1 << 63) - 1},  # past 64 bits
    {"x": "\udc80"},  # a surrogate-escaped byte of a name
    {1: "a"}, {"p": {2: "b"}},  # keys json turns into strings
    {"t": (1, 2)}, {"b": b"\x01"}, {"d": {"k": [1]}},  # other types, deeper nesting
])
def test_fast_line_declines_what_json_writes_differently(r):
    assert fast_line(r) is None


@pytest.mark.parametrize("r", [
    {}, {"a": {}}, {"a": []}, {"a": {"k": None}, "b": [None, True, -1, "x"]},
    {"topic": "T\x00\x1f\x7f\u2028\U0001f600\"\\/", "n": -(1 << 63), "m": (1 << 64) - 1},
])
def test_fast_line_hand_picked(r):
    assert fast_line(r) == json_line(r).encode()


@pytest.mark.parametrize("golden", GOLDEN_LINES, ids=lambda p: p.name)
def test_every_golden_record_is_printed_as_json_printed_it(golden):
    """The goldens hold the records (compact; compared after parsing); the line printed for each is json's."""
    lines = golden.read_bytes().splitlines()
    assert lines
    took = 0
    for line in lines:
        r = json.loads(line)
        fast = fast_line(r)
        if fast is not None:
            assert fast == json_line(r).encode()
            assert json.loads(fast) == r
            took += 1
    if golden.name.startswith(("inspect-messages", "inspect-queue")):
        assert took == len(lines)  # the record views never fall back


def test_write_jsonl_keeps_order_across_fallbacks(tmp_path):
    import io

    rows = [{"a": 1}, {"x": 1.5}, {"b": "é"}, {"c": 1 << 80}, {"d": None}]
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    out.write("first\n")
    write_jsonl(rows, out)
    out.flush()
    assert raw.getvalue().decode() == "first\n" + "".join(json_line(r) for r in rows)
    text = io.StringIO()  # a stream without a byte buffer (the --expect capture)
    write_jsonl(rows, text)
    assert text.getvalue() == "".join(json_line(r) for r in rows)


# ----------------------------------------------------------------------------- the CLI

def _cli(*args: str):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


@pytest.mark.parametrize("body", ["text", "hex", "base64", "none"])
def test_messages_json_is_json_dumps_of_the_records(body):
    from mqtool.formats.broker_conf import BrokerConfig
    from mqtool.inspect.messages import MessageQuery, iter_messages
    from mqtool.inspect.records import record_dict
    from mqtool.store.store import Store

    store = Store.open(Path(DEMO), BrokerConfig())
    want = "".join(json_line(record_dict(r, body)) for r in iter_messages(store, MessageQuery()))
    assert _cli("inspect", DEMO, "messages", "--json", "--body", body).stdout == want


def _parquet_rows(path: Path) -> list[dict]:
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        if r["properties"] is not None:
            r["properties"] = dict(r["properties"])
    return rows


@pytest.mark.parametrize("args,view", [
    (["messages"], "messages"),
    (["messages", "--topic", "DemoTopicA", "--body", "base64"], "messages"),
    (["messages", "--decompress", "--limit", "7"], "messages"),
    (["queue", "--topic", "DemoTopicA", "--queue-id", "2"], "queue"),
    (["queue", "--topic", "SCHEDULE_TOPIC_XXXX", "--queue-id", "0", "--body", "hex"], "queue"),
])
def test_parquet_holds_the_json_values(tmp_path, args, view):
    out = tmp_path / "r.parquet"
    r = _cli("inspect", DEMO, *args, "--format", "parquet", "--output", str(out))
    assert r.stdout == ""
    lines = [json.loads(x) for x in _cli("inspect", DEMO, *args, "--json").stdout.splitlines()]
    got = _parquet_rows(out)
    assert pq.read_schema(out).remove_metadata() == parquet_schema(view)
    assert len(got) == len(lines) > 0
    for g, want in zip(got, lines, strict=True):
        assert {k: v for k, v in g.items() if k in want} == want
        assert all(g[k] is None for k in g.keys() - want.keys())  # absent keys are null
        assert list(want) == [k for k in g if k in want]  # same order as the JSON keys


@pytest.mark.parametrize("topic,key", [("DemoTopicA", "order-1001"), ("DemoTopicA", "B2"),
                                       ("SCHEDULE_TOPIC_XXXX", "D18")])
def test_index_lookup_parquet_holds_the_json_rows(tmp_path, topic, key):
    out = tmp_path / "i.parquet"
    args = ["index", "--topic", topic, "--key", key]
    assert _cli("inspect", DEMO, *args, "--format", "parquet", "--output", str(out)).stdout == ""
    doc = json.loads(_cli("inspect", DEMO, *args, "--json").stdout)
    want = doc["matches"] + doc["rejected"]
    got = pq.read_table(out).to_pylist()
    assert pq.read_schema(out).remove_metadata() == parquet_schema("index")
    assert len(got) == len(want) and doc["matches"]
    for g, w in zip(got, want, strict=True):
        assert {k: v for k, v in g.items() if k in w} == w
        assert all(g[k] is None for k in g.keys() - w.keys())
        assert list(w) == [k for k in g if k in w]


def test_index_parquet_needs_a_lookup(tmp_path):
    r = CliRunner().invoke(app, ["inspect", DEMO, "index", "--format", "parquet", "--output", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--format" in r.output
    assert not (tmp_path / "x").exists()


def test_parquet_schema_is_the_documented_one():
    """docs/formats.md lists every column with its type, in order."""
    doc = (REPO / "docs" / "formats.md").read_text()
    section = doc[doc.index("## Parquet output") :]
    for view in ("messages", "queue"):
        for f in parquet_schema(view):
            assert f"| `{f.name}` | `{f.type}` |" in section, f.name
    index = section[section.index("Index lookup") :]
    for f in parquet_schema("index"):
        assert f"| `{f.name}` | `{f.type}` |" in index, f.name


@pytest.mark.parametrize("args,error", [
    (["messages", "--format", "parquet"], "--format and --output go together"),
    (["messages", "--output", "x.parquet"], "--format and --output go together"),
    (["messages", "--json", "--format", "parquet", "--output", "x.parquet"], "leave out --json"),
    (["overview", "--format", "parquet", "--output", "x.parquet"], "--format applies to the messages and queue"),
])
def test_parquet_usage_errors(tmp_path, args, error):
    r = CliRunner().invoke(app, ["inspect", DEMO, *args])
    assert r.exit_code == 2
    assert error in r.output
    assert not (tmp_path / "x.parquet").exists()
