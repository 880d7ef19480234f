"""TimerLog and TimerWheel (spec §6.3, §6.4), read-only."""

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mqtool.formats.timerlog import (
    TIMERLOG_BLANK,
    TIMERLOG_BLANK_MAGIC,
    TIMERLOG_DTYPE,
    TIMERLOG_UNIT_SIZE,
    unit_kind,
)
from mqtool.formats.timerwheel import SLOT_SIZE, SLOTS_TOTAL, slot_index
from mqtool.store import fastscan
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import MappedFileQueue, map_file, open_queue, read_at


class TimerLogUnit(NamedTuple):
    """One TimerLog unit at `pos`; `delayed_time_ms` = write time + delta (the slot it is in).

    The fields after `pos` are `timerlog_unit`'s, in its order (checked below).
    """

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
assert TimerLogUnit._fields[1:] == TIMERLOG_DTYPE.names


@dataclass
class TimerLog:
    root: Path
    queue: MappedFileQueue

    @classmethod
    def open(cls, root: Path, configured_size: int | None = None, findings: Findings | None = None,
             expected_size: int | None = None) -> "TimerLog":
        """`findings` (the queue's accumulator, `queue.findings`) receives what listing the files finds;
        `expected_size`: broker.conf's mappedFileSizeTimerLog when it sets one."""
        return cls(root, open_queue(root / "timerlog", configured_size, "timerlog", root, findings, expected_size))

    @property
    def findings(self) -> list[Finding]:
        return list(self.queue.findings)

    def read_unit(self, pos: int) -> TimerLogUnit | None:
        """The unit at a TimerLog offset, or None when none is written there."""
        f = self.queue.file_for(pos)
        if f is None:
            return None
        data = read_at(f.path, pos - f.start, TIMERLOG_UNIT_SIZE)
        fields = fastscan.timerlog_unit_at(data, 0)
        return None if fields is None else TimerLogUnit(pos, *fields)

    def iter_units(self) -> Iterator[TimerLogUnit]:
        """Every unit in order; a file ends at its 16-byte filler or at zeros."""
        for start, units in self.scan_columns():
            cols = [units[name].tolist() for name in TIMERLOG_DTYPE.names]
            del units
            for i, row in enumerate(zip(*cols, strict=True)):
                yield TimerLogUnit(start + i * TIMERLOG_UNIT_SIZE, *row)

    def scan_columns(self) -> Iterator[tuple[int, np.ndarray]]:
        """(global offset of the file's first unit, units) per file: a big-endian structured view
        (`TIMERLOG_DTYPE`, the fields of `timerlog_unit`) over the mapping, valid until the next item is requested."""
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
        return len(data) >= TIMERLOG_BLANK.size and TIMERLOG_BLANK.unpack_from(data)[-1] == TIMERLOG_BLANK_MAGIC


@dataclass
class TimerWheel:
    """The wheel file (or `timerwheel.gz`, as the oracle ships it), read into a numpy view."""

    path: Path
    slots: np.ndarray
    precision_ms: int
    slots_total: int = SLOTS_TOTAL

    @classmethod
    def open(cls, root: Path, precision_ms: int) -> "TimerWheel | None":
        p = wheel_path(root)
        return None if p is None else cls(p, read_wheel_slots(p), precision_ms)

    def get_slot(self, time_ms: int) -> Slot:
        """`TimerWheel.getSlot`: valid only when the stored time equals time / precision."""
        i = slot_index(time_ms, self.precision_ms, self.slots_total)
        if i >= len(self.slots):
            return EMPTY_SLOT
        s = self.slots[i]
        if int(s["time_units"]) != time_ms // self.precision_ms:
            return EMPTY_SLOT
        return self._slot(s)

    def iter_slots(self) -> Iterator[tuple[int, Slot]]:
        """(slot index, slot) of every written slot (stored time != 0), in index order."""
        for i in np.nonzero(self.slots["time_units"] != 0)[0]:
            yield int(i), self._slot(self.slots[i])

    def _slot(self, s) -> Slot:
        return Slot(int(s["time_units"]) * self.precision_ms, int(s["first_pos"]), int(s["last_pos"]),
                    int(s["num"]), int(s["magic"]))


def wheel_path(root: Path) -> Path | None:
    """`timerwheel`, else `timerwheel.gz` (as the oracle ships it), else None."""
    for name in ("timerwheel", "timerwheel.gz"):
        if (root / name).is_file():
            return root / name
    return None


def read_wheel_slots(path: Path | str, begin: int = 0, end: int | None = None) -> np.ndarray:
    """Slots [begin, end) of a wheel file or its `.gz` as a numpy view (`SLOT_DTYPE`); all by default."""
    path = str(path)
    count = -1 if end is None else (end - begin) * SLOT_SIZE
    if path.endswith(".gz"):
        with gzip.open(path) as fh:
            fh.seek(begin * SLOT_SIZE)
            data = fh.read(count)
    elif end is None and begin == 0:
        data = Path(path).read_bytes()
    else:
        data = read_at(Path(path), begin * SLOT_SIZE, count if count >= 0 else 1 << 62)
    return fastscan.timerwheel_slots(data)


def wheel_slot_count(path: Path | str) -> int:
    """Slots in a wheel file; for a `.gz`, from gzip's ISIZE trailer (the plain length mod 2**32)."""
    path = Path(path)
    if path.suffix == ".gz":
        with open(path, "rb") as fh:
            fh.seek(-4, 2)
            return int.from_bytes(fh.read(4), "little") // SLOT_SIZE
    return path.stat().st_size // SLOT_SIZE
