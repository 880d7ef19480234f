"""`mqtool simulate STORE --until T`: parse the options, call `mqtool.simulate`, render.

The checks before a run and the files written after it live in `mqtool.simulate.prepare`, the replay
in `mqtool.simulate.runner`; this module prints progress lines and the summary (`cli/render.py`, or
one JSON document with `--json`).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from mqtool.cli.common import (
    BrokerVersion,
    ConfigOption,
    JsonOption,
    StoreArgument,
    UpdateGoldenOption,
    broker_version_option,
    emit_json,
    expect_option,
    lazy_module,
    print_stderr,
    user_errors,
    warn_store_errors,
)
from mqtool.times import format_time

render = lazy_module("mqtool.cli.render")  # Rich tables: loaded when a command draws

HELP = """Replay the broker's schedule, timer and transaction-check services on a virtual clock.

\b
The store is opened read-only. The clock starts at --start (default: the store's last sign of
life: its newest record, checkpoint, timercheck or offset file) and stops before --until; both
accept ISO-8601, epoch ms, or +90s / +3d (relative to the start). The event log (JSON Lines)
goes to --events FILE (or - for stdout); the summary is a table on a TTY, one JSON document with
--json. Same store + options + seed => identical bytes.

\b
Example:
  mqtool simulate ./store --until +1h --config broker.conf --scenario faults.toml --events ev.jsonl
"""


def register(app: typer.Typer) -> None:
    app.command("simulate", help=HELP)(simulate_command)


def simulate_command(
    store: Path = StoreArgument,
    until: str = typer.Option(..., "--until", help="Stop time (exclusive): ISO, epoch ms or +90s/+3d."),
    start: str | None = typer.Option(None, "--start", help="Start time (default: the store's own now)."),
    config: Path | None = ConfigOption,
    scenario: Path | None = typer.Option(None, "--scenario", help="Scenario TOML (faults, answers, rounds)."),
    seed: int = typer.Option(0, "--seed", help="Seed of every random choice (answers, fault probabilities)."),
    events: str | None = typer.Option(None, "--events", help="Write the event log (JSON Lines) here; - = stdout."),
    out: Path | None = typer.Option(None, "--out", help="Write a new store: the input plus what the services "
                                    "appended (never modifies the input)."),
    as_json: bool = JsonOption,
    broker_version: BrokerVersion = broker_version_option("Broker behaviour: 5.3 or 4.9."),
    expect: Path | None = expect_option("Compare the event log with this golden JSON Lines file"),
    update_golden: bool = UpdateGoldenOption,
) -> None:
    from mqtool.golden import check_golden_options
    from mqtool.simulate.prepare import finish_run, open_events, prepare_run, store_notes
    from mqtool.simulate.runner import simulate

    with user_errors():
        check_golden_options(expect, update_golden)
        run = prepare_run(store, until, start=start, config_path=config, scenario_path=scenario, seed=seed,
                          broker_version=broker_version.value, events=events, out=out)
        for w in run.warnings:
            _say(f"warning: {w}")
        _say(f"simulate: seed {seed}, {format_time(run.start_ms)} -> {format_time(run.until_ms)}, "
             f"broker {run.broker_version}")
        # the event log is streamed to its file (or stdout) as it happens; only --expect holds it
        with open_events(run) as sink:
            result = simulate(run.store, run.config, run.start_ms, run.until_ms, run.scenario, seed,
                              run.broker_version, sink=sink, hold_events=expect is not None,
                              keep_records=out is not None)
        golden = None
        if expect is not None:
            from mqtool.golden import check_golden

            rows = [json.loads(line) for line in result.events.jsonl().splitlines() if line.strip()]
            golden = check_golden(rows, expect, lines=True, update_golden=update_golden, paths={"<store>": store})
        for w in finish_run(run, result):
            _say(f"warning: {w}")
        for note in store_notes(run):
            _say(note)
        warn_store_errors(run.store, store)
    if result.violations:
        for v in result.violations:
            _say(f"invariant violated: {v}")
        _say("reproduce with: " + shlex.join(run.reproduce_args()))
    if as_json:
        emit_json(result.summary)
    elif events != "-":
        render.render_simulate_summary(result.summary)
    if golden is not None:
        _say(golden.message)
        sys.stderr.write(golden.diff)
    if result.violations or (golden is not None and not golden.equal):
        raise typer.Exit(code=1)


def _say(line: str) -> None:
    print_stderr(line)
