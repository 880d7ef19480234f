"""`RecordSpool`: re-put records a service reads back much later, kept on disk instead of in memory.

In a 3-day run a third of a million rolled timer records wait up to a day on the timer topic for
their slot; as `SimMessage`s with their property maps they took ~1.3 KB each. A streaming run that
releases records (`StoreModel.releasing`) writes each one's fields (`marshal`, the fields of
`SimMessage` in slot order) to an unnamed temporary file and keeps only its place (two int64 per
record); a read decodes a new, equal `SimMessage`. Services never rely on a record's identity:
they copy its properties before editing them.
"""

from __future__ import annotations

import marshal
import os
import tempfile
from array import array
from operator import attrgetter

from mqtool.simulate.model import SimMessage

_FIELDS = tuple(SimMessage.__slots__)
_new = object.__new__
_values = attrgetter(*_FIELDS)  # the fields as one tuple, in slot order


def _make_setter():
    """`set_fields(m, values)`: one unpacking assignment of every slot (no loop of `setattr`)."""
    targets = ", ".join(f"m.{f}" for f in _FIELDS)
    scope: dict = {}
    exec(f"def set_fields(m, values):\n    {targets} = values\n", scope)  # noqa: S102 - names from __slots__
    return scope["set_fields"]


_set_fields = _make_setter()


class RecordSpool:
    """`put(m)`, `get(phys)`, `drop(phys)`; `close()` removes the file."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="mqtool-sim-")
        self._fd = self._file.fileno()
        self._end = 0
        self._where: dict[int, int] = {}  # phys -> index into _at
        self._at = array("q")  # (file offset, length) pairs
        self._free: list[int] = []

    def put(self, m: SimMessage) -> None:
        data = marshal.dumps(_values(m))
        os.pwrite(self._fd, data, self._end)
        i = self._where.get(m.phys)
        if i is None:
            if self._free:
                i = self._free.pop()
            else:
                i = len(self._at) // 2
                self._at.extend((0, 0))
            self._where[m.phys] = i
        self._at[2 * i] = self._end
        self._at[2 * i + 1] = len(data)
        self._end += len(data)

    def get(self, phys: int) -> SimMessage | None:
        i = self._where.get(phys)
        if i is None:
            return None
        values = marshal.loads(os.pread(self._fd, self._at[2 * i + 1], self._at[2 * i]))
        m = _new(SimMessage)
        _set_fields(m, values)
        return m

    def drop(self, phys: int) -> None:
        i = self._where.pop(phys, None)
        if i is not None:
            self._free.append(i)

    def __len__(self) -> int:
        return len(self._where)

    def close(self) -> None:
        self._file.close()
