"""numba kernels loaded through llvmlite alone (legacy: the CommitLog scan's kernels are in `mqtool._native`).

Still used by the output and simulator kernels that have not moved to the extension yet
(`inspect/jsonlines.py`, `inspect/parquet.py`, `audit/commitlog.py`, `simulate/plainscan.py`,
`simulate/eventlines.py`); deleted once none imports it.

numba stays the compiler. The first scan of an installation (or after the kernels' sources change)
compiles C-ABI entry points (`c_entry`) and writes their native object
code to a cache file; every later process loads that object into an LLVM MCJIT engine and calls it
through ctypes: about 0.1 s instead of numba's 0.6 s of imports and typing registries.

The cache file is keyed on the sources of the modules whose code or constants the kernels hold, the
numba and llvmlite versions, numba's environment and the host CPU (name and features: the code is
compiled for it). It carries its key and the SHA-256 of the object code: a stale, truncated or
corrupt file is recompiled, never loaded. Writers go through a temporary name and `os.replace`, so
two first runs at once leave one whole file. Any failure (also a cache directory that cannot be
written: every process would compile) leaves `load()` returning None and the scan uses numba's
dispatchers as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import llvmlite
import llvmlite.binding as _llvm
import numpy as np

CRC_SYMBOL = "mqtool_crc32"  # uLong crc32(uLong crc, const Bytef *buf, uInt len); result masked
_MAGIC = b"mqtool-native-1\n"
ALLOWED_EXTERNALS = frozenset({CRC_SYMBOL, "memcpy", "memmove", "memset", "memcmp"})
"""The only symbols the object code may leave unresolved: no NRT, no Python API, no numba helper."""


# ===================================================================== CRC32 symbol
def crc32_providers():
    """(name, library path, symbol) candidates, fastest first: zlib-ng's SIMD CRC (about 19 GB/s on
    these machines), then the system zlib that CPython uses (about 3.5 GB/s)."""
    try:
        from zlib_ng import zlib_ng

        yield "zlib-ng", zlib_ng.__file__, "zng_crc32"
    except ImportError:  # pragma: no cover - zlib-ng is a dependency
        pass
    name = ctypes.util.find_library("z")
    for lib in ([name] if name else []) + ["libz.so.1", "libz.dylib"]:
        yield "zlib", lib, "crc32"


def register_crc32() -> str | None:
    """Make `CRC_SYMBOL` resolvable by any LLVM JIT of this process; which one, or None (no zlib)."""
    if hasattr(register_crc32, "found"):
        return register_crc32.found
    found = None
    for what, lib, symbol in crc32_providers():
        try:
            fn = getattr(ctypes.CDLL(lib), symbol)
        except (OSError, AttributeError):
            continue
        _llvm.add_symbol(CRC_SYMBOL, ctypes.cast(fn, ctypes.c_void_p).value)
        found = f"{what} ({lib})"
        break
    register_crc32.found = found
    return found


# ===================================================================== cache key and file
def cache_dir() -> Path:
    """`$MQTOOL_CACHE_DIR`, else `$XDG_CACHE_HOME/mqtool`, else `~/.cache/mqtool` (the package
    directory may be read-only)."""
    if os.environ.get("MQTOOL_CACHE_DIR"):
        return Path(os.environ["MQTOOL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mqtool"


def _numba_version() -> str:
    """numba's version without importing it (importlib.metadata alone costs ~90 ms): the name of its
    dist-info directory, and the stat of its `__init__.py`."""
    from importlib.util import find_spec

    spec = find_spec("numba")
    if spec is None or spec.origin is None:
        return "none"
    init = Path(spec.origin)
    site = init.parent.parent
    dist = sorted(n for n in os.listdir(site) if n.startswith("numba-") and n.endswith((".dist-info", ".egg-info")))
    st = init.stat()
    return f"{dist} {st.st_size} {st.st_mtime_ns}"


def cache_key(group: str, sources: tuple[str, ...]) -> str:
    """SHA-256 of everything a group's object code depends on (see the module docstring)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(group.encode() + b"\0")
    for rel in sources:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    numba_env = sorted((k, v) for k, v in os.environ.items() if k.startswith("NUMBA_") and k != "NUMBA_CACHE_DIR")
    h.update(repr((_numba_version(), llvmlite.__version__, sys.version_info[:2], _llvm.get_process_triple(),
                   _llvm.get_host_cpu_name(), _llvm.get_host_cpu_features().flatten(), numba_env)).encode())
    return h.hexdigest()


def _cache_file(group: str, key: str) -> Path:
    return cache_dir() / f"{group}-{key[:24]}.o"


def read_cache(path: Path, key: str) -> tuple[list[str], bytes] | None:
    """(entry names, object code) of a cache file written for `key`, None when absent, stale or corrupt."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, sep, rest = data.partition(b"\n\n")
    lines = head.split(b"\n")
    if not sep or not data.startswith(_MAGIC) or len(lines) < 4:
        return None
    _, file_key, digest, *names = lines
    if file_key != key.encode() or hashlib.sha256(rest).hexdigest().encode() != digest:
        return None
    return [n.decode() for n in names], rest


def _writable(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK)


def write_cache(path: Path, key: str, names: list[str], obj: bytes) -> None:
    """Write atomically (a temporary name, then `os.replace`); an unwritable directory is no error."""
    head = b"\n".join([_MAGIC.rstrip(b"\n"), key.encode(), hashlib.sha256(obj).hexdigest().encode(),
                       *(n.encode() for n in names)])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head + b"\n\n" + obj)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


# ===================================================================== building (numba) and loading
def _target_machine():
    _llvm.initialize_native_target()
    _llvm.initialize_native_asmprinter()
    target = _llvm.Target.from_triple(_llvm.get_process_triple())
    return target.create_target_machine(cpu=_llvm.get_host_cpu_name(),
                                        features=_llvm.get_host_cpu_features().flatten(),
                                        reloc="static", codemodel="jitdefault", jit=True)


def build(entries: Callable[[], dict]) -> tuple[list[str], bytes]:
    """Compile the C entry points `entries()` gives (short name -> numba `cfunc`) with numba and
    return (entry names, object code).

    Each entry's library is linked into one module where everything but the entries is made
    internal; interprocedural constant propagation then proves the kernels never report an error,
    which drops the wrappers' error paths (the only users of the Python API, the GIL helpers and NRT).
    Raises RuntimeError if any other external symbol is left.
    """
    entries = entries()
    mod = None
    for fn in entries.values():
        part = _llvm.parse_bitcode(fn._library._final_module.as_bitcode())
        if mod is None:
            mod = part
        else:
            mod.link_in(part)
    names = {fn.native_name: short for short, fn in entries.items()}
    for f in mod.functions:
        if not f.is_declaration and f.name not in names:
            f.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration:
            g.linkage = "internal"
    tm = _target_machine()
    pm = _llvm.create_new_module_pass_manager()
    pm.add_ipsccp_pass()
    pm.add_global_dead_code_eliminate_pass()
    pm.add_simplify_cfg_pass()
    pm.add_global_dead_code_eliminate_pass()
    pm.add_strip_dead_prototype_pass()
    pm.run(mod, _llvm.create_pass_builder(tm, _llvm.create_pipeline_tuning_options(speed_level=3)))
    left = sorted({f.name for f in mod.functions if f.is_declaration and not f.name.startswith("llvm.")}
                  | {g.name for g in mod.global_variables if g.is_declaration})
    if set(left) - ALLOWED_EXTERNALS:
        raise RuntimeError(f"kernel object code needs symbols outside {sorted(ALLOWED_EXTERNALS)}: {left}")
    order = list(entries)
    by_short = {short: native for native, short in names.items()}
    return [f"{short} {by_short[short]}" for short in order], tm.emit_object(mod)


class Native:
    """The loaded object code: one MCJIT engine, the entries' addresses by short name."""

    def __init__(self, names: list[str], obj: bytes):
        if register_crc32() is None:
            raise RuntimeError("no zlib crc32 to bind")
        mod = _llvm.parse_assembly("")
        mod.triple = _llvm.get_process_triple()
        self._engine = _llvm.create_mcjit_compiler(mod, _target_machine())
        self._engine.add_object_file(_llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()
        self.addresses: dict[str, int] = {}
        for line in names:
            short, native = line.split(" ", 1)
            address = self._engine.get_function_address(native)
            if not address:
                raise RuntimeError(f"{native} not in the object code")
            self.addresses[short] = address

    def kernel(self, short: str, spec: str, fallback: Callable[[], Callable]) -> Callable:
        """Entry `short` called like the njit kernel it wraps (numpy arrays, ints, bools, int tuples;
        see `parse_spec`). A strided array is passed as a contiguous copy (copied back when writable);
        arguments of another dtype or shape go to `fallback()`, numba's dispatcher. ctypes releases
        the GIL during the call, like numba's `nogil`."""
        args, ret = parse_spec(spec)
        argtypes: list = []
        for kind, _, ndim in args:
            argtypes += [ctypes.c_void_p] + [ctypes.c_int64] * ndim if kind == "array" else [
                ctypes.c_void_p if kind == "tuple" else ctypes.c_int64]
        fn = ctypes.CFUNCTYPE(None, *argtypes, *([ctypes.c_void_p] if ret else []))(self.addresses[short])

        def call(*values):
            cargs: list = []
            keep = []
            back = []
            for (kind, what, ndim), x in zip(args, values, strict=True):
                if kind == "array":
                    if not (isinstance(x, np.ndarray) and x.dtype == what and x.ndim == ndim):
                        return fallback()(*values)
                    if not x.flags.c_contiguous:  # a strided view: the kernel works on a copy
                        y = np.ascontiguousarray(x)
                        if x.flags.writeable:
                            back.append((x, y))  # copied back: the kernel may have written it
                        keep.append(y)
                        x = y
                    cargs.append(x.ctypes.data)
                    cargs += x.shape
                elif kind == "tuple":
                    t = np.array(x, np.int64)
                    if t.shape != (what,):
                        return fallback()(*values)
                    keep.append(t)
                    cargs.append(t.ctypes.data)
                else:
                    cargs.append(int(x))
            result = np.empty(ret, np.int64)
            fn(*cargs, *([result.ctypes.data] if ret else []))
            for x, y in back:
                x[...] = y
            return None if not ret else int(result[0]) if ret == 1 else tuple(result.tolist())

        return call


def parse_spec(spec: str) -> tuple[list[tuple[str, object, int]], int]:
    """A C entry's arguments and result, as the njit kernel takes them: "u1[:] i8[:,:] i8 ? i8*22 -> i8*4"
    is a uint8 vector, a 2-D int64 array, an int, a bool, a tuple of 22 ints, returning a tuple of 4
    ints ("-> i8": one int, no arrow: nothing). Returns ([(kind, dtype or length, ndim)], result ints)."""
    params, _, result = spec.partition("->")
    args: list[tuple[str, object, int]] = []
    for p in params.split():
        if "[" in p:
            code, dims = p.split("[", 1)
            args.append(("array", np.dtype(code), dims.count(":")))
        elif "*" in p:
            args.append(("tuple", int(p.split("*")[1]), 0))
        else:
            args.append(("bool" if p == "?" else "int", None, 0))
    result = result.strip()
    return args, (0 if not result else int(result.split("*")[1]) if "*" in result else 1)


_loaded: dict[str, Native | None] = {}
errors: dict[str, str] = {}  # why `load(group)` gave None (for diagnostics and tests)


def load(group: str, entries: Callable[[], dict], sources: tuple[str, ...]) -> Native | None:
    """A group of native kernels: from its cache file when current, else compiled by `entries()`
    (which imports numba) and cached. `sources`: the files (relative to the repository) the object
    code depends on. None when they cannot be had (no zlib, a symbol left unresolved, an LLVM error):
    callers then use numba's dispatchers."""
    if group in _loaded:
        return _loaded[group]
    lib = None
    try:
        if register_crc32() is None:
            raise RuntimeError("no zlib crc32 to bind")
        key = cache_key(group, sources)
        path = _cache_file(group, key)
        cached = read_cache(path, key)
        if cached is not None:
            try:
                lib = Native(*cached)
            except Exception:  # noqa: BLE001 - a file LLVM refuses: compile again
                lib = None
        if lib is None:
            if not _writable(path.parent):  # compiling in every process would cost more than numba's load
                raise RuntimeError(f"cache directory {path.parent} is not writable")
            built = build(entries)
            write_cache(path, key, *built)
            lib = Native(*built)
    except Exception as e:  # noqa: BLE001 - any failure means: use numba as before
        errors[group] = f"{type(e).__name__}: {e}"
    _loaded[group] = lib
    return lib


def kernels_or_numba(group: str, specs: dict[str, str], numba_kernels: Callable[[], dict],
                     sources: tuple[str, ...]) -> dict:
    """{name: kernel} of a module's kernels: its group's native code (compiled on a cache miss from
    `numba_kernels()` behind C entries of `specs`), else numba's dispatchers (no native code to be had)."""

    def entries() -> dict:
        fns = numba_kernels()
        return {name: c_entry(fns[name], spec) for name, spec in specs.items()}

    lib = load(group, entries, sources)
    if lib is None:
        return numba_kernels()
    return {name: lib.kernel(name, spec, lambda name=name: numba_kernels()[name]) for name, spec in specs.items()}


def c_entry(kernel, spec: str):
    """`kernel` (an njit function) behind a C ABI, as a numba `cfunc` whose object code `native`
    caches: each array as a pointer and its shape, ints and bools as int64, int tuples as a pointer,
    the result written to an int64 buffer (`native.parse_spec` reads `spec`; `Native.kernel` makes
    the matching ctypes call). No allocation, no exception: the object code needs neither NRT nor
    the Python API, which `native.build` checks."""
    from numba import carray, cfunc, types
    from numba.np.unsafe.ndarray import to_fixed_tuple

    args, ret = parse_spec(spec)
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


def __getattr__(name: str):
    """`_crc32`: `CRC_SYMBOL` as a numba external function, for the numba recipes of the modules above."""
    if name == "_crc32":
        from numba import types

        register_crc32()
        fn = types.ExternalFunction(CRC_SYMBOL, types.uint64(types.uint64, types.voidptr, types.uint32))
        globals()["_crc32"] = fn
        return fn
    raise AttributeError(name)
