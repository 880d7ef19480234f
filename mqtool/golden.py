"""Golden files: compare a command's JSON output with a stored copy, or rewrite that copy.

`inspect --json --expect FILE` and `simulate --expect FILE` use this module; it is pure logic (no
Typer, no Rich, no printing). A golden holds either one JSON document (pretty-printed, 2-space
indent) or JSON Lines (one compact record per line): `lines=True` for record streams (`inspect`
messages/queue, the simulator's event log), decided by the caller, never guessed from the file.

Volatile fields never reach a golden and are ignored when comparing:
- absolute paths: each path given in `paths` (for example the store directory) is replaced by its
  placeholder wherever it appears in a string, and a value of a path key (`store`, `path`, ...) that
  is still absolute becomes `<path>`;
- fields that describe the run rather than the store (`VOLATILE_KEYS`, such as the audit report's
  `engine`: Spark master, partitions and executors).
Wall-clock time has no field of its own to strip: a command that would read the clock must be given
a fixed time instead (`inspect --now`), and the CLI refuses `--expect` without it.

Equality is on the normalised JSON values (key order is not significant); the readable difference
is a unified diff (`difflib`) of both sides pretty-printed, so each changed field shows on its own line.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqtool.errors import MqtoolError

# Top-level keys that describe how or where a run happened, not the store: removed before comparing.
VOLATILE_KEYS = frozenset({"engine"})
# Keys whose values are file system paths: an absolute value left after `paths` is replaced by `<path>`.
PATH_KEYS = frozenset({"store", "path", "root", "out", "index", "events", "parquet"})
PATH_PLACEHOLDER = "<path>"


class GoldenError(MqtoolError, ValueError):
    """A golden file that is missing or not JSON (a usage or input error, exit 2)."""


def check_golden_options(expect: object | None, update_golden: bool) -> None:
    """GoldenError for --update-golden without --expect: there is no file to rewrite."""
    if update_golden and expect is None:
        raise GoldenError("--update-golden needs --expect FILE (the golden file to rewrite)")


@dataclass(frozen=True)
class GoldenResult:
    """The outcome of `check_golden`: `equal`, the `diff` text ("" when equal) and a one-line `message`."""

    path: Path
    equal: bool
    updated: bool
    diff: str
    message: str


def normalise(doc: Any, paths: Mapping[str, str | os.PathLike] | None = None) -> Any:
    """A copy of `doc` without volatile fields: `paths` maps a placeholder (`"<store>"`) to an absolute path."""
    subs = sorted(((str(Path(p).resolve()), name) for name, p in (paths or {}).items()),
                  key=lambda s: -len(s[0]))

    def text(s: str) -> str:
        for p, name in subs:
            if s == p or p in s:
                s = s.replace(p, name)
        return s

    def walk(v: Any, key: str | None, top: bool) -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k, False) for k, x in v.items() if not (top and k in VOLATILE_KEYS)}
        if isinstance(v, list):
            return [walk(x, None, False) for x in v]
        if isinstance(v, str):
            v = text(v)
            if key in PATH_KEYS and os.path.isabs(v):
                return PATH_PLACEHOLDER
        return v

    if isinstance(doc, list):  # JSON Lines: each record is a top level
        return [walk(row, None, True) for row in doc]
    return walk(doc, None, True)


def dumps(doc: Any, lines: bool) -> str:
    """The golden file's text: one pretty document, or one compact JSON record per line."""
    if lines:
        return "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in doc)
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def loads(text: str, lines: bool, source: str = "output") -> Any:
    """Parse a golden file or a command's stdout: one JSON document, or JSON Lines (blank lines skipped)."""
    try:
        if lines:
            rows = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise GoldenError(f"{source}: line {n} is not JSON ({e.msg})") from None
            return rows
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise GoldenError(f"{source}: not a JSON document ({e.msg} at line {e.lineno})") from None


def read_golden(path: str | os.PathLike, lines: bool) -> Any:
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise GoldenError(f"{path}: golden file not found (create it with --update-golden)") from None
    except OSError as e:
        raise GoldenError(f"{path}: {e.strerror or e}") from None
    return loads(text, lines, str(path))


def diff(expected: Any, actual: Any, lines: bool, name: str = "golden") -> str:
    """A unified diff of both sides pretty-printed ("" when they are equal)."""
    if expected == actual:
        return ""

    def pretty(doc: Any) -> list[str]:
        if not lines:
            return json.dumps(doc, ensure_ascii=False, indent=2).splitlines(keepends=True)
        out = []
        for row in doc:
            out += (json.dumps(row, ensure_ascii=False, indent=2) + "\n").splitlines(keepends=True)
        return out

    text = "".join(difflib.unified_diff(pretty(expected), pretty(actual), f"{name} (expected)",
                                        "actual output", n=3))
    return text if text.endswith("\n") else text + "\n"


def compare(actual: Any, golden: str | os.PathLike, lines: bool,
            paths: Mapping[str, str | os.PathLike] | None = None) -> GoldenResult:
    """Compare `actual` (a document, or a list of JSON Lines records) with the golden file."""
    golden = Path(golden)
    ours = _plain(normalise(actual, paths))
    theirs = normalise(read_golden(golden, lines))
    d = diff(theirs, ours, lines, str(golden))
    if not d:
        return GoldenResult(golden, True, False, "", f"{golden}: output equals the golden file")
    what = f"{len(ours)} record(s), {len(theirs)} in the golden" if lines else "diff below"
    return GoldenResult(golden, False, False, d, f"{golden}: output differs from the golden file ({what}); "
                        "rewrite it with --update-golden if the change is intended")


def update(actual: Any, golden: str | os.PathLike, lines: bool,
           paths: Mapping[str, str | os.PathLike] | None = None) -> GoldenResult:
    """Rewrite the golden file with `actual`, normalised."""
    golden = Path(golden)
    doc = _plain(normalise(actual, paths))
    try:
        if golden.parent != Path(""):
            golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(dumps(doc, lines), encoding="utf-8")
    except OSError as e:
        raise GoldenError(f"{golden}: {e.strerror or e}") from None
    return GoldenResult(golden, True, True, "", f"{golden}: golden file written"
                        + (f" ({len(doc)} record(s))" if lines else ""))


def check_golden(actual: Any, golden: str | os.PathLike, *, lines: bool, update_golden: bool = False,
                 paths: Mapping[str, str | os.PathLike] | None = None) -> GoldenResult:
    """`--expect FILE` (compare) or `--expect FILE --update-golden` (rewrite), as the CLI offers them."""
    if update_golden:
        return update(actual, golden, lines, paths)
    return compare(actual, golden, lines, paths)


def _plain(doc: Any) -> Any:
    """Exactly what `--json` prints: tuples become lists, bytes hex, objects with `as_dict` their dict."""
    def default(o: Any) -> Any:
        if isinstance(o, bytes):
            return o.hex()
        if hasattr(o, "as_dict"):
            return o.as_dict()
        raise TypeError(f"not JSON serialisable: {type(o).__name__}")

    return json.loads(json.dumps(doc, ensure_ascii=False, default=default))
