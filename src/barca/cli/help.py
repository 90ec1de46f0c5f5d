"""`barca help [COMMAND...]`: the same text as `barca [COMMAND...] --help`, for those who type
help first (as git, cargo and the published barca take it)."""

from __future__ import annotations

import click

from barca.cli.output import emit
from barca.errors import UsageError


@click.command("help")
@click.argument("command", nargs=-1)
def help_command(command: tuple[str, ...]) -> None:
    """Print the help of COMMAND (`barca help get`, `barca help pool stop`), or of barca.

    \b
    Examples:
      barca help
      barca help get
    """
    from barca.cli.app import cli

    ctx = click.Context(cli, info_name="barca", **cli.context_settings)  # -h as --help
    current: click.Command = cli
    for name in command:
        group = current if isinstance(current, click.Group) else None
        found = group.get_command(ctx, name) if group is not None else None
        if found is None:
            where = " ".join(["barca", *ctx.command_path.split()[1:]])
            known = ", ".join(group.list_commands(ctx)) if group is not None else ""
            raise UsageError(f"'{name}' is not a command of `{where}`",
                             f"commands: {known}" if known else f"run `{where} --help`")
        ctx = click.Context(found, info_name=name, parent=ctx, **found.context_settings)
        current = found
    emit(current.get_help(ctx))
