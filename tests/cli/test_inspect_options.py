"""The per-view option table lives in `mqtool.inspect.options`; the CLI only passes what was given."""

import subprocess
import sys

import pytest

from mqtool.errors import MqtoolError
from mqtool.inspect import options
from mqtool.inspect.options import OptionError, check_options, views_taking


@pytest.mark.parametrize(("option", "views"), [
    ("--topic", ("messages", "queue", "index", "consumers")),
    ("--body", ("messages", "message", "queue")),
    ("--at", ("timer", "restart")),
    ("--offset", ("message",)),
    ("--group", ("retry", "consumers")),
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
    assert (r.returncode, r.stderr) == (2, "Error: --topic applies to the messages and queue and index and "
                                           "consumers views, not retry\n")


# ----------------------------------------------------------------------------- checks moved out of the CLI


@pytest.mark.parametrize(("view", "given", "message"), [
    ("message", {}, "the message view needs --offset PHYS (a record's physical offset)"),
    ("queue", {"--topic": True}, "the queue view needs --topic T and --queue-id Q"),
    ("queue", {"--queue-id": True}, "the queue view needs --topic T and --queue-id Q"),
    ("index", {"--topic": True}, "an index lookup needs both --topic T and --key K (the broker hashes T#K)"),
    ("index", {"--uniq-key": True}, "an index lookup needs both --topic T and --key K (the broker hashes T#K)"),
    ("index", {"--topic": True, "--key": True, "--uniq-key": True},
     "give --key or --uniq-key, not both: the IndexFile holds both under T#K"),
    ("index", {"--limit": True, "--begin": True}, "--limit, --begin do not apply to the index view without "
                                                  "--topic/--key"),
])
def test_a_view_without_what_it_needs(view, given, message):
    with pytest.raises(OptionError) as e:
        check_options(view, given)
    assert str(e.value) == message


@pytest.mark.parametrize(("view", "given"), [
    ("message", {"--offset": True}),
    ("queue", {"--topic": True, "--queue-id": True}),
    ("index", {}),
    ("index", {"--expect": True, "--update-golden": True}),  # the listing compared with a golden
    ("index", {"--topic": True, "--uniq-key": True, "--limit": True, "--begin": True}),
])
def test_a_view_with_what_it_needs(view, given):
    check_options(view, given)
    assert options.is_index_lookup(given) == ("--topic" in given)


@pytest.mark.parametrize(("given", "limit", "json_out", "now", "message"), [
    ({}, -1, False, False, "--limit must be >= 0"),
    ({"--update-golden": True}, None, True, True, "--update-golden needs --expect FILE (the golden file to rewrite)"),
    ({"--expect": True}, None, False, True, "--expect compares JSON output: add --json"),
    ({"--expect": True}, None, True, False, "--expect needs --now TIME: a golden file must not depend on the "
                                            "wall clock"),
    ({"--format": True}, None, False, False, "--format and --output go together: --format parquet --output FILE"),
    ({"--output": True}, None, False, False, "--format and --output go together: --format parquet --output FILE"),
    ({"--format": True, "--output": True}, None, True, False, "--format writes a file: leave out --json"),
])
def test_global_checks(given, limit, json_out, now, message):
    with pytest.raises(OptionError if "golden" not in message else MqtoolError) as e:
        options.check_global(given, limit, json_out, now)
    assert str(e.value) == message


def test_global_checks_pass():
    options.check_global({"--expect": True, "--update-golden": True}, 0, True, True)
    options.check_global({"--format": True, "--output": True}, 5, False, False)


def test_replay_length():
    assert options.replay_ms("10m") == 600_000
    with pytest.raises(OptionError, match=r"^--for must be longer than 0 \(e\.g\. 10m\)$"):
        options.replay_ms("0s")
