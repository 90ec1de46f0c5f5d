"""The read-only commands `barca serve` runs for a `--server` client (`GET /cli/{command}`,
in the server's child: `barca.cli.served_views`), and their command lines: parsed by the
command's own parser, refused where they would reach beyond a read of the served project,
and written anew from the parsed values, so that no request text is ever read as an option.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Sequence

from barca.cli.commands import COMMANDS
from barca.errors import UsageError

# options a request may not pass on, and why
REFUSED = {"--server": "the server runs the command itself",
           "--local": "the server runs the command itself",
           "--env": "the server reads the environment it serves (barca serve --env)",
           "--follow": "a request cannot wait for a run to end; follow it with "
                       "GET /runs/{id}/events"}
# tokens the `barca` entry point reads wherever they are on a command line
ENTRY_TOKENS = ("--server", "--local")
TARGET_SLOT = {"status": "args", "stats": "target"}  # the argument whose first value is a target


@dataclass(frozen=True)
class ViewLine:
    """A view command as parsed: its options written anew, its positionals by role."""

    name: str
    options: tuple[str, ...]  # `--name=value` and flags
    target: str | None  # status, stats: the target text (names, comma-separated)
    files: tuple[str, ...]
    run_id: str | None  # history, logs
    takes_files: bool
    takes_env: bool

    def argv(self, files: Sequence[str], env: str | None) -> list[str]:
        """The command line: `files` when it reads files and none was named, `--env=env`
        when it reads an environment."""
        named = self.files or (tuple(files) if self.takes_files else ())
        values = [v for v in (self.target, *named, self.run_id) if v is not None]
        env_option = [f"--env={env}"] if env and self.takes_env else []
        return checked([self.name, *self.options, *env_option,
                        *(["--", *values] if values else [])])


def parse_view(name: str, args: Sequence[str]) -> ViewLine:
    """`barca NAME ARGS` parsed by the command's own parser (UsageError for what it refuses,
    or what is refused here); NAME must be one of `barca.view_commands.VIEW_COMMANDS`."""
    import click
    from click.core import ParameterSource

    from barca.discover.files import is_path_arg

    module, attribute, _ = COMMANDS[name]
    command = getattr(importlib.import_module(module), attribute)
    try:  # no help option: help is printed by the client, never on the server's stdout
        ctx = command.make_context(name, list(args), help_option_names=[])
    except click.ClickException as exc:
        raise UsageError(exc.format_message()[:500], f"see `barca {name} --help`") from None
    options: list[str] = []
    target, files, run_id = None, [], None
    for param in command.params:
        if ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
            continue
        if isinstance(param, click.Argument):
            value = ctx.params[param.name]
            for text in (value if isinstance(value, tuple) else (value,)):
                if param.name == "run_id":
                    run_id = text
                elif param.name == TARGET_SLOT.get(name) and target is None and not files \
                        and not is_path_arg(text):
                    target = text
                else:
                    files.append(text)
            continue
        flag = max(param.opts, key=len)
        if flag in REFUSED:
            raise UsageError(f"{flag} cannot be passed to the server: {REFUSED[flag]}",
                             f"drop {flag}")
        options += _option(param, flag, ctx.params[param.name])
    return ViewLine(name, tuple(options), target, tuple(files), run_id,
                    any(p.name in ("files", "args") for p in command.params),
                    any("--env" in p.opts for p in command.params))


def _option(param, flag: str, value) -> list[str]:
    """An option as a command line gives it, `--name=value` so that no value can be read as
    an option."""
    assert flag.startswith("--"), flag
    if param.is_flag:
        if value:
            return [flag]
        return [max(param.secondary_opts, key=len)] if param.secondary_opts else []
    values = value if param.multiple else (value,)
    return [f"{flag}={v}" for v in values]


def checked(argv: list[str]) -> list[str]:
    """A command line the entry point reads as intended: nothing in it, not even a run id,
    is a token it would take as `--server` or `--local`."""
    for token in argv:
        if token in ENTRY_TOKENS or token.startswith("--server="):
            raise UsageError(f"'{token[:100]}' cannot be passed to the server",
                             "the server runs the command itself")
    return argv
