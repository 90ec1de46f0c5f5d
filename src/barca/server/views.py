"""The read-only commands the server runs for its clients, and only those.

A request never becomes a command line as typed: `GET /cli/{command}` names one of
VIEW_COMMANDS, its arguments are parsed by that command's own click parser, checked (files
must be files this server serves, a target must name a node, nothing may choose another
environment or another server), and the command line is written anew from the parsed values.
None of these commands runs a sensor or a step (`status` plans from stored state), and the
child runs with BARCA_READ_ONLY=1, so that SQLite refuses any write it might attempt. A dry
run observes sensors: it is a run, and goes through `POST /runs`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.server.http import ApiError
from barca.server.runs import child_env, run_captured

# name -> (module, attribute): the click command
VIEW_COMMANDS = {"status": ("barca.cli.inspect", "status_command"),
                 "list": ("barca.cli.inspect", "list_command"),
                 "history": ("barca.cli.history", "history_command"),
                 "logs": ("barca.cli.logs", "logs_command"),
                 "stats": ("barca.cli.stats", "stats_command")}
# options a request may not pass on, and why
REFUSED = {"--server": "the server runs the command itself",
           "--local": "the server runs the command itself",
           "--env": "the server reads the environment it serves (barca serve --env)",
           "--follow": "a request cannot wait for a run to end; follow it with "
                       "GET /runs/{id}/events"}
# tokens the `barca` entry point reads wherever they are on a command line
ENTRY_TOKENS = ("--server", "--local")
TARGET_SLOT = {"status": "args", "stats": "target"}  # the argument whose first value is a target
RUN_ID_ARGS = ("run_id",)


def cli_argv(name: str, args: Sequence[str], served: Any) -> list[str]:
    """`barca NAME ARGS` as the server will run it, rebuilt from what the command's parser
    made of ARGS; ApiError 404 (not a view), 400 (refused or unparsable)."""
    import click
    from click.core import ParameterSource

    if name not in VIEW_COMMANDS:
        remedy = ('start a run (a dry run too) with POST /runs {"dry_run": true, ...}'
                  if name in ("get", "run") else "")
        raise ApiError(404, f"`barca {name}` does not run here: this route runs only "
                       f"{', '.join(VIEW_COMMANDS)}", remedy or "see /openapi.json")
    module, attribute = VIEW_COMMANDS[name]
    command = getattr(importlib.import_module(module), attribute)
    try:  # no help option: help is printed by the client, never on the server's stdout
        ctx = command.make_context(name, list(args), help_option_names=[])
    except (click.ClickException, click.exceptions.Exit) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        raise ApiError(400, message, f"see `barca {name} --help`") from None
    options: list[str] = []
    positionals: list[tuple[str, str]] = []  # (argument name, value)
    for param in command.params:
        if ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
            continue
        if isinstance(param, click.Argument):
            value = ctx.params[param.name]
            values = value if isinstance(value, tuple) else (value,)
            positionals += [(param.name, v) for v in values if v is not None]
            continue
        flag = max(param.opts, key=len)
        if flag in REFUSED:
            raise ApiError(400, f"{flag} cannot be passed to the server: {REFUSED[flag]}",
                           f"drop {flag}")
        options += _option(param, flag, ctx.params[param.name])
    files = _check_positionals(name, positionals, served)
    argv = [name, *options, *env_option(command, served.options.env)]
    values = [v for _, v in positionals]
    if not files and name in ("status", "list", "stats"):
        values += list(served.pipeline.files)  # the served files, not every file of the project
    return checked([*argv, *(["--", *values] if values else [])])


def env_option(command: Any, env: str | None) -> list[str]:
    """The served environment, for a command that reads one."""
    takes = any("--env" in p.opts for p in command.params if hasattr(p, "opts"))
    return [f"--env={env}"] if env and takes else []


def _option(param: Any, flag: str, value: Any) -> list[str]:
    """An option as a command line gives it, `--name=value` so that no value can be read as
    an option."""
    assert flag.startswith("--"), flag
    if param.is_flag:
        if value:
            return [flag]
        return [max(param.secondary_opts, key=len)] if param.secondary_opts else []
    values = value if param.multiple else (value,)
    return [f"{flag}={v}" for v in values]


def _check_positionals(name: str, positionals: list[tuple[str, str]], served: Any
                       ) -> list[str]:
    """Files must be files this server serves; a target (status, stats) must name nodes of
    the served graph (404 unknown, 409 ambiguous); the files named."""
    from barca.cli.load import is_path_arg

    files = served.pipeline.files
    slot = TARGET_SLOT.get(name)
    named = []
    for i, (arg, text) in enumerate(positionals):
        if arg in RUN_ID_ARGS:
            continue  # data, looked up in the database by the command
        if text in files:
            named.append(text)
        elif arg == slot and i == 0 and not is_path_arg(text):
            for part in text.split(","):
                served.node_id(part)
        else:
            raise ApiError(400, f"'{text[:200]}' is not a file this server serves",
                           f"files served: {', '.join(files) or 'none'} (a target goes first)")
    return named


def checked(argv: list[str]) -> list[str]:
    """A command line the entry point reads as intended: nothing in it, not even a run id,
    is a token it would take as `--server` or `--local`."""
    for token in argv:
        if token in ENTRY_TOKENS or token.startswith("--server="):
            raise ApiError(400, f"'{token}' cannot be passed to the server",
                           "the server runs the command itself")
    return argv


def run_view(root: Path, argv: list[str]) -> dict:
    """Run a view command: {exit_code, stdout, stderr} (blocks)."""
    return run_captured(root, argv, {**child_env(), "BARCA_READ_ONLY": "1"})


def view_json(root: Path, argv: list[str]) -> Any:
    """The JSON a view command printed (`argv` asks for --json); its error as an ApiError
    (400 for a usage error, else 500), in the CLI's words."""
    done = run_view(root, checked(argv))
    if done["exit_code"] == 0:
        try:
            return orjson.loads(done["stdout"])
        except orjson.JSONDecodeError:
            pass
    lines = done["stderr"].strip().splitlines()
    try:
        envelope = orjson.loads(lines[-1]) if lines else {}
    except orjson.JSONDecodeError:
        envelope = {}
    if not isinstance(envelope, dict) or "error" not in envelope:
        envelope = {"error": f"barca {argv[0]} failed (exit {done['exit_code']}): "
                             f"{lines[-1][:500] if lines else 'no output'}", "kind": "infra"}
    raise ApiError(400 if done["exit_code"] == 2 else 500, envelope["error"],
                   envelope.get("remediation") or "", envelope.get("kind", "infra"))
