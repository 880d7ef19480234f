"""Start-up: `mqtool --help`, usage errors and small config views import only what they use.

Each case runs the real command in a fresh interpreter with `-X importtime` (which lists every
module the process imported, on stderr) and looks for the heavy packages by name.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.cli.common import BODY_CHOICES, VERSION_CHOICES, Body, BrokerVersion

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "fixtures" / "demo"

HEAVY = ("numba", "numpy", "pyarrow", "pyspark", "jsonschema", "sqlite3", "_sqlite3", "rich.table",
         "rich.markdown", "markdown_it", "orjson", "pydantic", "pydantic_core")
"""Not needed to print help or an error, or to decode a 4 KiB config file. (pydantic: Typer 0.29 coerces
every parameter through it, 0.12 s a command; pyproject.toml pins `typer<0.29`.)"""

_LINE = re.compile(r"^import time:\s+-?\d+ \|\s+-?\d+ \|( *)(\S+)$")
"""A line of `-X importtime`. Its times can be negative: CPython keeps one import clock for all threads, and
`overview` imports numpy on two threads at once (the walk's and the caller's), so one self time is less than 0."""


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules `python -X importtime -m mqtool ARGS` imported, and the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqtool", *args], capture_output=True,
                       text=True, env=env, cwd=REPO)
    names = {m.group(2) for line in p.stderr.splitlines() if (m := _LINE.match(line))}
    assert "mqtool.cli.app" in names, p.stderr[-2000:]  # the parse worked: the app itself is listed
    return names, p


def test_an_import_line_with_a_negative_self_time_is_read():
    """Printed by a real `inspect --json` on the demo (numpy imported on two threads at once): CI once missed it."""
    m = _LINE.match("import time:   -234637 |     142266 |   numpy")
    assert m is not None and m.group(2) == "numpy"


def heavy(names: set[str], packages: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in packages))


def test_help_imports_none_of_the_heavy_packages():
    names, p = imported("--help")
    assert p.returncode == 0
    assert "inspect" in p.stdout and "simulate" in p.stdout and "trace" in p.stdout
    assert heavy(names) == []
    assert "mqtool.cli.render" not in names and "mqtool.store.store" not in names


@pytest.mark.parametrize("args", [
    ["inspect", "--help"],
    ["simulate", "--help"],
    ["spark-audit", "--help"],
    ["inspect", str(DEMO), "nope"],  # click rejects the VIEW: exit 2 before the command runs
    ["inspect", str(DEMO), "--limit", "-1"],  # the command's own check: exit 2
    ["inspect", str(DEMO), "delay", "--at", "1"],  # an option of another view: exit 2
])
def test_help_and_usage_errors_import_none_of_the_heavy_packages(args):
    names, p = imported(*args)
    assert p.returncode == (0 if "--help" in args else 2), p.stderr[-2000:]
    assert heavy(names) == []
    if "--help" in args or "nope" in args:  # click prints these; Rich's Error: console is made on first use
        assert heavy(names, ("rich",)) == []


@pytest.mark.parametrize("path", ["config/timercheck", "config/delayOffset.json", "checkpoint"])
def test_a_config_file_dump_as_json_imports_none_of_the_heavy_packages(path):
    names, p = imported("inspect", str(DEMO / path), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith('{"version": 1')
    assert heavy(names) == []


@pytest.mark.parametrize("view", ["overview", "transactions", "restart", "delay", "index"])
def test_a_store_view_as_json_to_a_pipe_loads_no_rich(view):
    """No progress bar (stderr is a pipe), no table, no Error: line: neither cli/render.py nor Rich."""
    names, p = imported("inspect", str(DEMO), view, "--json", "--now", "1790000020000")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith('{"version": 1, "view": "' + view)
    assert heavy(names, ("rich", "pydantic")) == []


def test_the_same_view_as_text_loads_the_tables():
    """The check above can fail: text output draws with cli/render.py, which imports rich.table."""
    names, p = imported("inspect", str(DEMO), "delay", "--now", "1790000020000")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "rich.table" in names


def test_a_store_view_scans_with_the_extension_without_numba():
    """The CommitLog walk is the compiled extension's (`mqtool._native`): neither numba nor llvmlite, nor
    the plain-Python column kernels (the fallback where the extension is missing) are imported."""
    names, p = imported("inspect", str(DEMO), "--json", "--now", "1790000020000")
    assert p.returncode == 0, p.stderr[-2000:]
    assert {"numpy", "mqtool._native"} <= names
    assert heavy(names, ("numba", "llvmlite", "mqtool.store.kernels", "mqtool.store.native")) == []


def test_messages_json_writes_its_lines_with_the_extension_without_numba():
    """`messages --json` walks and writes its lines with the extension (the line writer of
    `inspect/jsonlines.py`), and neither numba nor llvmlite is imported."""
    names, p = imported("inspect", str(DEMO), "messages", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("\n") == 66  # 46 + 20 records in the demo's two CommitLog files
    assert "mqtool._native" in names
    assert heavy(names, ("numba", "llvmlite", "mqtool.store.kernels", "mqtool.store.native")) == []


OTHER_LAYOUTS_AND_AREAS = ("mqtool.store.dledger", "mqtool.store.batchcq", "mqtool.store.fleet",
                           "mqtool.store.consumequeue", "mqtool.formats.batchbody", "mqtool.golden",
                           "mqtool.cli.audit", "mqtool.cli.simulate", "mqtool.cli.trace", "mqtool.cli.render",
                           "mqtool.rules.schedule", "mqtool.rules.timer")
"""What `messages --json` on a plain CommitLog store does not run: the readers of the other layouts (DLedger,
BatchConsumeQueue), the fleet's discovery, the ConsumeQueue reader, the golden-file diff, the modules of the
other commands, and the schedule's and timer's rules (the `message` view explains a record with them)."""


def test_messages_on_a_plain_store_imports_only_what_it_runs():
    names, p = imported("inspect", str(DEMO), "messages", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("\n") == 66
    assert {"mqtool.store.commitlog", "mqtool.inspect.jsonlines", "mqtool.cli.inspect"} <= names
    assert heavy(names, OTHER_LAYOUTS_AND_AREAS) == []


@pytest.mark.parametrize("args", [["--body", "none"], ["--body", "text", "--decompress"], ["--body", "hex", "--verify"],
                                  ["--body", "none", "--limit", "3"]])
def test_messages_on_a_plain_store_imports_neither_numpy_nor_construct(args):
    """The walk writes its columns into plain buffers (`fastscan.columns_from`), all rows of a chunk are a range
    (no mask), the line writer's tables are `array`s, and the record's layout is `formats/record_layout.py`'s
    numbers: a plain store's `messages --json` imports neither numpy nor Construct (the demo's rows the writer
    leaves to the record path included)."""
    names, p = imported("inspect", str(DEMO), "messages", "--json", *args)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("\n") == (3 if "--limit" in args else 66)
    assert heavy(names, ("numpy", "construct")) == []


def test_a_filtered_messages_query_imports_numpy():
    """The check above can fail: a filter selects its rows with numpy masks, which it imports then."""
    names, p = imported("inspect", str(DEMO), "messages", "--json", "--topic", "DemoTopicA")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "numpy" in names


@pytest.mark.parametrize(("store", "view", "reader"), [("dledger", "messages", "mqtool.store.dledger"),
                                                       ("batchcq", "overview", "mqtool.store.batchcq")])
def test_a_store_of_another_layout_imports_its_reader(store, view, reader):
    """The check above can fail: where a store has the layout, its reader is imported when it is read."""
    names, p = imported("inspect", str(REPO / "fixtures" / store), view, "--json", "--now", "1790000020000")
    assert p.returncode in (0, 1), p.stderr[-2000:]
    assert reader in names


def test_a_fleet_imports_the_fleet_discovery():
    names, p = imported("inspect", str(REPO / "fixtures" / "fleet"), "--json", "--now", "1790000020000")
    assert p.returncode in (0, 1), p.stderr[-2000:]
    assert "mqtool.store.fleet" in names


def test_choices_equal_the_library_lists():
    """cli/common writes the choices out (the library's lists sit behind numpy); they must not drift."""
    from mqtool.inspect.records import BODY_MODES
    from mqtool.simulate.runner import VERSIONS

    assert BODY_CHOICES == BODY_MODES and [b.value for b in Body] == list(BODY_MODES)
    assert VERSION_CHOICES == VERSIONS and [v.value for v in BrokerVersion] == list(VERSIONS)
