"""`mqtool trace` / `mqtool index build` through the CLI, and the index against the scan."""

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from trace_stores import CONFIG, T0, build_paths, props  # noqa: E402

from mqtool.builder import broker as b  # noqa: E402
from mqtool.builder.writer import StoreWriter  # noqa: E402
from mqtool.cli.app import app  # noqa: E402
from mqtool.inspect.records import record_dict  # noqa: E402
from mqtool.store.store import Store  # noqa: E402
from mqtool.trace import TraceQuery, trace  # noqa: E402
from mqtool.trace.index import TraceIndex, build_index, index_finder  # noqa: E402

SCHEMA = json.loads((Path(__file__).parents[2] / "mqtool/schemas/trace.json").read_text())
runner = CliRunner()


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    return build_paths(tmp_path_factory.mktemp("cli") / "store")


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("cmd", [["trace"], ["index", "build"]])
def test_help(cmd):
    r = run(*cmd, "--help")
    assert r.exit_code == 0 and "Example" in r.output


def test_found_json_validates(store_dir):
    r = run("trace", store_dir, "--key", "tx-commit", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"]["state"] == "committed"
    assert doc["query"]["by"] == "key" and doc["query"]["as_of"] == T0 + 300_000
    assert [x["role"] for x in doc["records"]] == ["half", "half_copy", "half_copy", "commit", "op"]


def test_every_path_validates(store_dir):
    for key in ("plain", "delay-done", "delay-wait", "timer-roll", "timer-victim", "tx-rollback", "tx-discard",
                "tx-pending", "retry-dlq"):
        r = run("trace", store_dir, "--key", key, "--json")
        assert r.exit_code == 0
        jsonschema.validate(json.loads(r.stdout), SCHEMA)


def test_table_on_stdout(store_dir):
    r = run("trace", store_dir, "--key", "timer-victim")
    assert r.exit_code == 0
    assert "cancel_requested" in r.stdout and "\ncancelled by " in r.stdout


def test_not_found_is_exit_1(store_dir):
    r = run("trace", store_dir, "--uniq-key", "0123456789ABCDEF")
    assert r.exit_code == 1
    assert "not found: no record of UNIQ_KEY 0123456789ABCDEF" in r.stderr


@pytest.mark.parametrize("args, message", [
    ([], "Error: give exactly one of --uniq-key, --key, --offset, --msg-id"),
    (["--key", "a", "--offset", "1"], "Error: give exactly one of --uniq-key, --key, --offset, --msg-id "
                                      "(got --key, --offset)"),
    (["--msg-id", "not-hex"], "Error: not a message id: 'not-hex' (an offsetMsgId or a UNIQ_KEY is hexadecimal)"),
    (["--key", "plain", "--now", "yesterday"], "Error: not a time: 'yesterday'"),
])
def test_input_errors_are_exit_2(store_dir, args, message):
    r = run("trace", store_dir, *args)
    assert r.exit_code == 2
    assert r.stderr.startswith(message)


def test_missing_store_is_exit_2(tmp_path):
    assert run("trace", tmp_path / "nope", "--key", "x").exit_code == 2


def test_limit_and_newest_first(store_dir):
    r = run("trace", store_dir, "--key", "t", "--json")  # no record has KEYS "t"
    assert r.exit_code == 1


def test_until_continues_with_the_simulator(store_dir):
    r = run("trace", store_dir, "--key", "delay-wait", "--until", "+3h", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    sim = [s for s in doc["stages"] if s.get("simulated")]
    assert [s["stage"] for s in sim] == ["delivered"] and sim[0]["topic"] == "TopicA"
    assert doc["verdict"]["state"] == "delivered" and doc["verdict"]["text"].endswith("(simulated)")


# ----------------------------------------------------------------------------- index


def _docs(store, finder=None):
    out = []
    for key in ("plain", "delay-done", "timer-roll", "timer-victim", "tx-commit", "tx-rollback", "tx-discard",
                "retry-dlq"):
        out += [t.as_dict(record_dict) for t in trace(store, TraceQuery(key=key), finder=finder)]
    return out


def test_index_gives_the_same_traces(store_dir, tmp_path):
    store = Store.open(store_dir, CONFIG)
    r = run("index", "build", store_dir, "--out", tmp_path / "ix", "--json")
    assert r.exit_code == 0, r.output
    stats = json.loads(r.stdout)["index"]
    assert stats["rebuilt"] and stats["records_added"] == stats["total_records"] == 27
    finder, notes = index_finder(store, tmp_path / "ix")
    assert notes == []
    assert _docs(store, finder) == _docs(store)
    r = run("trace", store_dir, "--key", "tx-commit", "--json", "--index", tmp_path / "ix")
    assert json.loads(r.stdout)["verdict"]["state"] == "committed"


def test_index_grows_incrementally(store_dir, tmp_path):
    build_index(Store.open(store_dir, CONFIG), tmp_path / "ix")
    grown = tmp_path / "grown"
    with StoreWriter.extend(store_dir, grown, CONFIG) as w:
        b.put_message(w, "TopicA", 2, b"n", props("late", 99), store_timestamp=T0 + 400_000)
    store = Store.open(grown, CONFIG)
    with TraceIndex.open(tmp_path / "ix") as ix:
        assert ix.status(store) == "grown"
    finder, notes = index_finder(store, tmp_path / "ix")
    assert notes == ["index updated: 1 new record(s) indexed"]
    assert trace(store, TraceQuery(key="late"), finder=finder)[0].verdict.state == "delivered"
    with TraceIndex.open(tmp_path / "ix") as ix:
        assert ix.status(store) == "current"
        again = ix.update(store)
    assert (again.records, again.rebuilt) == (0, False)


def test_index_of_another_store_is_refused(store_dir, tmp_path):
    other = tmp_path / "other"
    with StoreWriter(other, CONFIG) as w:
        b.put_message(w, "TopicA", 0, b"o", props("other", 1), store_timestamp=T0)
    build_index(Store.open(other, CONFIG), tmp_path / "ix")
    r = run("trace", store_dir, "--key", "plain", "--index", tmp_path / "ix")
    assert r.exit_code == 2 and "the index does not match this store (stale)" in r.stderr
    r = run("trace", store_dir, "--key", "plain", "--index", tmp_path / "none")
    assert r.exit_code == 2 and "no trace index here" in r.stderr


@pytest.mark.parametrize("cmd", [["trace", "{store}", "--key", "x"], ["index", "build", "{store}", "--out", "{tmp}/i"]])
def test_missing_store_or_config_is_one_error_line(tmp_path, store_dir, cmd):
    """Not click's usage box: one `Error:` line, exit 2, for a missing store and a missing broker.conf."""
    for store, extra in ((tmp_path / "nope", []), (store_dir, ["--config", tmp_path / "none.conf"])):
        args = [str(a).format(store=store, tmp=tmp_path) for a in cmd] + [str(x) for x in extra]
        r = runner.invoke(app, args)
        assert r.exit_code == 2, r.output
        assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1, r.stderr
