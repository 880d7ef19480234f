"""`TimerUnits`: the simulator's TimerLog units by position, in compact columns.

A run over a million timer messages holds a million 52-byte units; as Python tuples in a dict
they took ~360 bytes each. Here a TimerLog file's units sit on its 52-byte grid in one `bytearray`
(10 native 64-bit values a unit, packed and unpacked by one `struct` call) plus a presence byte; a
position off the grid (a damaged store's odd file start) falls back to a plain dict. A unit's first
seven values are the tuple the service always used (`UNIT_FIELDS`); the last three are the row a
plain delivery of its record needs (`DeliveryRows`: meta, hi, lo; all zero for none), so the dequeue
need not read the record again. `reader` gives both at once, the form `rules.timer.walk_chain` walks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import itemgetter

import numpy as np

from mqtool.formats.timerlog import TIMERLOG_UNIT_SIZE

# a unit's fields, as `formats.timerlog` names them (the magic number and the unit's size aside)
UNIT_FIELDS = ("prev_pos", "magic", "write_time", "delayed_time", "offset_py", "size_py", "topic_hash")
ROW_FIELDS = (*UNIT_FIELDS, "meta", "hi", "lo")  # a unit and its delivery row, as `reader` reads them
FIELDS = len(UNIT_FIELDS)
UNIT_DTYPE = np.dtype([(name, "=i8") for name in UNIT_FIELDS])  # a run of units `put_run` writes
NO_ROW = (0, 0, 0)
# a unit's fields by name (`walk_chain`'s prev_pos and magic, ...)
PREV_POS, MAGIC, DELAYED_TIME, OFFSET_PY = (
    itemgetter(ROW_FIELDS.index(name)) for name in ("prev_pos", "magic", "delayed_time", "offset_py")
)
_UNIT = struct.Struct(f"={FIELDS}q")
_ROW = struct.Struct(f"={FIELDS}q{len(NO_ROW)}Q")
_STRIDE = _ROW.size
_WIDTH = len(ROW_FIELDS)
_GROW = 4096  # units a file's columns grow by at once


class TimerUnits:
    """A mapping `pos -> unit tuple` (get, [], []=, in, len) backed by per-file rows, each with its delivery row."""

    __slots__ = ("file_size", "_cols", "_here", "_odd", "_n")

    def __init__(self, file_size: int) -> None:
        self.file_size = int(file_size) if file_size and file_size > 0 else 1 << 62
        self._cols: dict[int, bytearray] = {}
        self._here: dict[int, bytearray] = {}
        self._odd: dict[int, tuple] = {}
        self._n = 0

    def _where(self, pos: int) -> tuple[int, int] | None:
        if pos < 0:
            return None
        f, within = divmod(pos, self.file_size)
        i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
        return None if rest else (f, i)

    def put(self, pos: int, unit, row=NO_ROW) -> None:
        """The unit at `pos` (7 values) and its delivery row (on the grid only; zeros: none)."""
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
        _ROW.pack_into(cols, i * _STRIDE, *unit, *row)

    __setitem__ = put

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
        """`self.put(pos + 52 * j, rows[j], extra[j])` for every j: the units a batch enqueue appends one after
        another (`rows` of `UNIT_DTYPE`, or int64 with one row of 7 values a unit), their columns written at
        once; `extra` (uint64 rows of 3, zeros for none) the delivery rows kept beside them."""
        n = len(rows)
        if rows.dtype == UNIT_DTYPE:
            rows = rows.view(np.int64).reshape(n, FIELDS)
        w = self._where(pos)
        if w is None or not n or (pos + (n - 1) * TIMERLOG_UNIT_SIZE) // self.file_size != pos // self.file_size:
            xs = extra.tolist() if extra is not None else [NO_ROW] * n
            for j, (unit, x) in enumerate(zip(rows.tolist(), xs, strict=True)):
                self.put(pos + j * TIMERLOG_UNIT_SIZE, unit, x)
            return
        f, i = w
        here, cols = self._grow(f, i + n)
        self._n += here.count(0, i, i + n)
        here[i : i + n] = b"\x01" * n
        view = np.frombuffer(cols, np.int64, n * _WIDTH, i * _STRIDE).reshape(n, _WIDTH)  # `_ROW`'s layout
        view[:, :FIELDS] = np.asarray(rows, np.int64).reshape(n, FIELDS)
        view[:, FIELDS:] = 0 if extra is None else np.asarray(extra, np.uint64).reshape(n, len(NO_ROW)).view(np.int64)
        del view  # the bytearray may grow again only without a view on it

    def reader(self, fallback: Callable[[int], tuple | None]) -> Callable[[int], tuple | None]:
        """`read(pos)`: the unit held at `pos` with its delivery row (`ROW_FIELDS`), else `fallback(pos)`'s unit
        (one not held here, e.g. read from the store's TimerLog) with none, or None: `walk_chain`'s reader."""
        fs, here_of, cols_of, unpack = self.file_size, self._here, self._cols, _ROW.unpack_from

        def read(pos: int) -> tuple | None:
            f, within = divmod(pos, fs)
            i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
            here = here_of.get(f)
            if rest or pos < 0 or here is None or i >= len(here) or not here[i]:
                u = fallback(pos)
                return None if u is None else (*u, *NO_ROW)
            return unpack(cols_of[f], i * _STRIDE)

        return read

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
