"""`barca queue [pause|resume]`: the runs in flight and waiting, and the queue's pause.

Without a server (no `--server`, no BARCA_SERVER, or `--local`) it reads the project's
database, where every run and a server's durable queue are (`engine.serving`); a pause there
is kept for the next `barca serve`, and refused while one runs (it would not see it). With a
server it asks it (`GET /queue`, `POST /queue/pause`, `POST /queue/resume`), which applies a
pause at once.
"""

from __future__ import annotations

import click

from barca.cli.output import choose_mode, emit, emit_json
from barca.errors import InfraError, UsageError

OPTIONS = [
    click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
                 "not a terminal)."),
    click.option("--pretty", is_flag=True, help="Human output (default in a terminal)."),
    click.option("--env", "env_name", metavar="NAME", help="The queue of environment NAME (or "
                 "set BARCA_ENV)."),
    click.option("--server", "server", metavar="URL", help="Ask the `barca serve` at URL (or "
                 "set BARCA_SERVER)."),
    click.option("--local", is_flag=True, help="Read this project's database even when "
                 "BARCA_SERVER is set."),
]
TIMEOUT_SECONDS = 30.0


def _options(function):
    for option in reversed(OPTIONS):
        function = option(function)
    return function


HELP = """The runs in flight and the runs waiting to start, and whether the queue is paused.

\b
Without a server this reads the project's database: every run in flight (a command's or a
server's) and the runs a `barca serve` accepted and has not started (kept across its
restarts). `pause` and `resume` keep the pause for the next `barca serve`; while one runs,
pass its address with --server (or BARCA_SERVER), and it takes effect at once: in-flight runs
go on, new runs are still accepted and wait, none starts until `resume`.
\b
Examples:
  barca queue
  barca queue pause --server http://127.0.0.1:8274
  barca queue resume
"""


@click.group("queue", invoke_without_command=True, help=HELP)
@_options
@click.pass_context
def queue_command(ctx: click.Context, json_flag, pretty, env_name, server, local) -> None:
    if ctx.invoked_subcommand is None:
        _answer(None, json_flag, pretty, env_name, server, local)


@queue_command.command("pause")
@_options
@click.pass_context
def pause_command(ctx: click.Context, **options) -> None:
    """Start no queued run until `barca queue resume` (in-flight runs go on)."""
    _answer(True, **_with_group(ctx, options))


@queue_command.command("resume")
@_options
@click.pass_context
def resume_command(ctx: click.Context, **options) -> None:
    """Start the queued runs again, in the order they were accepted."""
    _answer(False, **_with_group(ctx, options))


def _with_group(ctx: click.Context, options: dict) -> dict:
    """The subcommand's options, each defaulting to the group's (`barca queue --json pause`)."""
    return {name: value or ctx.parent.params[name] for name, value in options.items()}


def _answer(pause: bool | None, json_flag, pretty, env_name, server, local) -> None:
    from barca.views.queue import queue_text

    mode = choose_mode(json_flag, pretty)
    url = _server_url(server, local)
    body = _ask(url, pause) if url else _here(env_name, pause)
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(queue_text(body))


def _server_url(flag: str | None, local: bool) -> str | None:
    if local:
        if flag:
            raise UsageError("--local and --server cannot be used together", "pass one of them")
        return None
    if flag:
        return flag
    from barca.server_client import configured_server

    configured = configured_server()
    if configured is None:
        return None
    click.echo(f"[barca] server {configured.url} ({configured.source})", err=True)
    return configured.url


def _here(env_name: str | None, pause: bool | None) -> dict:
    import barca.engine.serving as serving
    from barca.project import open_project
    from barca.views.queue import queue_json

    db_path = open_project(env_name).db_path
    if pause is not None:
        serving.pause_unserved_queue(db_path, pause)
    return queue_json(serving.look_at_queue(db_path))


def _ask(url: str, pause: bool | None) -> dict:
    import httpx

    from barca.server_client import auth_headers

    path = "/queue" if pause is None else f"/queue/{'pause' if pause else 'resume'}"
    try:
        with httpx.Client(base_url=url.rstrip("/"), timeout=TIMEOUT_SECONDS,
                          headers=auth_headers()) as client:
            response = client.request("GET" if pause is None else "POST", path)
    except httpx.TransportError as exc:
        raise InfraError(f"cannot reach the barca server at {url}: {exc}",
                         "start it with `barca serve`, check --server / BARCA_SERVER, or pass "
                         "--local to read this project's queue") from None
    try:
        body = response.json()
    except ValueError:
        raise InfraError(f"the server answered {response.status_code} without JSON",
                         "is --server the address of `barca serve`?") from None
    if response.status_code >= 400:
        error = (UsageError if response.status_code < 500 else InfraError)(
            body.get("error", "error"), body.get("remediation"))
        raise error
    return body
