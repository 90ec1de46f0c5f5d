"""`barca version`."""

from __future__ import annotations

import click

from barca import __version__


@click.command("version")
@click.option("--json", "json_flag", is_flag=True, help="JSON output: {\"version\": ...}.")
@click.option("--pretty", is_flag=True, help="Human output.")
def version_command(json_flag: bool, pretty: bool) -> None:
    """Print barca's version (JSON when piped or with --json)."""
    from barca.cli.output import choose_mode, emit, emit_json

    if choose_mode(json_flag, pretty) == "json":
        emit_json({"version": __version__})
    else:
        emit(f"barca {__version__}")
