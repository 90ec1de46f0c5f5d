"""`--server URL` and `--local`: shown in the help of every command that can run on a
`barca serve`, and taken off the command line (with BARCA_SERVER) by `app.main` before the
command parses it (`barca.cli.remote` then runs it there)."""

from __future__ import annotations

import os
import sys

import click

from barca.errors import UsageError

REMOTE_COMMANDS = ("get", "run", "status", "list", "history", "logs", "stats", "sql",
                   "doctor")
OWN_SERVER_OPTION = ("queue",)  # commands that parse --server and --local themselves


def server_options(fn):
    """The options every command that can run remotely shows in its help; `app.main` takes
    them off the command line before the command parses it."""
    fn = click.option("--local", is_flag=True, expose_value=False,
                      help="Run here even when BARCA_SERVER is set.")(fn)
    return click.option("--server", metavar="URL", expose_value=False,
                        help="Run on a `barca serve` at URL (or set BARCA_SERVER).")(fn)


def take_server(argv: list[str]) -> tuple[str | None, list[str]]:
    """The server URL this command goes to (None: run here) and argv without the options."""
    url, local, rest = None, False, []
    items = iter(argv)
    for arg in items:
        if arg == "--local":
            local = True
        elif arg == "--server":
            url = next(items, None)
            if not url:
                raise UsageError("--server needs a URL", "e.g. --server http://127.0.0.1:8274")
        elif arg.startswith("--server="):
            url = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if rest and rest[0] in OWN_SERVER_OPTION:  # given back, after the command's name
        given = (["--server", url] if url is not None else []) + (["--local"] if local else [])
        return None, [rest[0], *given, *rest[1:]]
    if local:
        return None, rest
    if url is None and rest and rest[0] in REMOTE_COMMANDS:
        url = os.environ.get("BARCA_SERVER") or None
        if url:
            sys.stderr.write(f"[barca] server {url}\n")
    if url is not None and (not rest or rest[0] not in REMOTE_COMMANDS):
        raise UsageError(f"`barca {rest[0] if rest else ''}` always runs here: --server does "
                         "not apply to it",
                         f"--server works with {', '.join(REMOTE_COMMANDS + OWN_SERVER_OPTION)}")
    return url, rest
