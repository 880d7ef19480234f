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


def memcpy():
    """`_copy(out, o, src, s, n)` for numba: LLVM's memcpy of `src[s:s + n]` to `out[o:]` (two uint8
    arrays; no slice objects, so the object code keeps needing neither NRT nor the Python API). Shared by the
    kernels of `inspect.jsonlines` and `simulate.eventlines`."""
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _copy(typingctx, out, o, src, s, n):
        def codegen(context, builder, signature, args):
            ints = [context.cast(builder, args[i], signature.args[i], types.intp) for i in (1, 3, 4)]
            dst = context.make_array(signature.args[0])(context, builder, args[0]).data
            src_ = context.make_array(signature.args[2])(context, builder, args[2]).data
            cgutils.raw_memcpy(builder, builder.gep(dst, [ints[0]]), builder.gep(src_, [ints[1]]), ints[2], 1)
            return context.get_dummy_value()

        return types.void(out, o, src, s, n), codegen

    return _copy
