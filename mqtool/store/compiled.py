"""`kernel`: how a module's kernel, written as plain Python, is compiled by numba.

The kernel's source stays runnable as Python (the tests run it so); numba compiles the same code
object against a copy of its module's globals in which the helpers it calls are compiled too
(LLVM inlines them) and some names stand for numba-only objects (intrinsics, the scan's CRC).
`store/native.py` then keeps the object code. Imported only where numba is (a kernel is built).
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType


def kernel(main: Callable, helpers: tuple[Callable, ...] = (), bound: dict | None = None) -> Callable:
    """`main` compiled by numba (cached on disk, no GIL), its module's functions `helpers` compiled
    beside it and the names of `bound` standing for their objects, in a copy of its globals."""
    from numba import njit

    g = dict(main.__globals__)
    g.update(bound or {})
    for fn in helpers:
        g[fn.__name__] = njit(FunctionType(fn.__code__, g, fn.__name__))
    return njit(cache=True, nogil=True)(FunctionType(main.__code__, g, main.__name__))
