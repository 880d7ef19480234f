"""Read a ConfigManager JSON file with RocketMQ's `.bak` fallback (`ConfigManager.load`, spec §4.7, §5).

`MixAll.string2File` copies the previous content to `<file>.bak` before writing the new one (5.3.1
then overwrites the file in place; 4.9.8 writes `<file>.tmp`, deletes the file and renames), so a crash
can leave the main file torn, empty or missing. `ConfigManager.load` then reads `<file>.bak`; when that
is missing or empty too, the broker starts from defaults. Files are decoded as UTF-8 with replacement,
as `MixAll.file2String` does. Read-only: nothing is ever written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mqtool.formats.offsets_json import ConfigFileError

__all__ = ["read_config_json"]

T = TypeVar("T")


class _Unusable(Exception):
    """Why one candidate file could not be used: `kind` for the logic, the message for people."""

    def __init__(self, path: Path, kind: str, detail: str = "") -> None:
        self.kind = kind
        super().__init__(f"{path.name}: {kind}{detail}")


def _read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; raises _Unusable when unreadable."""
    try:
        with path.open("rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Unusable(path, "unreadable", f" ({exc.strerror or exc})") from exc
    return data.decode("utf-8", errors="replace")


def _parse(path: Path, text: str, parse: Callable[[str], T]) -> T:
    try:
        return parse(text)
    except ConfigFileError as exc:
        where = f" at line {exc.line} col {exc.col}" if exc.line is not None else ""
        raise _Unusable(path, "unparsable", f"{where} ({exc.reason})") from exc
    except ValueError as exc:
        raise _Unusable(path, "unparsable", f" ({exc})") from exc


def _load(path: Path, parse: Callable[[str], T]) -> T:
    """One candidate: raises _Unusable (missing, empty, unreadable, unparsable) or returns its value."""
    text = _read_text(path)
    if text is None:
        raise _Unusable(path, "missing")
    if not text.strip():
        raise _Unusable(path, "empty")
    return _parse(path, text, parse)


def read_config_json(path: Path, parse: Callable[[str], T]) -> tuple[T | None, Path | None, list[str]]:
    """(value, file actually used, problems) for `path`, falling back to `path.bak` like the broker.

    Both files absent is the normal state of a broker whose service never persisted: (None, None, []).
    """
    path = Path(path)
    bak = path.with_name(path.name + ".bak")
    try:
        return _load(path, parse), path, []
    except _Unusable as exc:
        main = exc
    try:
        value = _load(bak, parse)
    except _Unusable as exc:
        if main.kind == exc.kind == "missing":
            return None, None, []
        starts = exc.kind in ("missing", "empty")  # ConfigManager.loadBak returns true for these
        consequence = "the broker would start from defaults" if starts else "the broker would fail to load it"
        return None, None, [f"{main}; {exc}; {consequence}"]
    return value, bak, [f"{main}; read {bak.name}"]
