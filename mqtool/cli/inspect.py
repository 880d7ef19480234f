"""`mqtool inspect PATH [VIEW]`: parse the options, call one `mqtool.inspect` function, render.

Nothing here decodes or scans: the views live in `mqtool.inspect`, every table in `cli/render.py`.
"""

import io
import sys
import time
from contextlib import contextmanager, redirect_stdout
from enum import StrEnum
from pathlib import Path

import typer

from mqtool.cli import common
from mqtool.inspect import options
from mqtool.store.errors import StoreError
from mqtool.times import format_duration, format_time, parse_time

render = common.lazy_module("mqtool.cli.render")  # Rich tables: loaded when a command draws


class View(StrEnum):
    """VIEW: what `inspect` explains about a store directory."""

    overview = "overview"
    messages = "messages"
    message = "message"
    queue = "queue"
    delay = "delay"
    timer = "timer"
    transactions = "transactions"
    restart = "restart"
    retry = "retry"
    index = "index"
    replicas = "replicas"
    consumers = "consumers"


VIEWS = tuple(v.value for v in View)

DEFAULT_FOR = "10m"  # restart: the replay's length

# A progress bar appears on a TTY only when a scan walks more than this many CommitLog bytes.
PROGRESS_MIN_BYTES = 64 << 20

# Views whose numbers depend on "now" (ages, lags, overdue, predictions), and how far the store's last
# write may lie behind the wall clock before the text output suggests --now.
_NOW_VIEWS = ("overview", "delay", "timer", "transactions", "restart", "consumers")
STALE_STORE_MS = 10 * 60 * 1000

HELP = """Explain a RocketMQ store directory offline (read-only), or dump one store file.

\b
VIEW is one of:
  overview      layout, offset/time ranges, counts per topic/queue, headline numbers, findings (default)
  messages      CommitLog records; filters --from-offset --to-offset --topic --queue-id --key
                --uniq-key --tag --since --until --limit; --body, --decompress, --verify
  message       the record at --offset PHYS, everything decoded
  queue         --topic T --queue-id Q [--from N]: units resolved against the CommitLog
  delay         per delay level: stored/corrected offset, min/max, backlog, head deliver time
  timer         timercheck cursors, TimerLog units, wheel slots, pending histogram; --at TIME
  transactions  half messages with state, check counts and predicted check/discard times
  restart       what the broker does if it starts now (--at TIME): recovery, messages delivered
                twice and why, overdue delay/timer messages, transaction checks, and a replay of
                the first --for (default 10m) through the simulator; --events FILE keeps its log
  retry         per consumer group: retry backlog per delay level (next due), %RETRY% lag, DLQ
                contents with origin; --group G for one group
  index         the broker's IndexFiles: one row per file; with --topic T --key K [--begin T0
                --end T1] [--limit N]: the records IndexService.queryOffset finds for T#K
  replicas      a fleet only: per broker group each slave against its master: the bytes both
                hold and where they differ, how far behind, what a promotion now would lose
  consumers     per consumer group, topic and queue: committed and max offset, lag, the oldest
                unconsumed message's store time and age (mqadmin consumerProgress); --group G, --topic T

PATH may be a fleet: a directory holding stores at depth 1 or 2 (docs/fleet.md). Its overview has
a row per store and the totals, consumers a section per store and each group's lag over the
broker groups; every other view reads one of its stores: --broker NAME[:ID].

PATH may also be a single file (a commitlog/, consumequeue/, timerlog/ or index/ file, timerwheel,
config/timercheck, checkpoint, config/*.json): it is decoded according to its kind.

Times: ISO-8601 (2026-11-22T10:00:00Z), epoch ms, or relative to --now (-2h, +30m); printed in
UTC ISO with milliseconds unless --local (which also reads an ISO time without an offset as local
time). "Now" is the current time unless --now is given: on an old store, ages and "overdue" count from
today; --now with the store's last sign of life shows the store as the broker left it.

\b
Output: Rich tables on a terminal; --json gives JSON Lines for messages and queue, one
{"version": 1, "view": ...} document otherwise.

\b
Regression checks: --json --expect FILE compares the output with a golden file (exit 1 and a
unified diff on stderr when it differs); --update-golden rewrites FILE instead. Both need --now.
The store's absolute path is stored as <store>.

\b
Exit codes: 0 ok; 1 the store has error-level findings (overview, or any view with --verify), or
the output differs from --expect; 2 usage or input error (one "Error: ..." line on stderr).

\b
Examples:
  mqtool inspect ~/store
  mqtool inspect ~/store messages --topic TopicA --since -2h --json
  mqtool inspect ~/store delay --config broker.conf
  mqtool inspect ~/store restart --config broker.conf --for 30m
  mqtool inspect ~/store/config/timercheck --json
  mqtool inspect ~/store index --topic TopicA --key order-1001
  mqtool inspect ~/store delay --json --now 1790000020000 --expect tests/golden/delay.json
"""


def register(app: typer.Typer) -> None:
    """Add `inspect` to the app.

    Typer runs an app with a single command as that command; a root callback keeps `mqtool inspect`
    a subcommand whatever else is registered.
    """
    if app.registered_callback is None:
        app.callback()(_root)
    app.command("inspect", help=HELP, no_args_is_help=True)(inspect)


def _root() -> None:
    """Subcommands of mqtool."""


def inspect(
    path: Path = typer.Argument(..., help="Store directory (or a single store file).", show_default=False,
                                metavar="path"),
    view: View = typer.Argument(View.overview, help="One of: " + ", ".join(VIEWS) + ".",
                                show_choices=False, metavar="view"),
    config: Path | None = common.ConfigOption,
    json_out: bool = common.JsonOption,
    local: bool = common.LocalOption,
    now: str | None = common.now_option("the current time"),
    verify: bool = typer.Option(False, "--verify", help="Check CRC and lengths; exit 1 on error findings."),
    from_offset: int | None = typer.Option(None, "--from-offset", help="messages: first physical offset."),
    to_offset: int | None = typer.Option(None, "--to-offset", help="messages: stop before this offset."),
    topic: str | None = typer.Option(None, "--topic", help="messages/queue/index/consumers: topic."),
    queue_id: int | None = typer.Option(None, "--queue-id", help="messages/queue: queue id."),
    key: str | None = typer.Option(None, "--key", help="messages: one of the record's KEYS."),
    uniq_key: str | None = typer.Option(None, "--uniq-key", help="messages: UNIQ_KEY (client msgId)."),
    tag: str | None = typer.Option(None, "--tag", help="messages: TAGS value."),
    since: str | None = typer.Option(None, "--since", help="messages: store time >= TIME."),
    until: str | None = typer.Option(None, "--until", help="messages: store time < TIME."),
    limit: int | None = typer.Option(None, "--limit", help="messages/queue: at most N records."),
    body: common.Body = typer.Option(common.Body("text"), "--body", help="Body as text, hex, base64 or none."),
    decompress: bool = typer.Option(False, "--decompress", help="Show compressed bodies decompressed."),
    offset: int | None = typer.Option(None, "--offset", help="message: physical offset of the record."),
    from_: int = typer.Option(0, "--from", help="queue: first queue offset."),
    at: str | None = typer.Option(None, "--at", help="timer: walk the chain of the slot holding TIME; restart: "
                                  "the broker's start time (default: now)."),
    for_: str = typer.Option(DEFAULT_FOR, "--for", help="restart: how long the replay runs after the start."),
    events: Path | None = typer.Option(None, "--events", help="restart: write the replay's event log (JSON Lines) "
                                       "here.", dir_okay=False),
    format_: common.RecordFormat | None = typer.Option(None, "--format", help="messages/queue/index lookup: write "
                                                "the records to --output FILE in this format instead (parquet).",
                                                show_choices=True),
    output: Path | None = typer.Option(None, "--output", help="messages/queue/index lookup: the file --format "
                                       "writes.", dir_okay=False),
    begin: str | None = typer.Option(None, "--begin", help="index: lookup from this store time (default: all)."),
    end: str | None = typer.Option(None, "--end", help="index: lookup up to this store time (default: all)."),
    expect: Path | None = common.expect_option("With --json: compare the output with this golden file"),
    update_golden: bool = common.UpdateGoldenOption,
    group: str | None = typer.Option(None, "--group", help="retry/consumers: one consumer group."),
    broker: str | None = typer.Option(None, "--broker", help="A fleet's store: NAME[:ID] (brokerName:brokerId) "
                                      "or its directory.", metavar="NAME[:ID]"),
    broker_version: common.BrokerVersion = common.broker_version_option(
        "transactions/restart: whose check rounds the predictions follow (4.9: a discard a race decides "
        "shows both times)."),
) -> None:
    view, body = view.value, body.value
    given = {
        "--from-offset": from_offset is not None, "--to-offset": to_offset is not None, "--topic": topic is not None,
        "--queue-id": queue_id is not None, "--key": key is not None, "--uniq-key": uniq_key is not None,
        "--tag": tag is not None, "--since": since is not None, "--until": until is not None,
        "--limit": limit is not None, "--body": body != "text", "--decompress": decompress,
        "--offset": offset is not None, "--from": from_ != 0, "--at": at is not None,
        "--for": for_ != DEFAULT_FOR, "--events": events is not None,
        "--begin": begin is not None, "--end": end is not None,
        "--expect": expect is not None, "--update-golden": update_golden,
        "--format": format_ is not None, "--output": output is not None,
    }
    given["--group"] = group is not None
    given["--broker-version"] = broker_version.value != "5.3"
    with common.user_errors():
        options.check_global(given, limit, json_out, now is not None)
        wall_ms = int(time.time() * 1000)
        now_ms = parse_time(now, wall_ms, local) if now is not None else wall_ms
        cfg = common.load_config(config)
        if not path.exists():
            raise StoreError("no such file or directory", path)
        options.check_options(view, given, path if path.is_file() else None)
        if path.is_file() and broker is not None:
            raise StoreError("--broker picks a store of a fleet; this is a single file", path)
        if path.is_file():
            raise typer.Exit(_dump(path, cfg, json_out, local, verify, limit, body, decompress))
        fleet = _fleet_of(path, config, broker, view)
        if fleet is not None and broker is not None:
            member = fleet.select(broker)
            path, cfg, fleet = member.path, member.config, None
        if fleet is not None:
            with _golden(expect, update_golden, False, path) as golden_code:
                code = _fleet_view(fleet, view, now_ms, json_out, local, group, topic)
            raise typer.Exit(max(code, golden_code[0]))
        from mqtool.store.store import Store

        store = Store.open(path, cfg)
        if now is None and not json_out and view in _NOW_VIEWS and view != "overview":
            _now_note(store, now_ms, local)
        with _golden(expect, update_golden, view in ("messages", "queue"), path) as golden_code:
            if view == "overview":
                code = _overview(store, now_ms, json_out, local, now is None)
            elif view == "messages":
                code = _messages(store, now_ms, json_out, local, verify, body, decompress, limit, dict(
                    from_offset=from_offset, to_offset=to_offset, topic=topic, queue_id=queue_id, key=key,
                    uniq_key=uniq_key, tag=tag, since=since, until=until), output)
            elif view == "message":
                code = _message(store, offset, json_out, local, verify, body, decompress)
            elif view == "queue":
                code = _queue(store, topic, queue_id, from_, limit, json_out, local, verify, body, decompress, output)
            elif view == "delay":
                from mqtool.inspect.delay import delay_view

                code = _document(delay_view(store, now_ms), "render_delay", json_out, local, verify)
            elif view == "timer":
                from mqtool.inspect.timer import timer_view

                at_ms = parse_time(at, now_ms, local) if at is not None else None
                code = _document(timer_view(store, now_ms, at_ms), "render_timer", json_out, local, verify)
            elif view == "restart":
                at_ms = parse_time(at, now_ms, local) if at is not None else now_ms
                code = _restart(store, at_ms, options.replay_ms(for_), events, json_out, local, verify,
                                broker_version.value)
            elif view == "retry":
                from mqtool.inspect.retry import retry_view

                code = _document(retry_view(store, now_ms, group), "render_retry", json_out, local, verify)
            elif view == "consumers":
                from mqtool.inspect.consumers import consumers_view

                code = _document(consumers_view(store, now_ms, group, topic), "render_consumers", json_out, local,
                                 verify)
            elif view == "index":
                lookup_key = key if key is not None else uniq_key
                code = _index(store, now_ms, json_out, local, verify, topic, lookup_key, begin, end, limit, output)
            else:
                from mqtool.inspect.transactions import transactions_view

                with _progress_bar(store, "transactions") as progress:
                    doc = transactions_view(store, now_ms, progress, v4=broker_version.value.startswith("4"))
                code = _document(doc, "render_transactions", json_out, local, verify)
    raise typer.Exit(max(code, golden_code[0]))


FLEET_VIEWS = ("overview", "replicas", "consumers")  # the views that read every store of a fleet


def _fleet_of(path: Path, config: Path | None, broker: str | None, view: str):
    """The fleet PATH is (`store.fleet`), None for a store; the options that need the other kind refused."""
    from mqtool.store.dirs import is_store_dir  # a store is told without the fleet's module (or its readers)

    if is_store_dir(path) or not _fleets().is_fleet_dir(path):
        if broker is not None:
            raise StoreError("--broker picks a store of a fleet; this is one store (leave --broker out)", path)
        if view == "replicas":
            raise StoreError("the replicas view compares the stores of a fleet: give the directory holding them",
                             path)
        return None
    fleet = _fleets().open_fleet(path, config)
    if broker is None and view not in FLEET_VIEWS:
        raise StoreError(f"a fleet of {len(fleet.members)} stores: the {view} view reads one, give --broker "
                         "NAME[:ID] (" + ", ".join(m.name for m in fleet.members) + ")", path)
    return fleet


def _fleets():
    """`store/fleet.py`, imported for a directory that is no store."""
    from mqtool.store import fleet

    return fleet


def _fleet_view(fleet, view: str, now_ms: int, json_out: bool, local: bool, group: str | None = None,
                topic: str | None = None) -> int:
    """The fleet overview, the replicas or the consumers view; exit 1 when a finding is an error (as `overview`)."""
    if view == "consumers":
        from mqtool.inspect.consumers import fleet_consumers_view

        return _document(fleet_consumers_view(fleet, now_ms, group, topic), "render_consumers", json_out, local,
                         verify=False)
    if view == "replicas":
        from mqtool.inspect.replicas import replicas_view

        with _status("replicas: comparing CommitLogs"):
            doc = replicas_view(fleet, now_ms, keys=json_out)
        return _document(doc, "render_replicas", json_out, local, verify=True)
    from mqtool.inspect.fleet import fleet_overview

    with _status(f"fleet: {len(fleet.members)} stores"):
        doc = fleet_overview(fleet, now_ms)
    if json_out:
        common.emit_json(doc)
    else:
        render.render_fleet(doc, local)
    errors = doc["totals"]["finding_counts"]["error"]
    return common.EXIT_FINDINGS if errors else common.EXIT_OK


@contextmanager
def _golden(expect: Path | None, update_golden: bool, lines: bool, store_path: Path):
    """With --expect: capture the JSON printed inside, print it as usual, then compare it with the golden
    file (diff on stderr, exit code 1 in `code[0]`) or rewrite the file (--update-golden)."""
    code = [common.EXIT_OK]
    if expect is None:
        yield code
        return
    from mqtool.golden import check_golden, loads

    buf = io.StringIO()
    with redirect_stdout(buf):
        yield code
    sys.stdout.write(buf.getvalue())
    result = check_golden(loads(buf.getvalue(), lines), expect, lines=lines, update_golden=update_golden,
                          paths={"<store>": store_path})
    common.print_stderr(result.message)
    sys.stderr.flush()
    sys.stderr.write(result.diff)
    code[0] = common.EXIT_OK if result.equal else common.EXIT_FINDINGS


def _scan_bytes(store) -> int:
    return sum(f.length for f in store.commitlog.files)


@contextmanager
def _progress_bar(store, what: str):
    """`render.progress_bar` for a CommitLog scan; with no bar to draw (stderr not a TTY, or a short
    scan) it yields None without loading `cli/render.py` and Rich's tables (~50 ms of a `--json` run)."""
    total = _scan_bytes(store)
    if total < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
        yield None
        return
    with render.progress_bar(total, PROGRESS_MIN_BYTES, what) as progress:
        yield progress


@contextmanager
def _status(text: str):
    """`render.status`, loading `cli/render.py` only when stderr is a TTY (where the spinner is drawn)."""
    if not sys.stderr.isatty():
        yield lambda _text: None
        return
    with render.status(text) as update:
        yield update


def _has_errors(findings: list[dict]) -> bool:
    return any(f["severity"] == "error" for f in findings)


def _document(doc: dict, show: str, json_out: bool, local: bool, verify: bool) -> int:
    """Print one view's document: JSON, or the `cli/render.py` function named `show` (by name: looking it
    up loads render and Rich's tables, which a `--json` run does not need)."""
    if json_out:
        common.emit_json(doc)
    else:
        getattr(render, show)(doc, local)
        render.render_findings(doc.get("findings", []))
    return common.EXIT_FINDINGS if verify and _has_errors(doc.get("findings", [])) else common.EXIT_OK


def _now_note(store, now_ms: int, local: bool) -> None:
    """Text output without --now: say that "now" is the wall clock, and how far behind the store is."""
    last = store.last_activity_ms() or None  # the same "store's own now" simulate and trace use
    line = f"now: {format_time(now_ms, local)} (the current time; set another with --now)"
    if last is not None:
        gap = now_ms - last
        line += f"; the store's last sign of life: {format_time(last, local)}"
        if gap > STALE_STORE_MS:
            line += (f", {format_duration(gap)} earlier. Ages, lags and \"overdue\" count from now; "
                     f"--now {last} shows the store as the broker left it")
    render.render_note(line)


def _overview(store, now_ms: int, json_out: bool, local: bool, wall_clock: bool = False) -> int:
    from mqtool.inspect.overview import overview

    with _progress_bar(store, "overview") as progress:
        doc = overview(store, now_ms, progress)
    if wall_clock and not json_out:
        _now_note(store, now_ms, local)
    code = _document(doc, "render_overview", json_out, local, verify=True)
    return code


def _restart(store, at_ms: int, for_ms: int, events: Path | None, json_out: bool, local: bool,
             verify: bool, broker_version: str = "5.3") -> int:
    from mqtool.inspect.restart import restart_preview

    with _status("restart preview: recovery, stored deliveries, replay"):
        doc = restart_preview(store, store.config, at_ms, for_ms, events, broker_version=broker_version)
    return _document(doc, "render_restart", json_out, local, verify)


def _messages(store, now_ms: int, json_out: bool, local: bool, verify: bool, body: str, decompress: bool,
              limit: int | None, f: dict, parquet: Path | None = None) -> int:
    from mqtool.inspect.messages import MessageQuery, find_messages, scan_findings
    from mqtool.inspect.records import record_dict

    query = MessageQuery(
        from_offset=f["from_offset"], to_offset=f["to_offset"], topic=f["topic"], queue_id=f["queue_id"],
        key=f["key"], uniq_key=f["uniq_key"], tag=f["tag"],
        since_ms=parse_time(f["since"], now_ms, local) if f["since"] is not None else None,
        until_ms=parse_time(f["until"], now_ms, local) if f["until"] is not None else None, limit=limit)
    from mqtool.inspect.jsonlines import fast_query, message_lines

    with _progress_bar(store, "messages") as progress:
        if json_out and parquet is None and fast_query(query, body):  # the same lines, made from columns
            common.emit_jsonl_parts(message_lines(store, query, verify, body, decompress, progress))
        elif parquet is not None and _parquet().fast_query(query):  # the same rows, as Arrow batches from columns
            n = _parquet().write_messages(store, query, parquet, verify, body, decompress, progress)
            render.render_note(f"wrote {n} record(s) to {parquet}")
        else:
            source, records = find_messages(store, query, verify, progress)
            if query.key is not None or query.uniq_key is not None:
                render.render_note(f"lookup: {_LOOKUP_NOTE[source]}")
            rows = (record_dict(r, body, decompress) for r in records)
            if parquet is not None:
                _write_parquet(rows, parquet, "messages")
            elif json_out:
                common.emit_jsonl(rows)
            else:
                render.render_messages(rows, local)
    findings = [x.as_dict() for x in scan_findings(store)]
    if findings or not json_out:  # nothing to print: render (Rich tables) stays unloaded
        render.render_findings(findings, quiet_when_empty=json_out)
    return common.EXIT_FINDINGS if verify and _has_errors(findings) else common.EXIT_OK


def _parquet():
    """`inspect/parquet.py`, imported only by the commands that write Parquet."""
    from mqtool.inspect import parquet

    return parquet


_LOOKUP_NOTE = {
    "indexfile": "the broker's IndexFiles (index/)",
    "indexfile+scan": "the broker's IndexFiles (index/), and a scan of the CommitLog part they do not cover",
    "scan": "a scan of the CommitLog (no IndexFile covers this query)",
}


def _message(store, offset: int, json_out: bool, local: bool, verify: bool, body: str, decompress: bool) -> int:
    from mqtool.inspect.messages import message_at

    doc = message_at(store, offset, body, decompress)
    code = _document(doc, "render_message", json_out, local, verify=False)
    if verify and not all(doc["checks"][k] for k in ("crc_ok", "size_ok", "physical_offset_ok")):
        return common.EXIT_FINDINGS
    return code


def _queue(store, topic: str, queue_id: int, start: int, limit: int | None, json_out: bool, local: bool,
           verify: bool, body: str, decompress: bool, parquet: Path | None = None) -> int:
    from mqtool.inspect.queue import iter_queue, queue_summary

    bad = 0

    def rows():
        nonlocal bad
        for row in iter_queue(store, topic, queue_id, start, limit, body, decompress):
            bad += not row["match"]
            yield row

    if parquet is not None:
        _write_parquet(rows(), parquet, "queue")
    elif json_out:
        common.emit_jsonl(rows())
    else:
        render.render_queue(queue_summary(store, topic, queue_id), topic, queue_id, rows(), local)
    if bad:
        render.render_note(f"{bad} unit(s) do not match their CommitLog record")
    return common.EXIT_FINDINGS if verify and bad else common.EXIT_OK


def _write_parquet(rows, path: Path, view: str) -> None:
    """--format parquet: the rows `--json` would print, as one Parquet file (schema: docs/formats.md)."""
    from mqtool.output import write_parquet

    n = write_parquet(rows, path, view)
    render.render_note(f"wrote {n} record(s) to {path}")


def _index(store, now_ms: int, json_out: bool, local: bool, verify: bool, topic: str | None, key: str | None,
           begin: str | None, end: str | None, limit: int | None, parquet: Path | None = None) -> int:
    """The IndexFile rows, or with --topic and --key the broker's key lookup (--format parquet: its
    matches, then its rejected hash hits, as rows); `options.check_index` has checked the pair."""
    from mqtool.inspect.index import index_files_view, index_lookup

    if topic is None:
        return _document(index_files_view(store), "render_index", json_out, local, verify)
    begin_ms = parse_time(begin, now_ms, local) if begin is not None else None
    end_ms = parse_time(end, now_ms, local) if end is not None else None
    doc = index_lookup(store, topic, key, begin_ms, end_ms, limit)
    if parquet is not None:
        _write_parquet(doc["matches"] + doc["rejected"], parquet, "index")
        render.render_findings(doc["findings"], quiet_when_empty=True)
        return common.EXIT_FINDINGS if verify and _has_errors(doc["findings"]) else common.EXIT_OK
    return _document(doc, "render_index", json_out, local, verify)


def _dump(path: Path, cfg, json_out: bool, local: bool, verify: bool, limit: int | None, body: str,
          decompress: bool) -> int:
    from mqtool.inspect.dump import dump_file

    doc = dump_file(path, cfg, limit, body, decompress)
    return _document(doc, "render_dump", json_out, local, verify)
