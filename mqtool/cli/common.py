"""What every command shares: error handling (exit 2, one line), JSON output, the store option."""

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from mqtool.formats.compression import DecompressError
from mqtool.formats.message import RecordError
from mqtool.store.errors import StoreError
from mqtool.times import TimeFormatError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

USER_ERRORS: tuple[type[Exception], ...] = (StoreError, TimeFormatError, RecordError, DecompressError,
                                             ValueError, OSError)

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


def fail(message: str) -> typer.Exit:
    """Print one `Error:` line on stderr; the caller raises the returned Exit(2)."""
    stderr.print(f"Error: {message}", markup=False, highlight=False)
    return typer.Exit(code=EXIT_USAGE)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn our exceptions (and unreadable files) into one clear line and exit code 2."""
    try:
        yield
    except typer.Exit:
        raise
    except USER_ERRORS as e:
        msg = str(e)
        if isinstance(e, OSError) and e.filename:
            msg = f"{e.filename}: {e.strerror or e}"
        raise fail(msg) from None


def load_config(config: Path | None):
    """broker.conf when given, else RocketMQ's defaults."""
    from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf

    return load_broker_conf(config) if config else BrokerConfig()


def emit_json(doc: Any) -> None:
    """One JSON document on stdout (sorted keys would reorder records, so insertion order is kept)."""
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, default=_default) + "\n")


def emit_jsonl(rows) -> None:
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False, default=_default) + "\n")


def _default(o: Any) -> Any:
    if isinstance(o, bytes):
        return o.hex()
    if hasattr(o, "as_dict"):
        return o.as_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


ConfigOption = typer.Option(None, "--config", help="The broker's broker.conf (delay levels, timer, "
                            "transaction settings, mapped file sizes).")
JsonOption = typer.Option(False, "--json", help="Machine-readable output (JSON, version 1).")
LocalOption = typer.Option(False, "--local", help="Print times in local time instead of UTC.")

Render = Callable[..., None]
