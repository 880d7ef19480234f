"""`mqtool trace` and `mqtool index build`: parse the options, call `mqtool.trace`, render.

The joins, stages and verdicts live in `mqtool.trace`; this module reads options, prints a Rich
timeline (a table on a TTY, the same table as plain text in a pipe) or the `--json` document(s),
and sets the exit code: 0 found, 1 not found, 2 input error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from mqtool.cli.common import (
    EXIT_USAGE,
    ConfigOption,
    JsonOption,
    LocalOption,
    emit_json,
    fail,
    load_config,
    stderr,
    user_errors,
)
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.times import format_time, parse_time

EXIT_FOUND, EXIT_NOT_FOUND = 0, 1

# --config without click's own existence check: a missing or unreadable broker.conf is then one
# `Error:` line (exit 2) from `load_config`, like every other input error, not a usage box.
StoreConfigOption = typer.Option(None, "--config", help=ConfigOption.help, metavar="<file>")

TRACE_HELP = """Follow one message through every system topic: where is it now, and how did it get there?

\b
Name the message by exactly one of --uniq-key (the client's msgId / UNIQ_KEY), --key (a word of
KEYS; several messages are listed newest first, --limit N keeps N), --offset (a physical offset)
or --msg-id (an offsetMsgId, or a client msgId). The timeline shows born, stored, parked (delay
level, wheel slot, half), rolls, put-backs, cancels, commit/rollback/discard, delivery and, per
consumer group in consumerOffset.json, whether it was consumed; then one verdict line.
"Now" is the store's last sign of life (checkpoint, timercheck, offset files) unless --now is given.
--until T continues the timeline with the simulator (relative T counts from the simulator's start).
--index DIR uses a lookup index (mqtool index build) instead of searching the CommitLog.
Exit: 0 found, 1 not found, 2 input error.

\b
Example:
  mqtool trace ./store --key order-1001 --config broker.conf
  mqtool trace ./store --uniq-key 7F000001... --until +2h --json
"""

INDEX_HELP = """Build (or bring up to date) the trace lookup index of a store: SQLite, UNIQ_KEY/KEYS -> offsets.

\b
An existing index in DIR is updated incrementally when the store grew (only new records are
read) and rebuilt when it belongs to another or a truncated store.

\b
Example:
  mqtool index build ./store --out ./store-index
"""

index_app = typer.Typer(help="The trace lookup index.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("trace", help=TRACE_HELP)(trace_command)
    index_app.command("build", help=INDEX_HELP)(index_build_command)
    app.add_typer(index_app, name="index")


def trace_command(
    store: Path = typer.Argument(..., help="The store directory (read-only)."),
    uniq_key: str | None = typer.Option(None, "--uniq-key", help="UNIQ_KEY (the client-side msgId)."),
    key: str | None = typer.Option(None, "--key", help="A word of the KEYS property."),
    offset: int | None = typer.Option(None, "--offset", help="Physical CommitLog offset of any of its records."),
    msg_id: str | None = typer.Option(None, "--msg-id", help="offsetMsgId (or client msgId)."),
    config: Path | None = StoreConfigOption,
    as_json: bool = JsonOption,
    until: str | None = typer.Option(None, "--until", help="Continue with the simulator up to this time "
                                     "(ISO, epoch ms, or +2h from the simulator's start)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most N messages (--key)."),
    index: Path | None = typer.Option(None, "--index", help="Trace index directory (mqtool index build).",
                                      file_okay=False),
    local: bool = LocalOption,
    now: str | None = typer.Option(None, "--now", help="Reference time for 'in 1h58m' and overdue "
                                   "(default: the store's last sign of life)."),
    broker_version: str = typer.Option("5.3", "--broker-version", help="Simulator rules for --until: 5.3 or 4.9."),
) -> None:
    from mqtool.inspect.records import record_dict
    from mqtool.store.store import Store
    from mqtool.trace import TraceQuery, trace
    from mqtool.trace.future import continue_trace
    from mqtool.trace.timeline import store_as_of

    with user_errors():
        given = [n for n, v in (("--uniq-key", uniq_key), ("--key", key), ("--offset", offset),
                                ("--msg-id", msg_id)) if v is not None]
        if len(given) != 1:
            raise fail("give exactly one of --uniq-key, --key, --offset, --msg-id"
                       + (f" (got {', '.join(given)})" if given else ""))
        if broker_version not in ("5.3", "4.9"):
            raise fail(f"--broker-version must be 5.3 or 4.9, got {broker_version!r}")
        query = TraceQuery(uniq_key=uniq_key, key=key, offset=offset, msg_id=msg_id)
        st = Store.open(store, load_config(config))
        as_of = parse_time(now, store_as_of(st)) if now is not None else None
        until_ms = None
        if until is not None:
            from mqtool.simulate.runner import default_start

            until_ms = parse_time(until, default_start(st))
        finder, notes = None, []
        if index is not None:
            from mqtool.trace.index import index_finder

            finder, notes = index_finder(st, index)
        traces = trace(st, query, finder=finder, as_of=as_of, limit=limit)
        if until_ms is not None:
            traces = [continue_trace(st, t, until_ms, broker_version) for t in traces]
    for n in notes:
        stderr.print(n, markup=False, highlight=False)
    if not traces:
        what = next(f"{n} {v}" for n, v in ((PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_key), (PROPERTY_KEYS, key),
                                             ("offset", offset), ("msgId", msg_id)) if v is not None)
        stderr.print(f"not found: no record of {what} in {store}", markup=False, highlight=False)
        raise typer.Exit(code=EXIT_NOT_FOUND)
    if as_json:
        for t in traces:
            emit_json(t.as_dict(lambda r: record_dict(r, body="none")))
        return
    render_traces(traces, local)


def _console() -> Console:
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if tty else 200, highlight=False, soft_wrap=False, emoji=False)


def render_traces(traces, local: bool) -> None:
    """The timeline table of each message, then its verdict line (newest message first)."""
    out = _console()
    for i, t in enumerate(traces):
        head = f"UNIQ_KEY {', '.join(t.uniq_keys) or '-'}"
        if len(traces) > 1:
            head = f"message {i + 1}/{len(traces)}: {head}"
        table = Table(title=head, box=box.SIMPLE_HEAVY, title_justify="left")
        for col in ("time", "stage", "place", "offset", "detail"):
            table.add_column(col, overflow="fold", no_wrap=col != "detail")
        for s in t.stages:
            stage = s.stage + (" (sim)" if s.simulated else "")
            table.add_row(format_time(s.time, local) if s.time is not None else "-", stage, s.place or "-",
                          "-" if s.physical_offset is None else str(s.physical_offset), s.detail)
        out.print(table)
        colour = {"delivered": "green", "committed": "green", "waiting": "cyan", "pending": "cyan"}.get(
            t.verdict.state, "yellow")
        out.print(t.verdict.text, style=f"bold {colour}", markup=False)  # the text starts with the state
        out.print(f"(as of {format_time(t.as_of, local)})", style="dim")
        if i + 1 < len(traces):
            out.print()


def index_build_command(
    store: Path = typer.Argument(..., help="The store directory (read-only)."),
    out: Path = typer.Option(..., "--out", help="Directory for the index (created if missing).", file_okay=False),
    config: Path | None = StoreConfigOption,
    as_json: bool = JsonOption,
) -> None:
    from mqtool.store.store import Store
    from mqtool.trace.index import build_index

    with user_errors():
        st = Store.open(store, load_config(config))
        try:
            stats = build_index(st, out)
        except OSError as e:  # sqlite3 errors on an unwritable directory are OperationalError, not OSError
            raise fail(f"{out}: {e}") from None
        except Exception as e:
            import sqlite3

            if isinstance(e, sqlite3.Error):
                stderr.print(f"Error: {out}: {e}", markup=False, highlight=False)
                raise typer.Exit(code=EXIT_USAGE) from None
            raise
    if as_json:
        emit_json({"version": 1, "index": stats.as_dict()})
        return
    how = "rebuilt" if stats.rebuilt else "updated"
    print(f"{how} {stats.path}: {stats.records} record(s) added ({stats.rows} rows), "
          f"{stats.total_records} indexed up to offset {stats.end}")
