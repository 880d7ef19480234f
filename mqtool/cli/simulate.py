"""`mqtool simulate STORE --until T`: parse the options, call `mqtool.simulate.simulate`, render.

The replay itself lives in `mqtool.simulate`; this module only reads options, writes the event log
and prints the summary (Rich on a TTY, one JSON document with `--json`).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from mqtool.cli.common import ConfigOption, JsonOption, emit_json, fail, load_config, stderr, stdout, user_errors
from mqtool.times import format_time, parse_time

# --config without click's own existence check: a missing or unreadable broker.conf is then one
# `Error:` line (exit 2) from `load_config`, like every other input error, not a usage box.
StoreConfigOption = typer.Option(None, "--config", help=ConfigOption.help, metavar="<file>")

HELP = """Replay the broker's schedule, timer and transaction-check services on a virtual clock.

\b
The store is opened read-only. The clock starts at --start (default: the store's newest store
timestamp) and stops before --until; both accept ISO-8601, epoch ms, or +90s / +3d (relative to
the start). The event log (JSON Lines) goes to --events FILE (or - for stdout); the summary is a
table on a TTY, one JSON document with --json. Same store + options + seed => identical bytes.

\b
Example:
  mqtool simulate ./store --until +1h --config broker.conf --scenario faults.toml --events ev.jsonl
"""


def register(app: typer.Typer) -> None:
    app.command("simulate", help=HELP)(simulate_command)


def simulate_command(
    store: Path = typer.Argument(..., help="The store directory (read-only).", show_default=False),
    until: str = typer.Option(..., "--until", help="Stop time (exclusive): ISO, epoch ms or +90s/+3d."),
    start: str | None = typer.Option(None, "--start", help="Start time (default: the store's own now)."),
    config: Path | None = StoreConfigOption,
    scenario: Path | None = typer.Option(None, "--scenario", help="Scenario TOML (faults, answers, rounds)."),
    seed: int = typer.Option(0, "--seed", help="Seed of every random choice (answers, fault probabilities)."),
    events: str | None = typer.Option(None, "--events", help="Write the event log (JSON Lines) here; - = stdout."),
    out: Path | None = typer.Option(None, "--out", help="Write a new store: the input plus what the services "
                                    "appended (never modifies the input)."),
    as_json: bool = JsonOption,
    broker_version: str = typer.Option("5.3", "--broker-version", help="Broker behaviour: 5.3 or 4.9."),
    expect: Path | None = typer.Option(None, "--expect", help="Compare the event log with this golden JSON Lines "
                                       "file; exit 1 with a diff when it differs.", dir_okay=False),
    update_golden: bool = typer.Option(False, "--update-golden", help="With --expect: rewrite the golden file "
                                       "with this run's event log."),
) -> None:
    from mqtool.simulate.runner import simulate
    from mqtool.simulate.scenario import ScenarioError, load_scenario
    from mqtool.store.store import Store

    with user_errors():
        if broker_version not in ("5.3", "4.9"):
            raise fail(f"--broker-version must be 5.3 or 4.9, got {broker_version!r}")
        if update_golden and expect is None:
            raise fail("--update-golden needs --expect FILE (the golden file to rewrite)")
        cfg = load_config(config)
        st = Store.open(store, cfg)  # a missing or wrong directory: StoreError, one `Error:` line
        if scenario is not None and not scenario.is_file():
            raise fail(f"{scenario}: no such scenario file")
        if start is None:
            from mqtool.simulate.runner import default_start

            start_ms = default_start(st)
        else:
            start_ms = parse_time(start, None)
        until_ms = parse_time(until, start_ms)
        if until_ms <= start_ms:
            raise fail(f"--until ({format_time(until_ms)}) must be after --start ({format_time(start_ms)})")
        try:
            sc = load_scenario(scenario, start_ms)
        except ScenarioError as e:
            raise fail(str(e)) from None
        if sc.broker:
            cfg.with_overrides(sc.broker, source="scenario [broker]")  # a bad value fails before the run
            for name in _unused_settings(sc.broker):
                stderr.print(f"warning: scenario [broker]: {name} is not a setting the simulator uses (ignored)",
                             markup=False, highlight=False)
        _check_outputs(store, events, out)
        if out is not None:
            _check_file_sizes(st, cfg)
        stderr.print(f"simulate: seed {seed}, {format_time(start_ms)} -> {format_time(until_ms)}, "
                     f"broker {broker_version}", markup=False, highlight=False)
        result = simulate(st, cfg, start_ms, until_ms, sc, seed, broker_version)
        golden = None
        if expect is not None:
            from mqtool.golden import check_golden

            rows = [json.loads(line) for line in result.events.jsonl().splitlines() if line.strip()]
            golden = check_golden(rows, expect, lines=True, update_golden=update_golden, paths={"<store>": store})
        if events is not None:
            text = result.events.jsonl()
            if events == "-":
                sys.stdout.write(text)
            else:
                Path(events).write_text(text, encoding="utf-8")
        if out is not None:
            from mqtool.simulate.output import write_store

            for w in write_store(st, result, out):
                stderr.print(f"warning: --out: {w}", markup=False, highlight=False)
        for f in sorted({(x.severity, x.file, x.message) for x in st.findings if x.severity != "info"}):
            # what the broker would have met on restart (a damaged file, an unparsable offsets
            # file it replaces with defaults): the run follows the broker, but says so
            stderr.print(f"{f[0]}: {f[1]}: {f[2]}", markup=False, highlight=False)
    if result.violations:
        cmd = ["mqtool", "simulate", str(store), "--start", str(start_ms), "--until", str(until_ms),
               "--seed", str(seed), "--broker-version", broker_version]
        if config:
            cmd += ["--config", str(config)]
        if scenario:
            cmd += ["--scenario", str(scenario)]
        for v in result.violations:
            stderr.print(f"invariant violated: {v}", markup=False, highlight=False)
        stderr.print("reproduce with: " + shlex.join(cmd), markup=False, highlight=False)
    if as_json:
        emit_json(result.summary)
    elif events != "-":
        _render(result.summary)
    if golden is not None:
        stderr.print(golden.message, markup=False, highlight=False)
        sys.stderr.write(golden.diff)
    if result.violations or (golden is not None and not golden.equal):
        raise typer.Exit(code=1)


def _unused_settings(broker: dict) -> list[str]:
    """[broker] names that no simulated service reads (a typo would otherwise change nothing, silently)."""
    from dataclasses import fields

    from mqtool.formats.broker_conf import BrokerConfig

    known = {f.metadata["java"] for f in fields(BrokerConfig) if "java" in f.metadata}
    return sorted(k for k in broker if k not in known)


def _check_outputs(store: Path, events: str | None, out: Path | None) -> None:
    """Refuse unusable output paths before the run (never after minutes of simulation)."""
    if events is not None and events != "-":
        parent = Path(events).parent
        if not parent.is_dir():
            raise fail(f"{events}: no such directory {str(parent)!r} for the event log")
        if Path(events).is_dir():
            raise fail(f"{events}: is a directory (give a file for the event log)")
    if out is not None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise fail(f"{out}: --out must be a new or empty directory (the input store is never modified)")
        if out.resolve() == store.resolve():
            raise fail(f"{out}: --out must not be the input store")


def _check_file_sizes(st, cfg) -> None:
    """--out extends the store's files with broker.conf's sizes: they must be the sizes on disk.

    RocketMQ itself refuses to load a CommitLog whose files do not have `mappedFileSizeCommitLog`
    bytes; without this check the new store would put records where its ConsumeQueues do not look.
    """
    cl = st.commitlog.queue
    if cl.files and cl.file_size != cfg.mapped_file_size_commitlog:
        raise fail(f"--out: the store's CommitLog files are {cl.file_size} bytes but mappedFileSizeCommitLog is "
                   f"{cfg.mapped_file_size_commitlog}; give the broker's broker.conf with --config")


def _render(summary: dict) -> None:
    from rich.table import Table

    t = Table(title=f"simulate (seed {summary['seed']}, broker {summary['broker_version']})")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("from", format_time(summary["start"]))
    t.add_row("until", format_time(summary["until"]))
    t.add_row("events", str(summary["events"]))
    for topic, n in summary["deliveries_per_topic"].items():
        t.add_row(f"delivered to {topic}", str(n))
    for level, n in summary["delay_backlog_per_level"].items():
        t.add_row(f"delay level {level} backlog", str(n))
    t.add_row("pending timers", str(summary["pending_timers"]))
    t.add_row("pending half messages", str(summary["pending_half_messages"]))
    t.add_row("check rounds", str(summary["check_rounds"]))
    t.add_row("duplicates (faults)", str(summary["duplicates"]))
    stdout.print(t)
    peak = max(summary["timeline"]) or 1
    stdout.print("delivery timeline (20 buckets from start to until):")
    for i, n in enumerate(summary["timeline"]):
        stdout.print(f"  {i:2d} {'#' * (n * 40 // peak)} {n}", markup=False, highlight=False)
