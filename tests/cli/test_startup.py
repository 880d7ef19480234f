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

_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$")


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules `python -X importtime -m mqtool ARGS` imported, and the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqtool", *args], capture_output=True,
                       text=True, env=env, cwd=REPO)
    names = {m.group(2) for line in p.stderr.splitlines() if (m := _LINE.match(line))}
    assert "mqtool.cli.app" in names, p.stderr[-2000:]  # the parse worked: the app itself is listed
    return names, p


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


def test_a_small_store_view_walks_without_numba():
    """The demo store (92 records) is walked by the CPython engine: numpy, but no numba load."""
    names, p = imported("inspect", str(DEMO), "--json", "--now", "1790000020000")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "numpy" in names and "mqtool.store.walk" in names
    assert "numba" not in names and "mqtool.store.kernels" not in names


def _past_the_budget(engine: str | None, *view: str) -> tuple[set[str], str]:
    """The modules a view of the demo store (the overview by default) imports when the CPython budget
    is 10 records, and its output."""
    view = view or ("--json", "--now", "1790000020000")
    code = ("import sys; from mqtool.store import fastscan; fastscan._python_left = 10; "
            f"fastscan.ENGINE = {engine!r}; "
            "from mqtool.cli.app import main; sys.argv = ['mqtool', 'inspect', *sys.argv[1:]]; main()")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", code, str(DEMO), *view], capture_output=True,
                       text=True, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    return {m.group(2) for line in p.stderr.splitlines() if (m := _LINE.match(line))}, p.stdout


def test_a_store_view_past_the_python_budget_loads_the_native_walk_without_numba():
    """The check above can fail: past `PYTHON_WALK_RECORDS` records the same view loads the compiled
    walk, the object code numba wrote (`store/native.py`), through llvmlite without importing numba."""
    from mqtool.store import native

    assert native.load() is not None, native.errors  # compiled and cached here if it was not
    names, out = _past_the_budget(None)
    assert out.startswith('{"version": 1')
    assert {"mqtool.store.native", "llvmlite.binding"} <= names
    assert "numba" not in names and "mqtool.store.kernels" not in names


def test_messages_json_past_the_python_budget_writes_its_lines_without_numba():
    """Past the budget `messages --json` walks and writes each chunk with native code (the compiled
    line writer of `inspect/jsonlines.py`), byte for byte what the record path prints."""
    from mqtool.inspect import jsonlines

    assert jsonlines.json_lines is not None  # the extension's line writer
    names, out = _past_the_budget(None, "messages", "--json")
    assert "numba" not in names and "mqtool.store.kernels" not in names
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    want = subprocess.run([sys.executable, "-m", "mqtool", "inspect", str(DEMO), "messages", "--json"],
                          capture_output=True, text=True, cwd=REPO, env=env)
    assert out == want.stdout and out.count("\n") == 66  # 46 + 20 records in the two files; the same bytes


def test_a_store_view_with_numba_pinned_skips_numbas_blas_check():
    """The numba dispatcher path (the fallback) imports numba without scipy.linalg."""
    names, _ = _past_the_budget("numba")
    assert {"numba", "mqtool.store.kernels"} <= names
    assert "numba.np.arraymath" in names and "scipy.linalg" not in names  # numba's BLAS check skipped


def test_choices_equal_the_library_lists():
    """cli/common writes the choices out (the library's lists sit behind numpy); they must not drift."""
    from mqtool.inspect.records import BODY_MODES
    from mqtool.simulate.runner import VERSIONS

    assert BODY_CHOICES == BODY_MODES and [b.value for b in Body] == list(BODY_MODES)
    assert VERSION_CHOICES == VERSIONS and [v.value for v in BrokerVersion] == list(VERSIONS)
