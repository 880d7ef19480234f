"""What every command shares: the options (defined once), error handling (exit 2, one line), JSON output.

Choices are Typer enums: click rejects a bad value with its usage message and exit 2 before the command
runs. Only `MqtoolError` becomes an `Error:` line; any other exception is a bug and keeps its traceback.
"""

import functools
import importlib.util
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from mqtool.errors import MqtoolError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


@functools.cache
def _stderr_console():
    """Rich's console for the `Error:` and warning lines, made on first use: rich.console takes ~30 ms
    to import, and `--help`, usage errors (click prints those) and most `--json` runs never print here."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def print_stderr(text: str) -> None:
    """One line on stderr, as printed (no Rich markup, no highlighting)."""
    _stderr_console().print(text, markup=False, highlight=False)

# The choices. The library's own lists (`inspect.records.BODY_MODES`, `simulate.runner.VERSIONS`)
# sit behind numpy and the store model, which `--help` must not import: the values are written out here and
# tests/cli/test_startup.py checks that they equal the library's, in the same order.
BODY_CHOICES = ("text", "hex", "base64", "none")
VERSION_CHOICES = ("5.3", "4.9")
Body = StrEnum("Body", {m: m for m in BODY_CHOICES})
Body.__doc__ = "--body: how record bodies are shown."
BrokerVersion = StrEnum("BrokerVersion", {"v" + v.replace(".", "_"): v for v in VERSION_CHOICES})
BrokerVersion.__doc__ = "--broker-version: whose rules the simulator follows."
RecordFormat = StrEnum("RecordFormat", {"parquet": "parquet"})
RecordFormat.__doc__ = "--format: a file format for the record views (with --output FILE)."


def lazy_module(name: str) -> ModuleType:
    """The module `name`, executed on its first attribute access (`importlib.util.LazyLoader`).

    The cli modules name `render` at the top, but the Rich table machinery behind it is loaded only
    when a command draws something: `--help` and usage errors never pay for it.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)
    return module


def fail(message: str) -> typer.Exit:
    """Print one `Error:` line on stderr; the caller raises the returned Exit(2)."""
    print_stderr(f"Error: {message}")
    return typer.Exit(code=EXIT_USAGE)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn an `MqtoolError` into one clear line and exit code 2; let every other exception through."""
    try:
        yield
    except MqtoolError as e:
        raise fail(str(e)) from None


def load_config(config: Path | None):
    """broker.conf when given, else RocketMQ's defaults."""
    from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf

    return load_broker_conf(config) if config else BrokerConfig()


def warn_store_errors(store: Any, path: Path) -> None:
    """One stderr line when the store has error findings (`Store.file_findings`): simulate and trace run on
    it all the same, but must not do so silently."""
    errors = sum(1 for f in store.file_findings() if f.severity == "error")
    if errors:
        print_stderr(f"warning: the store has at least {errors} error finding(s); see mqtool inspect {path}")


def emit_json(doc: Any) -> None:
    """One JSON document on stdout (sorted keys would reorder records, so insertion order is kept)."""
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, default=_default) + "\n")


def emit_jsonl(rows) -> None:
    """JSON Lines on stdout: orjson's bytes where they equal json's (`mqtool.output.write_jsonl`)."""
    from mqtool.output import write_jsonl

    write_jsonl(rows, sys.stdout, _default)


def emit_jsonl_parts(parts) -> None:
    """JSON Lines on stdout from finished lines and rows (`mqtool.output.write_jsonl_parts`)."""
    from mqtool.output import write_jsonl_parts

    write_jsonl_parts(parts, sys.stdout, _default)


def _default(o: Any) -> Any:
    if isinstance(o, bytes):
        return o.hex()
    if hasattr(o, "as_dict"):
        return o.as_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# ----------------------------------------------------------------------------- options shared by commands

StoreArgument = typer.Argument(..., help="The store directory (read-only).", show_default=False)
# --config without click's own existence check: a missing or unreadable broker.conf is then one
# `Error:` line (exit 2) from `load_config`, like every other input error, not a usage box.
ConfigOption = typer.Option(None, "--config", help="The broker's broker.conf (delay levels, timer, "
                            "transaction settings, mapped file sizes).", metavar="<file>")
JsonOption = typer.Option(False, "--json", help="Machine-readable output (JSON, version 1).")
LocalOption = typer.Option(False, "--local", help="Print times in local time instead of UTC.")
UpdateGoldenOption = typer.Option(False, "--update-golden", help="With --expect: rewrite the golden file "
                                  "with this output.")


def now_option(default: str) -> Any:
    """--now TIME; `default` says what "now" is without it."""
    return typer.Option(None, "--now", help=f"Reference time for ages, overdue and relative times "
                        f"(default: {default}).")


def expect_option(compare: str) -> Any:
    """--expect FILE; `compare` says what is compared with the golden file."""
    return typer.Option(None, "--expect", help=f"{compare}; exit 1 with a diff when it differs.", dir_okay=False)


def broker_version_option(help: str) -> Any:
    return typer.Option(BrokerVersion("5.3"), "--broker-version", help=help)

