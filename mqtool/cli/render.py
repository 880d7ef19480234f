"""Every Rich table, histogram, status line and progress bar of mqtool (colour only when the stream is a TTY).

Nothing else imports Rich's tables. Renderers take the plain documents and results of the library
(`inspect`, `simulate`, `trace`, `spark-audit`) and print them; they compute nothing but layout.
Times are printed with `mqtool.times.format_time` (UTC ISO with ms, or `--local`).
"""

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mqtool.formats.names import (
    PROPERTY_KEYS,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_TAGS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from mqtool.times import format_duration, format_time

BAR_WIDTH = 40
MESSAGE_BATCH = 200
BODY_PREVIEW = 40


class _Console(Console):
    """Rich's console, but a closed stdout (`| head`) raises BrokenPipeError for `cli/app.py` to end with
    141, as every other output path does (Rich's own handler exits 1, our code for findings)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def _console(stderr: bool = False) -> Console:
    """A console for the current stream: Rich's own TTY detection decides colour; a pipe gets 200 columns."""
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return _Console(file=stream, stderr=stderr, width=None if tty else 200, highlight=False,
                   soft_wrap=False, emoji=False)


def _t(ms: int | None, local: bool) -> str:
    return format_time(ms, local) if ms is not None else "-"


def _v(x) -> str:
    return "-" if x is None else str(x)


def _table(title: str | None, *columns: str, **kw) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left", **kw)
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


def _add(table: Table, *cells, style: str | None = None) -> None:
    """A row whose cells are literal text: record data never goes through Rich markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells), style=style)


def _kv(title: str, pairs: list[tuple[str, object]]) -> Table:
    t = Table(title=title, box=box.SIMPLE, show_header=False, title_justify="left")
    t.add_column("key", style="bold")
    t.add_column("value", overflow="fold")
    for k, v in pairs:
        _add(t, k, _v(v))
    return t


def bar(count: int, biggest: int, width: int = BAR_WIDTH) -> str:
    """A terminal histogram bar: full blocks proportional to count/biggest (at least one when count > 0)."""
    if count <= 0 or biggest <= 0:
        return ""
    return "█" * max(1, round(width * count / biggest))


def _histogram(title: str, buckets: list[dict], local: bool) -> Table | None:
    if not buckets:
        return None
    t = _table(title, "from", "to", "count", "")
    biggest = max(b["count"] for b in buckets)
    for b in buckets:
        _add(t, _t(b["start_ms"], local), _t(b["end_ms"], local), str(b["count"]), bar(b["count"], biggest))
    return t


# ----------------------------------------------------------------------------- findings and notes


def render_findings(findings: list[dict], quiet_when_empty: bool = False) -> None:
    """Findings on stderr, at the end (Kafka's `DumpLogSegments`): a table on a TTY, else one line each."""
    con = _console(stderr=True)
    if not findings:
        if not quiet_when_empty:
            con.print("No findings.", style="green")
        return
    style = {"error": "red", "warning": "yellow", "info": "dim"}
    if not sys.stderr.isatty():
        for f in findings:
            where = f["file"] + (f" @{f['offset']}" if f["offset"] is not None else "")
            queue = f" [{f['topic']}/{f['queue_id']}]" if f.get("topic") else ""
            con.print(f"{f['severity']}: {f['check']}: {where}{queue}: {f['message']}", markup=False,
                      soft_wrap=True)
        return
    t = _table(f"{len(findings)} finding(s)", "severity", "check", "file", "offset", "topic/queue", "message")
    for f in findings:
        where = f"{f['topic']}/{f['queue_id']}" if f.get("topic") else "-"
        _add(t, f["severity"], f["check"], f["file"], _v(f["offset"]), where, f["message"],
                  style=style.get(f["severity"]))
    con.print(t)


def render_note(text: str) -> None:
    _console(stderr=True).print(text, style="yellow", markup=False)


@contextmanager
def progress_bar(total: int, min_total: int, what: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr, or None when not a TTY or the scan is short."""
    if total < min_total or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(TextColumn(f"scanning CommitLog ({what})"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=_console(stderr=True), transient=True) as p:
        task = p.add_task(what, total=total)

        def update(done: int, tot: int) -> None:
            p.update(task, completed=done, total=tot)

        yield update


# ----------------------------------------------------------------------------- overview


def render_overview(doc: dict, local: bool) -> None:
    con = _console()
    files, cl = doc["files"], doc["commitlog"]
    con.print(f"[bold]RocketMQ store[/bold] {escape(doc['store'])}")
    clf = files["commitlog"]
    pairs = [
        ("CommitLog files", f"{clf['files']} x {clf['file_size']} B ({clf['first']} .. {clf['last']})"
                            if clf["files"] else "none"),
        ("CommitLog offsets", f"{cl['min_offset']} .. {cl['max_offset']}"),
        ("records", cl["records"]),
        ("store time range", f"{_t(cl['first_store_timestamp'], local)} .. {_t(cl['last_store_timestamp'], local)}"),
        ("ConsumeQueues", _queue_count(files)),
        ("TimerLog", "-" if files["timerlog"] is None else f"{files['timerlog']['files']} file(s)"),
        ("timerwheel", files["timerwheel"]),
        ("checkpoint", "present" if files["checkpoint"] else "absent"),
        ("abort file", "PRESENT (broker running or crashed)" if files["abort"] else "absent (clean shutdown)"),
        ("config files", ", ".join(files["config"]) or "-"),
    ]
    found = (doc.get("layouts") or {}).get("found")
    if found:  # DLedger, BatchCQ, RocksDB, compaction, POP (a plain store shows nothing more)
        pairs.insert(0, ("production layouts", ", ".join(found)))
    pairs += _config_source_pairs(doc)
    con.print(_kv("Layout", pairs))
    scans = _table("CommitLog files", "file", "records", "valid bytes", "stop", "trailing bytes")
    for s in cl["scans"]:
        _add(scans, s["file"], str(s["records"]), str(s["valid_bytes"]), s["stop_reason"], str(s["trailing_bytes"]))
    con.print(scans)
    t = _table("Topics and queues", "topic", "role", "queue", "records", "cq min", "cq max")
    t.columns[0].max_width = 64  # long %RETRY% topics fold instead of widening the table
    for top in doc["topics"]:
        for i, q in enumerate(top["queues"]):
            _add(t, top["topic"] if i == 0 else "", (top["role"] or "") if i == 0 else "", str(q["queue_id"]),
                      str(q["records"]), _v(q["cq_min_offset"]), _v(q["cq_max_offset"]))
    con.print(t)
    _render_compaction_and_pop(con, doc, local)
    d, tx, tm = doc["delay"], doc["transactions"], doc["timer"]
    head = [
        ("delay backlog", f"{d['backlog']} message(s) in {d['levels_with_backlog']} level(s); "
                          + (f"{d['never_delivered']} NEVER delivered (level(s) "
                             f"{', '.join(map(str, d['never_levels']))} not in messageDelayLevel); "
                             if d.get("never_delivered") else "")
                          + f"{d['overdue_levels']} level(s) overdue; {d['corrections']} offset correction(s)"),
        ("transactions", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in tx["counts"].items())),
    ]
    if tx["oldest_pending"]:
        head.append(("oldest pending half", f"{tx['oldest_pending']['uniq_key']} "
                                            f"(age {format_duration(tx['oldest_pending']['age_ms'])})"))
    if tm:
        cp = tm["checkpoint"] or {}
        head.append(("timer", f"{tm['units']['total']} TimerLog units ({tm['units']['roll']} roll, "
                              f"{tm['units']['delete']} delete), {tm['slots']} slots, {tm['pending']} pending, "
                              f"enqueue behind {_v(tm['enqueue_behind'])}, read time "
                              f"{_t(cp.get('last_read_time_ms'), local)}"))
    if doc.get("restart_preview"):
        head.insert(0, ("NOT SHUT DOWN CLEANLY", f"{doc['restart_preview']} (mqtool inspect STORE restart)"))
    con.print(_kv("Headline", head))
    fc = doc["finding_counts"]
    con.print(f"findings: {fc['error']} error(s), {fc['warning']} warning(s), {fc['info']} info")


def _queue_count(files: dict) -> str:
    """Every queue of the store, ConsumeQueue and BatchConsumeQueue (and RocksDB): the table's count."""
    total, batch = files.get("queues_total") or files["consumequeue"], files.get("batchconsumequeue") or {}
    line = f"{total['queues']} queues of {total['topics']} topics"
    return line + (f" ({batch['queues']} BatchConsumeQueue)" if batch.get("queues") else "")


def _config_source_pairs(doc: dict) -> list[tuple[str, str]]:
    """Which copy of the config was used, when the store has config in RocksDB (spec §14)."""
    src = doc.get("config_sources")
    if not src:
        return []
    said = {"json": "JSON file", "rocksdb": "RocksDB", None: "none"}
    return [("consumer offsets from", said[src["consumer_offsets"]]),
            ("topic config from", said[src["topics"]] + (f" ({src['topics_file']})" if src["topics_file"] else "")),
            *([("subscription groups from", said[src["subscription_groups"]])] if "subscription_groups" in src else [])]


def _render_compaction_and_pop(con, doc: dict, local: bool) -> None:
    """Compaction per queue and POP per group (only for stores that have them)."""
    if doc.get("compaction"):
        t = _table("Compaction (records kept vs in CommitLog)", "topic", "queue", "kept", "in CommitLog",
                   "queue offsets", "compacted to", "log files")
        for r in doc["compaction"]:
            _add(t, r["topic"], str(r["queue_id"]), str(r["records"]), _v(r["in_commitlog"]),
                 f"{_v(r['min_queue_offset'])} .. {_v(r['max_queue_offset'])}", _v(r["compacted_to"]),
                 str(r["log_files"]))
        con.print(t)
    pop = doc.get("pop")
    if pop:
        t = _table(f"POP ({pop['checkpoints']} checkpoints, {pop['orphan_acks']} acks without one)", "group",
                   "topic", "popped", "acked", "invisible", "due", "revived", "next revive")
        for r in pop["groups"]:
            _add(t, r["group"], r["topic"], str(r["popped"]), str(r["acked"]), str(r["invisible"]), str(r["due"]),
                 str(r["revived"]), _t(r["next_revive_time"], local) if r["next_revive_time"] else "-")
        con.print(t)


# ----------------------------------------------------------------------------- messages


def _flags(r: dict) -> str:
    out = []
    if r["transaction"] not in (None, "none"):
        out.append(r["transaction"])
    if r["compression"]:
        out.append(r["compression"])
    if r["magic"] == "v2":
        out.append("v2")
    return " ".join(out)


def _preview(body: str | None) -> str:
    if body is None:
        return ""
    return body if len(body) <= BODY_PREVIEW else body[: BODY_PREVIEW - 1] + "…"


def _message_table() -> Table:
    return _table(None, "offset", "stored", "topic", "q", "qoff", "tags", "keys", "uniq key", "size", "flags",
                  "crc", "body")


def render_messages(rows: Iterable[dict], local: bool, of: int | None = None) -> None:
    """Records in tables of 200 rows, so that a long scan streams; `of`: how many the source holds."""
    con = _console()
    t, n, total = _message_table(), 0, 0
    for r in rows:
        p = r["properties"]
        _add(t, str(r["physical_offset"]), _t(r["store_timestamp"], local), r["topic"], str(r["queue_id"]),
                  str(r["queue_offset"]), p.get(PROPERTY_TAGS, ""), p.get(PROPERTY_KEYS, ""), r["uniq_key"] or "",
                  str(r["total_size"]), _flags(r), "ok" if r["crc_ok"] else "BAD", _preview(r["body"]),
                  style=None if r["crc_ok"] else "red")
        n += 1
        total += 1
        if n == MESSAGE_BATCH:
            con.print(t)
            t, n = _message_table(), 0
    if n:
        con.print(t)
    con.print(f"{total} of {of} record(s) shown" if of is not None and of != total else f"{total} record(s)")


def render_message(doc: dict, local: bool) -> None:
    con = _console()
    r = doc["record"]
    times = ("born_timestamp", "store_timestamp")
    pairs = [(k, _t(v, local) + f" ({v})" if k in times else v) for k, v in r.items()
             if k not in ("properties", "body")]
    con.print(_kv(f"Record at {r['physical_offset']}", pairs))
    props = _table("Properties (stored order)", "name", "value")
    for k, v in r["properties"].items():
        _add(props, k, v)
    con.print(props)
    ch = doc["checks"]
    con.print(_kv("Checks", [("body CRC", "ok" if ch["crc_ok"] else "MISMATCH"),
                             ("computed size", f"{ch['computed_size']} ({'ok' if ch['size_ok'] else 'MISMATCH'})"),
                             ("PHYSICALOFFSET field", f"{ch['physical_offset_field']} "
                                                      f"({'ok' if ch['physical_offset_ok'] else 'MISMATCH'})"),
                             ("sysFlag", ", ".join(f"{k}={v}" for k, v in doc["sys_flag_bits"].items()))]))
    cq = doc["consume_queue"]
    con.print(_kv("ConsumeQueue", [("queue", f"{cq['topic']}/{cq['queue_id']} offset {cq['queue_offset']}"),
                                   ("unit", cq["unit"]), ("points back", cq["points_back"]),
                                   ("problem", cq.get("problem"))]))
    if doc["explain"]:
        con.print("[bold]What the broker does with it[/bold]")
        for line in doc["explain"]:
            con.print(f"  - {line}", markup=False)
    batch = doc.get("inner_batch")
    if batch is not None and batch["messages"]:
        _inner_messages(con, batch)
    elif r["body"] is not None:
        note = f" (INNER_BATCH, {batch['error']})" if batch is not None else ""
        con.print(f"[bold]Body[/bold]{escape(note)}")
        con.print(_printable(r["body"]), markup=False)


def _inner_messages(con: Console, batch: dict) -> None:
    """An INNER_BATCH record's messages, one row each, instead of the batch encoding's bytes."""
    count = f"{len(batch['messages'])} message(s)" + ("" if batch["count_matches"] else
                                                     f", but INNER_NUM says {batch['inner_num']}")
    t = _table(f"Inner messages (INNER_BATCH body, {count})", "qoff", "flag", "tags", "keys", "uniq key",
               "other properties", "size", "body")
    for m in batch["messages"]:
        p = m["properties"]
        shown = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        other = " ".join(f"{k}={v}" for k, v in p.items() if k not in shown)
        _add(t, str(m["queue_offset"]), str(m["flag"]), p.get(PROPERTY_TAGS, ""), p.get(PROPERTY_KEYS, ""),
             p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""), other, str(m["body_length"]),
             _printable(_preview(m["body"])), style=None if batch["count_matches"] else "yellow")
    con.print(t)


def _printable(text: str | None) -> str:
    """Text with control characters (but newline and tab) shown as \\xNN: a binary body printed as text
    must not drive the terminal."""
    if text is None:
        return ""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# ----------------------------------------------------------------------------- queue


def render_queue(summary: dict, topic: str, queue_id: int, rows: Iterable[dict], local: bool) -> None:
    con = _console()
    kind = "BatchConsumeQueue" if summary.get("batch") else "ConsumeQueue"
    if summary.get("rocksdb"):
        kind = "RocksDB ConsumeQueue"
    con.print(f"[bold]{kind} {escape(topic)}/{queue_id}[/bold]  min {_v(summary.get('min_offset'))}  "
              f"max {_v(summary.get('max_offset'))}  files {_v(summary.get('files'))}")
    t = _table(None, "qoff", "commitlog offset", "size", "tagsCode", "stored", "keys", "uniq key", "match")
    n = 0
    for r in rows:
        ok = r["match"]
        qoff = str(r["cq_queue_offset"]) + (f" +{r['cq_batch_size']}" if "cq_batch_size" in r else "")
        _add(t, qoff, str(r["cq_commitlog_offset"]), str(r["cq_size"]), str(r["cq_tags_code"]),
                  _t(r["store_timestamp"], local), (r["properties"] or {}).get(PROPERTY_KEYS, ""), r["uniq_key"] or "",
                  "ok" if ok else "; ".join(r["problems"]), style=None if ok else "red")
        n += 1
    con.print(t)
    con.print(f"{n} unit(s)")


# ----------------------------------------------------------------------------- delay


def render_delay(doc: dict, local: bool) -> None:
    con = _console()
    f = doc["offset_file"]
    src = {"store data": "; levels implied by the store's units (no broker.conf)", "defaults": "; default levels"}
    con.print(f"[bold]Delay levels[/bold] (now {_t(doc['now_ms'], local)}; delayOffset.json "
              f"{'present' if f['present'] else 'absent'}{', .bak present' if f['bak_present'] else ''}"
              f"{src.get(doc['delay_levels']['source'], '')})")
    rows = [r for r in doc["levels"] if r["max_offset"] is not None or r["offset_stored"] or r["backlog"]]
    biggest = max((r["backlog"] for r in rows), default=0)
    t = _table(None, "level", "delay", "queue", "stored", "min", "max", "starts at", "backlog", "",
               "head deliver", "overdue")
    for r in rows:
        stored = _v(r["offset"]) if r["offset_stored"] else f"({r['offset']})"
        start = str(r["corrected_offset"])
        if r["correction"]:
            start = f"{r['correction']['from']} -> {r['correction']['to']}"
        overdue = "-"
        if r["overdue_ms"] is not None:
            overdue = format_duration(r["overdue_ms"]) if r["overdue_ms"] > 0 else \
                f"due in {format_duration(-r['overdue_ms'])}"
        elif r["never_delivered"]:
            overdue = "never delivered"
        delay = format_duration(r["delay_ms"]) if r["delay_ms"] is not None else "not configured"
        head = _t(r["head_deliver_timestamp"], local) if r["configured"] else "-"
        _add(t, str(r["level"]), delay, str(r["queue_id"]), stored, _v(r["min_offset"]), _v(r["max_offset"]),
                  start, str(r["backlog"]), bar(r["backlog"], biggest, 20), head,
                  overdue, style="red" if r["correction"] or r["never_delivered"] else None)
    con.print(t)
    if not rows:
        con.print("no delay-level queue and no stored offset")
    tot = doc["totals"]
    never = (f"{tot['never_delivered']} never delivered (level(s) {', '.join(map(str, tot['never_levels']))} not "
             "in messageDelayLevel); " if tot["never_delivered"] else "")
    con.print(f"backlog {tot['backlog']}; {never}{tot['overdue_levels']} level(s) overdue; "
              f"{tot['corrections']} offset(s) correctDelayOffset would change.  (stored offset in parentheses: "
              "absent from delayOffset.json, read as 0)")
    h = _histogram("Pending delay messages by deliver time", doc["histogram"], local)
    if h:
        con.print(h)


# ----------------------------------------------------------------------------- timer


def render_timer(doc: dict, local: bool) -> None:
    con = _console()
    cp = doc["checkpoint"]
    if cp is None:
        con.print("no config/timercheck (no timer service state)")
    else:
        con.print(_kv("Timer checkpoint (config/timercheck)", [
            ("lastReadTimeMs", f"{cp['last_read_time_ms']} ({_t(cp['last_read_time_ms'], local)}); "
                               f"dequeue lag {format_duration(doc['dequeue_lag_ms'])}"),
            ("lastTimerLogFlushPos", f"{cp['last_timer_log_flush_pos']} (TimerLog end "
                                     f"{_v(doc['timerlog']['end_offset'])})"),
            ("lastTimerQueueOffset", f"{cp['last_timer_queue_offset']} (timer queue max "
                                     f"{_v(doc['timer_queue']['max_offset'])}, enqueue behind "
                                     f"{_v(doc['timer_queue']['enqueue_behind'])})"),
            ("masterTimerQueueOffset", cp["master_timer_queue_offset"]),
            ("dataVersion", f"counter {cp['counter']}, timestamp {cp['timestamp']}"),
        ]))
    u = doc["units"]
    con.print(f"TimerLog units: {u['total']} ({u['normal']} normal, {u['roll']} roll, {u['delete']} delete)")
    if doc["slots"]:
        t = _table("Written wheel slots", "slot time", "time ms", "num", "first pos", "last pos", "chain", "read")
        for s in doc["slots"]:
            _add(t, _t(s["time_ms"], local), str(s["time_ms"]), str(s["num"]), str(s["first_pos"]),
                      str(s["last_pos"]), f"{s['chain_length']} {'ok' if s['chain_ok'] else 'BROKEN'}",
                      "yes" if s["read"] else "no", style=None if s["chain_ok"] else "red")
        con.print(t)
    p = doc["pending"]
    con.print(f"pending deliveries: {p['count']} ({p['overdue']} overdue), "
              f"{_t(p['earliest_ms'], local)} .. {_t(p['latest_ms'], local)}")
    h = _histogram("Pending timer deliveries by time", p["histogram"], local)
    if h:
        con.print(h)
    _topic_metrics(con, "config/timermetrics (TimerMetrics) vs TimerLog", doc.get("metrics"), "pending in TimerLog",
                   "pending_in_timerlog", local)
    if doc["missing_records"]:
        t = _table("TimerLog units without their CommitLog record", "pos", "kind", "offset_py", "size_py", "problem")
        for m in doc["missing_records"]:
            _add(t, str(m["pos"]), m["kind"], str(m["offset_py"]), str(m["size_py"]), m["problem"], style="red")
        con.print(t)
    ch = doc["chain"]
    if ch is not None:
        if ch["slot"] is None:
            con.print(f"slot {_t(ch['time_ms'], local)}: empty ({ch['broken'] or 'no unit in it'})")
        else:
            s = ch["slot"]
            t = _table(f"Slot {_t(ch['time_ms'], local)}: num {s['num']}, first {s['first_pos']}, last "
                       f"{s['last_pos']} (dequeue order)", "pos", "prev", "kind", "state", "uniq key", "real topic",
                       PROPERTY_TIMER_OUT_MS, "cancels")
            for x in ch["units"]:
                _add(t, str(x["pos"]), str(x["prev_pos"]), x["kind"], x["state"], x["uniq_key"] or "-",
                          x["real_topic"] or "-", _t(x["timer_out_ms"], local), x["del_uniq_key"] or "")
            con.print(t)
            if ch["broken"]:
                con.print(f"chain broken: {ch['broken']}", style="red", markup=False)


# ----------------------------------------------------------------------------- transactions


def _topic_metrics(con: Console, title: str, m: dict | None, found_label: str, found_key: str, local: bool) -> None:
    """A metrics file's per-topic counts next to what the store holds (timer and transactions views)."""
    if m is None:
        return
    t = _table(title + ("" if m["agrees"] else " [yellow]differ[/yellow]"), "topic", "metric count", found_label,
               "last change")
    for r in m["topics"]:
        _add(t, escape(r["topic"]), str(r["count"]), str(r[found_key]), _t(r["time_stamp"], local),
             style=None if r["count"] == r[found_key] else "yellow")
    con.print(t)


def render_transactions(doc: dict, local: bool) -> None:
    con = _console()
    s = doc["settings"]
    con.print(f"[bold]Transactions[/bold] (now {_t(doc['now_ms'], local)}; transactionTimeOut "
              f"{s['transaction_timeout_ms']} ms, transactionCheckMax {s['transaction_check_max']}, "
              f"transactionCheckInterval {s['transaction_check_interval_ms']} ms)")
    t = _table(None, "qoff", "uniq key", "keys", "real topic", "group", "state", "checks", "age", "immunity",
               "copies", "next check", "discard")
    colours = {"committed": "green", "rolled_back": "yellow", "discarded": "magenta", "pending": "bold"}
    for h in doc["half_messages"]:
        pr = h["prediction"] or {}
        real = f"{h['real_topic']}/{_v(h['real_queue_id'])}"
        _add(t, str(h["queue_offset"]), h["uniq_key"] or "-", " ".join(h["keys"]), real, h["producer_group"] or "-",
                  h["state"], str(h["check_times"]), format_duration(h["age_ms"]),
                  format_duration(h["immunity_ms"]) + (" (property)" if h["immunity_property"] else ""),
                  ",".join(str(c["queue_offset"]) for c in h["copies"]) or "-",
                  _t(pr.get("next_check_ms"), local), _t(pr.get("discard_ms"), local),
                  style=colours.get(h["state"]))
    con.print(t)
    c = doc["counts"]
    con.print(f"committed {c['committed']}, rolled back {c['rolled_back']}, pending {c['pending']}, "
              f"discarded {c['discarded']}  (predictions assume the check service starts at now)")
    for h in doc["half_messages"]:
        for note in h["notes"]:
            con.print(f"  {h['uniq_key']}: {note}", markup=False)
    if doc["check_progress"]:
        t = _table("Check progress (CID_RMQ_SYS_TRANS)", "half queue", "half offset", "half max", "op offset",
                   "op max")
        for p in doc["check_progress"]:
            _add(t, str(p["queue_id"]), _v(p["half_offset"]), _v(p["half_max_offset"]), _v(p["op_offset"]),
                      _v(p["op_max_offset"]))
        con.print(t)
    _topic_metrics(con, "config/transactionMetrics (TransactionMetrics) vs half topic", doc.get("metrics"),
                   "pending halves", "pending_halves", local)
    if doc["discarded"]:
        t = _table("TRANS_CHECK_MAX_TIME_TOPIC (discarded halves)", "qoff", "offset", "stored", "uniq key",
                   "real topic", "group", "checks")
        for d in doc["discarded"]:
            _add(t, str(d["queue_offset"]), str(d["physical_offset"]), _t(d["store_timestamp"], local),
                      d["uniq_key"] or "-", f"{d['real_topic']}/{_v(d['real_queue_id'])}", d["producer_group"] or "-",
                      _v(d["check_times"]))
        con.print(t)


# ----------------------------------------------------------------------------- retry


def render_retry(doc: dict, local: bool) -> None:
    """Per consumer group: the retry backlog per delay level, the %RETRY% queues, the DLQ messages."""
    con = _console()
    con.print(f"[bold]Retry and DLQ[/bold] per consumer group (now {_t(doc['now_ms'], local)})")
    if not doc["groups"]:
        con.print("no %RETRY% or %DLQ% topic, no retry parked in SCHEDULE_TOPIC_XXXX")
    for g in doc["groups"]:
        b, dlq = g["backlog"], g["dlq"]
        con.print(f"\n[bold]{escape(g['group'])}[/bold]: {b['count']} retry(ies) parked"
                  + (f", next due {_t(b['next_due_ms'], local)}" if b["next_due_ms"] is not None else "")
                  + f"; {dlq['count']} dead-lettered in {escape(g['dlq_topic'])}")
        st = g.get("settings")
        con.print("  settings: " + ("none in subscriptionGroup.json (defaults: retryQueueNums 1, retryMaxTimes 16)"
                                    if st is None else
                                    f"retryQueueNums {st['retry_queue_nums']}, retryMaxTimes {st['retry_max_times']}, "
                                    f"consumeEnable {st['consume_enable']}, consumeBroadcastEnable "
                                    f"{st['consume_broadcast_enable']}, consumeMessageOrderly "
                                    f"{st['consume_message_orderly']}, groupSysFlag {st['group_sys_flag']}, "
                                    f"groupRetryPolicy {st['group_retry_policy'] or '-'}"), markup=False)
        if b["levels"]:
            t = _table(None, "level", "delay", "schedule queue", "parked", "next due", "last due", "overdue",
                       "head (uniq key, reconsume)")
            for r in b["levels"]:
                h = r["head"]
                never = r["delay_ms"] is None  # a level missing from messageDelayLevel: never delivered
                _add(t, str(r["level"]), "not configured" if never else format_duration(r["delay_ms"]),
                     str(r["queue_id"]), str(r["count"]), "never" if never else _t(r["next_due_ms"], local),
                     _t(r["last_due_ms"], local),
                     format_duration(r["overdue_ms"]) if r["overdue_ms"] else "-",
                     f"{_v(h['uniq_key'])} #{h['reconsume_times']}")
            con.print(t)
        if g["retry_queues"]:
            t = _table(None, "retry queue", "min", "max", "committed", "to consume")
            for q in g["retry_queues"]:
                _add(t, f"{g['retry_topic']}/{q['queue_id']}", _v(q["min_offset"]), _v(q["max_offset"]),
                     _v(q["consumer_offset"]), _v(q["lag"]))
            con.print(t)
        if dlq["messages"]:
            shown = len(dlq["messages"])
            t = _table(f"{g['dlq_topic']}" + (f" (newest {shown} of {dlq['count']})" if shown < dlq["count"] else ""),
                       "stored", "place", "offset", "uniq key", "keys", "origin topic", PROPERTY_ORIGIN_MESSAGE_ID,
                       "reconsume")
            for m in dlq["messages"]:
                _add(t, _t(m["store_timestamp"], local), f"{m['queue_id']}@{m['queue_offset']}",
                     str(m["physical_offset"]), _v(m["uniq_key"]), " ".join(m["keys"]) or "-", _v(m["origin_topic"]),
                     _v(m["origin_message_id"]), str(m["reconsume_times"]))
            con.print(t)
    tot = doc["totals"]
    con.print(f"\n{tot['groups']} group(s): {tot['retry_backlog']} retry(ies) parked, {tot['retry_lag']} delivered "
              f"to %RETRY% not yet consumed, {tot['dlq_messages']} in DLQs")


def render_consumers(doc: dict, local: bool) -> None:
    """Per consumer group, mqadmin consumerProgress's table: each queue's offsets, lag and oldest unconsumed;
    for a fleet one section per store, then each group's lag over the broker groups."""
    con = _console()
    con.print(f"[bold]Consumer progress[/bold] (now {_t(doc['now_ms'], local)})")
    if "stores" not in doc:
        _consumer_store(con, doc, local)
        _consumer_totals(con, doc["totals"])
        return
    for s in doc["stores"]:
        counted = "" if s["counted"] else "; a replica: not counted in the cluster's totals"
        con.print(Text.assemble(("\n== " + s["store"], "bold"), f" (broker group {s['broker_group']}, "
                                f"{s['role'] or 'role unknown'}{counted})"))
        _consumer_store(con, s, local)
        vs = s["vs_master"]
        if vs is not None and (vs["rewind"] or vs["ahead"] or vs["missing"]):
            behind = sum(1 for q in vs["queues"] if (q["rewind"] or 0) > 0)
            con.print(f"committed offsets vs {vs['master']}: {vs['rewind']} message(s) behind on {behind} "
                      f"queue(s), consumed again if this store were promoted now"
                      + (f"; {vs['ahead']} ahead of the master" if vs["ahead"] else "")
                      + (f"; {vs['missing']} queue offset(s) missing" if vs["missing"] else ""), style="yellow",
                      markup=False)
    t = _table("\nCluster: each group over the broker groups (masters)", "group", "lag", "expired", "queues",
               "oldest unconsumed", "age", "brokers")
    for g in doc["groups"]:
        _add(t, g["group"] + (" (system)" if g["system"] else ""), str(g["lag"]), str(g["expired"]), str(g["queues"]),
             _t(g["oldest_unconsumed_ms"], local), format_duration(g["age_ms"]) if g["age_ms"] is not None else "-",
             ", ".join(g["brokers"]), style="dim" if g["system"] else None)
    con.print(t)
    tot = doc["totals"]
    con.print(f"{tot['stores']} store(s), {tot['counted_stores']} counted; ", end="")
    _consumer_totals(con, tot)


def _consumer_totals(con, tot: dict) -> None:
    con.print(f"{tot['groups']} group(s): lag {tot['lag']}, {tot['expired']} expired unconsumed; "
              f"{tot['system_groups']} system group(s): lag {tot['system_lag']}")


def _consumer_store(con, doc: dict, local: bool) -> None:
    """One store's groups: a headline per group, then its queues."""
    source = {"json": "config/consumerOffset.json", "rocksdb": "config/consumerOffsets (RocksDB)"}
    con.print(f"offsets from {source[doc['offsets_source']]}" if doc["offsets_source"] in source else
              "no consumer offsets stored (neither config/consumerOffset.json nor its RocksDB copy)", markup=False)
    if not doc["groups"]:
        con.print("no consumer group has committed an offset" + (f" on {doc.get('topic')}" if doc.get("topic") else ""),
                  markup=False)
    by_group: dict[str, list[dict]] = {}
    for r in doc["queues"]:
        by_group.setdefault(r["group"], []).append(r)
    for g in doc["groups"]:
        age = f", oldest unconsumed {_t(g['oldest_unconsumed_ms'], local)} ({format_duration(g['age_ms'])} old)" \
            if g["oldest_unconsumed_ms"] is not None else ""
        expired = f", {g['expired']} expired unconsumed" if g["expired"] else ""
        con.print(Text.assemble(("\n" + g["group"], "bold"), (" (system)" if g["system"] else ""),
                                f": lag {g['lag']} on {g['queues']} queue(s) of {len(g['topics'])} topic(s)"
                                f"{expired}{age}"))
        rows = by_group.get(g["group"], [])
        if not rows:
            con.print("  no committed offset on any topic's queue")
            continue
        t = _table(None, "topic", "queue", "committed", "min", "max", "lag", "last consumed", "oldest unconsumed",
                   "age")
        for r in rows:
            _add(t, r["topic"], str(r["queue_id"]), _v(r["committed_offset"]), str(r["min_offset"]),
                 str(r["max_offset"]), str(r["lag"]), _t(r["last_consumed_ms"], local),
                 _t(r["oldest_unconsumed_ms"], local), format_duration(r["age_ms"]) if r["age_ms"] is not None else "-",
                 style="dim" if r["system"] else None)
        con.print(t)


# ----------------------------------------------------------------------------- single-file dumps


def render_dump(doc: dict, local: bool) -> None:
    con = _console()
    con.print(f"[bold]{doc['kind']}[/bold] {escape(doc['file'])} ({doc['size']} bytes)")
    kind = doc["kind"]
    if kind == "commitlog":
        s = doc["scan"]
        con.print(f"start offset {s['start_offset']}: {s['records']} record(s), {s['valid_bytes']} valid bytes, "
                  f"stopped at {s['stop_reason']}, {s['trailing_bytes']} trailing byte(s)")
        render_messages(doc["records"], local, of=s["records"])
    elif kind == "consumequeue":
        t = _table(f"{escape(doc['topic'])}/{doc['queue_id']}: {doc['unit_count']} unit(s)", "queue offset",
                   "commitlog offset", "size", "tagsCode")
        for u in doc["units"]:
            _add(t, str(u["queue_offset"]), str(u["commitlog_offset"]), str(u["size"]), str(u["tags_code"]))
        con.print(t)
    elif kind == "timerlog":
        t = _table(f"{doc['unit_count']} unit(s), end {doc['end_offset']}", "pos", "prev", "magic", "kind",
                   "write time", "delayed time", "offset_py", "size_py")
        for u in doc["units"]:
            _add(t, str(u["pos"]), str(u["prev_pos"]), str(u["magic"]), u["kind"], _t(u["curr_write_time_ms"], local),
                      _t(u["delayed_time_ms"], local), str(u["offset_py"]), str(u["size_py"]))
        con.print(t)
    elif kind == "timerwheel":
        t = _table(f"{doc['written_slots']} written slot(s) of {doc['slot_count']}", "index", "time", "num",
                   "first pos", "last pos")
        for s in doc["slots"]:
            _add(t, str(s["index"]), _t(s["time_ms"], local), str(s["num"]), str(s["first_pos"]), str(s["last_pos"]))
        con.print(t)
    elif kind == "index":
        _index_dump(con, doc, local)
    elif kind == "config" and "counts" in doc:
        _metrics_dump(con, doc, local)
    elif kind in ("timercheck", "checkpoint"):
        values = doc[kind]
        con.print(_kv(kind, [(k, f"{v} ({_t(v, local)})" if k.endswith(("time_ms", "timestamp")) and v > 0 else v)
                             for k, v in values.items()]))
    else:
        import json

        shown = {k: v for k, v in doc.items() if k not in ("version", "view", "kind", "file", "size", "findings")}
        con.print(json.dumps(shown, indent=2, ensure_ascii=False), markup=False)


def _metrics_dump(con: Console, doc: dict, local: bool) -> None:
    """config/timermetrics or config/transactionMetrics: one row per topic."""
    dv = doc["data_version"]
    if dv is not None:
        con.print(f"dataVersion counter {dv['counter']}, timestamp {dv['timestamp']} ({_t(dv['timestamp'], local)})")
    t = _table(f"{doc['member']}: {len(doc['counts'])} topic(s)", "topic", "count", "last change")
    for c in doc["counts"]:
        _add(t, escape(c["topic"]), str(c["count"]), _t(c["time_stamp"], local))
    con.print(t)


def _index_header(h: dict, local: bool) -> list[tuple[str, object]]:
    return [("beginTimestamp", f"{h['begin_timestamp']} ({_t(h['begin_timestamp'], local)})"),
            ("endTimestamp", f"{h['end_timestamp']} ({_t(h['end_timestamp'], local)})"),
            ("beginPhyOffset", h["begin_phy_offset"]), ("endPhyOffset", h["end_phy_offset"]),
            ("hashSlotCount", h["hash_slot_count"]), ("indexCount", h["index_count"])]


def _index_dump(con: Console, doc: dict, local: bool) -> None:
    st = doc["stats"]
    con.print(_kv("IndexFile header", [*_index_header(doc["header"], local),
                                       ("geometry", f"{st['max_hash_slot_num']} slots, {st['max_index_num']} entries "
                                                    f"(from {st['geometry_from']})"),
                                       ("fill", f"{st['entries']} entries ({st['fill_ratio']:.2%}), "
                                                f"{st['slots_used']} slots used, longest chain "
                                                f"{st['longest_chain']}")]))
    t = _table(f"{len(doc['entries'])} of {doc['entry_count']} entries", "entry", "keyHash", "slot", "phyOffset",
               "timeDiff", "time", "prevIndex")
    for e in doc["entries"]:
        _add(t, str(e["entry"]), str(e["key_hash"]), str(e["slot"]), str(e["phy_offset"]), str(e["time_diff"]),
             _t(e["timestamp"], local), str(e["prev_index"]))
    con.print(t)


# ----------------------------------------------------------------------------- index


def render_index(doc: dict, local: bool) -> None:
    """The IndexFile rows (`inspect STORE index`) or a key lookup (`--topic T --key K`)."""
    if "matches" in doc:
        _index_lookup(doc, local)
        return
    con = _console()
    t = _table(f"{doc['totals']['files']} IndexFile(s), {doc['totals']['entries']} entries", "file", "begin",
               "end", "begin phy", "end phy", "slots used", "entries", "fill", "longest chain",
               "outside CommitLog", "findings")
    for r in doc["files"]:
        _add(t, r["file"], _t(r["begin_timestamp"], local), _t(r["end_timestamp"], local), str(r["begin_phy_offset"]),
             str(r["end_phy_offset"]), f"{r['slots_used']}/{r['max_hash_slot_num']}",
             f"{r['entries']}/{r['max_index_num'] - 1}", f"{r['fill_ratio']:.1%}", str(r["longest_chain"]),
             _v(r["entries_outside_commitlog"]), str(len(r["findings"])),
             style="red" if any(f["severity"] == "error" for f in r["findings"]) else None)
    con.print(t)
    if not doc["files"]:
        con.print("no IndexFile in this store")


def _index_lookup(doc: dict, local: bool) -> None:
    con = _console()
    window = "" if doc["begin"] == 0 and doc["end"] >= (1 << 63) - 1 else \
        f" between {_t(doc['begin'], local)} and {_t(doc['end'], local)}"
    t = _table(f"{escape(doc['index_key'])} (keyHash {doc['key_hash']}){window}: {len(doc['matches'])} "
               f"record(s)", "phy offset", "stored", "topic", "queue", "queue offset", "matched by", PROPERTY_KEYS,
               "index file")
    for m in doc["matches"]:
        _add(t, str(m["physical_offset"]), _t(m["timestamp"], local), m["topic"], str(m["queue_id"]),
             str(m["queue_offset"]), m["matched_by"], _v(m["keys"]), m["file"])
    con.print(t)
    for r in doc["rejected"]:
        con.print(f"entry {r['entry']} of {r['file']} -> {r['physical_offset']}: {r['reason']}", markup=False,
                  style="dim")
    con.print(f"{len(doc['files'])} file(s) searched, {doc['hash_matches']} chain entries with the key's hash; "
              f"the broker itself (maxMsgsNumBatch cap) returns {len(doc['broker_phy_offsets'])} offset(s)",
              markup=False)


# ----------------------------------------------------------------------------- spark-audit


def render_audit_summary(report: dict) -> None:
    """The `spark-audit` report: engine and CommitLog lines, findings per check, then the findings."""
    s = report["summary"]
    con = _console()
    e = report["engine"]
    con.print(f"[bold]spark-audit[/bold] {report['store']}  (engine: {e['master']}, {e['partitions']} partitions, "
              f"{e['executors']} executor(s))")
    cl = s["commitlog"]
    con.print(f"CommitLog: {cl['files']} file(s), {cl['records']} records, offsets {cl['min_offset']} .. "
              f"{cl['max_offset']}, recovery ends at {cl['recovery_end']}")
    t = _table("findings per check", "check", "error", "warning", "info")
    style = {"error": "red", "warning": "yellow"}
    for check, n in s["checks"].items():
        worst = next((k for k in ("error", "warning") if n[k]), None)
        t.add_row(check, str(n["error"]), str(n["warning"]), str(n["info"]), style=style.get(worst))
    con.print(t)
    render_findings(report["findings"])


def render_fleet_audit_summary(report: dict) -> None:
    """`spark-audit FLEET`: a row per store, the totals, each replica pair, then every finding (a store's
    named by the store)."""
    con = _console()
    e, tot = report["engine"], report["totals"]
    con.print(Text.assemble(("spark-audit", "bold"), f" fleet {report['fleet']}: {tot['stores']} store(s) in "
                            f"{tot['broker_groups']} broker group(s)  (engine: {e['master']}, {e['partitions']} "
                            f"partitions, {e['executors']} executor(s))"))
    t = _table(None, "store", "dir", "role", "records", "offsets", "recovery end", "err/warn/info")
    for st in report["stores"]:
        n = st["totals"]["finding_counts"]
        cl = st["summary"]["commitlog"] if st["summary"] else None
        _add(t, st["name"], st["dir"], _v(st["role"]), st["totals"]["records"],
             f"{cl['min_offset']} .. {cl['max_offset']}" if cl else "-", _v(cl and cl["recovery_end"]),
             f"{n['error']}/{n['warning']}/{n['info']}", style="red" if n["error"] else None)
    n = tot["finding_counts"]
    _add(t, "total", "", "", tot["records"], "", "", f"{n['error']}/{n['warning']}/{n['info']}")
    con.print(t)
    for g in report["cross_store"]["replicas"]["groups"]:
        for p in g.get("pairs", []):
            lost, c = p["promotion_loses"], p["common"]
            con.print(f"{p['slave']} vs master {p['master']}: behind {p['behind']['bytes']} bytes, "
                      f"{p['behind']['records']} record(s); first difference {_v(c['first_difference'])}; "
                      f"promotion now loses {lost['records']} record(s), {lost['bytes']} bytes", markup=False)
    keys = report["cross_store"]["uniq_keys_on_two_groups"]
    con.print(f"UNIQ_KEYs on two broker groups: {tot['uniq_keys_on_two_groups']}"
              + (f" ({', '.join(k['uniq_key'] for k in keys[:5])}{', ...' if len(keys) > 5 else ''})" if keys else ""),
              markup=False)
    named = [{**f, "file": f"{st['name']}: {f['file']}"} for st in report["stores"] for f in st["findings"]]
    render_findings(named + report["findings"])


@contextmanager
def audit_progress() -> Iterator[Callable[[int, int], None] | None]:
    """`spark-audit --local`: a tasks-done bar on stderr when it is a TTY, else None."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), transient=True,
                  console=_console(stderr=True)) as p:
        task = p.add_task("tasks", total=None)
        yield lambda done, total: p.update(task, completed=done, total=total)


@contextmanager
def status(text: str) -> Iterator[Callable[[str], None]]:
    """A spinner line on stderr (a TTY only); yields a function that changes its text."""
    if not sys.stderr.isatty():
        yield lambda _text: None
        return
    with _console(stderr=True).status(text) as s:
        yield lambda new: s.update(new)


# ----------------------------------------------------------------------------- simulate


def render_simulate_summary(summary: dict) -> None:
    """The summary table of a run, then the delivery timeline as a text histogram."""
    con = _Console(soft_wrap=True)
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
    con.print(t)
    peak = max(summary["timeline"]) or 1
    con.print("delivery timeline (20 buckets from start to until):")
    for i, n in enumerate(summary["timeline"]):
        con.print(f"  {i:2d} {'#' * (n * 40 // peak)} {n}", markup=False, highlight=False)


# ----------------------------------------------------------------------------- trace


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
            _add(table, _t(s.time, local), stage, s.place or "-", _v(s.physical_offset), s.detail)
        out.print(table)
        colour = {"delivered": "green", "committed": "green", "waiting": "cyan", "pending": "cyan"}.get(
            t.verdict.state, "yellow")
        out.print(t.verdict.text, style=f"bold {colour}", markup=False)  # the text starts with the state
        out.print(f"(as of {format_time(t.as_of, local)})", style="dim")
        for note in t.notes:
            out.print(f"note: {note}", style="dim", markup=False)
        if i + 1 < len(traces):
            out.print()


def render_fleet_trace(result, local: bool) -> None:
    """`trace FLEET`: each store's timelines under its name, then the UNIQ_KEYs on two broker groups."""
    out = _console()
    for s in result.stores:
        if not s.traces:
            continue
        m = s.member
        head = f"== {m.name} (broker group {m.group}, {m.identity.role or 'role unknown'}): "
        out.print(Text.assemble((head, "bold"), f"{len(s.traces)} message(s), lookup: {s.lookup}"))
        render_traces(s.traces, local)
        out.print()
    absent = [s.member.name for s in result.stores if not s.traces and s.lookup is not None]
    if absent:
        out.print(f"not on {len(absent)} store(s): {', '.join(absent)}", markup=False)
    for s in result.stores:
        if s.lookup is None:
            out.print(f"{s.member.name}: {'; '.join(s.notes)}", style="yellow", markup=False)
    for c in result.cross_broker:
        out.print(f"UNIQ_KEY {c['uniq_key']} is stored on {len(c['broker_groups'])} broker groups: a producer retry "
                  "that went to another broker (consumers get it twice)", style="bold red", markup=False)
        t = _table(None, "store", "broker group", "place", "offset", "born", "stored")
        for x in c["copies"]:
            _add(t, x["store"], x["broker_group"], f"{x['topic']}/{x['queue_id']}@{x['queue_offset']}",
                 str(x["physical_offset"]), _t(x["born_timestamp"], local), _t(x["store_timestamp"], local))
        out.print(t)
    if result.key_broker_groups and not result.cross_broker:
        out.print(f"--key {result.query.key} is on {len(result.key_broker_groups)} broker groups "
                  f"({', '.join(result.key_broker_groups)}) under different UNIQ_KEYs: distinct messages",
                  markup=False)
    out.print(result.verdict(), style="bold", markup=False)


# ----------------------------------------------------------------------------- restart preview


def render_restart(doc: dict, local: bool) -> None:
    """What a start at `at_ms` does: the headline first, then recovery, duplicates, late, transactions, replay."""
    con = _console()
    rec = doc["recovery"]
    con.print(f"[bold]Restart preview[/bold]: broker started at {_t(doc['at_ms'], local)}, replay for "
              f"{format_duration(doc['for_ms'])}")
    if doc["headline"]:
        con.print(f"NOT shut down cleanly; {doc['headline']}", style="bold red", markup=False)
    else:
        con.print("clean shutdown: normal recovery", style="bold green")
    con.print(_kv("Recovery", _recovery_pairs(rec, local)))
    _recovery_cuts(con, rec)
    _restart_duplicates(con, doc, local)
    _restart_late(con, doc["late"], local)
    _restart_transactions(con, doc, local)
    if doc["replay"] is not None:
        _restart_replay(con, doc["replay"], local)


def _recovery_pairs(rec: dict, local: bool) -> list[tuple[str, object]]:
    sd, cp, cl = rec["shutdown"], rec["checkpoint"] or {}, rec["commitlog"]
    pairs: list[tuple[str, object]] = [
        ("shutdown", "clean (no abort file)" if sd["clean"]
         else f"NOT clean: abort file present (pid {sd['abort_pid']})"),
        ("checkpoint", f"physic {_t(cp.get('physic_msg_timestamp') or None, local)}, logics "
                       f"{_t(cp.get('logics_msg_timestamp') or None, local)}, index "
                       f"{_t(cp.get('index_msg_timestamp') or None, local)}" if cp else "absent"),
    ]
    if cl is None:
        return [*pairs, ("CommitLog", "no files")]
    pairs += [
        ("CommitLog recovery", f"{'recoverNormally' if cl['mode'] == 'normal' else 'recoverAbnormally'}, "
                               f"CRC check {'on' if cl['check_crc'] else 'off'} (checkCRCOnRecover)"),
        ("re-checked from", f"file {cl['check_from_file']} of {cl['files']}"
         + (f" (first record not after {_t(cl['min_timestamp'], local)})" if cl["min_timestamp"] else "")),
        ("valid data ends", f"{cl['end_offset']} in {cl['stop_file']}: {cl['stop_reason']}"),
        ("dropped", f"{cl['dropped_bytes']} byte(s) up to the scan end {cl['scan_end_offset']}"
         if cl["dropped_bytes"] else "nothing"),
    ]
    if cl["deleted_files"]:
        pairs.append(("files deleted", ", ".join(cl["deleted_files"])))
    pairs += [("REFUSES TO START", r) for r in cl["load_refused"]]
    tl = rec["timerlog"]
    if tl is not None:
        pairs.append(("timer enqueue resumes", f"queue offset {tl['enqueue_queue_offset']} "
                                               f"({_v(tl['timer_queue_max_offset'])} units in the timer queue "
                                               "after recovery)"))
    idx = rec["index"]
    pairs.append(("index files", f"{len(idx['destroyed'])} of {idx['files']} destroyed" if idx["files"] else "none"))
    return pairs


def _recovery_cuts(con: Console, rec: dict) -> None:
    cuts = _table("Cut by recovery", "what", "where", "from", "count", "CommitLog offsets")
    for t in rec["consume_queues"]["truncated"]:
        _add(cuts, "ConsumeQueue units", f"{t['topic']}/{t['queue_id']}", f"queue offset {t['from_queue_offset']}",
             str(t["units"]), ", ".join(map(str, t["commitlog_offsets"])), style="yellow")
    tl = rec["timerlog"]
    if tl is not None:
        if tl["truncated_units"]:
            _add(cuts, "TimerLog units", "timerlog", f"position {tl['end_offset']}", str(len(tl["truncated_units"])),
                 "-", style="yellow")
        for d in tl["dangling_units"]:
            _add(cuts, "TimerLog unit KEPT, dangling", f"timerlog @{d['pos']}", f"slot {d['delayed_time_ms']}", "1",
                 f"{d['offset_py']} (past the end: reads what is written there next)", style="red")
    for name in rec["index"]["destroyed"]:
        _add(cuts, "index file", name, "-", "1", "-")
    if cuts.row_count:
        con.print(cuts)


def _restart_duplicates(con: Console, doc: dict, local: bool) -> None:
    dups = doc["duplicates"]
    if not dups:
        con.print("Duplicates: none (no message already on its topic is delivered again)", style="green")
        return
    t = _table(f"Duplicates: {len(dups)} message(s) delivered again", "kind", "topic/queue", "keys", "uniq key",
               "delivered", "again", "why")
    t.columns[-1].min_width, t.columns[-1].max_width = 40, 72
    for d in dups:
        _add(t, d["kind"], f"{d['topic']}/{_v(d['queue_id'])}", " ".join(d["keys"]), d["uniq_key"] or "-",
             (f"{_t(d['delivered_at_ms'], local)} " if d["delivered_at_ms"] is not None else "")
             + f"@{d['delivered_offset']}", _t(d["again_at_ms"], local), d["reason"],
             style="red")
    con.print(t)


def _restart_late(con: Console, late: dict, local: bool) -> None:
    levels = late["delay_levels"]
    if levels:
        never = f", {late['never_delivered']} never delivered" if late["never_delivered"] else ""
        t = _table(f"Delay levels with a backlog ({late['overdue']} overdue in all, not counting messages "
                   f"delivered before{never})", "level", "queue", "persisted",
                   "restarts at", "max", "backlog", "overdue", "late by", "goes out")
        for lv in levels:
            again = f" ({lv['delivered_before']} delivered before)" if lv["delivered_before"] else ""
            out = _t(lv["goes_out_ms"], local) if lv["configured"] else "never: level not in messageDelayLevel"
            _add(t, str(lv["level"]), str(lv["queue_id"]), _v(lv["persisted_offset"]), str(lv["restart_offset"]),
                 str(lv["max_offset"]), str(lv["backlog"]), f"{lv['overdue']}{again}",
                 format_duration(lv["overdue_by_ms"]) if lv["overdue"] else "-", out,
                 style="red" if lv["never_delivered"] else "yellow" if lv["overdue"] else None)
        con.print(t)
    w = late["timer"]
    if w.get("present"):
        con.print(f"timer wheel: {w['pending']} pending ({w['overdue']} overdue), dequeue reads again from "
                  f"{_t(w['restart_read_time_ms'], local)} (timercheck {_t(w['last_read_time_ms'], local)}), "
                  f"earliest {_t(w['earliest_ms'], local)}", markup=False)
        for s in w["skipped"]:
            con.print(f"  slot {_t(s['slot_ms'], local)}: {s['uniq_key']} ({s['topic']}) is SKIPPED: older than the "
                      "wheel holds", style="red", markup=False)
    elif not levels:
        con.print("Late and due: nothing (no delay backlog, no timer wheel)")


def _either_t(times: list[int], local: bool) -> str:
    """One time, or "either A or B" where a race the store does not decide picks one."""
    if len(times) < 2:
        return _t(times[0] if times else None, local)
    return f"either {_t(times[0], local)} or {_t(times[1], local)} (a race: the reput dispatch decides)"


def _restart_transactions(con: Console, doc: dict, local: bool) -> None:
    tx = doc["transactions"]
    rows = [("checked again", r["uniq_key"], " ".join(r["keys"]), r["topic"], _t(r["again_at_ms"], local), r["reason"])
            for r in doc["rechecks"]]
    rows += [("first rounds", r["uniq_key"], " ".join(r["keys"]), r["topic"], _t(r["next_check_ms"], local),
              f"check #{r['check_times'] + 1}" + ("" if r["state"] == "pending" else
                                                  f" ({r['state'].replace('_', ' ')}: the producer answers again)"))
             for r in tx["first_rounds"]]
    rows += [("discarded", r["uniq_key"], " ".join(r["keys"]), r["topic"], _either_t(r["discard_outcomes"], local),
              r["discard_reason"]) for r in tx["to_discard"]]
    if not rows:
        con.print("Transactions: no half message is checked or discarded")
        return
    t = _table("Transactions", "what", "uniq key", "keys", "topic", "when", "why")
    for r in rows:
        _add(t, *[x or "-" for x in r], style="magenta" if r[0] == "discarded" else None)
    con.print(t)


def _restart_replay(con: Console, rp: dict, local: bool) -> None:
    con.print(f"[bold]Replay[/bold] through the simulator, {_t(rp['from_ms'], local)} .. {_t(rp['until_ms'], local)}: "
              f"{rp['events']} event(s)")
    t = _table(None, "event", "count")
    for kind, n in rp["counts"].items():
        _add(t, kind, str(n))
    con.print(t)
    again = rp["delivered_again"]
    if again:
        a = _table(f"Delivered again in the replay ({len(again)})", "time", "service", "topic/queue", "uniq key",
                   "new offset")
        for e in again:
            _add(a, _t(e["time"], local), e["service"], f"{e['topic']}/{_v(e['queue_id'])}", e["uniq_key"] or "-",
                 _v(e.get("new_physical_offset")), style="red")
        con.print(a)
    for v in rp["violations"]:
        con.print(f"simulator invariant violated: {v}", style="bold red", markup=False)
    if rp["events_path"]:
        con.print(f"event log: {rp['events_path']}", markup=False)


# ----------------------------------------------------------------------------- fleets (issue #29)


def _time_range(first: int | None, last: int | None, local: bool) -> str:
    """`first .. last`, the last without its date when both fall on the same day (a narrower fleet table)."""
    a, b = _t(first, local), _t(last, local)
    if "T" in a and a.split("T")[0] == b.split("T")[0]:
        b = b.split("T", 1)[1]
    return f"{a} .. {b}"


def render_fleet(doc: dict, local: bool) -> None:
    """`inspect FLEET`: one row per store, then the totals; each store's warnings and errors on stderr."""
    con = _console()
    tot = doc["totals"]
    con.print(f"[bold]Fleet[/bold] {escape(doc['fleet'])}: {tot['stores']} store(s) in {tot['groups']} broker "
              f"group(s), cluster(s) {escape(', '.join(tot['clusters']) or '-')}")
    t = _table(None, "store", "dir", "role", "records", "offsets", "behind master", "store time",
               "delay/timer/half", "shutdown", "err/warn/info")
    for r in doc["stores"]:
        fc = r["finding_counts"]
        _add(t, r["name"], r["dir"], _v(r["role"]), _v(r["records"]),
             "-" if r["min_offset"] is None else f"{r['min_offset']} .. {r['max_offset']}",
             "-" if r.get("behind_master_bytes") is None else f"{r['behind_master_bytes']} B",
             _time_range(r["first_store_timestamp"], r["last_store_timestamp"], local),
             f"{_v(r['delay_backlog'])}/{_v(r['timer_pending'])}/{_v(r['transactions_pending'])}",
             "-" if r["clean_shutdown"] is None else ("clean" if r["clean_shutdown"] else "CRASHED (abort)"),
             f"{fc['error']}/{fc['warning']}/{fc['info']}",
             style="red" if fc["error"] else None)
    con.print(t)
    fc = tot["finding_counts"]
    con.print(_kv("Totals", [
        ("records", tot["records"]), ("CommitLog bytes", tot["bytes"]),
        ("store time", f"{_t(tot['first_store_timestamp'], local)} .. {_t(tot['last_store_timestamp'], local)}"),
        ("crashed stores", tot["crashed_stores"]),
        ("findings", f"{fc['error']} error(s), {fc['warning']} warning(s), {fc['info']} info"),
    ]))
    worst = [{**f, "file": f"{r['name']}: {f['file']}"} for r in doc["stores"] for f in r["findings"]
             if f["severity"] != "info"]
    render_findings(doc["findings"] + worst, quiet_when_empty=False)
    if fc["info"]:
        render_note(f"{fc['info']} info finding(s): --json lists them, or inspect one store with --broker NAME")


def _lost_line(t: dict) -> str:
    per = ", ".join(f"{k} {v}" for k, v in t["per_topic"].items())
    return f"{t['records']} record(s), {t['bytes']} bytes" + (f" ({per})" if per else "")


def _config_pairs(cfg: dict | None) -> list[tuple[str, str]]:
    """SlaveSynchronize's files as a promotion would serve them."""
    if cfg is None:
        return []
    t, c, d = cfg["topics"], cfg["consumer_offsets"], cfg["delay_offsets"]
    lacks = ", ".join(t["only_on_master"][:5]) + (", ..." if len(t["only_on_master"]) > 5 else "")
    return [("topics.json", f"master {t['master']}, slave {t['slave']}"
             + (f"; slave lacks {len(t['only_on_master'])}: {lacks}" if t["only_on_master"] else "")),
            ("consumer offsets", f"{c['behind']} behind ({c['consumed_again']} consumed again), "
                                 f"{c['missing_on_slave']} missing on the slave, of {c['entries']}"),
            ("delay offsets", "no delayOffset.json on the slave" if d["master_file"] and not d["slave_file"]
             else f"{len(d['levels_behind'])} level(s) behind ({d['delivered_again']} delivered again)")]


def _epoch_pairs(ep: dict | None) -> list[tuple[str, str]]:
    """Controller mode: both epoch files and where the slave truncates when it follows this master."""
    if ep is None:
        return []
    show = lambda entries: ", ".join(f"{e}@{s}" for e, s in entries) or "-"  # noqa: E731
    point = ep["truncate_offset"]
    where = ("no truncation (empty epoch file: a new replica)" if point is None else
             "NO consistent point: it will not follow this master" if point < 0 else
             f"at {point}: drops {_lost_line(ep['truncated_records'])}")
    return [("epochs (slave / master)", f"{show(ep['slave'])} / {show(ep['master'])}"),
            ("rejoining truncates", where)]


def render_replicas(doc: dict, local: bool) -> None:
    """`inspect FLEET replicas`: per group, each slave against its master (DLedger: each node)."""
    con = _console()
    con.print(f"[bold]Replicas[/bold] of {escape(doc['fleet'])}")
    for g in doc["groups"]:
        con.print(f"\n[bold]{escape(g['group'])}[/bold] ({g['kind']}): " + escape(", ".join(g["stores"])))
        if g["kind"] == "single":
            con.print("  one store: nothing to compare")
        for p in g.get("pairs", []):
            m, s, c = p["master_commitlog"], p["slave_commitlog"], p["common"]
            diff = ("none" if c["first_difference"] is None else
                    f"from {c['first_difference']} ({c['differing_bytes']} byte(s) in {len(c['differing_regions'])} "
                    f"region(s), {c['differing_records']['records']} master record(s))")
            b = p["behind"]
            con.print(_kv(f"{p['slave']} vs master {p['master']}", [
                ("master CommitLog", f"{m['min_offset']} .. {m['max_offset']} (last stored "
                                     f"{_t(m['last_store_timestamp'], local)})"),
                ("slave CommitLog", f"{s['min_offset']} .. {s['max_offset']} (last stored "
                                    f"{_t(s['last_store_timestamp'], local)}); "
                                    + ("clean shutdown" if s["shutdown"]["clean"] else "CRASHED (abort file)")),
                ("both hold", f"{c['from_offset']} .. {c['to_offset']} ({c['bytes']} bytes)"),
                ("first difference", diff),
                ("behind", f"{b['bytes']} bytes, {b['records']} record(s), "
                           + ("-" if b["store_time_ms"] is None else format_duration(b["store_time_ms"]))),
                ("ahead", f"{p['ahead']['bytes']} bytes, {p['ahead']['records']} record(s)"),
                ("torn tail / past end", f"{s['torn_bytes']} byte(s); files past end: "
                                         + (", ".join(s["files_past_end"]) or "-")),
                ("promotion now loses", _lost_line(p["promotion_loses"])),
                *_epoch_pairs(p.get("epochs")),
                *_config_pairs(p.get("config")),
            ]))
            odd = [q for q in p["consume_queues"] if q["placeholder_units"] or q["dispatch_behind"]
                   or q["past_commitlog_end"] or q["mismatched_units"]]
            if odd:
                t = _table("ConsumeQueues that differ", "queue", "master max", "slave min", "slave max",
                           "placeholders", "dispatch behind", "past end", "mismatched")
                for q in odd:
                    _add(t, f"{q['topic']}/{q['queue_id']}", _v(q["master_max_offset"]), _v(q["slave_min_offset"]),
                         _v(q["slave_max_offset"]), str(q["placeholder_units"]), _v(q["dispatch_behind"]),
                         _v(q["past_commitlog_end"]), str(q["mismatched_units"]))
                con.print(t)
        if g["kind"] == "dledger":
            t = _table(f"reference: {g['reference']}", "node", "begin index", "end index", "term",
                       "committed index", "committed pos", "behind (entries)", "differing entries",
                       "records only on the reference")
            for n in g["nodes"]:
                lost = n.get("only_on_reference")
                _add(t, n["name"], _v(n["begin_index"]), _v(n["end_index"]), _v(n["term"]),
                     _v(n["committed_index"]), _v(n["committed_pos"]), _v(n.get("behind_entries")),
                     _v(n.get("differing_entries")), "-" if lost is None else _lost_line(lost))
            con.print(t)
