"""The event log's lines: each kind's fixed pieces, the compiled formatter and its plain-Python reference.

A batch is `(kind id, column, column, ...)`, one value per event in each column, in its `Kind`'s name
order (`time` first). The run's thread hands a block of batches over as one orjson text; the writer
thread turns it into lines with `mqtool._native.event_lines` (`_kernels/eventlines.pxi`, the GIL
released): each event's line is its kind's fixed pieces around the texts orjson wrote for its values,
the bytes `json` writes for these values (str, int up to 64 bits, bool, None, a dict of str to int).
`lines` writes the same bytes with `json`, one line dict at a time: the reference the kernel is tested
against, the way for values orjson refuses, and the fallback (with one warning) when the extension
is not built.
"""

from __future__ import annotations

import json

import numpy as np

# json.dumps(d, ensure_ascii=False, separators=(",", ":")) builds this encoder on every call
JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
ROW_NAMES = ("topic", "queue_id", "uniq_key", "physical_offset", "new_physical_offset")
KEYS = ("time", "service", "event", *ROW_NAMES)
"""A line's first keys, in order; event-specific detail keys follow."""
TOO_SMALL, MALFORMED, SCRATCH = -1, -2, -3  # the kernel's failures: `out`, the text, its scratch `spans`


def _text(value: str) -> bytes:
    return JSON.encode(value).encode("utf-8", "surrogatepass")


class Kind:
    """One kind of line: `service` and `event`, its columns `names` (`time`, the five row names, then `detail`
    keys), `id` (its place in its log: the number orjson writes for it) and `pieces` (the line's fixed bytes
    before each column's value and after the last)."""

    __slots__ = ("id", "service", "event", "names", "detail", "index", "pieces")

    def __init__(self, kid: int, service: str, event: str, detail: tuple[str, ...]) -> None:
        if len(set(detail)) != len(detail) or not set(detail).isdisjoint(KEYS):
            raise ValueError(f"detail keys {detail!r} repeat a key of the line")
        self.id, self.service, self.event, self.detail = kid, service, event, detail
        self.names = ("time", *ROW_NAMES, *detail)
        self.index = {k: i for i, k in enumerate(self.names)}
        after_time = b",%b:%b,%b:%b" % (_text("service"), _text(service), _text("event"), _text(event))
        self.pieces = (
            [b"{%b:" % _text("time")]
            + [(after_time if i == 1 else b"") + b",%b:" % _text(k) for i, k in enumerate(self.names) if i]
            + [b"}\n"]
        )

    def constant(self, key: str):
        """The value of a key that is not a column: the service, the event, None (a detail it has not)."""
        return self.service if key == "service" else self.event if key == "event" else None

    def dicts(self, columns: tuple) -> list[dict]:
        """The line dicts of a batch's columns (`json`'s key order)."""
        keys, ident = ("time", "service", "event", *self.names[1:]), (self.service, self.event)
        return [dict(zip(keys, (time, *ident, *rest), strict=True)) for time, *rest in zip(*columns, strict=True)]


def lines(batches: list[tuple], kinds: list[Kind]) -> bytes:
    """The lines of `batches` as `json` writes them, one line dict at a time (the reference)."""
    out = []
    for kid, *columns in batches:
        out += map(JSON.encode, kinds[kid].dicts(columns))
    return "\n".join(out).encode("utf-8", "surrogatepass") + b"\n" if out else b""


class Table:
    """The kinds' pieces as the kernel reads them; `fixed`: the most bytes of pieces a line has."""

    def __init__(self, kinds: list[Kind]) -> None:
        blob, offsets, first = bytearray(), [0], [0]
        self.fixed, widest = 1, 1
        for kind in kinds:  # in id order
            for p in kind.pieces:
                blob += p
                offsets.append(len(blob))
            first.append(len(offsets) - 1)
            self.fixed = max(self.fixed, sum(map(len, kind.pieces)))
            widest = max(widest, len(kind.names))
        self.pieces = np.frombuffer(bytes(blob) or b"\0", np.uint8)
        self.poff = np.array(offsets, np.int64)
        self.kfirst = np.array(first, np.int64)
        self.widest = widest  # the most columns a kind has


class Formatter:
    """`format(text, lines, table)`: the bytes of a block's lines (a view into a buffer the next call
    reuses: write it before formatting the next). Made on one thread, used on one other (the writer's)."""

    def __init__(self, kernel) -> None:
        self._kernel = kernel
        self._out = np.empty(1 << 20, np.uint8)
        self._spans = np.empty(1 << 16, np.int64)

    def format(self, text: bytes, lines: int, table: Table) -> memoryview:
        src = np.frombuffer(text, np.uint8)
        need = len(text) + lines * table.fixed
        spans = 2 * lines * table.widest + 2  # two per value of the block's events: enough for any batch of them
        while True:
            if len(self._out) < need:
                self._out = np.empty(need + (need >> 2), np.uint8)
            if len(self._spans) < spans:
                self._spans = np.empty(spans + (spans >> 2), np.int64)
            n = self._kernel(src, table.pieces, table.poff, table.kfirst, self._spans, self._out)
            if n >= 0:
                return memoryview(self._out)[:n]
            if n == TOO_SMALL:
                need = 2 * len(self._out)
            elif n == SCRATCH:
                spans = 2 * len(self._spans)
            else:
                raise RuntimeError("event lines: orjson's text is not what the formatter reads")
