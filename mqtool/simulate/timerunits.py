"""`TimerUnits`: the simulator's TimerLog units by position, in compact columns.

A run over a million timer messages holds a million 52-byte units; as Python tuples in a dict
they took ~360 bytes each. Here a TimerLog file's units sit on its 52-byte grid in one
`bytearray` (7 native int64 per unit, 56 bytes, packed and unpacked by one `struct` call) plus a
presence byte; a position off the grid (a
damaged store's odd file start) falls back to a plain dict. The values read back are the tuples
the service always used: `(prev_pos, magic, write_time, delayed_time, offset_py, size_py, topic_hash)`.

Beside a unit, the service may keep what a plain delivery of its record needs (`extra`: three uint64,
see `TimerService._columns`), so the dequeue need not read the record again; a unit written without
them (`[]=`, `put_run` without `extra`) has none.
"""

from __future__ import annotations

import struct

import numpy as np

from mqtool.formats.timerlog import TIMERLOG_UNIT_SIZE

# a unit's fields, as `formats.timerlog` names them (the magic number and the unit's size aside)
UNIT_FIELDS = ("prev_pos", "magic", "write_time", "delayed_time", "offset_py", "size_py", "topic_hash")
FIELDS = len(UNIT_FIELDS)
UNIT_DTYPE = np.dtype([(name, "=i8") for name in UNIT_FIELDS])  # a run of units `put_run` writes
_UNIT = struct.Struct(f"={FIELDS}q")
_STRIDE = _UNIT.size
_GROW = 4096  # units a file's columns grow by at once
XFIELDS = 3
_XUNIT = struct.Struct(f"={XFIELDS}Q")
_XSTRIDE = _XUNIT.size


def _file(where: tuple[int, int]) -> int:
    f, _i = where
    return f


def _meta(x) -> int:
    """An `extra` row's first value (0: no row)."""
    meta, _hi, _lo = x
    return meta


class TimerUnits:
    """A mapping `pos -> unit tuple` (get, [], []=, in, len) backed by per-file int64 rows."""

    __slots__ = ("file_size", "_cols", "_here", "_odd", "_n", "_x")

    def __init__(self, file_size: int) -> None:
        self.file_size = int(file_size) if file_size and file_size > 0 else 1 << 62
        self._cols: dict[int, bytearray] = {}
        self._here: dict[int, bytearray] = {}
        self._odd: dict[int, tuple] = {}
        self._n = 0
        self._x: dict[int, bytearray] = {}  # file -> `extra` rows (grown only where some are written)

    def _where(self, pos: int) -> tuple[int, int] | None:
        if pos < 0:
            return None
        f, within = divmod(pos, self.file_size)
        i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
        return None if rest else (f, i)

    def __setitem__(self, pos: int, unit: tuple) -> None:
        w = self._where(pos)
        if w is None:
            if pos not in self._odd:
                self._n += 1
            self._odd[pos] = tuple(unit)
            return
        f, i = w
        here, cols = self._grow(f, i + 1)
        if not here[i]:
            here[i] = 1
            self._n += 1
        _UNIT.pack_into(cols, i * _STRIDE, *unit)
        x = self._x.get(f)
        if x is not None and i * _XSTRIDE < len(x):
            _XUNIT.pack_into(x, i * _XSTRIDE, 0, 0, 0)

    def _grow(self, f: int, units: int) -> tuple[bytearray, bytearray]:
        """File `f`'s (written flags, columns), grown to hold at least `units` units."""
        here = self._here.get(f)
        if here is None:
            here = self._here[f] = bytearray()
            self._cols[f] = bytearray()
        cols = self._cols[f]
        if units > len(here):
            grow = units - len(here) + _GROW
            here.extend(bytes(grow))
            cols.extend(bytes(_STRIDE * grow))
        return here, cols

    def put_run(self, pos: int, rows: np.ndarray, extra: np.ndarray | None = None) -> None:
        """`self[pos + 52 * j] = rows[j]` for every j: the units a batch enqueue appends one after
        another (`rows` of `UNIT_DTYPE`, or int64 with one row of 7 values a unit), their columns written at
        once; `extra` (uint64 rows of XFIELDS, zeros for none) the rows kept beside them."""
        n = len(rows)
        if rows.dtype == UNIT_DTYPE:
            rows = rows.view(np.int64).reshape(n, FIELDS)
        w = self._where(pos)
        last = self._where(pos + (n - 1) * TIMERLOG_UNIT_SIZE) if n else None
        if w is None or last is None or _file(last) != _file(w):
            xs = extra.tolist() if extra is not None else [None] * n
            for j, (unit, x) in enumerate(zip(rows.tolist(), xs, strict=True)):
                at = pos + j * TIMERLOG_UNIT_SIZE
                self[at] = unit
                if x is not None and _meta(x):
                    self.set_extra(at, x)
            return
        f, i = w
        here, cols = self._grow(f, i + n)
        self._n += here.count(0, i, i + n)
        here[i : i + n] = b"\x01" * n
        view = np.frombuffer(cols, np.int64, n * FIELDS, i * _STRIDE)  # `_UNIT`'s native int64 layout
        view[:] = np.asarray(rows, np.int64).reshape(n * FIELDS)
        del view  # the bytearray may grow again only without a view on it
        self._put_extra(f, i, n, extra)

    def _put_extra(self, f: int, i: int, n: int, extra: np.ndarray | None) -> None:
        """File `f`'s `extra` rows [i, i + n): `extra` (uint64, XFIELDS a row; a row of zeros is none), or none."""
        x = self._x.get(f)
        if extra is None:
            if x is None or i * _XSTRIDE >= len(x):
                return
            n = min(n, len(x) // _XSTRIDE - i)
        else:
            if x is None:
                x = self._x[f] = bytearray()
            need = (i + n) * _XSTRIDE
            if need > len(x):
                x.extend(bytes(need - len(x) + _GROW * _XSTRIDE))
        view = np.frombuffer(x, np.uint64, n * XFIELDS, i * _XSTRIDE)
        view[:] = 0 if extra is None else np.asarray(extra, np.uint64).reshape(n * XFIELDS)
        del view

    def extra(self, pos: int) -> tuple[int, int, int] | None:
        """The `extra` row kept beside the unit at `pos`, None when there is none."""
        f, within = divmod(pos, self.file_size)
        x = self._x.get(f)
        if x is None or pos < 0:
            return None
        i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
        if rest or (i + 1) * _XSTRIDE > len(x):
            return None
        row = _XUNIT.unpack_from(x, i * _XSTRIDE)
        return row if _meta(row) else None

    def set_extra(self, pos: int, row) -> None:
        """Keep `row` (XFIELDS uint64, the first non-zero) beside the unit at `pos` (on the grid only)."""
        w = self._where(pos)
        if w is None:
            return
        f, i = w
        x = self._x.get(f)
        if x is None:
            x = self._x[f] = bytearray()
        if (i + 1) * _XSTRIDE > len(x):
            x.extend(bytes((i + 1) * _XSTRIDE - len(x) + _GROW * _XSTRIDE))
        _XUNIT.pack_into(x, i * _XSTRIDE, *row)

    def chain(self, last_pos: int, extra: bool = False) -> list[tuple] | None:
        """`walk_chain(last_pos, self.get, prev_pos)`'s units when the walk ends at prevPos -1 through
        units held here whose positions fall all the way (every unit appended here points back
        before itself); None otherwise (a unit not held, a prevPos forward or in a loop): the caller
        walks it with `walk_chain`. With `extra`, (pos, unit, its `extra` row or None) a unit."""
        out = []
        xs = self._x if extra else None
        pos = last_pos
        bound = 1 << 62
        fs = self.file_size
        cols_of, here_of = self._cols, self._here
        unpack = _UNIT.unpack_from
        while pos != -1:
            if pos < 0 or pos >= bound:
                return None
            f, within = divmod(pos, fs)
            i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
            here = here_of.get(f)
            if rest or here is None or i >= len(here) or not here[i]:
                return None
            u = unpack(cols_of[f], i * _STRIDE)
            if xs is None:
                out.append((pos, u))
            else:
                x = xs.get(f)
                if x is not None and (i + 1) * _XSTRIDE <= len(x):
                    meta, _hi, _lo = x = _XUNIT.unpack_from(x, i * _XSTRIDE)
                    if not meta:
                        x = None
                else:
                    x = None
                out.append((pos, u, x))
            bound = pos
            pos, _magic, _write, _delayed, _offset, _size, _hash = u  # on to its prevPos
        return out

    def get(self, pos: int, default=None):
        w = self._where(pos)
        if w is None:
            return self._odd.get(pos, default)
        f, i = w
        here = self._here.get(f)
        if here is None or i >= len(here) or not here[i]:
            return default
        return _UNIT.unpack_from(self._cols[f], i * _STRIDE)

    def __getitem__(self, pos: int) -> tuple:
        u = self.get(pos)
        if u is None:
            raise KeyError(pos)
        return u

    def __contains__(self, pos: int) -> bool:
        return self.get(pos) is not None

    def __len__(self) -> int:
        return self._n
