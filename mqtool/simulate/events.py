"""The simulator's event records and their JSON Lines form (`mqtool/schemas/simulate-event.json`).

One line per event, keys in this order: `time` (virtual epoch ms), `service`
(`schedule|timer|transaction|broker|consumer`), `event`, `topic`, `queue_id`, `uniq_key`,
`physical_offset`, `new_physical_offset`, then event-specific detail keys.

Every event enters `EventLog` the same way: in a batch of n >= 1 events of one kind (service, event
and detail keys), column by column (`EventLog.batch`). The batches are counted, handed to the sink's
lines (`eventlines`), to the `watch_columns` callbacks (the summary's tallies, the invariant checks)
and, when events are held, kept as they are (`SimEvent`s and `jsonl()` are made from them: one path for all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, TextIO

from mqtool.output import BlockWriter, byte_buffer
from mqtool.simulate import eventlines
from mqtool.simulate.eventlines import ROW_NAMES, Kind
from mqtool.store import extension


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


FLUSH_LINES = 4096  # events a block holds: the lines go to the sink, the watched events to their callbacks
WRITER_BLOCKS = 8  # blocks (about 1 MB each) waiting for the writer thread; the run waits when they are all taken
_SCALARS = frozenset({str, int, bool, type(None)})
_NO_ROW = (None,) * len(ROW_NAMES)
_TIMES = itemgetter(1)  # a batch (kind id, times, columns...): its times


class Columns(dict):
    """Events of one kind, in order, column by column: what `EventLog.watch_columns` callbacks read.
    `cols[key]` is the list of that key's values (`time`, `service`, `topic`, ... or a detail key;
    None where an event has no such detail), made when first asked for. Every callback of a block gets the same
    list for a key: none may change it."""

    def __init__(self, batches: list[tuple], kinds: list[Kind]) -> None:
        super().__init__()
        self._batches, self._kinds = batches, kinds

    def __missing__(self, key: str) -> list:
        batches, kinds = self._batches, self._kinds
        ids = set(map(itemgetter(0), batches))
        if len(ids) == 1:  # one kind (the usual block): C-level passes
            kind = kinds[ids.pop()]
            at = kind.index.get(key)
            if at is not None:
                col = self[key] = list(chain.from_iterable(map(itemgetter(at + 1), batches)))
            else:
                col = self[key] = [kind.constant(key)] * sum(map(len, map(_TIMES, batches)))
            return col
        col = self[key] = []
        for kid, times, *columns in batches:
            kind = kinds[kid]
            at = kind.index.get(key)
            col += (times, *columns)[at] if at is not None else repeat(kind.constant(key), len(times))
        return col


class EventLog:
    """The ordered event history, handed on as it happens: to the `watch_columns` callbacks, to `sink` (a text
    file, written by a writer thread when it has a byte buffer) and into `events` when `hold` (the default
    without a sink: tests and library callers iterate it). `keep=False` only counts: the services do not even
    compute the events' details (`tally`)."""

    def __init__(self, keep: bool = True, sink: TextIO | None = None, hold: bool | None = None) -> None:
        self.keep, self.sink = keep, sink
        self.hold = keep and (sink is None if hold is None else hold)
        self._held: list[tuple] = []  # the held batches
        self._events: list[SimEvent] = []  # those of the first `_made` held batches
        self._made = 0
        self.by_kind: dict[str, int] = {}
        self._column_watchers: dict[str, list[Callable[[Columns], None]]] = {}
        self._watched: dict[str, list] = {}  # per watched event, its batches not handed on yet
        self._lined = keep and sink is not None  # lines are made
        self._kinds: dict[tuple, Kind] = {}
        self._kind_list: list[Kind] = []
        self._table: eventlines.Table | None = None  # the kinds' pieces, made again when a kind is added
        # in order: runs of batches (lists) whose lines orjson and the kernel write, and json's finished lines
        self._parts: list[list[tuple] | bytes] = []
        self._lines = 0  # their events
        kernel = extension.kernel("event_lines") if self._lined else None  # None: `lines` writes every line
        self._formatter = eventlines.Formatter(kernel) if kernel is not None else None
        self._buffer = None
        self._writer: BlockWriter | None = None

    def watch_columns(self, event: str, callback: Callable[[Columns], None]) -> None:
        """Call `callback(cols)` with the events of that kind in order, in blocks; all of them by `flush()`."""
        self._column_watchers.setdefault(event, []).append(callback)
        self._watched.setdefault(event, [])

    def batch(self, time, service: str, event: str, /, *row, **detail) -> None:
        """Events of one kind (`service`, `event`, the detail keys), in order: `time`, the `row` values (`ROW_NAMES`,
        None where left out) and each detail value is a column (a list, tuple or numpy array with a value per
        event) or one value for every event (a list value is always a column): `emit`'s arguments, each for
        n >= 1 events. Values are str, int, bool, None or a dict of str to int (orjson writes those as `json`
        does), never a float."""
        # a numpy array's values as Python's; a dict or a numpy scalar the same for every event
        values = [
            v if type(v) in _SCALARS or not hasattr(v, "tolist") else v.tolist() for v in _values(time, row, detail)
        ]
        n = next((len(v) for v in values if type(v) is list or type(v) is tuple), 1)
        if n:
            cols = []
            for v in values:
                if type(v) is not list and type(v) is not tuple:
                    cols.append([v] * n)
                elif len(v) == n:
                    cols.append(list(v))
                else:
                    raise ValueError(f"a column of {len(v)} values in a batch of {n} events")
            self._add(self._kind(service, event, tuple(detail)), tuple(cols), n, True)

    def emit(self, time: int, service: str, event: str, /, *row, **detail: Any) -> None:
        """One event whose detail may hold any JSON value (a float, a list, a status object): its line is
        written by `json` where a value is not one `batch` takes."""
        self._add(self._kind(service, event, tuple(detail)), tuple(zip(_values(time, row, detail))), 1, False)

    def tally(self, event: str, n: int = 1) -> None:
        """Count `n` events without recording them (instead of `batch` when `keep` is False)."""
        self.by_kind[event] = self.by_kind.get(event, 0) + n

    def _kind(self, service: str, event: str, detail: tuple[str, ...]) -> Kind:
        kind = self._kinds.get((service, event, detail))
        if kind is None:
            kind = self._kinds[(service, event, detail)] = Kind(len(self._kind_list), service, event, detail)
            self._kind_list.append(kind)
            self._table = None
        return kind

    def _add(self, kind: Kind, cols: tuple, n: int, plain: bool) -> None:
        """The one path: a batch of `n` events of `kind`, its columns `cols`, counted and handed on."""
        event = kind.event
        by_kind = self.by_kind
        by_kind[event] = by_kind.get(event, 0) + n
        if not self.keep:
            return
        batch = (kind.id, *cols)
        if self._lined:
            parts = self._parts
            if plain or all(map(_SCALARS.issuperset, map(map, repeat(type), cols))):
                if not parts or type(parts[-1]) is bytes:
                    parts.append([])
                parts[-1].append(batch)
            else:  # a float, a nested value: `json` writes it, in its place
                parts.append(eventlines.lines([batch], self._kind_list))
            self._lines += n
            if self._lines >= FLUSH_LINES:
                self._write()
        watched = self._watched.get(event)
        if watched is not None:
            watched.append(batch)
            if len(watched) >= FLUSH_LINES:
                self._hand_on()
        if self.hold:
            self._held.append(batch)

    @property
    def events(self) -> list[SimEvent]:
        """The held events as `SimEvent`s (made when asked for)."""
        for kid, *cols in self._held[self._made :]:
            kind = self._kind_list[kid]
            for time, topic, queue_id, uniq_key, phys, new_phys, *values in zip(*cols, strict=True):
                detail = dict(zip(kind.detail, values, strict=True))
                event = SimEvent(time, kind.service, kind.event, topic, queue_id, uniq_key, phys, new_phys, detail)
                self._events.append(event)
        self._made = len(self._held)
        return self._events

    def _hand_on(self) -> None:
        """The watched events not yet handed on, to their `watch_columns` callbacks."""
        for event, pending in self._watched.items():
            if pending:
                self._watched[event] = []
                cols = Columns(pending, self._kind_list)
                for w in self._column_watchers[event]:
                    w(cols)

    def flush(self) -> None:
        """Hand every event on: the lines are in the sink when this returns (a failed write raises here)."""
        self._write()
        self.close()

    def _write(self) -> None:
        """Hand the watched events on and pass the block's lines to the sink: to the writer thread when
        the sink has a byte buffer (the run goes on while the kernel formats and the file takes them)."""
        self._hand_on()
        parts, lines = self._parts, self._lines
        if not parts:
            return
        self._parts, self._lines = [], 0
        formatter, texts = self._formatter, []
        if formatter is not None and self._table is None:
            self._table = eventlines.Table(self._kind_list)
        for p in parts:
            if type(p) is bytes:
                texts.append(p)
            elif formatter is None:  # no extension: `json` writes every line
                texts.append(eventlines.lines(p, self._kind_list))
            else:
                _texts(p, self._kind_list, texts)
        data = (texts, lines, self._table)
        if self._buffer is None:
            self._buffer = byte_buffer(self.sink) or False
        if not self._buffer:  # formatted and written on this thread
            self.sink.write(b"".join(map(bytes, _formatted(formatter, data))).decode("utf-8", "surrogatepass"))
            return
        writer = self._writer
        if writer is None:
            render = partial(_formatted, formatter)
            writer = self._writer = BlockWriter(self._buffer.write, render, WRITER_BLOCKS, "mqtool-events")
        elif writer.error is not None:
            self.close()  # raises the writer's error
        writer.put(data)

    def close(self) -> None:
        """Stop the writer thread once it has written what it was given; raise the error a write met (an
        OSError of a full disk). Lines not passed on yet stay unwritten: `flush()` writes everything and closes."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _check_held(self) -> None:
        if self.keep and not self.hold:
            raise ValueError("the events were streamed to the sink, not held (EventLog(hold=True) keeps them)")

    def __iter__(self):
        self._check_held()
        return iter(self.events)

    def __len__(self) -> int:
        return sum(self.by_kind.values())

    def dicts(self) -> list[dict[str, Any]]:
        """The held events' line dicts, in order (`Kind.dicts`: what `jsonl()` writes)."""
        self._check_held()
        return [d for kid, *cols in self._held for d in self._kind_list[kid].dicts(cols)]

    def jsonl(self) -> str:
        """The held events' lines, as `json` writes them (`eventlines.lines`)."""
        self._check_held()
        return eventlines.lines(self._held, self._kind_list).decode("utf-8", "surrogatepass")


def _values(time, row: tuple, detail: dict) -> tuple:
    """An event's values (or columns) in its line's order: `time`, the five row values, the detail values."""
    if len(row) > len(ROW_NAMES):
        raise TypeError(f"an event has {len(ROW_NAMES)} row values, not {len(row)}")
    return (time, *row, *_NO_ROW[len(row) :], *detail.values())


def _texts(run: list[tuple], kinds: list[Kind], out: list) -> None:
    """A run of batches as orjson's text (a `memoryview` of it) for the kernel, appended to `out`; a
    batch with a value orjson refuses (an integer past 64 bits, a lone surrogate) found by halves and
    its lines written by `json` (bytes)."""
    import orjson

    try:
        out.append(memoryview(orjson.dumps(run)))
    except orjson.JSONEncodeError:
        if len(run) == 1:
            out.append(eventlines.lines(run, kinds))
        else:
            _texts(run[: len(run) // 2], kinds, out)
            _texts(run[len(run) // 2 :], kinds, out)


def _formatted(formatter: eventlines.Formatter | None, block: tuple) -> Iterator[bytes | memoryview]:
    """A block's lines (its texts, lines and `Table`), part by part: json's finished lines as they are,
    orjson's texts through the kernel (each view valid until the next is made)."""
    texts, lines, table = block
    for t in texts:
        yield t if type(t) is bytes else formatter.format(t, lines, table)
