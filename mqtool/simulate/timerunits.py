"""`TimerUnits`: the simulator's TimerLog units by position, in compact columns.

A run over a million timer messages holds a million 52-byte units; as Python tuples in a dict
they took ~360 bytes each. Here a TimerLog file's units sit on its 52-byte grid in one `bytearray`
(10 native 64-bit values a unit, packed and unpacked by one `struct` call); a position off the grid (a
damaged store's odd file start) falls back to a plain dict. A unit's first
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
from mqtool.simulate.timerrows import NO_ROW

# a unit's fields, as `formats.timerlog` names them (the magic number and the unit's size aside)
UNIT_FIELDS = ("prev_pos", "magic", "write_time", "delayed_time", "offset_py", "size_py", "topic_hash")
ROW_FIELDS = (*UNIT_FIELDS, "meta", "hi", "lo")  # a unit and its delivery row, as `reader` reads them
FIELDS = len(UNIT_FIELDS)
UNIT_DTYPE = np.dtype([(name, "=i8") for name in UNIT_FIELDS])  # a run of units `put_run` writes
# a unit's fields by name (`walk_chain`'s prev_pos and magic, ...)
PREV_POS, MAGIC, OFFSET_PY = (itemgetter(ROW_FIELDS.index(name)) for name in ("prev_pos", "magic", "offset_py"))
_ROW = struct.Struct(f"={FIELDS}q{len(NO_ROW)}Q")
_STRIDE = _ROW.size
_WIDTH = len(ROW_FIELDS)
_GROW = 4096  # units a file's columns grow by at once


class TimerUnits:
    """The units by position (`put`, `put_run`; `get`, `reader`), each with its delivery row. A row of magic 0
    is none written (the columns start zeroed): a unit of magic 0 (a damaged store's) is held off the columns."""

    __slots__ = ("file_size", "_cols", "_odd", "_read")

    def __init__(self, file_size: int) -> None:
        self.file_size = int(file_size) if file_size and file_size > 0 else 1 << 62
        self._cols: dict[int, bytearray] = {}
        self._odd: dict[int, tuple] = {}  # off the grid (a damaged store's odd file start), or of magic 0
        self._read = self.reader(self._odd.get)

    def put(self, pos: int, unit, row=NO_ROW) -> None:
        """The unit at `pos` (7 values) and its delivery row (on the grid only; zeros: none)."""
        f, within = divmod(pos, self.file_size)
        i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
        _prev, magic, *_rest = unit
        if rest or pos < 0 or not magic:
            self._odd[pos] = tuple(unit)
        if not (rest or pos < 0):
            _ROW.pack_into(self._grow(f, i + 1), i * _STRIDE, *unit, *row)

    __setitem__ = put

    def put_run(self, positions: list[int], rows: np.ndarray, extra: np.ndarray) -> None:
        """`self.put(positions[j], rows[j], extra[j])` for every j (`rows` of `UNIT_DTYPE` or int64 rows of 7,
        `extra` uint64 rows of 3): the units a batch enqueue appends (never of magic 0: `MAGIC_DEFAULT`), their
        columns written at once where they follow one another on one file's grid."""
        n, pos = len(positions), positions[0]
        f, within = divmod(pos, self.file_size)
        if rows.dtype == UNIT_DTYPE:
            rows = rows.view(np.int64).reshape(n, FIELDS)
        one_run = positions[-1] - pos == (n - 1) * TIMERLOG_UNIT_SIZE and within + positions[-1] - pos < self.file_size
        if pos < 0 or within % TIMERLOG_UNIT_SIZE or not one_run:
            for p, unit, x in zip(positions, rows.tolist(), extra.tolist(), strict=True):
                self.put(p, unit, x)
            return
        i = within // TIMERLOG_UNIT_SIZE
        cols = self._grow(f, i + n)
        view = np.frombuffer(cols, np.int64, n * _WIDTH, i * _STRIDE).reshape(n, _WIDTH)  # `_ROW`'s layout
        view[:, :FIELDS] = rows
        view[:, FIELDS:] = extra.view(np.int64)
        del view  # the bytearray may grow again only without a view on it

    def _grow(self, f: int, units: int) -> bytearray:
        """File `f`'s columns, grown to hold at least `units` units."""
        cols = self._cols.setdefault(f, bytearray())
        if units * _STRIDE > len(cols):
            cols.extend(bytes(_STRIDE * (units + _GROW) - len(cols)))
        return cols

    def reader(self, fallback: Callable[[int], tuple | None]) -> Callable[[int], tuple | None]:
        """`read(pos)`: the unit held at `pos` with its delivery row (`ROW_FIELDS`), else `fallback(pos)`'s unit
        (one not held here, e.g. read from the store's TimerLog) with none, or None: `walk_chain`'s reader."""
        fs, cols_of, unpack = self.file_size, self._cols, _ROW.unpack_from

        def read(pos: int) -> tuple | None:
            f, within = divmod(pos, fs)
            i, rest = divmod(within, TIMERLOG_UNIT_SIZE)
            cols = cols_of.get(f)  # (none for a negative position: `put` holds those off the columns)
            if not rest and cols is not None and i * _STRIDE < len(cols):
                row = unpack(cols, i * _STRIDE)
                if row[1]:  # magic 0: none here
                    return row
            u = fallback(pos)
            return None if u is None else (*u, *NO_ROW)

        return read

    def get(self, pos: int) -> tuple | None:
        """The unit at `pos` (its 7 fields), None where none is held."""
        row = self._read(pos)
        return None if row is None else row[:FIELDS]
