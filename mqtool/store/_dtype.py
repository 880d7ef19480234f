"""numpy dtypes and `struct` formats derived from a flat Construct Struct of integers (no second layout).

Stand-in until a shared Struct -> dtype helper exists (the lead's `formats/layout.py`): the fast
readers view mapped files through this dtype, so the Construct definition stays the only layout.
"""

import numpy as np
from construct import FormatField, Renamed, Struct


def struct_dtype(s: Struct) -> np.dtype:
    """Big/little-endian integer fields of `s` as a packed structured dtype with the same names and offsets."""
    fields = []
    for sub in s.subcons:
        inner = sub.subcon if isinstance(sub, Renamed) else sub
        if not isinstance(inner, FormatField) or not sub.name:
            raise TypeError(f"{sub!r} is not a named fixed-width integer field")
        order, code = inner.fmtstr[0], inner.fmtstr[1:]
        kind = "u" if code.isupper() else "i"
        fields.append((sub.name, f"{'>' if order == '>' else '<'}{kind}{inner.length}"))
    dt = np.dtype(fields)
    assert dt.itemsize == s.sizeof()
    return dt


def struct_format(s: Struct) -> str:
    """The same fields as a `struct` module format (one byte order), for per-item unpacking."""
    orders = set()
    codes = []
    for sub in s.subcons:
        inner = sub.subcon if isinstance(sub, Renamed) else sub
        if not isinstance(inner, FormatField):
            raise TypeError(f"{sub!r} is not a fixed-width integer field")
        orders.add(inner.fmtstr[0])
        codes.append(inner.fmtstr[1:])
    if len(orders) != 1:
        raise TypeError("mixed byte orders")
    return orders.pop() + "".join(codes)
