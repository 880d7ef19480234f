"""Everything `mqtool simulate` checks before a run, and the files it writes after one.

A run may take minutes: every input and output is checked first (`prepare_run`), so that a typo in a
path or a time fails at once with one line, never after the simulation. `finish_run` writes the
event log and the `--out` store; what it cannot write is a `SimulateError` too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TextIO

from mqtool.errors import MqtoolError
from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf
from mqtool.rules.timer import check_timer_precision
from mqtool.simulate.runner import SimulationResult, default_start
from mqtool.simulate.scenario import Scenario, ScenarioError, load_scenario
from mqtool.store.store import Store
from mqtool.times import format_time, parse_time


class SimulateError(MqtoolError):
    """Options of a run that cannot work: times in the wrong order, an unusable output path."""


@dataclass(frozen=True)
class Run:
    """A checked run: the opened store, its config (scenario overrides not yet applied) and the options."""

    store_path: Path
    store: Store
    config: BrokerConfig
    config_path: Path | None
    scenario: Scenario
    scenario_path: Path | None
    start_ms: int
    until_ms: int
    seed: int
    broker_version: str
    events: str | None  # a file, "-" for stdout, or None
    out: Path | None
    warnings: tuple[str, ...] = ()

    def reproduce_args(self) -> list[str]:
        """The command line that repeats this run exactly (times made absolute)."""
        cmd = ["mqtool", "simulate", str(self.store_path), "--start", str(self.start_ms)]
        cmd += ["--until", str(self.until_ms), "--seed", str(self.seed), "--broker-version", self.broker_version]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        if self.scenario_path:
            cmd += ["--scenario", str(self.scenario_path)]
        return cmd


def prepare_run(
    store_path: Path,
    until: str,
    *,
    start: str | None = None,
    config_path: Path | None = None,
    scenario_path: Path | None = None,
    seed: int = 0,
    broker_version: str = "5.3",
    events: str | None = None,
    out: Path | None = None,
) -> Run:
    """Open the store and check every option; `until` relative (`+1h`) counts from the start.

    The start defaults to the store's own now (`default_start`: its last sign of life).
    """
    from mqtool.store.delaylevels import config_in_effect

    config = load_broker_conf(config_path) if config_path else BrokerConfig()
    store = Store.open(store_path, config)
    config = config_in_effect(store, config)  # no broker.conf: the delay levels the store's units imply
    if scenario_path is not None and not scenario_path.is_file():
        raise ScenarioError(f"{scenario_path}: no such scenario file")
    start_ms = default_start(store) if start is None else parse_time(start)
    until_ms = parse_time(until, start_ms)
    if until_ms <= start_ms:
        raise SimulateError(f"--until ({format_time(until_ms)}) must be after --start ({format_time(start_ms)})")
    scenario = load_scenario(scenario_path, start_ms)
    effective = config.with_overrides(scenario.broker, source="scenario [broker]")  # a bad value fails now
    unused = unused_settings(scenario.broker)
    warnings = [f"scenario [broker]: {name} is not a setting the simulator uses (ignored)" for name in unused]
    if not broker_version.startswith("4") and effective.timer_wheel_enable:
        check_timer_precision(effective.timer_precision_ms)  # as the timer service does, before the run
    check_outputs(store_path, events, out)
    if out is not None:
        check_file_sizes(store, config)
    inputs = (store_path, store, config, config_path, scenario, scenario_path)
    return Run(*inputs, start_ms, until_ms, seed, broker_version, events, out, tuple(warnings))


def unused_settings(broker: dict) -> list[str]:
    """[broker] names that no simulated service reads (a typo would otherwise change nothing, silently)."""
    known = {f.metadata["java"] for f in fields(BrokerConfig) if "java" in f.metadata}
    return sorted(k for k in broker if k not in known)


def check_outputs(store_path: Path, events: str | None, out: Path | None) -> None:
    """Refuse unusable output paths before the run (never after minutes of simulation)."""
    if events is not None and events != "-":
        parent = Path(events).parent
        if not parent.is_dir():
            raise SimulateError(f"{events}: no such directory {str(parent)!r} for the event log")
        if Path(events).is_dir():
            raise SimulateError(f"{events}: is a directory (give a file for the event log)")
    if out is not None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise SimulateError(f"{out}: --out must be a new or empty directory (the input store is never modified)")
        if out.resolve() == store_path.resolve():
            raise SimulateError(f"{out}: --out must not be the input store")


def check_file_sizes(store: Store, config: BrokerConfig) -> None:
    """--out extends the store's files with broker.conf's sizes: they must be the sizes on disk.

    RocketMQ itself refuses to load a CommitLog whose files do not have `mappedFileSizeCommitLog`
    bytes (`DLedgerCommitLog` gives DLedger's data files the same size); without this check the new
    store would put records where its ConsumeQueues do not look.
    """
    dl = store.dledger  # DLedger mode: the entries' data files have mappedFileSizeCommitLog bytes
    cl = dl.data if dl is not None else store.commitlog.queue
    if cl.files and cl.file_size != config.mapped_file_size_commitlog:
        kind = "DLedger data" if dl is not None else "CommitLog"
        raise SimulateError(
            f"--out: the store's {kind} files are {cl.file_size} bytes but "
            f"mappedFileSizeCommitLog is {config.mapped_file_size_commitlog}; give the broker's "
            "broker.conf with --config"
        )


@contextmanager
def open_events(run: Run) -> Iterator[TextIO | None]:
    """The stream the run writes its event log to as it goes: the `--events` file, stdout for "-",
    None without the option. A write that fails is a `SimulateError`."""
    if run.events in (None, "-"):
        yield None if run.events is None else sys.stdout
        return
    try:
        with open(run.events, "w", encoding="utf-8", buffering=1 << 20) as f:
            yield f
    except OSError as e:
        raise SimulateError(f"{run.events}: cannot write the event log ({e.strerror or e})") from None


def finish_run(run: Run, result: SimulationResult) -> list[str]:
    """Write the `--out` store (the event log was streamed to its file by `open_events`); returns the writer's
    warnings."""
    if run.out is None:
        return []
    from mqtool.simulate.output import write_store

    try:
        return [f"--out: {w}" for w in write_store(run.store, result, run.out)]
    except OSError as e:
        raise SimulateError(f"{run.out}: cannot write the new store ({e.strerror or e})") from None


def store_notes(run: Run) -> list[str]:
    """What the broker would have met on restart (a damaged file, an unparsable offsets file it replaces
    with defaults): the run follows the broker, but says so. One `severity: file: message` line each."""
    notes = {(x.severity, x.file, x.message) for x in run.store.findings if x.severity != "info"}
    return [f"{s}: {f}: {m}" for s, f, m in sorted(notes)]
