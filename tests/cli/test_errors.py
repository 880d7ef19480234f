"""Errors end to end: a user's mistake is one `Error:` line and exit 2, a bug is a traceback, a closed pipe is quiet.

The CLI catches only `MqtoolError`: each user error below comes from a different subclass raised by
the library; a RuntimeError, ValueError or OSError injected into the library must not be dressed up
as a user error.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, PROJECT
from mqtool.cli.app import EXIT_BROKEN_PIPE, app
from mqtool.errors import MqtoolError

DEMO = FIXTURES / "demo"
CONF = FIXTURES / "demo.broker.conf"
NOW = "1790000020000"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_error_line(r, text: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1, r.stderr
    assert text in r.stderr, r.stderr


# ----------------------------------------------------------------------------- user errors: one line, exit 2


def _bad_scenario(tmp: Path) -> Path:
    p = tmp / "bad.toml"
    p.write_text("[[faults]]\nkind = 'meteor'\nat = '+1s'\n")
    return p


def _bad_conf(tmp: Path) -> Path:
    p = tmp / "bad.conf"
    p.write_text("transactionCheckMax=many\n")
    return p


CASES = {
    # name: (args given tmp_path, the text the line must hold)
    "StoreError": (lambda t: ["inspect", t / "nope"], "nope: no such file or directory"),
    "TimeFormatError": (lambda t: ["inspect", DEMO, "delay", "--now", "yesterday"], "not a time: 'yesterday'"),
    "RecordError": (lambda t: ["inspect", DEMO, "message", "--offset", "5", "--now", NOW], "no record at 5"),
    "ConfigFileError": (lambda t: ["inspect", DEMO, "--config", _bad_conf(t), "--now", NOW],
                        'transactionCheckMax = "many" is not an integer'),
    "missing --config": (lambda t: ["simulate", DEMO, "--until", "+1h", "--config", t / "none.conf"],
                         "none.conf: cannot read"),
    "ScenarioError": (lambda t: ["simulate", DEMO, "--config", CONF, "--until", "+1h", "--scenario",
                                 _bad_scenario(t)], "faults[0].kind must be one of"),
    "SimulateError": (lambda t: ["simulate", DEMO, "--config", CONF, "--start", NOW, "--until", "-1h"],
                      "must be after --start"),
    "SimulateError (--events)": (lambda t: ["simulate", DEMO, "--config", CONF, "--until", "+1h", "--events",
                                            t / "no" / "ev.jsonl"], "for the event log"),
    "GoldenError": (lambda t: ["inspect", DEMO, "delay", "--json", "--now", NOW, "--expect", t / "none.json"],
                    "golden file not found"),
    "TraceError": (lambda t: ["trace", DEMO, "--msg-id", "not-hex"], "not a message id: 'not-hex'"),
    "TraceError (index)": (lambda t: ["index", "build", DEMO, "--out", CONF / "sub"], "demo.broker.conf"),
    "audit --out": (lambda t: ["spark-audit", DEMO, "--config", CONF, "--local", "--out", t / "no" / "a.json"],
                    "cannot write the report"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_user_error_is_one_line_and_exit_2(name, tmp_path):
    make_args, text = CASES[name]
    one_error_line(run(*make_args(tmp_path)), text)


def test_spark_that_cannot_start_is_a_user_error():
    """Java missing: pyspark's launcher fails; `SparkStartError` says so in one line (no traceback). In a fresh
    process: a JVM an earlier test started in this one would serve the new session whatever JAVA_HOME says."""
    pytest.importorskip("pyspark")
    env = {**os.environ, "JAVA_HOME": "/nonexistent-java-home", "PYTHONPATH": str(PROJECT)}
    r = subprocess.run([sys.executable, "-m", "mqtool", "spark-audit", str(DEMO), "--config", str(CONF)],
                       capture_output=True, text=True, timeout=300, cwd=PROJECT, env=env)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert "cannot start Spark with master local[*]" in lines[0], r.stderr


def test_every_user_error_class_is_an_mqtool_error():
    from mqtool.audit.runner import write_report  # noqa: F401 - its errors are MqtoolError itself
    from mqtool.formats.compression import DecompressError
    from mqtool.formats.message import RecordError
    from mqtool.formats.offsets_json import ConfigFileError
    from mqtool.golden import GoldenError
    from mqtool.simulate.prepare import SimulateError
    from mqtool.simulate.scenario import ScenarioError
    from mqtool.spark.start import SparkStartError
    from mqtool.store.errors import StoreError
    from mqtool.times import TimeFormatError
    from mqtool.trace.model import TraceError

    # DecompressError never reaches the CLI: `inspect --decompress` reports it as the record's body_error
    for cls in (StoreError, TimeFormatError, RecordError, DecompressError, ConfigFileError, GoldenError,
                ScenarioError, SimulateError, TraceError, SparkStartError):
        assert issubclass(cls, MqtoolError), cls


# ----------------------------------------------------------------------------- choices: Typer's enums


@pytest.mark.parametrize("args, option", [
    (["inspect", DEMO, "bogus"], "'view'"),
    (["inspect", DEMO, "messages", "--body", "utf16"], "'--body'"),
    (["simulate", DEMO, "--until", "+1h", "--broker-version", "4.0"], "'--broker-version'"),
    (["trace", DEMO, "--key", "x", "--broker-version", "5"], "'--broker-version'"),
    (["spark-audit", DEMO, "--local", "--fail-on", "info"], "'--fail-on'"),
])
def test_a_bad_choice_is_rejected_by_typer(args, option):
    r = run(*args)
    assert r.exit_code == 2
    assert f"Invalid value for {option}" in r.stderr and "is not one of" in r.stderr, r.stderr
    assert r.stdout == ""


# ----------------------------------------------------------------------------- bugs: a traceback, never exit 2


def _boom(exc: Exception):
    def f(*_a, **_k):
        raise exc
    return f


BUGS = [
    ("mqtool.inspect.delay.delay_view", ["inspect", DEMO, "delay", "--now", NOW]),
    ("mqtool.simulate.runner.simulate", ["simulate", DEMO, "--config", CONF, "--until", "+1h"]),
    ("mqtool.trace.trace", ["trace", DEMO, "--key", "T600"]),
    ("mqtool.trace.index.build_index", ["index", "build", DEMO, "--out", "/tmp/unused-index"]),
    ("mqtool.audit.runner.run_local", ["spark-audit", DEMO, "--local"]),
]


@pytest.mark.parametrize("target, args", BUGS, ids=[b[0] for b in BUGS])
@pytest.mark.parametrize("exc", [RuntimeError("injected"), ValueError("injected"), OSError(5, "injected")],
                         ids=["RuntimeError", "ValueError", "OSError"])
def test_an_injected_bug_is_not_a_user_error(monkeypatch, target, args, exc):
    monkeypatch.setattr(target, _boom(exc))
    r = run(*args)
    assert r.exit_code == 1 and r.exception is exc, (r.exit_code, r.output)
    assert not any(line.startswith("Error:") for line in r.stderr.splitlines())


def test_a_bug_shows_its_traceback():
    code = ("import mqtool.inspect.delay as d\n"
            "def boom(*a, **k): raise RuntimeError('injected bug')\n"
            "d.delay_view = boom\n"
            "from mqtool.cli.app import main\n"
            f"sys.argv = ['mqtool', 'inspect', {str(DEMO)!r}, 'delay', '--now', '{NOW}']\n"
            "main()\n")
    r = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True, timeout=120,
                       cwd=PROJECT)
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr and "RuntimeError: injected bug" in r.stderr
    assert not any(line.startswith("Error:") for line in r.stderr.splitlines())


# ----------------------------------------------------------------------------- a closed pipe (`| head`)


def _console_script() -> list[str]:
    """The installed `mqtool` script next to this Python (`python -m mqtool` runs the same `main`)."""
    script = Path(sys.executable).with_name("mqtool")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "mqtool"]


@pytest.mark.parametrize("args", [
    ["inspect", DEMO, "messages", "--json"],  # 60 KiB: the write fails inside the command
    ["inspect", DEMO, "delay", "--json", "--now", NOW],  # one buffered document: fails at the final flush
    ["inspect", DEMO, "--now", NOW],  # Rich tables: Rich's console meets the closed pipe
], ids=["streaming", "buffered", "rich"])
def test_a_closed_pipe_ends_quietly(args):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte, like `| head -0`
    try:
        r = subprocess.run([*_console_script(), *map(str, args)], stdout=write, stderr=subprocess.PIPE,
                           text=True, timeout=120, cwd=PROJECT)
    finally:
        os.close(write)
    assert r.stderr == ""
    assert r.returncode == EXIT_BROKEN_PIPE


def test_head_closes_the_pipe_quietly():
    """`mqtool inspect STORE messages --json | head -3`: three lines, nothing on stderr."""
    cmd = " ".join(_console_script()) + f" inspect {DEMO} messages --json | head -3"
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120,
                       cwd=PROJECT)
    assert r.stderr == ""
    assert len(r.stdout.splitlines()) == 3 and r.stdout.startswith('{"physical_offset": 0,')
    assert r.returncode in (0, EXIT_BROKEN_PIPE)  # 0 only if all 60 KiB fit in the pipe before head exited


def test_trace_until_before_the_simulator_start_is_one_line():
    r = run("trace", DEMO, "--config", CONF, "--key", "T600", "--until", "-1h")
    one_error_line(r, "must be after the simulator's start")
