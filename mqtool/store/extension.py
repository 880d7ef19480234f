"""The compiled extension, `mqtool._native`, imported once for every module that calls one of its kernels.

Each kernel has a plain-Python reference beside the code that calls it. Where the extension cannot be
imported (mqtool installed where no C compiler was found) or lacks a kernel (built before its sources
changed, until `pip install -e .` builds it again), `kernel` answers None and the caller runs its
reference; the first `kernel` call of the process says so in one warning, naming everything that falls
back. `plain_python()` makes every `kernel` answer None for a while: how the tests run the references
in one process (the warning is tested in a child process, where the extension is really missing).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

FALLBACKS: dict[str, str] = {
    "CommitLogWalk": "the CommitLog scan (about 50 times slower)",
    "gather": "the CommitLog scan (about 50 times slower)",
    "property_pairs": "the CommitLog scan (about 50 times slower)",
    "host_keys": "the CommitLog scan (about 50 times slower)",
    "TopicTable": "the CommitLog scan (about 50 times slower)",
    "row_checks": "the CommitLog scan (about 50 times slower)",
    "int64_stats": "`messages --json`",
    "json_lines": "`messages --json`",
    "JSONL_LAYOUT": "`messages --json`",
    "JSONL_TEXTS": "`messages --json`",
    "body_crcs": "`messages --format parquet`",
    "string_hashes": "the audit's string hashes",
    "same_strings": "the audit's string hashes",
    "props_scan": "the simulator's property reader",
    "props_row": "the simulator's property reader",
    "event_lines": "the simulator's event log",
}
"""Every kernel (or constant) a module takes from the extension, and what runs as plain Python without it."""

_loaded: list[ModuleType | None] = []  # the extension, or None; filled by the first `kernel` call
_hidden = 0  # `plain_python` blocks open


def kernel(name: str) -> Callable | None:
    """The extension's `name` (one of `FALLBACKS`), or None where the caller runs its plain-Python reference."""
    if name not in FALLBACKS:
        raise KeyError(f"{name!r} is not a kernel of mqtool._native (extension.FALLBACKS lists them)")
    if not _loaded:
        _loaded.append(_load())
    module = _loaded[0]
    return None if module is None or _hidden else getattr(module, name, None)


def _load() -> ModuleType | None:
    """Import the extension, warning once (here) if anything will run as plain Python."""
    try:
        from mqtool import _native as native
    except ImportError as e:
        _warn(f"cannot be loaded ({e})", list(FALLBACKS), "Reinstall mqtool where a C compiler is available")
        return None
    missing = [name for name in FALLBACKS if not hasattr(native, name)]
    if missing:
        _warn(f"is older than its sources (it lacks {', '.join(missing)})", missing, "Rebuild it")
    return native


def _warn(problem: str, names: list[str], remedy: str) -> None:
    what = list(dict.fromkeys(FALLBACKS[name] for name in names))
    warnings.warn(
        f"mqtool's compiled extension {problem}, so these run as plain Python: {', '.join(what)}. "
        f"{remedy} (pip install -e .).",
        RuntimeWarning,
        stacklevel=4,
    )


@contextmanager
def plain_python() -> Iterator[None]:
    """Every `kernel` answers None inside the block, as on a machine where the extension is missing."""
    global _hidden
    _hidden += 1
    try:
        yield
    finally:
        _hidden -= 1
