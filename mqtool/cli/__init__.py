"""Typer commands: parse options, call one library function, render (nothing else lives here)."""
