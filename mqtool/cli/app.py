"""The `mqtool` command: one Typer app, one module per area registers its commands here."""

import typer

app = typer.Typer(
    name="mqtool",
    help="Open an Apache RocketMQ store offline: inspect it, simulate its services, audit it, trace a message.\n\n"
         "Exit codes: 0 ok, 1 findings or a golden file differs, 2 usage or input error.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    """Each area's module adds its commands (imported here so `mqtool --help` lists them all)."""
    from mqtool.cli import audit, inspect, simulate, trace

    for area in (inspect, simulate, audit, trace):
        area.register(app)


_register()


def main() -> None:
    """Console-script entry point."""
    app()
