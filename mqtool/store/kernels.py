"""The numba kernels of `fastscan`: the CommitLog walk, Arrow gathers, property splitting, CRC32.

Imported only when a scan needs a kernel (`fastscan.kernels()`), so commands that read small
files (index, queue, config views) never pay numba's import (about 1 s per process). Constants,
column numbers and the layout come from `fastscan` (the Construct definition); nothing here
restates a field.
"""

from __future__ import annotations

import llvmlite.binding as _llvm
import numpy as np
from numba import carray, cfunc, njit, types

from mqtool.store import native


def _import_hidden(module: str, hidden: str) -> None:
    """Import numba's `module` once with the package `hidden` made unimportable (it then takes the
    path numba has for a machine without it), unless either is already imported."""
    import sys

    if module in sys.modules or hidden in sys.modules:
        return
    sys.modules[hidden] = None  # `import hidden...` raises ImportError
    try:
        __import__(module)
    finally:
        del sys.modules[hidden]


def _numba_support_without_scipy_or_cffi() -> None:
    """Import numba's numpy and cffi support with `scipy.linalg` and `cffi` hidden, once, before any
    kernel is loaded: both are startup cost of every command that scans, for features no kernel here
    uses.

    `numba.np.arraymath` asks at import whether scipy's BLAS is there (`_HAVE_BLAS`, for `np.dot`
    and friends), which imports all of `scipy.linalg` (`import numba` itself imports only `scipy`):
    about a third of the start-up. `numba.core.typing.cffi_utils`, imported when the first kernel
    is loaded, builds a `cffi.FFI()` (importing cffi and pycparser, 50-130 ms) so that kernels could
    call cffi functions. A process that imported either package before is left as it is.
    """
    _import_hidden("numba.np.arraymath", "scipy.linalg")
    _import_hidden("numba.core.typing.cffi_utils", "cffi")


_numba_support_without_scipy_or_cffi()


# ===================================================================== CRC32 from the kernel
_CRC_SYMBOL = native.CRC_SYMBOL  # uLong crc32(uLong crc, const Bytef *buf, uInt len); result masked


def _register_crc32(force_table: bool = False) -> str:
    """Make `_CRC_SYMBOL` resolvable by the JIT (cached kernels refer to it by name): zlib-ng or the
    system zlib (`native.register_crc32`), else a table-driven cfunc."""
    found = None if force_table else native.register_crc32()
    if found is not None:
        return found
    _llvm.add_symbol(_CRC_SYMBOL, _table_crc32().address)
    return "table (no zlib found)"


def _crc_table() -> np.ndarray:
    """The CRC-32 (IEEE, reflected) byte table; built only when no zlib is found (~20 ms at import)."""
    table = np.zeros(256, np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[n] = c
    return table


def _table_crc32():
    """zlib's crc32 signature over a byte table (only used where no libz can be loaded)."""
    if not hasattr(_table_crc32, "fn"):
        table = _crc_table()

        @cfunc(types.uint64(types.uint64, types.voidptr, types.uint32))
        def fn(crc, ptr, n):
            data = carray(ptr, n, np.uint8)
            c = np.uint32(crc) ^ np.uint32(0xFFFFFFFF)
            for i in range(n):
                c = table[(c ^ data[i]) & 0xFF] ^ (c >> np.uint32(8))
            return np.uint64(c ^ np.uint32(0xFFFFFFFF))

        _table_crc32.fn = fn  # keeps the compiled code (and its address) alive
    return _table_crc32.fn


CRC_IMPLEMENTATION = _register_crc32()
_crc32 = types.ExternalFunction(_CRC_SYMBOL, types.uint64(types.uint64, types.voidptr, types.uint32))


# ===================================================================== CommitLog kernel
def _compile_walk():
    """`walk`'s functions under numba: the same code objects, with globals where the helpers and
    `_crc32` are their compiled forms (numba resolves globals when it compiles)."""
    from types import FunctionType

    from mqtool.store import walk

    g = dict(vars(walk))
    g["_crc32"] = _crc32
    for name in walk.NUMBA_HELPERS:
        fn = getattr(walk, name)
        g[name] = njit(inline="always")(FunctionType(fn.__code__, g, name))
    fn = walk._commitlog_kernel
    return njit(cache=True, nogil=True)(FunctionType(fn.__code__, g, fn.__name__)), g["_u32"]


_commitlog_kernel, _u32 = _compile_walk()


# ===================================================================== Arrow columns
@njit(cache=True, nogil=True)
def _gather(a, starts, lens, offsets, out):
    """Copy a[starts[i]:starts[i]+lens[i]] to out[offsets[i]:...] (Arrow binary/string data).

    A byte loop, not a slice assignment: LLVM turns it into memcpy, and unlike numba's slice copy it
    allocates nothing and cannot raise (what the C entry of `native` needs)."""
    for i in range(starts.shape[0]):
        o = offsets[i]
        s = starts[i]
        for t in range(lens[i]):
            out[o + t] = a[s + t]


@njit(cache=True, nogil=True)
def _property_pairs(a, starts, lens, rec_offsets, kpos, klen, vpos, vlen):
    """`string2messageProperties` on bytes (0x01/0x02 never occur inside a UTF-8 sequence).

    Pairs in stored order; a repeated name keeps its first place and its last value (dict order).
    Returns the number of pairs (rec_offsets[i] is record i's first pair), or -1 when the pair
    arrays are too small.
    """
    m = 0
    cap = kpos.shape[0]
    for r in range(starts.shape[0]):
        rec_offsets[r] = m
        first = m
        i = starts[r]
        end = i + lens[r]
        while i < end:
            j = i
            k = -1
            while j < end and a[j] != 2:
                if k < 0 and a[j] == 1:
                    k = j
                j += 1
            if k > i and k < j - 1:  # a name and a value
                dup = -1
                for q in range(first, m):
                    if klen[q] == k - i:
                        same = True
                        for t in range(k - i):
                            if a[kpos[q] + t] != a[i + t]:
                                same = False
                                break
                        if same:
                            dup = q
                            break
                if dup >= 0:
                    vpos[dup] = k + 1
                    vlen[dup] = j - k - 1
                else:
                    if m == cap:
                        return -1
                    kpos[m] = i
                    klen[m] = k - i
                    vpos[m] = k + 1
                    vlen[m] = j - k - 1
                    m += 1
            i = j + 1
    rec_offsets[starts.shape[0]] = m
    return m


property_pairs = _property_pairs  # public name: callers outside the scanner (audits) use this


@njit(cache=True, nogil=True)
def _host_keys(a, pos, out):
    """IPv4 address and port of each host as one int64 (only meaningful for IPv4 hosts)."""
    for i in range(pos.shape[0]):
        out[i] = (_u32(a, pos[i]) << 32) | _u32(a, pos[i] + 4)


# ===================================================================== C entry points (`native`)
def c_entry(kernel, spec: str):
    """`kernel` (an njit function) behind a C ABI, as a numba `cfunc` whose object code `native`
    caches: each array as a pointer and its shape, ints and bools as int64, int tuples as a pointer,
    the result written to an int64 buffer (`native.parse_spec` reads `spec`; `Native.kernel` makes
    the matching ctypes call). No allocation, no exception: the object code needs neither NRT nor
    the Python API, which `native.build` checks."""
    from numba.np.unsafe.ndarray import to_fixed_tuple

    args, ret = native.parse_spec(spec)
    params, values, sig = [], [], []
    env = {"carray": carray, "kernel": kernel, "to_fixed_tuple": to_fixed_tuple, "np": np}
    for i, (kind, what, ndim) in enumerate(args):
        if kind == "array":
            dims = [f"s{i}_{d}" for d in range(ndim)]
            params += [f"p{i}", *dims]
            sig += [types.voidptr] + [types.int64] * ndim
            env[f"t{i}"] = what
            values.append(f"carray(p{i}, ({', '.join(dims)},), t{i})")
        elif kind == "tuple":
            params.append(f"p{i}")
            sig.append(types.voidptr)
            values.append(f"to_fixed_tuple(carray(p{i}, {what}, np.int64), {what})")
        else:
            params.append(f"x{i}")
            sig.append(types.int64)
            values.append(f"x{i} != 0" if kind == "bool" else f"x{i}")
    call = f"kernel({', '.join(values)})"
    if ret:
        params.append("result")
        sig.append(types.voidptr)
        targets = ", ".join(f"r[{k}]" for k in range(ret))
        body = f"    r = carray(result, {ret}, np.int64)\n    {targets} = {call}\n"
    else:
        body = f"    {call}\n"
    exec(f"def entry({', '.join(params)}):\n{body}", env)  # noqa: S102 - generated glue, no input
    return cfunc(types.void(*sig), error_model="numpy")(env["entry"])


def c_entries() -> dict:
    """The scan kernels' C entry points (`fastscan.NATIVE_SPECS`), compiled on demand: a numba-only
    process never pays for them."""
    from mqtool.store.fastscan import NATIVE_SPECS

    kernels = {"walk": _commitlog_kernel, "gather": _gather, "property_pairs": _property_pairs,
               "host_keys": _host_keys}
    return {name: c_entry(kernels[name], spec) for name, spec in NATIVE_SPECS.items()}
