"""The per-view option table lives in `mqtool.inspect.options`; the CLI only passes what was given."""

import subprocess
import sys

import pytest

from mqtool.inspect import options
from mqtool.inspect.options import OptionError, check_options, views_taking


@pytest.mark.parametrize(("option", "views"), [
    ("--topic", ("messages", "queue", "index")),
    ("--body", ("messages", "message", "queue")),
    ("--at", ("timer", "restart")),
    ("--offset", ("message",)),
    ("--group", ("retry",)),
    ("--format", ("messages", "queue", "index")),  # index lookups as Parquet
])
def test_views_taking(option, views):
    assert views_taking(option) == views


def test_every_view_and_option_is_declared():
    from mqtool.cli.inspect import VIEWS

    assert tuple(options.VIEWS) == VIEWS
    declared = {o for opts in options.VIEWS.values() for o in opts}
    assert declared == set(options.OPTION_ORDER)


def test_first_misplaced_option_in_check_order():
    given = {"--topic": True, "--key": True}
    with pytest.raises(OptionError, match=r"^--key applies to the messages and index views, not delay$"):
        check_options("delay", given)
    check_options("messages", given)  # both belong to messages


def test_single_file_takes_only_dump_options():
    check_options("overview", {"--limit": True, "--body": True}, "x")
    with pytest.raises(OptionError, match=r"^--topic, --expect do not apply to a single-file dump$"):
        check_options("overview", {"--topic": True, "--limit": True, "--expect": True}, "x")
    with pytest.raises(OptionError, match=r"^x is a single file: it is dumped by its kind"):
        check_options("delay", {}, "x")


def test_cli_reports_the_library_message_with_exit_2(tmp_path):
    (tmp_path / "commitlog").mkdir()
    r = subprocess.run([sys.executable, "-m", "mqtool", "inspect", str(tmp_path), "retry", "--topic", "T"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (2, "Error: --topic applies to the messages and queue and index views, "
                                           "not retry\n")
