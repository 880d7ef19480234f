"""`mqtool trace` and `mqtool index build`: parse the options, call `mqtool.trace`, render.

The joins, stages and verdicts live in `mqtool.trace`; this module reads options, prints a Rich
timeline (a table on a TTY, the same table as plain text in a pipe) or the `--json` document(s),
and sets the exit code: 0 found, 1 not found, 2 input error.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from mqtool.cli.common import (
    BrokerVersion,
    ConfigOption,
    JsonOption,
    LocalOption,
    StoreArgument,
    broker_version_option,
    emit_json,
    lazy_module,
    load_config,
    now_option,
    print_stderr,
    user_errors,
    warn_store_errors,
)
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.times import parse_time

render = lazy_module("mqtool.cli.render")  # Rich tables: loaded when a command draws

EXIT_FOUND, EXIT_NOT_FOUND = 0, 1
LOOKUPS = ("auto", "indexfile", "sqlite", "scan")
Lookup = StrEnum("Lookup", {v: v for v in LOOKUPS})
Lookup.__doc__ = "--lookup: what finds a message's records."

TRACE_HELP = """Follow one message through every system topic: where is it now, and how did it get there?

\b
Name the message by exactly one of --uniq-key (the client's msgId / UNIQ_KEY), --key (a word of
KEYS; several messages are listed newest first, --limit N keeps N; --topic T keeps those sent to T,
asking the IndexFile for T only, as queryMsgByKey does), --offset (a physical offset)
or --msg-id (an offsetMsgId, or a client msgId). The timeline shows born, stored, parked (delay
level, wheel slot, half), rolls, put-backs, cancels, commit/rollback/discard, delivery and, per
consumer group in consumerOffset.json, whether it was consumed; then one verdict line.
"Now" is the store's last sign of life (checkpoint, timercheck, offset files) unless --now is given.
--until T continues the timeline with the simulator (relative T counts from the simulator's start);
--scenario FILE gives that run its scenario: with [[consumers]] the retries, the DLQ and POP
revives of the message become stages, and the verdict says how each group ends with it.
Lookups (--lookup auto): --key and --uniq-key ask the broker's own IndexFiles (index/) when they
can answer, else the SQLite index of --index DIR (mqtool index build), else search the CommitLog;
which one was used is printed (JSON: query.lookup).
STORE may be a fleet (a directory of stores, `inspect FLEET`): every store is searched, every record
named by its store, and a UNIQ_KEY stored on two broker groups (a producer retry that went to another
broker: consumers get it twice) is called out.
Exit: 0 found, 1 not found, 2 input error.

\b
Example:
  mqtool trace ./store --key order-1001 --config broker.conf
  mqtool trace ./store --key order-1001 --topic TopicA
  mqtool trace ./store --uniq-key 7F000001... --until +2h --json
  mqtool trace ./store --key order-1001 --until +6h --scenario consumers.toml
  mqtool trace ./fleet --key order-1001
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
    store: Path = StoreArgument,
    uniq_key: str | None = typer.Option(None, "--uniq-key", help="UNIQ_KEY (the client-side msgId)."),
    key: str | None = typer.Option(None, "--key", help="A word of the KEYS property."),
    topic: str | None = typer.Option(None, "--topic", help="With --key: only messages sent to this topic "
                                     "(as queryMsgByKey); the IndexFile is asked for this topic only."),
    offset: int | None = typer.Option(None, "--offset", help="Physical CommitLog offset of any of its records."),
    msg_id: str | None = typer.Option(None, "--msg-id", help="offsetMsgId (or client msgId)."),
    config: Path | None = ConfigOption,
    as_json: bool = JsonOption,
    until: str | None = typer.Option(None, "--until", help="Continue with the simulator up to this time "
                                     "(ISO, epoch ms, or +2h from the simulator's start)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most N messages (--key)."),
    index: Path | None = typer.Option(None, "--index", help="Trace index directory (mqtool index build).",
                                      file_okay=False),
    lookup: Lookup = typer.Option(Lookup("auto"), "--lookup", help="What finds the records: auto, indexfile "
                                  "(index/), sqlite (--index DIR) or scan."),
    local: bool = LocalOption,
    now: str | None = now_option("the store's last sign of life"),
    broker_version: BrokerVersion = broker_version_option(
        "Whose rules the verdict and --until follow: 5.3 or 4.9 (4.9: check rounds without the 1 s sleep)."),
    scenario: Path | None = typer.Option(None, "--scenario", help="With --until: the simulator's scenario TOML "
                                         "([[consumers]], faults, transaction answers).", dir_okay=False),
) -> None:
    from mqtool.inspect.records import record_dict
    from mqtool.store.store import Store
    from mqtool.trace import TraceQuery, trace
    from mqtool.trace.core import select_finder
    from mqtool.trace.future import continue_trace, simulator_plan
    from mqtool.trace.timeline import store_as_of

    with user_errors():
        query = TraceQuery(uniq_key=uniq_key, key=key, offset=offset, msg_id=msg_id, topic=topic)
        if _is_fleet(store):
            raise typer.Exit(_trace_fleet(store, config, query, as_json, until, index, scenario, lookup.value,
                                          limit, now, local))
        st = Store.open(store, load_config(config))
        as_of = parse_time(now, store_as_of(st), local) if now is not None else None
        until_ms, sc = simulator_plan(st, until, scenario, local)
        finder, used, notes = select_finder(st, query, index, lookup.value)
        traces = trace(st, query, finder=finder, as_of=as_of, limit=limit, lookup=used,
                       broker_version=broker_version.value)
        if until_ms is not None:
            traces = [continue_trace(st, t, until_ms, broker_version.value, scenario=sc) for t in traces]
    for n in notes:
        print_stderr(n)
    warn_store_errors(st, store)
    if not traces:
        what = next(f"{n} {v}" for n, v in ((PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_key), (PROPERTY_KEYS, key),
                                             ("offset", offset), ("msgId", msg_id)) if v is not None)
        print_stderr(f"not found: no record of {what} in {store}")
        raise typer.Exit(code=EXIT_NOT_FOUND)
    if as_json:
        for t in traces:
            emit_json(t.as_dict(lambda r: record_dict(r, body="none")))
        return
    render.render_note(f"lookup: {used}")
    render.render_traces(traces, local)


def _is_fleet(path: Path) -> bool:
    from mqtool.store.fleet import is_fleet_dir

    return path.is_dir() and is_fleet_dir(path)


def _trace_fleet(path: Path, config: Path | None, query, as_json: bool, until: str | None, index: Path | None,
                 scenario: Path | None, lookup: str, limit: int | None, now: str | None, local: bool) -> int:
    """`trace FLEET`: every store searched (`trace/fleet.py`); the exit code (0 found, 1 not found)."""
    from mqtool.inspect.records import record_dict
    from mqtool.store.fleet import open_fleet
    from mqtool.trace.fleet import trace_fleet
    from mqtool.trace.model import TraceError

    for option, given in (("--until", until), ("--scenario", scenario), ("--index", index)):
        if given is not None:
            raise TraceError(f"{option} works on one store; {path} is a fleet (trace one of its stores)")
    if lookup == "sqlite":
        raise TraceError(f"--lookup sqlite needs --index DIR, which works on one store; {path} is a fleet")
    if query.offset is not None:
        raise TraceError(f"--offset is a place in one store's CommitLog; {path} is a fleet: give --msg-id (an "
                         "offsetMsgId names its broker's address too), --uniq-key or --key")
    result = trace_fleet(open_fleet(path, config), query, now=now, local=local, limit=limit, lookup=lookup)
    if as_json:
        emit_json(result.as_dict(lambda r: record_dict(r, body="none")))
    else:
        render.render_fleet_trace(result, local)
    if not result.found:
        print_stderr(f"not found: no record on any store of {path}")
    return EXIT_FOUND if result.found else EXIT_NOT_FOUND


def index_build_command(
    store: Path = StoreArgument,
    out: Path = typer.Option(..., "--out", help="Directory for the index (created if missing).", file_okay=False),
    config: Path | None = ConfigOption,
    as_json: bool = JsonOption,
) -> None:
    from mqtool.store.store import Store
    from mqtool.trace.index import build_index

    with user_errors():
        stats = build_index(Store.open(store, load_config(config)), out)
    if as_json:
        emit_json({"version": 1, "index": stats.as_dict()})
        return
    how = "rebuilt" if stats.rebuilt else "updated"
    print(f"{how} {stats.path}: {stats.records} record(s) added ({stats.rows} rows), "
          f"{stats.total_records} indexed up to offset {stats.end}")
