"""Issue 27, bad input at the command line: an unreadable --config is one `Error:` line and exit 2;
simulate and trace say when the store has error findings; an odd store prints no Python `None`."""

import json
import random
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from mqtool.cli.app import app

DEMO = FIXTURES / "demo"
NOW = "1790000020000"


def run(*args: str):
    return CliRunner().invoke(app, [*map(str, args)])


@pytest.fixture
def random_conf(tmp_path) -> Path:
    """Two kilobytes of random bytes; the third (0x03) is the first that no properties text holds."""
    p = tmp_path / "rand.conf"
    p.write_bytes(random.Random(27).randbytes(2048))
    assert p.read_bytes()[:3] == b"\xe1\xe9\x03"
    return p


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", DEMO, "delay", "--now", NOW],
        ["simulate", DEMO, "--until", "+1m"],
        ["trace", DEMO, "--key", "D18"],
        ["spark-audit", DEMO, "--local"],
    ],
)
def test_random_bytes_as_config_are_one_error_line(random_conf, command):
    r = run(*command, "--config", random_conf)
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: rand.conf: not a properties text (byte 0x03 at offset 2); a broker.conf holds key=value lines\n"
    )
    assert r.stdout == ""


def test_a_config_without_a_key_value_line_is_an_error(tmp_path):
    conf = tmp_path / "words.conf"
    conf.write_text("# a note\nhello\nworld\n")
    r = run("inspect", DEMO, "delay", "--now", NOW, "--config", conf)
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: words.conf: no key=value line in 2 line(s) (line 2: 'hello'); a broker.conf holds key=value lines\n"
    )


def test_unknown_keys_and_comments_only_stay_accepted(tmp_path):
    """`MixAll.properties2Object` ignores a key no config bean has; an empty or comment-only file sets nothing."""
    for text in ("fooBar=1\nbrokerName: b\n", "", "# nothing\n! here\n"):
        conf = tmp_path / "ok.conf"
        conf.write_text(text)
        r = run("inspect", DEMO, "delay", "--now", NOW, "--config", conf, "--json")
        assert r.exit_code == 0, r.stderr


@pytest.fixture
def cut_queue(tmp_path) -> Path:
    """The demo store with DemoTopicA/0's ConsumeQueue file (400 B, 3 units) cut to 200 bytes."""
    store = shutil.copytree(DEMO, tmp_path / "demo")
    f = store / "consumequeue" / "DemoTopicA" / "0" / "00000000000000000000"
    f.write_bytes(f.read_bytes()[:200])
    return store


def test_simulate_and_trace_say_the_store_has_error_findings(cut_queue):
    sim = run("simulate", cut_queue, "--until", "+1m", "--json")
    trace = run("trace", cut_queue, "--key", "D18", "--json")
    line = f"warning: the store has at least 1 error finding(s); see mqtool inspect {cut_queue}"
    assert sim.exit_code == 0 and line in sim.stderr.splitlines()
    assert trace.exit_code == 0 and line in trace.stderr.splitlines()
    inspect = run("inspect", cut_queue, "--now", NOW, "--json")
    assert inspect.exit_code == 1
    errors = [
        (f["file"], f["offset"], f["message"])
        for f in json.loads(inspect.stdout)["findings"]
        if f["severity"] == "error"
    ]
    assert errors == [
        (
            "consumequeue/DemoTopicA/0/00000000000000000000",
            200,
            "file is 200 bytes, not 400: "
            "MappedFileQueue.load refuses a file of another length, the broker does not start",
        )
    ]


def test_no_warning_on_a_clean_store():
    assert "error finding" not in run("simulate", DEMO, "--until", "+1m", "--json").stderr
    assert "error finding" not in run("trace", DEMO, "--key", "D18", "--json").stderr


def test_a_store_of_a_timercheck_alone_prints_no_none(tmp_path):
    (tmp_path / "config").mkdir()
    shutil.copy(DEMO / "config" / "timercheck", tmp_path / "config" / "timercheck")
    for view in ("overview", "timer", "delay", "transactions", "restart", "retry"):
        r = run("inspect", tmp_path, view, "--now", NOW)
        assert r.exit_code == 0, (view, r.stderr)
        assert "None" not in r.stdout, view
    assert "CommitLog files     none" in run("inspect", tmp_path, "--now", NOW).stdout


def test_spark_audit_calls_a_cut_commitlog_file_cut_not_missing(tmp_path):
    """fixtures/batchcq's one CommitLog file (4096 B) cut to 1000 bytes: PlainTopic/0's unit 2 points at 1281."""
    from mqtool.audit.runner import run_local

    store = shutil.copytree(FIXTURES / "batchcq", tmp_path / "batchcq")
    f = store / "commitlog" / "00000000000000000000"
    f.write_bytes(f.read_bytes()[:1000])
    rep = run_local(store)
    unit = [
        (x["file"], x["offset"], x["message"])
        for x in rep["findings"]
        if x["check"] == "consumequeue.consistency" and x["offset"] is not None
    ]
    assert unit == [
        (
            "consumequeue/PlainTopic/0/00000000000000000000",
            40,
            "unit 2 points to CommitLog offset 1281: "
            "past the end of its CommitLog file 00000000000000000000 (1000 bytes, the last): cut short, or "
            "the files after it are missing",
        )
    ]
    assert not any("missing CommitLog file" in x["message"] for x in rep["findings"])


def test_spark_audit_names_the_cut_length_when_the_queue_shows_it(tmp_path):
    """Two files of 65536 B (basic-5.3.1), the second cut to 5000: units past 70536 lie in a cut file."""
    from conftest import ORACLE, copy_with_wheel, need_oracle
    from mqtool.audit.records import CommitLogRecords

    need_oracle()
    store = copy_with_wheel(ORACLE / "basic-5.3.1" / "store", tmp_path / "basic")
    f = store / "commitlog" / "00000000000000065536"
    f.write_bytes(f.read_bytes()[:5000])
    with CommitLogRecords(str(store)) as records:
        assert records.get(96257) == (
            "past the end of its CommitLog file 00000000000000065536, cut to 5000 bytes (the queue's files are 65536)"
        )
        assert records.get(131072) == (
            "past the end of its CommitLog file 00000000000000065536 (5000 bytes, the "
            "last): cut short, or the files after it are missing"
        )


def test_a_10_byte_checkpoint_is_short_in_overview_and_read_as_the_broker_does_in_restart(tmp_path):
    """The demo's checkpoint cut to 10 bytes: physicMsgTimestamp 1790000019700 survives whole; StoreCheckpoint
    maps a 4 KiB page, so the rest reads as 0 (the restart view said "checkpoint absent")."""
    store = shutil.copytree(DEMO, tmp_path / "demo")
    (store / "checkpoint").write_bytes((DEMO / "checkpoint").read_bytes()[:10])
    doc = json.loads(run("inspect", store, "--now", NOW, "--json").stdout)
    assert [(f["file"], f["offset"], f["message"]) for f in doc["findings"] if f["severity"] == "error"] == [
        (
            "checkpoint",
            10,
            "file is 10 bytes, shorter than the 40 StoreCheckpoint reads: the broker maps a 4096-byte "
            "page and reads the missing bytes as 0",
        )
    ]
    restart = run("inspect", store, "restart", "--now", NOW)
    assert restart.exit_code == 0, restart.stderr
    assert "physic 2026-09-21T14:13:39.700Z, logics -, index -" in restart.stdout
    assert "absent" not in restart.stdout
