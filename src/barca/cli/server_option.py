"""`--server [URL]` and `--local`: shown in the help of every command that can run on a
`barca serve`, and taken off the command line by `app.main` before the command parses it
(`barca.cli.remote` then runs it there).

The CONFIGURED server is BARCA_SERVER (an empty value is unset) over `[server] url` in
barca.toml. With one and no flag, `get` and `run` execute here with the cache decided by the
server's ledger (`ledger_server()` names it to them), while `status`, `list`, `history`,
`stats` and `logs` give the server's answer. `--server URL` (a word with `://`) runs the
command on that server; a bare `--server` (followed by nothing, a target or a flag) on the
configured one (exit 2 if none). `--local` is the only way around a configured server (with
`--server` it is exit 2); nothing ever falls back to a local run by itself. A configured
server needs a `[remote]` store (exit 2 naming the fix), the one its ledger records. Using it
says so once: `[barca] server <url> (<source>)`; then the runs whose posts it missed are sent
to it again, by every command that uses it (a get or run as it starts, the others before
the server answers them).
"""

from __future__ import annotations

import os
import sys
import click

from barca.errors import UsageError
from barca.server_config import Configured, configured_server, project_settings

REMOTE_COMMANDS = ("get", "run", "status", "list", "history", "logs", "stats", "sql",
                   "doctor")
LEDGER_COMMANDS = ("get", "run")  # executed here against a configured server's ledger
OWN_SERVER_OPTION = ("queue",)  # commands that parse --server and --local themselves


_ledger: Configured | None = None  # the server whose ledger this process's get/run consult


def ledger_server() -> Configured | None:
    """The configured server whose ledger decides this `get`/`run` (None: local records)."""
    return _ledger


def server_options(fn):
    """The options every command that can run remotely shows in its help; `app.main` takes
    them off the command line before the command parses it."""
    fn = click.option("--local", is_flag=True, expose_value=False,
                      help="Run here on local records only, even with a configured server "
                           "([server] url or BARCA_SERVER).")(fn)
    return click.option("--server", metavar="[URL]", expose_value=False,
                        help="Run on a `barca serve` at URL; bare: on the configured "
                             "server.")(fn)


def take_server(argv: list[str]) -> tuple[str | None, list[str]]:
    """The server URL this command goes to (None: run here) and argv without the options."""
    global _ledger
    url, flag, local, rest = None, False, False, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--local":
            local = True
        elif arg == "--server":
            flag = True
            if i + 1 < len(argv) and "://" in argv[i + 1]:
                url, i = argv[i + 1], i + 1
        elif arg.startswith("--server="):
            flag, url = True, arg.split("=", 1)[1] or None
        else:
            rest.append(arg)
        i += 1
    command = rest[0] if rest else None
    if local and flag:
        raise UsageError("--local and --server cannot be used together",
                         "pass --local to run on local records, or --server to use a server")
    if command in OWN_SERVER_OPTION:  # given back, after the command's name
        if flag and url is None:
            url = _configured_or_refuse().url
        given = (["--server", url] if flag else []) + (["--local"] if local else [])
        return None, [command, *given, *rest[1:]]
    if flag and command not in REMOTE_COMMANDS:
        raise UsageError(f"`barca {command or ''}` always runs here: --server does not apply "
                         "to it", f"--server works with "
                                  f"{', '.join(REMOTE_COMMANDS + OWN_SERVER_OPTION)}")
    if local or (url is not None) or command not in REMOTE_COMMANDS:
        return url, rest
    configured = _configured_or_refuse() if flag else configured_server()
    if configured is None:
        return None, rest
    _check_remote(configured)
    sys.stderr.write(f"[barca] server {configured.url} ({configured.source})\n")
    if command in LEDGER_COMMANDS and not flag:
        _ledger = configured
        return None, rest
    _resend_kept(configured, rest)
    return configured.url, rest


def _resend_kept(configured: Configured, rest: list[str]) -> None:
    """Runs the configured server has not recorded yet (their posts failed) are sent before
    the server answers for them (engine.ledger_client.resend_kept)."""
    from barca.engine.ledger_client import resend_kept
    from barca.printable import note

    env = next((a.split("=", 1)[1] for a in rest if a.startswith("--env=")), None)
    if "--env" in rest[:-1]:
        env = rest[rest.index("--env") + 1]
    resend_kept(configured.url, env, note)


def _configured_or_refuse() -> Configured:
    configured = configured_server()
    if configured is None:
        raise UsageError("--server without a URL means the configured server, and none is "
                         "configured", "give its address (--server http://127.0.0.1:8274), "
                         "or set [server] url in barca.toml or BARCA_SERVER")
    return configured


def _check_remote(configured: Configured) -> None:
    """A configured server's ledger records results in a store this machine must share."""
    if os.environ.get("BARCA_REMOTE_URI") or project_settings().remote_uri:
        return
    raise UsageError(f"a server is configured ({configured.source} {configured.url}) but no "
                     "[remote] store: the server's ledger records results that are in one",
                     'set [remote] uri = "s3://bucket/prefix" in barca.toml (or '
                     "BARCA_REMOTE_URI) to the server's store, or pass --local to run on "
                     "local records only (barca docs remote)")

