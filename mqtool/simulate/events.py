"""The simulator's event records and their JSON Lines form (`mqtool/schemas/simulate-event.json`).

One line per event, keys in this order: `time` (virtual epoch ms), `service`
(`schedule|timer|transaction|broker`), `event`, `topic`, `queue_id`, `uniq_key`,
`physical_offset`, `new_physical_offset`, then event-specific detail keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import add, attrgetter, getitem, itemgetter, mod, mul
from typing import Any, TextIO

from mqtool.formats.names import ACK_TAG

SERVICES = ("schedule", "timer", "transaction", "broker", "consumer")
EVENTS = ("deliver", "enqueue", "roll", "cancel", "check", "put_back", "commit", "rollback", "discard",
          "skip", "put_failed", "persist", "crash", "restart", "clock_jump", "consume", "send_back", "dlq",
          "drop", "pop", ACK_TAG, "revive", "change_invisible")  # the ack event is named like the ack record's tag


@dataclass(slots=True)
class SimEvent:
    time: int
    service: str
    event: str
    topic: str | None = None
    queue_id: int | None = None
    uniq_key: str | None = None
    physical_offset: int | None = None
    new_physical_offset: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {"time": self.time, "service": self.service, "event": self.event, "topic": self.topic,
             "queue_id": self.queue_id, "uniq_key": self.uniq_key, "physical_offset": self.physical_offset,
             "new_physical_offset": self.new_physical_offset}
        for k, v in self.detail.items():
            if k not in d:
                d[k] = v
        return d

    def to_json(self) -> str:
        return _JSON.encode(self.as_dict())


# json.dumps(d, ensure_ascii=False, separators=(",", ":")) builds this encoder on every call
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_SCALARS = frozenset({str, int, bool, type(None)})
_FLUSH_LINES = 4096
_NATIVE_AFTER = 1 << 16  # lines written before the writer thread formats them (`eventlines`: loads LLVM)
_WRITER_BLOCKS = 8  # blocks of about `_FLUSH_LINES` lines (~1 MB) waiting for the writer thread
# where one line's object ends and the next begins in orjson's text of a list of lines: every line
# starts with its "time" key, and inside a string a quote is escaped, so the pattern is structural
_NEXT = b'},{"time":'
_NEXT_LINE = b'}\n{"time":'
_KEYS = ("time", "service", "event", "topic", "queue_id", "uniq_key", "physical_offset", "new_physical_offset")
_ROW_NAMES = _KEYS[3:]


def _json_line(d: dict[str, Any]) -> bytes:
    """`json`'s own line, the reference every faster form equals."""
    return _JSON.encode(d).encode("utf-8", "surrogatepass")


class _NoOrjson:  # pragma: no cover - orjson is a dependency; without it `json` writes every line
    class JSONEncodeError(Exception):
        pass

    @staticmethod
    def dumps(_):
        raise _NoOrjson.JSONEncodeError


def _orjson():
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return _NoOrjson
    return orjson


def _lines_of(dicts: list[dict[str, Any]], orjson) -> bytes:
    """The lines of `dicts` (each ending in a newline), as `_json_line` writes them one by one.

    The dicts hold str, int, bool and None values, or a dict of str to int (`EventLog.record`
    lets nothing else in): orjson writes those as `json` does (tests/test_output.py) and refuses
    what it cannot (integers past 64 bits, lone surrogates). One `dumps` call writes the whole list;
    its objects are split into lines where one ends and the next begins."""
    try:
        text = orjson.dumps(dicts)[1:-1]
    except orjson.JSONEncodeError:
        return b"".join(_one_line(d, orjson) for d in dicts)
    if text.count(_NEXT) != len(dicts) - 1:  # pragma: no cover - a nested list of lines: not in `record`
        return b"".join(_one_line(d, orjson) for d in dicts)
    return text.replace(_NEXT, _NEXT_LINE) + b"\n"


def _json_parts(items: list, orjson) -> list[tuple[bytes | None, bytes | None]]:
    """A block's line dicts, `record_batch`/`record_rows` calls and finished lines (bytes) as
    `(orjson text, None)` for `eventlines` to format and `(None, lines)` written here: one `dumps` of
    the whole block, or, when orjson refuses a value (or meets a finished line), each half on its own
    down to the item that goes the way `_batch_lines` sends it."""
    try:
        return [(orjson.dumps(items), None)]
    except orjson.JSONEncodeError:
        pass
    if len(items) > 1:
        half = len(items) // 2
        return _json_parts(items[:half], orjson) + _json_parts(items[half:], orjson)
    item = items[0]
    if type(item) is bytes:
        return [(None, item)]
    if type(item) is dict:
        return [(None, _one_line(item, orjson))]
    return [(None, _lines_of(_dicts_of(*item), orjson))]


def _one_line(d: dict[str, Any], orjson) -> bytes:
    try:
        return orjson.dumps(d) + b"\n"
    except orjson.JSONEncodeError:
        return _json_line(d) + b"\n"


class _Template(int):
    """The line of a `record_batch` row of one (service, event, detail keys) as a bytes %-format:
    `fmt % time` is the line with `service`, `event` and the keys written by `json` (a `%` doubled)
    and a `%b` for each of the row's `width` values; the line dict's `keys`;
    `ident` `(service, event)`; `index`, each row key's place in a row (what `Columns` reads); and
    `slow`, whether a batch of these had a value `_batch_lines` could not take (a nested dict with two
    keys: then the rows of this kind go the way of `record`'s dicts from there on). As an int it is its
    id in its log (orjson writes a call `(time, template, rows)` with it, `eventlines`); `pieces`, the
    line's fixed bytes around its values (the time, then the row's) as `eventlines._format` writes them."""

    def __new__(cls, service: str, event: str, detail_keys: tuple[str, ...], timed: bool = False,
                tid: int = 0) -> _Template:
        return int.__new__(cls, tid)

    def __init__(self, service: str, event: str, detail_keys: tuple[str, ...], timed: bool = False,
                 tid: int = 0) -> None:
        def key(k: str) -> str:
            return _JSON.encode(k).replace("%", "%%") + ":"

        def raw(k: str) -> bytes:
            return _JSON.encode(k).encode("utf-8", "surrogatepass")

        self.pieces = [b'{"time":', b",%b:%b,%b:%b,%b:" % (raw("service"), raw(service), raw("event"), raw(event),
                                                           raw("topic"))]
        self.pieces += [b",%b:" % raw(k) for k in _ROW_NAMES[1:] + detail_keys] + [b"}\n"]

        rest = [f",{key('service')}{_JSON.encode(service).replace('%', '%%')},{key('event')}"
                f"{_JSON.encode(event).replace('%', '%%')}"]
        rest += [f",{key(k)}%b" for k in _ROW_NAMES + detail_keys]
        # timed (`record_rows`): the time is a row's first value, the batch's "time" is `_TIMED` (`%b`)
        self.fmt = (b'{"time":%b' if timed else b'{"time":%d') + \
            ("".join(rest) + "}\n").encode("utf-8", "surrogatepass").replace(b"%", b"%%")
        names = (("time",) if timed else ()) + _ROW_NAMES + detail_keys
        self.width = len(names)
        self.widths = {self.width}
        self.keys = _KEYS + detail_keys
        self.ident = (service, event)
        self.index = {k: i for i, k in enumerate(names)}
        self.slow = False
        self.timed = timed


def _batch_lines(batches: list[tuple[int, _Template, list[tuple]]], orjson) -> bytes:
    """The lines of `record_batch` rows, each batch `(time, template, rows)` through its template.

    orjson writes all values of all rows as one flat JSON array; with no comma inside a value (a
    scalar's text has one only in a string), splitting it at the commas gives each value's text,
    exactly as orjson writes it inside a line's object. When a value's text holds a comma or orjson
    cannot write one, each row's line dict goes the way of `record`'s. A batch of `_VERBATIM` holds
    finished lines instead of a time (`_verbatim`). (The format is built without a Python step per
    batch: most batches are of one row.)"""
    rows_of = list(map(itemgetter(2), batches))
    try:
        pieces = orjson.dumps(list(chain.from_iterable(chain.from_iterable(rows_of))))
    except orjson.JSONEncodeError:
        pieces = None
    if pieces is not None:
        pieces = pieces[1:-1].split(b",") if len(pieces) > 2 else []
        templates = list(map(itemgetter(1), batches))
        lens = list(map(len, rows_of))
        if len(pieces) == sum(map(mul, lens, map(_WIDTH, templates))):
            return b"".join(map(mul, map(mod, map(_FMT, templates), map(itemgetter(0), batches)), lens)) % tuple(pieces)
    if len(batches) > 1:  # each half on its own: only the batch with such a value goes the slow way
        half = len(batches) // 2
        return _batch_lines(batches[:half], orjson) + _batch_lines(batches[half:], orjson)
    time, t, rows = batches[0]
    t.slow = True
    return _lines_of(_dicts_of(time, t, rows), orjson)


class _Verbatim:
    """The template of finished lines: `fmt % lines` gives them back, no row values."""

    fmt = b"%b"
    width = 0
    slow = False


_VERBATIM = _Verbatim()
_NO_ROWS = [()]  # a verbatim batch's rows: one entry, no values (never changed)
_FMT, _WIDTH, _IDENT, _INDEX = attrgetter("fmt"), attrgetter("width"), attrgetter("ident"), attrgetter("index")
_TIMED = b"%b"  # a `record_rows` batch's "time": its template's `%b` stays for the rows' first values
_CALL_KEYS = {"time": None, "service": 0, "event": 1}  # not in a row: in `ident` or the call's own


def _verbatim(lines: bytes) -> tuple[bytes, _Verbatim, list]:
    """Finished lines as a batch of `_batch_lines`: in their place among the `record_batch` calls."""
    return lines.replace(b"%", b"%%"), _VERBATIM, _NO_ROWS


def _dicts_of(time: int, template: _Template, rows: list[tuple]) -> list[dict[str, Any]]:
    """The line dicts of a `record_batch` call (made without a Python step per row), or of a
    `record_rows` call (its rows' own times)."""
    if template.timed:
        ident = template.ident
        return [dict(zip(template.keys, (r[0], *ident, *r[1:]), strict=True)) for r in rows]
    return list(map(dict, map(zip, repeat(template.keys), map(add, repeat((time, *template.ident)), rows))))


def _batch_values(batch: tuple[int, _Template, list[tuple]], key: str):
    """One key's values in a `record_batch` call: its column of the rows, or the call's time, service or
    event, None for a key the call has not."""
    time, t, rows = batch
    i = t.index.get(key)
    if i is not None:
        return map(itemgetter(i), rows)
    value = time if key == "time" else t.ident[0] if key == "service" else t.ident[1] if key == "event" else None
    return repeat(value, len(rows))


class Columns:
    """Events of one kind, in order, column by column: what `EventLog.watch_columns` callbacks read.
    `cols[key]` is the list of that key's values (`time`, `service`, `topic`, ... or a detail key;
    None where an event has no such detail); `len(cols)` the number of events. Every callback of a
    batch gets the same list for a key: none may change it.

    The events come as line dicts (`record`) and `(time, template, rows)` calls (`record_batch`), in
    order; a column is gathered when it is first asked for, in C-level passes when only calls came."""

    __slots__ = ("_pending", "_dicts", "_templates", "_rows", "_cache")

    def __init__(self, pending: list) -> None:
        self._pending = pending
        kinds = set(map(type, pending))
        self._dicts = dict in kinds and (len(kinds) > 1 or None)  # None: line dicts only
        self._templates: set | None = None
        self._rows: list | None = None
        self._cache: dict[str, list] = {}

    def __len__(self) -> int:
        return len(self["time"])

    def __getitem__(self, key: str) -> list:
        col = self._cache.get(key)
        if col is None:
            col = self._cache[key] = self._column(key)
        return col

    def _column(self, key: str) -> list:
        pending = self._pending
        if self._dicts is None:  # line dicts only
            return list(map(dict.get, pending, repeat(key)))
        if not self._dicts:  # calls only
            if self._templates is None:
                self._templates = set(map(itemgetter(1), pending))
            if key in _CALL_KEYS and not (key == "time" and any(map(attrgetter("timed"), self._templates))):
                # the call's time, service or event, once for each of its rows
                values = map(itemgetter(0), pending) if key == "time" else \
                    map(itemgetter(_CALL_KEYS[key]), map(_IDENT, map(itemgetter(1), pending)))
                if self._rows is None:
                    self._rows = list(chain.from_iterable(map(itemgetter(2), pending)))
                if len(self._rows) == len(pending):  # a row each (most calls)
                    return list(values)
                return list(chain.from_iterable(map(repeat, values, map(len, map(itemgetter(2), pending)))))
            at = {t.index.get(key) for t in self._templates}
            if None not in at:
                if self._rows is None:
                    self._rows = list(chain.from_iterable(map(itemgetter(2), pending)))
                if len(at) == 1:  # in the same place of every row
                    return list(map(itemgetter(at.pop()), self._rows))
                # in a row of each call, not in the same place in all (`record_rows` and `record_batch`)
                places = map(dict.get, map(_INDEX, map(itemgetter(1), pending)), repeat(key))
                return list(map(getitem, self._rows,
                                chain.from_iterable(map(repeat, places, map(len, map(itemgetter(2), pending))))))
            return list(chain.from_iterable(map(_batch_values, pending, repeat(key))))
        out: list = []
        for e in pending:
            if type(e) is dict:
                out.append(e.get(key))
            else:
                out += _batch_values(e, key)
        return out


class EventLog:
    """The ordered event history, handed on as it happens.

    Each event goes to the watchers of its kind: `watch` callbacks get a `SimEvent` as it happens,
    `watch_columns` callbacks get the events in batches of `Columns`, in order, all of them by the
    time `flush()` returns (the summary's tallies, the invariant checks: read after the run). It goes
    to `sink` when one is given (a text file: one JSON line per event, written in batches through its
    byte buffer when it has one), and into `events` when `hold` (the default without a sink: tests
    and library callers iterate it). `keep=False` only counts, and the services do not even compute
    the details (benchmarks). Call `flush()` at the end of a run.

    `record` makes the event's line dict `{time, service, event, topic, ..., **detail}` and its line
    (orjson, or `json` for what orjson writes differently) at once; `record_batch` keeps its rows, whose
    lines are made with all others pending through their bytes templates (`_batch_lines`) without a
    dict per row. The lines go to the sink about `_FLUSH_LINES` at a time: through a writer thread
    (`_Writer`) when it has a byte buffer.
    """

    def __init__(self, keep: bool = True, sink: TextIO | None = None, hold: bool | None = None) -> None:
        self.keep = keep
        self.sink = sink
        self.hold = keep and (sink is None if hold is None else hold)
        self.events: list[SimEvent] = []
        self.by_kind: dict[str, int] = {}
        self._watchers: dict[str, list[Callable[[SimEvent], None]]] = {}
        self._column_watchers: dict[str, list[Callable[[Columns], None]]] = {}
        # per watched kind, what is not handed on yet: line dicts (`record`) and row batches (`record_batch`)
        self._watched: dict[str, list] = {}
        self._per_event = self.hold  # a SimEvent is made for each event (hold or `watch`)
        self._lined = keep and sink is not None  # lines are made
        self._orjson = _orjson() if sink is not None else _NoOrjson
        self._templates: dict[tuple, _Template] = {}
        # the lines to come, in order: `record_batch` calls and `record`'s finished lines (`_verbatim`)
        self._batches: list[tuple] = []
        self._batched = 0  # their lines
        self._buffer = None
        self._writer: _Writer | None = None
        # once `_NATIVE_AFTER` lines went to a writer thread: the items of a block are handed over as one
        # orjson text the writer thread formats without the GIL (`eventlines`); `_batches` then holds
        # line dicts, calls and json's finished lines (bytes)
        self._native = None
        self._table = None  # the templates as `eventlines.Table`, made again when a template is added
        self._lines_out = 0
        self._tried = False

    @property
    def count(self) -> int:
        return sum(self.by_kind.values())

    def watch(self, event: str, callback: Callable[[SimEvent], None]) -> None:
        """Call `callback(e)` for every recorded event of that kind, in order, as it happens."""
        self._watchers.setdefault(event, []).append(callback)
        self._per_event = True

    def watch_columns(self, event: str, callback: Callable[[Columns], None]) -> None:
        """Call `callback(cols)` with the events of that kind in order, in batches (`Columns`); every
        event has been handed on when `flush()` returns."""
        self._column_watchers.setdefault(event, []).append(callback)
        self._watched.setdefault(event, [])

    def emit(self, time: int, service: str, event: str, topic: str | None = None, queue_id: int | None = None,
             uniq_key: str | None = None, physical_offset: int | None = None,
             new_physical_offset: int | None = None, **detail: Any) -> None:
        self.record(time, service, event, topic, queue_id, uniq_key, physical_offset, new_physical_offset, detail,
                    False)

    def emit_plain(self, time: int, service: str, event: str, topic: str | None = None,
                   queue_id: int | None = None, uniq_key: str | None = None, physical_offset: int | None = None,
                   new_physical_offset: int | None = None, **detail: Any) -> None:
        """`emit` for the hot paths, whose values are str, int, bool or None, or a dict of str to int
        (orjson writes those as `json` does), never a float."""
        self.record(time, service, event, topic, queue_id, uniq_key, physical_offset, new_physical_offset, detail,
                    True)

    def record(self, time: int, service: str, event: str, topic: str | None, queue_id: int | None,
               uniq_key: str | None, physical_offset: int | None, new_physical_offset: int | None,
               detail: dict[str, Any], plain: bool = False) -> None:
        """`emit` with the detail as a dict (the caller's own, not copied); `plain` as `emit_plain`."""
        by_kind = self.by_kind
        by_kind[event] = by_kind.get(event, 0) + 1
        if not self.keep:
            return
        # the line's dict: no detail key can be one of the eight (they are `emit`'s parameters), so the
        # detail follows them as given
        d = None
        if self._lined:
            d = {"time": time, "service": service, "event": event, "topic": topic, "queue_id": queue_id,
                 "uniq_key": uniq_key, "physical_offset": physical_offset,
                 "new_physical_offset": new_physical_offset, **detail}
            if self._native is not None:  # the dict itself, written with the block (`_json_parts`)
                self._batches.append(d if plain or _SCALARS.issuperset(map(type, d.values()))
                                     else _json_line(d) + b"\n")
            elif plain or _SCALARS.issuperset(map(type, d.values())):
                self._batches.append(_verbatim(_one_line(d, self._orjson)))
            else:  # a float, a nested value: `json` itself writes it
                self._batches.append(_verbatim(_json_line(d) + b"\n"))
            self._batched += 1
            if self._batched >= _FLUSH_LINES:
                self._write()
        watched = self._watched.get(event)
        if watched is not None:
            if d is None:
                d = {"time": time, "service": service, "event": event, "topic": topic, "queue_id": queue_id,
                     "uniq_key": uniq_key, "physical_offset": physical_offset,
                     "new_physical_offset": new_physical_offset, **detail}
            watched.append(d)
            if len(watched) >= _FLUSH_LINES:
                self._hand_on()
        if self._per_event:
            e = SimEvent(time, service, event, topic, queue_id, uniq_key, physical_offset, new_physical_offset,
                         detail)
            if self.hold:
                self.events.append(e)
            for w in self._watchers.get(event, ()):
                w(e)

    def record_batch(self, time: int, service: str, event: str, rows: list[tuple],
                     detail_keys: tuple[str, ...]) -> None:
        """Events of one kind at one time, in order: each row is `(topic, queue_id, uniq_key,
        physical_offset, new_physical_offset, *detail)` with the detail values in `detail_keys`' order,
        every value as `emit_plain` takes it. The same as `record(..., plain=True)` row by row."""
        key = (service, event, detail_keys)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = _Template(service, event, detail_keys, False, len(self._templates))
            self._table = None
        if self._per_event or (self.keep and (type(time) is not int or (
                len(rows[0]) != template.width if len(rows) == 1 else set(map(len, rows)) != template.widths))):
            record = self.record  # a SimEvent per row (or the row of a wrong width raises there)
            for r in rows:
                record(time, service, event, r[0], r[1], r[2], r[3], r[4],
                       dict(zip(detail_keys, r[5:], strict=True)), True)
            return
        self._add_batch(event, (time, template, rows[:]))  # the caller may reuse its list

    def _add_batch(self, event: str, batch: tuple) -> None:
        """A `record_batch` or `record_rows` call's `(time, template, rows)`: counted, to the sink and
        the watchers."""
        template, rows = batch[1], batch[2]
        by_kind = self.by_kind
        by_kind[event] = by_kind.get(event, 0) + len(rows)
        if not self.keep:
            return
        if self._lined:
            self._batches.append(_verbatim(_lines_of(_dicts_of(*batch), self._orjson))
                                 if template.slow and self._native is None else batch)
            self._batched += len(rows)
            if self._batched >= _FLUSH_LINES:
                self._write()
        watched = self._watched.get(event)
        if watched is not None:
            watched.append(batch)
            if len(watched) >= _FLUSH_LINES:
                self._hand_on()

    def record_rows(self, service: str, event: str, rows: list[tuple], detail_keys: tuple[str, ...]) -> None:
        """Events of one kind, in order, each at its own time: each row is `(time, topic, queue_id,
        uniq_key, physical_offset, new_physical_offset, *detail)`. The same lines as a `record_batch`
        call for each row (the timer's dequeue keeps the rows of consecutive slots for one call)."""
        key = (service, event, detail_keys, True)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = _Template(service, event, detail_keys, True, len(self._templates))
            self._table = None
        if self._per_event or (self.keep and (
                len(rows[0]) != template.width if len(rows) == 1 else set(map(len, rows)) != template.widths)):
            record = self.record  # a SimEvent per row (or the row of a wrong width raises there)
            for r in rows:
                record(r[0], service, event, r[1], r[2], r[3], r[4], r[5],
                       dict(zip(detail_keys, r[6:], strict=True)), True)
            return
        self._add_batch(event, (_TIMED if self._native is None else None, template, rows[:]))

    def tally(self, event: str) -> None:
        """Count an event without recording it: the hot paths call this instead of `emit` when
        `keep` is False, so that the event's details are not even computed."""
        self.by_kind[event] = self.by_kind.get(event, 0) + 1

    def _hand_on(self) -> None:
        """The watched events not yet handed on, to their `watch_columns` callbacks."""
        for event, pending in self._watched.items():
            if pending:
                self._watched[event] = []
                cols = Columns(pending)
                for w in self._column_watchers[event]:
                    w(cols)

    def flush(self) -> None:
        """Write the lines not yet written to the sink (they are in it when this returns: the writer
        thread is stopped) and hand the watched events on. A write that failed raises here."""
        self._write()
        self.close()

    def _write(self) -> None:
        """Hand the watched events on and pass the finished lines to the sink: to the writer thread
        when the sink has a byte buffer (the run goes on while the file takes them)."""
        self._hand_on()
        if self.sink is None:
            return
        batches = self._batches
        if not batches:
            return
        if self._native is not None:
            if self._table is None:
                from mqtool.simulate.eventlines import Table

                self._table = Table(sorted(self._templates.values()))
            data = (self._native, _json_parts(batches, self._orjson), self._batched, self._table)
        else:
            data = _batch_lines(batches, self._orjson)
        self._batches = []
        self._lines_out += self._batched
        self._batched = 0
        if self._buffer is None:
            self._buffer = _byte_buffer(self.sink) or False
        if not self._buffer:
            self.sink.write(data.decode("utf-8", "surrogatepass"))
            return
        writer = self._writer
        if writer is None:
            writer = self._writer = _Writer(self._buffer.write)
        elif writer.error is not None:
            self.close()  # raises the writer's error
        writer.put(data)
        if self._native is None and self._lines_out >= _NATIVE_AFTER and not self._tried:
            from mqtool.simulate.eventlines import formatter

            self._tried = True  # once: None when no compiled formatter can be had
            self._native = formatter()

    def close(self) -> None:
        """Stop the writer thread once it has written what it was given, and raise the error a write
        of it met (an OSError of a full disk, as the write itself raised it before). Lines not passed
        on yet stay unwritten: `flush()` writes everything and closes."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _held(self) -> list[SimEvent]:
        if self.keep and not self.hold:
            raise ValueError("the events were streamed to the sink, not held (EventLog(hold=True) keeps them)")
        return self.events

    def __iter__(self):
        return iter(self._held())

    def __len__(self) -> int:
        return self.count

    def jsonl(self) -> str:
        return "".join(e.to_json() + "\n" for e in self._held())


class _Writer:
    """Writes byte blocks with `write` on a thread of its own, in order: a file's write releases the
    GIL, so the run goes on while the file takes the lines. At most `_WRITER_BLOCKS` blocks wait
    (memory stays bounded; `put` waits when they are all taken). After a failed write it drops the
    rest and keeps the error (`error`); `close` raises it on the caller's thread."""

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        import queue
        import threading

        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(_WRITER_BLOCKS)
        self._thread = threading.Thread(target=self._run, args=(write,), name="mqtool-events", daemon=True)
        self._thread.start()

    def _run(self, write: Callable[[bytes], Any]) -> None:
        get = self._queue.get
        while (data := get()) is not None:
            if self.error is None:
                try:
                    if type(data) is bytes:
                        write(data)
                        continue
                    formatter, parts, lines, table = data  # formatted here, the GIL released
                    for text, finished in parts:
                        write(finished if text is None else formatter.format(text, lines, table))
                except BaseException as e:  # noqa: BLE001 - handed to the caller's thread by `close`
                    self.error = e

    def put(self, data: bytes | tuple) -> None:
        self._queue.put(data)

    def close(self) -> None:
        """Wait until every block is written and the thread is gone; raise the error of a write."""
        self._queue.put(None)
        self._thread.join()
        error, self.error = self.error, None
        if error is not None:
            raise error


def _byte_buffer(sink: TextIO):
    """The byte stream under a UTF-8 text sink with no newline translation, flushed so that what was
    written to it before comes first (`mqtool.output.write_jsonl` does the same); None for any other
    sink (a StringIO, the --expect capture)."""
    import codecs
    import os

    buffer = getattr(sink, "buffer", None)
    encoding = getattr(sink, "encoding", None)
    if buffer is None or encoding is None or os.linesep != "\n" or codecs.lookup(encoding).name != "utf-8":
        return None
    sink.flush()
    return buffer
