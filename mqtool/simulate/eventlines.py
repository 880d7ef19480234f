"""The event log's lines formatted by compiled code on the writer thread, without the GIL.

The run's thread hands over a block of events as one orjson text: a JSON array whose items are the
line dicts of `EventLog.record` (`{...}`) and the `record_batch`/`record_rows` calls
`[time, template id, [[row values], ...]]` (a template is an int: its id). `_format` (numba; loaded as
native code through `mqtool/store/native.py`, so a process never imports numba once the object code
is cached) copies each dict's text as a line, and writes each row as its template's fixed pieces
(`'{"time":'`, `',"service":...,"topic":'`, `',"queue_id":'`, ..., `'}\\n'`) around the texts of the
call's time (a `record_rows` row's own first value) and the row's values, exactly as orjson wrote
them: the bytes `json` writes for these values (`tests/simulate/test_event_lines.py`). A value's
text is found by walking the JSON structure (strings with their escapes, nested dicts), so a comma
or a bracket inside a string is no special case.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SPEC = "u1[:] u1[:] i8[:] i8[:] u1[:] u1[:] -> i8"  # `_format`'s arguments (`native.parse_spec`)
SOURCES = ("mqtool/simulate/eventlines.py", "mqtool/store/kernels.py", "mqtool/store/native.py",
           "mqtool/store/fastscan.py", "mqtool/store/compiled.py")
TOO_SMALL, MALFORMED = -1, -2  # `_format`'s failures: `out` is too small; a text it does not expect


def _skip(src, i, n):
    """The index after the JSON value starting at `src[i]` (orjson's text: no white space)."""
    c = src[i]
    if c == 34:  # a string: up to its closing quote; a backslash escapes the next byte
        i += 1
        while i < n:
            c = src[i]
            if c == 92:
                i += 2
            elif c == 34:
                return i + 1
            else:
                i += 1
        return n
    if c == 123 or c == 91:  # an object or array: to its matching bracket, strings skipped whole
        depth = 0
        string = False
        while i < n:
            c = src[i]
            if string:
                if c == 92:
                    i += 1
                elif c == 34:
                    string = False
            elif c == 34:
                string = True
            elif c == 123 or c == 91:
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n
    while i < n:  # a number, true, false, null
        c = src[i]
        if c == 44 or c == 93 or c == 125:
            return i
        i += 1
    return n


def _copy(out, o, src, s, n):
    """`out[o:o + n] = src[s:s + n]` (compiled: LLVM's memcpy, `store.compiled.memcpy`)."""
    for q in range(n):
        out[o + q] = src[s + q]


def _piece_value(out, o, pieces, a, b, src, s, e):
    """A template's piece `pieces[a:b]` then a value's text `src[s:e]` to `out[o:]`: where they end, or -1
    when `out` is too small for them."""
    if o + (b - a) + (e - s) > len(out):
        return -1
    _copy(out, o, pieces, a, b - a)
    o += b - a
    _copy(out, o, src, s, e - s)
    return o + e - s


def _format(src, pieces, poff, tfirst, timed, out):
    """The lines of the orjson text `src` (see the module docstring) written to `out`; their length, or
    `TOO_SMALL` / `MALFORMED`. Template `t`'s pieces are `pieces[poff[k]:poff[k + 1]]` for `k` in
    `tfirst[t]` .. `tfirst[t + 1] - 1`; `timed[t]`: its rows carry their own time (`record_rows`)."""
    n = len(src)
    cap = len(out)
    ntemplates = len(tfirst) - 1
    if n < 2 or src[0] != 91:
        return MALFORMED
    i = 1
    o = 0
    while i < n - 1:
        c = src[i]
        if c == 44:
            i += 1
            continue
        if c == 123:  # a line dict: its text and a newline
            e = _skip(src, i, n)
            if o + e - i + 1 > cap:
                return TOO_SMALL
            _copy(out, o, src, i, e - i)
            o += e - i
            out[o] = 10
            o += 1
            i = e
            continue
        if c != 91:
            return MALFORMED
        # a call: [time,template,[[row],...]]
        ts = i + 1
        te = _skip(src, ts, n)
        if te >= n or src[te] != 44:
            return MALFORMED
        i = te + 1
        t = 0
        while i < n and 48 <= src[i] <= 57:
            t = t * 10 + (src[i] - 48)
            i += 1
        if t >= ntemplates or i + 1 >= n or src[i] != 44 or src[i + 1] != 91:
            return MALFORMED
        i += 2
        first, last = tfirst[t], tfirst[t + 1]
        while i < n and src[i] != 93:
            if src[i] == 44:
                i += 1
                continue
            if src[i] != 91:
                return MALFORMED
            i += 1
            k = first
            if not timed[t]:  # the call's time is the row's first value
                o = _piece_value(out, o, pieces, poff[k], poff[k + 1], src, ts, te)
                if o < 0:
                    return TOO_SMALL
                k += 1
            while i < n and src[i] != 93:
                if src[i] == 44:
                    i += 1
                    continue
                e = _skip(src, i, n)
                if k >= last - 1:
                    return MALFORMED
                o = _piece_value(out, o, pieces, poff[k], poff[k + 1], src, i, e)
                if o < 0:
                    return TOO_SMALL
                k += 1
                i = e
            if k != last - 1:
                return MALFORMED
            a, b = poff[k], poff[k + 1]
            if o + (b - a) > cap:
                return TOO_SMALL
            _copy(out, o, pieces, a, b - a)
            o += b - a
            i += 1  # the row's ]
        if i + 1 >= n or src[i + 1] != 93:
            return MALFORMED
        i += 2  # the rows' ] and the call's ]
    return o


class Table:
    """The templates' fixed pieces as `_format` reads them; `fixed`: the most bytes of pieces a line has."""

    def __init__(self, templates: list) -> None:
        blob, offsets, first, timed = bytearray(), [0], [0], []
        self.fixed = 1
        for t in templates:  # in id order
            for p in t.pieces:
                blob += p
                offsets.append(len(blob))
            first.append(len(offsets) - 1)
            timed.append(t.timed)
            self.fixed = max(self.fixed, sum(map(len, t.pieces)))
        self.pieces = np.frombuffer(bytes(blob) or b"\0", np.uint8)
        self.poff = np.array(offsets, np.int64)
        self.tfirst = np.array(first, np.int64)
        self.timed = np.array(timed or [0], np.uint8)


class Formatter:
    """`format(text, lines, table)`: the bytes of a block's lines (a view into a buffer reused by the next
    call: write it before formatting the next). Made on one thread, used on another (the writer's)."""

    def __init__(self, kernel: Callable) -> None:
        self._kernel = kernel
        self._out = np.empty(1 << 20, np.uint8)

    def format(self, text: bytes, lines: int, table: Table) -> memoryview:
        src = np.frombuffer(text, np.uint8)
        need = len(text) + lines * (table.fixed + 21)  # a line's pieces, its time's text again, a newline
        while True:
            if len(self._out) < need:
                self._out = np.empty(need + (need >> 2), np.uint8)
            n = self._kernel(src, table.pieces, table.poff, table.tfirst, table.timed, self._out)
            if n >= 0:
                return memoryview(self._out)[:n]
            if n != TOO_SMALL:
                raise RuntimeError("event lines: orjson's text is not what the formatter reads")
            need = 2 * len(self._out)


_loaded: list = []


def formatter() -> Formatter | None:
    """A `Formatter` over the compiled `_format` (native code, else numba's dispatcher), or None when
    neither can be had (the run's thread then formats the lines in Python)."""
    if not _loaded:
        try:
            from mqtool.store import native

            kernel = native.kernels_or_numba("eventlines", {"format": SPEC}, lambda: {"format": _numba_format()},
                                             SOURCES)["format"]
        except Exception:  # noqa: BLE001 - no compiler to be had: the Python path writes the same lines
            kernel = None
        _loaded.append(kernel)
    return Formatter(_loaded[0]) if _loaded[0] is not None else None


def _numba_format():
    """`_format` compiled with numba (cached on disk), `_skip` and `_piece_value` inlined, `_copy` a memcpy."""
    from mqtool.store import compiled

    return compiled.kernel(_format, (_skip, _piece_value), {"_copy": compiled.memcpy()})
