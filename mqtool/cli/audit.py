"""`mqtool spark-audit STORE|FLEET`: every store audit, on Apache Spark (or `--local`), one JSON report.

Parses options, runs `mqtool.spark.runner.run_spark_audit` (or `mqtool.audit.runner.run_local`),
writes the report and renders a summary. `mqtool.spark` (and so pyspark) is imported inside the
command only.
"""

from enum import StrEnum
from pathlib import Path

import typer

from mqtool.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    ConfigOption,
    JsonOption,
    StoreArgument,
    emit_json,
    lazy_module,
    load_config,
    user_errors,
)

render = lazy_module("mqtool.cli.render")  # Rich tables: loaded when a command draws


class FailOn(StrEnum):
    """--fail-on: the least severe finding that fails the audit."""

    error = "error"
    warning = "warning"


HELP = """Audit a RocketMQ store on Apache Spark: CommitLog integrity, ConsumeQueue consistency,
delay levels, timer wheel, transactions, statistics. One JSON report (version 1).

\b
Checks: commitlog.integrity, consumequeue.consistency, schedule, timer, transactions, stats.
Spark runs embedded (local[*]) unless --master names a cluster (spark://host:7077, yarn,
k8s://...); the store path must then be readable by every executor at the same path.
--local runs the same checks in this process without Spark (small stores, no Java).

\b
A fleet directory (stores at depth 1 or 2, docs/fleet.md) is audited in one job: a section per
store, the cluster's totals, and the cross-store checks (each slave against its master, a
UNIQ_KEY on two broker groups). --config serves the stores without a broker.conf of their own;
--parquet writes DIR/<store dir>/....

\b
Exit codes: 0 clean, 1 findings at or above --fail-on (default: error), 2 usage or input error.

\b
Example:
  mqtool spark-audit /data/rocketmq/store --config broker.conf --out audit.json
  mqtool spark-audit /data/store --master spark://10.0.0.5:7077 --parquet /shared/store-parquet
  mqtool spark-audit /incident/stores --local --out fleet-audit.json
"""


def register(app: typer.Typer) -> None:
    """Add `spark-audit` to the app."""
    if app.registered_callback is None:
        app.callback()(_root)
    app.command("spark-audit", help=HELP, no_args_is_help=True)(spark_audit)


def _root() -> None:
    """Subcommands of mqtool."""


def spark_audit(
    store: Path = StoreArgument,
    master: str | None = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
    config: Path | None = ConfigOption,
    out: Path | None = typer.Option(None, "--out", help="Write the JSON report to this file.", dir_okay=False),
    parquet: Path | None = typer.Option(None, "--parquet", help="Also write the decoded records as Parquet "
                                        "(DIR/commitlog, DIR/consumequeue, DIR/timerlog).", file_okay=False),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a finding has this severity or "
                                   "worse."),
    local: bool = typer.Option(False, "--local", help="Run the checks in this process, without Spark."),
    json_out: bool = JsonOption,
    verbose: bool = typer.Option(False, "--verbose", help="Show Spark's own log output."),
    conf: list[str] = typer.Option([], "--conf", help="Extra Spark setting KEY=VALUE (repeatable), e.g. "
                                   "spark.executor.memory=2g."),
    split_mb: float = typer.Option(256, "--split-mb", help="Cut CommitLog files into partitions of about this "
                                   "many MiB (at record starts).", min=0),
) -> None:
    fleet = _is_fleet(store)
    with user_errors():
        from mqtool.audit.options import check_audit_options
        from mqtool.audit.plan import open_audited_store
        from mqtool.audit.runner import write_report

        spark_conf = check_audit_options(local, master, conf)  # before the store is opened or Spark starts
        split = int(split_mb * (1 << 20))
        if fleet:
            report = _audit_fleet(store, config, split, parquet, local, master, verbose, spark_conf)
        else:
            # broker.conf (or RocketMQ's defaults) and the store, opened once here: a bad file or a
            # directory that is no store fails before Spark starts
            st = open_audited_store(store, load_config(config))
            if local:
                report = _run_local(st, split, parquet)
            else:
                report = _run_spark(st, split, parquet, master or "local[*]", verbose, spark_conf)
        if out is not None:
            write_report(report, out)
    _exit(report, json_out, fail_on, render.render_fleet_audit_summary if fleet else render.render_audit_summary)


def _exit(report: dict, json_out: bool, fail_on: FailOn, draw) -> None:
    """Print the report (JSON or `draw`), exit 1 when a finding (a fleet's: any store's or the fleet's)
    reaches --fail-on."""
    if json_out:
        emit_json(report)
    else:
        draw(report)
    found = report["findings"] + [f for s in report.get("stores", []) for f in s["findings"]]
    sev = {f["severity"] for f in found}
    failing = {"error"} if fail_on is FailOn.error else {"error", "warning"}
    raise typer.Exit(code=EXIT_FINDINGS if sev & failing else EXIT_OK)


def _is_fleet(path: Path) -> bool:
    from mqtool.store.fleet import is_fleet_dir

    return path.is_dir() and is_fleet_dir(path)


def _audit_fleet(path: Path, config: Path | None, split: int, parquet: Path | None, local: bool,
                 master: str | None, verbose: bool, spark_conf: dict) -> dict:
    """`spark-audit FLEET`: every store's files in one plan, one pass (one Spark job), one report."""
    from mqtool.store.fleet import open_fleet

    fleet = open_fleet(path, config)
    if local:
        from mqtool.audit.fleet import run_fleet_local

        with render.audit_progress() as progress:
            report = run_fleet_local(fleet, split, progress)
        if parquet is not None:
            from mqtool.spark.runner import write_parquet_local

            for s in report["stores"]:
                if s["summary"] is not None:
                    write_parquet_local(s["store"], str(parquet / s["dir"]), split)
        return report
    from mqtool.spark.start import start_spark

    master = master or "local[*]"
    with render.status(f"starting Spark ({master})") as status:
        spark = start_spark(master, verbose=verbose, conf=spark_conf)
        try:
            from mqtool.spark.runner import run_spark_fleet_audit

            status(f"auditing {len(fleet.members)} stores on {master}")
            return run_spark_fleet_audit(spark, fleet, split, str(parquet) if parquet else None)
        finally:
            spark.stop()


def _run_local(store, split: int, parquet: Path | None) -> dict:
    from mqtool.audit.runner import run_local

    with render.audit_progress() as progress:
        report = run_local(store, split_bytes=split, progress=progress)
    if parquet is not None:
        from mqtool.spark.runner import write_parquet_local

        write_parquet_local(report["store"], str(parquet), split)
    return report


def _run_spark(store, split: int, parquet: Path | None, master: str, verbose: bool, spark_conf: dict) -> dict:
    from mqtool.spark.start import start_spark

    with render.status(f"starting Spark ({master})") as status:
        spark = start_spark(master, verbose=verbose, conf=spark_conf)
        try:
            from mqtool.spark.runner import run_spark_audit

            status(f"auditing on {master}")
            return run_spark_audit(spark, store, split_bytes=split, parquet=str(parquet) if parquet else None)
        finally:
            spark.stop()
