"""Reading a controller-mode store's `epochFileCheckpoint` (with `CheckpointFile#read`'s `.bak` fallback)."""

from __future__ import annotations

from pathlib import Path

from mqtool.formats.epochfile import EPOCH_FILE, EpochFileError, parse_epoch_file
from mqtool.store.findings import Findings

CHECK = "store.epoch"


def _read(path: Path) -> list[tuple[int, int]]:
    if not path.is_file():
        return []
    return parse_epoch_file(path.read_text("utf-8", errors="replace"))


def read_epoch_entries(root: Path, findings: Findings) -> list[tuple[int, int]] | None:
    """The epoch entries the broker loads: the file, else (empty, missing or unreadable) its `.bak`; None
    when neither exists. A file the broker cannot read is a finding."""
    main, bak = root / EPOCH_FILE, root / f"{EPOCH_FILE}.bak"
    if not main.exists() and not bak.exists():
        return None
    try:
        entries = _read(main)
        if entries:
            return entries
    except EpochFileError as e:
        findings.add(EPOCH_FILE, None, CHECK, "warning", f"{e}; the broker reads {EPOCH_FILE}.bak instead")
    try:
        return _read(bak)
    except EpochFileError as e:
        findings.add(f"{EPOCH_FILE}.bak", None, CHECK, "error", f"{e}: the broker cannot load its epochs")
        return []
