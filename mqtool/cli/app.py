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
    from mqtool.cli import inspect as inspect_cli

    inspect_cli.register(app)
    from mqtool.cli import audit as audit_cli; audit_cli.register(app)  # noqa: E702
    from mqtool.cli import simulate as simulate_cli; simulate_cli.register(app)  # noqa: E702, I001
    from mqtool.cli import trace as trace_cli; trace_cli.register(app)  # noqa: E702, I001


_register()


def main() -> None:
    """Console-script entry point."""
    app()
