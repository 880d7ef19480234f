"""Write docs/commands.md: every command's `--help` and real command lines with their real output.

Usage: `python scripts/make_commands_doc.py [--check | --stdout]` (default: rewrite docs/commands.md).
Every command runs in this process (`typer.testing.CliRunner`) on the demo store in `fixtures/`, with
a fixed `--now` where the command reads a time, so the text is the same on every machine;
`tests/cli/test_commands_doc.py` regenerates it and compares it with the checked-in file.
"""

import os
import sys

# Fixed terminal settings before Typer and Rich are imported: they read these at import time.
for _var in ("FORCE_COLOR", "PY_COLORS", "CLICOLOR_FORCE", "GITHUB_ACTIONS", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
             "JUPYTER_COLUMNS", "JUPYTER_LINES"):
    os.environ.pop(_var, None)
os.environ.update(NO_COLOR="1", TERM="dumb", COLUMNS="100", LINES="50", TERMINAL_WIDTH="100", TZ="UTC")

import argparse  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import tempfile  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing the package
    sys.path.insert(0, str(REPO))

from typer.testing import CliRunner  # noqa: E402

from mqtool.cli.app import app  # noqa: E402

DOC = REPO / "docs" / "commands.md"
STORE = "fixtures/demo"
CONF = ["--config", "fixtures/demo.broker.conf"]
NOW = ["--now", "1790000020000"]
CRASH = ["fixtures/crash", "restart", "--config", "fixtures/crash.broker.conf", "--now", "1790000009200"]
LAYOUT_NOW = ["--now", "1790000020000"]  # the layout fixtures' stop (fixtures/layouts.md)


def layout(name: str) -> list[str]:
    """A production-layout fixture store and its settings."""
    return [f"fixtures/{name}", "--config", f"fixtures/{name}.broker.conf"]


INDEX_DIR = "/tmp/demo-index"  # shown in the document; the run uses a fresh temporary directory


@dataclass
class Example:
    args: list[str]
    text: str = ""  # one sentence above the command line
    head: int | None = None  # `| head -n N`
    pretty: bool = False  # `| python3 -m json.tool`
    devnull: bool = False  # `> /dev/null`: only stderr and the exit code matter


@dataclass
class Command:
    name: list[str]  # e.g. ["index", "build"]
    intro: str
    examples: list[Example]


EXIT_CODES = "".join(f"| {code} | {meaning} |\n" for code, meaning in [
    ("code", "meaning (the same for every command)"),
    ("---", "---"),
    (0, "ok: a clean store, the message was found, the output equals the golden file"),
    (1, "findings or a difference: error-level findings (`inspect` overview or `--verify`; `spark-audit` at or "
        "above `--fail-on`), the output differs from `--expect`, the message was not found (`trace`), a "
        "simulator invariant was violated (`simulate`)"),
    (2, "usage or input error: a bad option, a missing or unreadable store, a broken config or golden file "
        "(one `Error: ...` line on stderr)"),
]).replace("| --- | --- |", "|---|---|")

COMMANDS = [
    Command([], "The entry point; `python3 -m mqtool` is the same program.", []),
    Command(["inspect"], "Decode a store (or one store file) and explain it. Every view has `--json`.", [
        Example(["inspect", STORE, *CONF, *NOW], "The overview (the default view):", head=30),
        Example(["inspect", STORE, "delay", *CONF, *NOW], "Delay levels and their backlog:", head=30),
        Example(["inspect", STORE, "timer", *CONF, *NOW], "Timer cursors, TimerLog units and wheel slots:", head=40),
        Example(["inspect", STORE, "transactions", *CONF, *NOW], "Half messages and what the check service "
                "will do with them:", head=30),
        Example(["inspect", *CRASH, "--at", "+2m"], "After a crash: what a broker started two minutes after the "
                "kill -9 of `fixtures/crash` does (`fixtures/crash.md` tells its story): recovery, every message "
                "delivered twice and why, what is overdue, the transaction checks, and a replay of the first 10 "
                "minutes (findings on stderr):"),
        Example(["inspect", STORE, "retry", *CONF, *NOW], "Per consumer group: retries parked per delay level, "
                "the %RETRY% queues and the DLQ with each message's origin:", head=30),
        Example(["inspect", STORE, "messages", "--key", "order-1001", *CONF, *NOW],
                "CommitLog records, filtered (here by a word of KEYS):"),
        Example(["inspect", STORE, "message", "--offset", "2791", "--decompress", *CONF, *NOW],
                "One record with everything decoded (a zlib-compressed body, shown decompressed):", head=50),
        Example(["inspect", STORE, "queue", "--topic", "SCHEDULE_TOPIC_XXXX", "--queue-id", "0", *CONF, *NOW],
                "ConsumeQueue units resolved against the CommitLog:"),
        Example(["inspect", STORE, "index", *CONF, *NOW], "The broker's IndexFiles, one row per file:"),
        Example(["inspect", STORE, "index", "--topic", "DemoTopicA", "--key", "order-1001", *CONF, *NOW],
                "What `IndexService.queryOffset` finds for a key (`mqadmin queryMsgByKey` without a broker):"),
        Example(["inspect", f"{STORE}/index/20260921141320010", "--limit", "5"],
                "One IndexFile, header and entries:"),
        Example(["inspect", STORE, "delay", *CONF, "--json", *NOW], "Any view as one JSON document:",
                head=25, pretty=True),
        Example(["inspect", STORE, "messages", "--topic", "DemoTopicA", "--limit", "2", "--body", "none", *CONF,
                 "--json", *NOW], "Record views as JSON Lines:"),
        Example(["inspect", f"{STORE}/config/timercheck", "--json"], "A single store file, dumped by its kind:"),
        Example(["inspect", *layout("dledger"), *LAYOUT_NOW], "A DLedger-mode store (`fixtures/dledger`; "
                "`fixtures/layouts.md` tells what each layout fixture holds): the DLedger data files hold the "
                "CommitLog records:", head=22),
        Example(["inspect", *layout("batchcq"), "queue", "--topic", "BatchTopic", "--queue-id", "0", *LAYOUT_NOW],
                "A BatchConsumeQueue: each unit's base queue offset and batch size (`0 +3`: INNER_NUM 3):"),
        Example(["inspect", "fixtures/fleet", "replicas", "--now", "2026-11-18T12:00:00Z"], "A fleet (a directory "
                "of stores, docs/fleet.md): each slave against its master, and what a promotion now would lose "
                "(`--broker NAME[:ID]` runs any other view on one of its stores):", head=16),
        Example(["inspect", STORE, "delay", *CONF, "--json", *NOW, "--expect", "tests/golden/inspect-delay.json"],
                "A regression check against a golden file (exit 1 and a unified diff on stderr when it differs; "
                "`--update-golden` rewrites the file):", devnull=True),
        Example(["inspect", STORE, "timers", *CONF], "A usage error:"),
    ]),
    Command(["spark-audit"], "Every store audit in one JSON report, on Spark or in process (`--local`).", [
        Example(["spark-audit", STORE, *CONF, "--local"], "In process, without Spark or Java:"),
        Example(["spark-audit", STORE, *CONF, "--local", "--json"], "The report:", head=30, pretty=True),
        Example(["spark-audit", STORE, *CONF, "--local", "--fail-on", "warning", "--out", "/dev/null"],
                "As a CI gate, failing on warnings too (exit 1 only if a warning or error is found):",
                devnull=True),
    ]),
    Command(["simulate"], "Replay the schedule, timer and transaction-check services on a virtual clock.", [
        Example(["simulate", STORE, *CONF, "--until", "+1h"], "One hour after the store's newest record:"),
        Example(["simulate", STORE, *CONF, "--until", "+1h", "--events", "-"], "The event log (JSON Lines):",
                head=6),
        Example(["simulate", STORE, *CONF, "--until", "+1h", "--json"], "The summary as JSON:", pretty=True,
                head=40),
    ]),
    Command(["trace"], "Follow one message through every system topic.", [
        Example(["trace", STORE, *CONF, "--key", "T600", *NOW], "A timer message still in the wheel:"),
        Example(["trace", STORE, *CONF, "--key", "H4discard", *NOW], "A transaction nobody answered:"),
        Example(["trace", STORE, *CONF, "--key", "D18", *NOW, "--json"], "As JSON (one document per message):",
                pretty=True, head=20),
        Example(["trace", STORE, *CONF, "--key", "no-such-key", *NOW], "Not found:"),
        Example(["trace", *layout("dledger"), "--key", "D1", *LAYOUT_NOW],
                "A delayed message on a DLedger-mode store:"),
    ]),
    Command(["index", "build"], "The trace lookup index (SQLite).", [
        Example(["index", "build", STORE, *CONF, "--out", INDEX_DIR], "Build it, then `trace --index DIR`:"),
    ]),
]


def invoke(args: list[str], subs: dict[str, str]) -> tuple[str, str, int]:
    r = CliRunner().invoke(app, args, prog_name="mqtool", catch_exceptions=False)
    out, err = r.stdout, r.stderr
    for real, shown in subs.items():
        out, err = out.replace(real, shown), err.replace(real, shown)
    return out, err, r.exit_code


def tidy(text: str) -> str:
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def render_example(ex: Example, subs: dict[str, str], run_args: list[str]) -> str:
    out, err, code = invoke(run_args, subs)
    cmd = "mqtool " + shlex.join(ex.args)
    if ex.pretty:
        cmd += " | python3 -m json.tool"
        out = "".join(json.dumps(json.loads(line), indent=4) + "\n" for line in out.splitlines() if line.strip())
    if ex.devnull:
        cmd += " > /dev/null"
        out = ""
    if ex.head is not None:
        cmd += f" | head -n {ex.head}"
        out = "".join(out.splitlines(keepends=True)[:ex.head])
    parts = [f"{ex.text}\n\n" if ex.text else "", "```console\n", f"$ {cmd}\n", tidy(out)]
    if err:
        parts += ["```\n\nstderr:\n\n```text\n", tidy(err)]
    parts.append(f"```\n\nexit code {code}" + (" (of mqtool)" if ex.pretty or ex.head else "") + "\n\n")
    return "".join(parts)


def render_doc() -> str:
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            index = str(Path(tmp) / "demo-index")
            subs = {index: INDEX_DIR, str(REPO) + "/": "", str(REPO): "."}
            return _render(subs, index)
    finally:
        os.chdir(cwd)


def _render(subs: dict[str, str], index: str) -> str:
    doc = [
        "# Commands\n\n",
        "<!-- Generated by scripts/make_commands_doc.py; do not edit "
        "(tests/cli/test_commands_doc.py checks it). -->\n\n",
        "Every command and option, from each command's `--help`, and real command lines run on the demo store "
        "in `fixtures/` (`fixtures/README.md` lists its records; the restart example runs on the crash store, "
        "`fixtures/crash.md`) with their real output. Times are fixed with "
        "`--now` (the demo broker stopped at 1790000020000 = 2026-09-21T14:13:40Z), so the output does not "
        "depend on when it was made. Long outputs are cut with `head`; trailing spaces of Rich tables "
        "(200 columns in a pipe) are removed.\n\n",
        "## Exit codes\n\nOne table for all commands:\n\n", EXIT_CODES, "\n",
        "Contents: " + ", ".join(f"[`{' '.join(['mqtool', *c.name])}`](#{'-'.join(['mqtool', *c.name])})"
                                 for c in COMMANDS) + ".\n\n",
    ]
    for c in COMMANDS:
        title = " ".join(["mqtool", *c.name])
        doc.append(f"## {title}\n\n{c.intro}\n\n")
        out, err, code = invoke([*c.name, "--help"], subs)
        assert code == 0, (c.name, err)
        doc += ["```text\n", f"$ {title} --help\n", tidy(out), "```\n\n"]
        for ex in c.examples:
            run_args = [index if a == INDEX_DIR else a for a in ex.args]
            doc.append(render_example(ex, subs, run_args))
    return "".join(doc).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 when docs/commands.md is out of date")
    g.add_argument("--stdout", action="store_true", help="print the document instead of writing it")
    args = parser.parse_args(argv)
    text = render_doc()
    if args.stdout:
        sys.stdout.write(text)
    elif args.check:
        if DOC.read_text("utf-8") != text:
            print(f"{DOC} is out of date: run python scripts/make_commands_doc.py", file=sys.stderr)
            return 1
    else:
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
