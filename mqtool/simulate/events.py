"""The simulator's event records and their JSON Lines form (`mqtool/schemas/simulate-event.json`).

One line per event, keys in this order: `time` (virtual epoch ms), `service`
(`schedule|timer|transaction|broker`), `event`, `topic`, `queue_id`, `uniq_key`,
`physical_offset`, `new_physical_offset`, then event-specific detail keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from mqtool.formats.names import ACK_TAG

SERVICES = ("schedule", "timer", "transaction", "broker", "consumer")
EVENTS = ("deliver", "enqueue", "roll", "cancel", "check", "put_back", "commit", "rollback", "discard",
          "skip", "put_failed", "persist", "crash", "restart", "clock_jump", "consume", "send_back", "dlq",
          "drop", "pop", ACK_TAG, "revive")  # the ack event is named like the ack record's tag


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


def _orjson_line(dumps, error) -> Callable[[dict[str, Any]], bytes]:
    """`_JSON.encode(d)` as UTF-8, made by orjson where it writes the same text: every value a str,
    int, bool or None (orjson escapes strings as `json` does with `ensure_ascii=False`,
    tests/test_output.py; compact output has `json`'s separators). A float, a nested value, an integer
    past 64 bits or a lone surrogate goes through `json` itself."""
    encode = _JSON.encode
    scalars = _SCALARS.issuperset

    def line(d: dict[str, Any]) -> bytes:
        if scalars(map(type, d.values())):
            try:
                return dumps(d)
            except error:
                pass
        return encode(d).encode("utf-8", "surrogatepass")

    return line


def _plain_line(dumps, error) -> Callable[[dict[str, Any]], bytes]:
    """`line` for callers whose values are never floats and nested at most as a dict of str to int
    (`EventLog.emit_plain`): orjson refuses what it cannot write as `json` does (integers past 64
    bits, lone surrogates), so only the type check is left out."""
    encode = _JSON.encode

    def line(d: dict[str, Any]) -> bytes:
        try:
            return dumps(d)
        except error:
            return encode(d).encode("utf-8", "surrogatepass")

    return line


def _json_line(d: dict[str, Any]) -> bytes:
    return _JSON.encode(d).encode("utf-8", "surrogatepass")


def _line_encoders() -> tuple[Callable[[dict[str, Any]], bytes], Callable[[dict[str, Any]], bytes]]:
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return _json_line, _json_line
    return _orjson_line(orjson.dumps, orjson.JSONEncodeError), _plain_line(orjson.dumps, orjson.JSONEncodeError)


_FLUSH_LINES = 4096


class EventLog:
    """The ordered event history, handed on as it happens.

    Each event goes to the watchers of its kind (`watch`: the summary's tallies, the invariant
    checks), to `sink` when one is given (a text file: one JSON line per event, written in batches of
    lines), and into `events` when `hold` (the default without a sink: tests and library callers
    iterate it). `keep=False` only counts, and the services do not even compute the details
    (benchmarks). Call `flush()` at the end of a run with a sink.
    """

    def __init__(self, keep: bool = True, sink: TextIO | None = None, hold: bool | None = None) -> None:
        self.keep = keep
        self.sink = sink
        self.hold = keep and (sink is None if hold is None else hold)
        self.events: list[SimEvent] = []
        self.count = 0
        self.by_kind: dict[str, int] = {}
        self._watchers: dict[str, list[Callable[[SimEvent], None]]] = {}
        self._lines: list[bytes] = []  # UTF-8 lines, decoded together when written
        self._encode, self._plain = _line_encoders() if sink is not None else (_json_line, _json_line)

    def watch(self, event: str, callback: Callable[[SimEvent], None]) -> None:
        """Call `callback(e)` for every recorded event of that kind, in order."""
        self._watchers.setdefault(event, []).append(callback)

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
        self.count += 1
        by_kind = self.by_kind
        by_kind[event] = by_kind.get(event, 0) + 1
        if not self.keep:
            return
        watchers = self._watchers.get(event)
        e = None
        if self.hold or watchers:
            e = SimEvent(time, service, event, topic, queue_id, uniq_key, physical_offset, new_physical_offset,
                         detail)
            if self.hold:
                self.events.append(e)
        if self.sink is not None:
            # `e.as_dict()` without the event: no detail key can be one of the eight (they are `emit`'s
            # parameters), so the detail follows them as given
            lines = self._lines
            lines.append((self._plain if plain else self._encode)(
                {"time": time, "service": service, "event": event, "topic": topic, "queue_id": queue_id,
                 "uniq_key": uniq_key, "physical_offset": physical_offset,
                 "new_physical_offset": new_physical_offset, **detail}))
            if len(lines) >= _FLUSH_LINES:
                self.flush()
        if watchers:
            for w in watchers:
                w(e)

    def record_batch(self, time: int, service: str, event: str, rows: list[tuple],
                     detail_keys: tuple[str, ...]) -> None:
        """Events of one kind at one time, in order: each row is `(topic, queue_id, uniq_key,
        physical_offset, new_physical_offset, *detail)` with the detail values in `detail_keys`' order,
        every value as `emit_plain` takes it. The same as `record(..., plain=True)` row by row; the batch
        paths of the services call this so that the log can write a batch at once."""
        if not self.keep:
            self.count += len(rows)
            self.by_kind[event] = self.by_kind.get(event, 0) + len(rows)
            return
        record = self.record
        for r in rows:
            record(time, service, event, r[0], r[1], r[2], r[3], r[4], dict(zip(detail_keys, r[5:], strict=True)),
                   True)

    def tally(self, event: str) -> None:
        """Count an event without recording it: the hot paths call this instead of `emit` when
        `keep` is False, so that the event's details are not even computed."""
        self.count += 1
        self.by_kind[event] = self.by_kind.get(event, 0) + 1

    def flush(self) -> None:
        """Write the lines not yet written to the sink."""
        if self._lines and self.sink is not None:
            self._lines.append(b"")
            self.sink.write(b"\n".join(self._lines).decode("utf-8", "surrogatepass"))
            self._lines.clear()

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
