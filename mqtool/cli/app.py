"""The `mqtool` command: one Typer app, one module per area registers its commands here."""

import gc
import os
import sys

# No command does linear algebra, but numpy's import starts OpenBLAS's thread pool (a thread per core,
# each spinning a while before it sleeps): ~0.1 s of CPU in every process that imports numpy. A user's
# own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer
from typer.core import TyperGroup

# What a shell reports for a program killed by SIGPIPE (128 + 13), as for `git log | head`.
EXIT_BROKEN_PIPE = 141


def stdout_closed() -> int:
    """The reader of stdout went away (`| head`): end quietly, as Python's documentation recommends.

    Further writes, and the flush at exit, go to /dev/null instead of raising again; the exit code
    is the one of a program that SIGPIPE ended.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


class _Group(TyperGroup):
    """Catches a closed stdout before click does (click would exit 1, our code for findings)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise typer.Exit(stdout_closed()) from None


app = typer.Typer(
    name="mqtool",
    cls=_Group,
    help="Open an Apache RocketMQ store offline: inspect it, simulate its services, audit it, trace a message.\n\n"
         "Exit codes: 0 ok, 1 findings or a golden file differs, 2 usage or input error.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help and usage-error formatting: Typer's Rich panels would import rich.table,
    # rich.markdown and markdown-it on every `--help` and every typo (tests/cli/test_startup.py).
    rich_markup_mode=None,
)


AREAS = ("inspect", "simulate", "audit", "trace")
"""The modules of `mqtool.cli` that add commands, in `--help`'s order."""
_AREA_OF = {"inspect": "inspect", "simulate": "simulate", "spark-audit": "audit", "trace": "trace", "index": "trace"}
"""Each command's area."""


def _root() -> None:
    """Subcommands of mqtool."""


def _register(argv: list[str]) -> None:
    """Each area's module adds its commands: all of them (so `mqtool --help` and a mistyped command list them
    all), or only the area of the command the arguments name (`mqtool inspect ...` imports none of the other
    areas' modules)."""
    app.callback()(_root)  # a group whatever is registered (Typer runs a lone command as the app itself)
    area = _AREA_OF.get(argv[1]) if len(argv) > 1 else None
    for name in (area,) if area is not None else AREAS:
        _area(name).register(app)


def _area(name: str):
    """The module of one area of `AREAS`."""
    if name == "inspect":
        from mqtool.cli import inspect as module
    elif name == "simulate":
        from mqtool.cli import simulate as module
    elif name == "audit":
        from mqtool.cli import audit as module
    else:
        from mqtool.cli import trace as module
    return module


_register(sys.argv)


def main() -> None:
    """Console-script entry point; stdout is flushed here so that a pipe closed at the end is quiet too."""
    try:
        try:
            app()
        finally:
            sys.stdout.flush()
            # The command is done: its objects go to the collector's permanent generation, so the interpreter's
            # shutdown does not scan them all once more (70-90 ms after an overview of 1 GiB; atexit handlers,
            # Spark's included, still run). docs/performance.md, "Session 14".
            gc.freeze()
    except BrokenPipeError:
        sys.exit(stdout_closed())
