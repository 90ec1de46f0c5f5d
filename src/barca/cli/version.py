"""`barca version`."""

from __future__ import annotations

import click

from barca import __version__


@click.command("version")
def version_command() -> None:
    """Print barca's version."""
    click.echo(f"barca {__version__}")
