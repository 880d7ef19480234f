"""TimerLog and TimerWheel (spec §6.3, §6.4), read-only."""

import gzip
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mqtool.formats.timerlog import TIMERLOG_BLANK_MAGIC, TIMERLOG_UNIT_SIZE, unit_kind
from mqtool.formats.timerwheel import SLOT_SIZE, SLOTS_TOTAL, slot_index
from mqtool.store import fastscan
from mqtool.store.findings import Finding
from mqtool.store.mapped_files import MappedFileQueue, map_file, open_queue, read_at

_UNIT = struct.Struct(">iqiqiqiiq")
_SLOT = struct.Struct(">qqqii")
_SLOT_DTYPE = fastscan.SLOT_DTYPE


class TimerLogUnit(NamedTuple):
    """One TimerLog unit at `pos`; `delayed_time_ms` = write time + delta (the slot it is in)."""

    pos: int
    size: int
    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delayed_time_delta: int
    offset_py: int
    size_py: int
    real_topic_hash: int
    reserved: int

    @property
    def delayed_time_ms(self) -> int:
        return self.curr_write_time_ms + self.delayed_time_delta

    @property
    def kind(self) -> str:
        return unit_kind(self.magic)


class Slot(NamedTuple):
    """A wheel slot; an empty (or stale) slot reads as time -1, positions -1, num 0."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int
    magic: int

    @property
    def empty(self) -> bool:
        return self.time_ms == -1


EMPTY_SLOT = Slot(-1, -1, -1, 0, 0)


@dataclass
class TimerLog:
    root: Path
    queue: MappedFileQueue

    @classmethod
    def open(cls, root: Path, configured_size: int | None = None) -> "TimerLog":
        return cls(root, open_queue(root / "timerlog", configured_size, "timerlog", root))

    @property
    def findings(self) -> list[Finding]:
        return list(self.queue.findings)

    def read_unit(self, pos: int) -> TimerLogUnit | None:
        """The unit at a TimerLog offset, or None when none is written there."""
        f = self.queue.file_for(pos)
        if f is None:
            return None
        data = read_at(f.path, pos - f.start, TIMERLOG_UNIT_SIZE)
        if len(data) < TIMERLOG_UNIT_SIZE or _UNIT.unpack_from(data)[0] != TIMERLOG_UNIT_SIZE:
            return None
        return TimerLogUnit(pos, *_UNIT.unpack_from(data))

    def iter_units(self) -> Iterator[TimerLogUnit]:
        """Every unit in order; a file ends at its 16-byte filler or at zeros."""
        for start, units in self.scan_columns():
            cols = [units[name].tolist() for name in fastscan.TIMERLOG_DTYPE.names]
            del units
            for i, row in enumerate(zip(*cols, strict=True)):
                yield TimerLogUnit(start + i * TIMERLOG_UNIT_SIZE, *row)

    def scan_columns(self) -> Iterator[tuple[int, np.ndarray]]:
        """(global offset of the file's first unit, units) per file: a big-endian structured view
        (`fastscan.TIMERLOG_DTYPE`) over the mapping, valid until the next item is requested."""
        for f in self.queue.files:
            with map_file(f.path) as buf:
                units = fastscan.timerlog_units(buf)
                try:
                    yield f.start, units
                finally:
                    del units

    def end_offset(self) -> int:
        """One past the last unit (where the next unit would be written)."""
        end = self.queue.min_offset
        for u in self.iter_units():
            end = u.pos + TIMERLOG_UNIT_SIZE
        return end

    @staticmethod
    def is_filler(data: bytes) -> bool:
        return len(data) >= 16 and struct.unpack_from(">i", data, 12)[0] == TIMERLOG_BLANK_MAGIC


@dataclass
class TimerWheel:
    """The wheel file (or `timerwheel.gz`, as the oracle ships it), read into a numpy view."""

    path: Path
    slots: np.ndarray
    precision_ms: int
    slots_total: int = SLOTS_TOTAL

    @classmethod
    def open(cls, root: Path, precision_ms: int) -> "TimerWheel | None":
        p = root / "timerwheel"
        if p.is_file():
            data = p.read_bytes()
        elif (root / "timerwheel.gz").is_file():
            p = root / "timerwheel.gz"
            data = gzip.decompress(p.read_bytes())
        else:
            return None
        n = len(data) // SLOT_SIZE
        return cls(p, np.frombuffer(data, dtype=_SLOT_DTYPE, count=n), precision_ms)

    def get_slot(self, time_ms: int) -> Slot:
        """`TimerWheel.getSlot`: valid only when the stored time equals time / precision."""
        i = slot_index(time_ms, self.precision_ms, self.slots_total)
        if i >= len(self.slots):
            return EMPTY_SLOT
        s = self.slots[i]
        if int(s["time"]) != time_ms // self.precision_ms:
            return EMPTY_SLOT
        return Slot(int(s["time"]) * self.precision_ms, int(s["first"]), int(s["last"]), int(s["num"]),
                    int(s["magic"]))

    def iter_slots(self) -> Iterator[tuple[int, Slot]]:
        """(slot index, slot) of every written slot (stored time != 0), in index order."""
        for i in np.nonzero(self.slots["time"] != 0)[0]:
            s = self.slots[i]
            yield int(i), Slot(int(s["time"]) * self.precision_ms, int(s["first"]), int(s["last"]),
                               int(s["num"]), int(s["magic"]))
