"""Fast-reader views derived from a Construct definition: numpy dtype, `struct` format, field offsets.

A layout is written once, as a Construct `Struct` in `mqtool.formats`; numpy structured views
(ConsumeQueue, TimerLog, TimerWheel), `struct` decoders and the compiled CommitLog kernel take their
field names, widths and offsets from it through this module, so a new format never restates one.

Only fixed-width fields qualify: integers (`Int32sb` ...), possibly wrapped in `Rebuild`, `Const`
or an `Adapter` over an integer; `Padding` becomes a gap. `prefix()` stops at the first field whose
size depends on the data (the CommitLog header before the hosts).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from construct import Construct, FormatField, Padded, Pass, SizeofError, Struct

# the field type and the list helpers live with the CommitLog's numbers, which need no Construct
from mqtool.formats.record_layout import Field, fields_format, shift, size

if TYPE_CHECKING:
    import numpy as np

_VARIABLE = (SizeofError, KeyError, AttributeError)  # sizeof() of a field that depends on the data


def python_source(values: dict) -> str:
    """`NAME = value` lines for `Field`s, lists of them and ints: a generated block of a module that must not
    import Construct (`record_layout.py`)."""

    def field(f: Field) -> str:
        return f"Field({f.name!r}, {f.offset}, {f.size}, {f.fmt!r})".replace("'", '"')

    lines = []
    for name, v in values.items():
        if isinstance(v, list):
            lines += [f"{name} = [", *(f"    {field(f)}," for f in v), "]"]
        else:
            lines.append(f"{name} = {field(v) if isinstance(v, Field) else int(v)}")
    return "\n".join(lines) + "\n"


def _format_field(sc: Construct) -> FormatField | None:
    """The integer under a field's wrappers (Renamed, Rebuild, Const, Adapter), None if it is not one."""
    while not isinstance(sc, FormatField):
        sc = getattr(sc, "subcon", None)
        if sc is None:
            return None
    return sc


def _is_gap(sc: Construct) -> bool:
    return isinstance(sc, Padded) and sc.subcon is Pass


def _fields(s: Struct, stop_at_variable: bool) -> tuple[list[Field], int]:
    """(fields, bytes covered) of a Struct, walking its subcons in order."""
    out: list[Field] = []
    pos = 0
    for sc in s.subcons:
        try:
            size = sc.sizeof()
        except _VARIABLE:
            if stop_at_variable:
                break
            raise TypeError(f"field {sc.name!r} has no fixed size") from None
        if _is_gap(sc):
            pos += size
            continue
        ff = _format_field(sc)
        if ff is None or sc.name is None:
            if stop_at_variable:
                break
            raise TypeError(f"field {sc.name!r} is not a fixed-width integer")
        out.append(Field(sc.name, pos, size, ff.fmtstr))
        pos += size
    return out, pos


def fields(s: Struct) -> list[Field]:
    """Every field of a fixed-size Struct; TypeError when one is not a fixed-width integer."""
    return _fields(s, stop_at_variable=False)[0]


def prefix(s: Struct) -> list[Field]:
    """The fixed-width fields before the first field whose size depends on the data."""
    return _fields(s, stop_at_variable=True)[0]


def runs(s: Struct) -> list[list[Field]]:
    """The runs of consecutive fixed-width fields, split where a field's size depends on the data.

    Offsets are relative to the start of each run (a reader adds where the run begins).
    """
    out: list[list[Field]] = [[]]
    pos = 0
    for sc in s.subcons:
        try:
            size = sc.sizeof()
        except _VARIABLE:
            size = None
        ff = _format_field(sc) if size is not None and not _is_gap(sc) else None
        if ff is None or sc.name is None:
            if out[-1]:
                out.append([])
            pos = 0
            continue
        out[-1].append(Field(sc.name, pos, size, ff.fmtstr))
        pos += size
    return [r for r in out if r]


def offsets(s: Struct | list[Field], base: int = 0) -> dict[str, int]:
    """Byte offset of each field (plus `base`): the constants the compiled kernel indexes with."""
    fs = s if isinstance(s, list) else prefix(s)
    return {f.name: base + f.offset for f in fs}


def _numpy_code(f: Field) -> str:
    """`>l` (struct's standard 4-byte long) is `>i4` for numpy, whose `l` is the platform's long."""
    code = f.fmt.lstrip("<>=!")
    kind = "f" if code in "efd" else "u" if code.isupper() or code == "?" else "i"
    return f"{f.fmt[0] if f.fmt[0] in '<>' else '>'}{kind}{f.size}"


def dtype(s: Struct) -> np.dtype:
    """The big-endian numpy structured dtype of a fixed-size Struct (same names, offsets, itemsize)."""
    import numpy as np  # here: `formats` is construct and the standard library for everything else

    fs = fields(s)
    return np.dtype(
        {
            "names": [f.name for f in fs],
            "formats": [_numpy_code(f) for f in fs],
            "offsets": [f.offset for f in fs],
            "itemsize": s.sizeof(),
        }
    )


def struct_format(s: Struct | list[Field]) -> struct.Struct:
    """The `struct.Struct` reading the fields in order (gaps as pad bytes), big-endian."""
    if isinstance(s, list):
        return fields_format(s)
    return fields_format(fields(s), s.sizeof())


__all__ = ["Field", "dtype", "fields", "offsets", "prefix", "runs", "shift", "size", "struct_format"]
