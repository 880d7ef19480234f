"""`RecordSpool`: re-put records a service reads back much later, kept on disk instead of in memory.

In a 3-day run a third of a million rolled timer records wait up to a day on the timer topic for
their slot; as `SimMessage`s with their property maps they took ~1.3 KB each. A streaming run that
releases records (`StoreModel.releasing`) writes each one's fields (`marshal`, the fields of
`SimMessage` in slot order) to an unnamed temporary file and keeps only its place (two int64 per
record); a read decodes a new, equal `SimMessage`. Services never rely on a record's identity:
they copy its properties before editing them.

A service that can rebuild a record from a few numbers keeps a row instead (`put_row`: `ROW_FIELDS`
int64 in memory, no encoding); `get` then asks the row's `rebuild(phys, row)` for the record.
"""

from __future__ import annotations

import marshal
import os
import tempfile
from array import array
from collections.abc import Callable
from operator import attrgetter

from mqtool.simulate.model import SimMessage, message_of

_values = attrgetter(*SimMessage.__slots__)  # the fields as one tuple, in slot order (`message_of`'s order)

ROW_FIELDS = 11  # the int64 a row (`put_row`) holds
FLUSH = 1 << 20  # bytes of records kept in memory before one write appends them to the file
_LEN_BITS = 32  # `_where` packs (file offset << _LEN_BITS) | length into one int


class RecordSpool:
    """Records are appended to a buffer that one write moves to the file when it holds `FLUSH` bytes (a `pwrite`
    per record cost as much as encoding it); a record still in the buffer is read from it. `close()` removes the file.
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="mqtool-sim-")
        self._fd = self._file.fileno()
        self._end = 0  # file offset past the last record put (written or still buffered)
        self._where: dict[int, int] = {}  # phys -> (file offset << _LEN_BITS) | length
        self._buf = bytearray()  # the records from file offset `_flushed` on, not yet written
        self._flushed = 0
        self._rows = array("q")  # `put_row`'s rows, ROW_FIELDS each; `_where` holds ~(row index)
        self._rebuild: Callable[[int, tuple], SimMessage | None] | None = None

    def put(self, m: SimMessage) -> None:
        data = marshal.dumps(_values(m))
        n = len(data)
        self._where[m.phys] = (self._end << _LEN_BITS) | n
        self._end += n
        buf = self._buf
        buf += data
        if len(buf) >= FLUSH:
            os.pwrite(self._fd, buf, self._flushed)
            self._flushed = self._end
            self._buf = bytearray()

    def put_row(self, phys: int, row: tuple, rebuild: Callable[[int, tuple], SimMessage | None]) -> None:
        """Keep the record at `phys` as `row` (ROW_FIELDS int64): `get(phys)` is `rebuild(phys, row)`
        (one `rebuild` a spool)."""
        self._rebuild = rebuild
        self._where[phys] = ~(len(self._rows) // ROW_FIELDS)
        self._rows.extend(row)

    def row(self, phys: int) -> tuple | None:
        """The row `put_row` keeps for `phys`, None for a record kept whole (or none)."""
        v = self._where.get(phys)
        if v is None or v >= 0:
            return None
        i = ~v * ROW_FIELDS
        return tuple(self._rows[i : i + ROW_FIELDS])

    def get(self, phys: int) -> SimMessage | None:
        v = self._where.get(phys)
        if v is None:
            return None
        if v < 0:
            return self._rebuild(phys, self.row(phys))
        at = v >> _LEN_BITS
        n = v & ((1 << _LEN_BITS) - 1)
        i = at - self._flushed
        return message_of(marshal.loads(self._buf[i : i + n] if i >= 0 else os.pread(self._fd, n, at)))

    def __contains__(self, phys: int) -> bool:
        return phys in self._where

    def drop(self, phys: int) -> None:
        self._where.pop(phys, None)

    def __len__(self) -> int:
        return len(self._where)

    def close(self) -> None:
        self._file.close()
