"""The directories that make a store and tell its layouts apart, by name (spec §12, §13): what opening a
store and discovering a fleet look for before any reader is needed. Light on purpose: a plain CommitLog
store is opened without importing the fleet's module or the DLedger and BatchConsumeQueue readers."""

from pathlib import Path

BCQ_DIR = "batchconsumequeue"  # BatchConsumeQueue's root under the store (spec §13)


def find_dledger_dirs(root: Path) -> list[Path]:
    """Every `dledger-<selfId>` directory of a store root (one per node id this store ran as)."""
    return sorted(p for p in root.glob("dledger-*") if p.is_dir())


STORE_MARKERS = ("commitlog", "consumequeue", "timerlog", "checkpoint", BCQ_DIR)  # what makes a directory a store


def is_store_dir(d: Path) -> bool:
    """A RocketMQ store root: a CommitLog, ConsumeQueue, TimerLog, checkpoint or DLedger directory in it."""
    return d.is_dir() and (any((d / m).exists() for m in STORE_MARKERS) or bool(find_dledger_dirs(d)))
