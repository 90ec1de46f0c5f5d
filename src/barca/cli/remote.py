"""`--server URL` (or BARCA_SERVER): run a command against a `barca serve` project over HTTP
and print what the same command prints locally: the same stdout, the same progress lines,
the same exit code. `--local` runs here whatever BARCA_SERVER says.

`get` and `run` start a run (`POST /runs`, a dry run too: it observes sensors) and follow
its event stream, printing each line the local command would print; Ctrl-C cancels the
remote run (a second one leaves it). `status`, `list`, `history`, `logs` and `stats` are
parsed here (a usage error, or --help, is answered here as the local command would), then
run by the server (`GET /cli/<command>`, which parses them again and refuses what is not a
read), and their output printed as it came.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import orjson

from barca.printable import note
from barca.errors import BarcaError, InfraError, UsageError

TIMEOUT_SECONDS = 30.0
RUN_ID_HEADER = "Barca-Run-Id"  # the server names the run it started in its answer


def run_remote(url: str, argv: list[str], json_mode: bool) -> int:
    """Run `barca ARGV` on the server at `url`; the exit code."""
    import httpx

    client = httpx.Client(base_url=url.rstrip("/"), timeout=TIMEOUT_SECONDS,
                          headers=auth_headers())
    try:
        if argv[0] in ("get", "run"):
            return _run(client, argv, json_mode)
        return _view(client, argv, json_mode)
    except httpx.TransportError as exc:
        raise InfraError(f"cannot reach the barca server at {url}: {exc}",
                         "start it with `barca serve`, check --server / BARCA_SERVER, or pass "
                         "--local to run here") from None
    finally:
        client.close()


def auth_headers() -> dict[str, str]:
    """The server's token, from BARCA_SERVER_TOKEN (never a flag: command lines are public)."""
    token = os.environ.get("BARCA_SERVER_TOKEN", "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _parse(argv: list[str]) -> dict[str, Any]:
    """The command's parameters, parsed as the local command would parse them (--help
    printed here; a usage error raised here)."""
    import click

    from barca.cli.app import cli

    parent = click.Context(cli, info_name="barca", **cli.context_settings)
    return cli.get_command(parent, argv[0]).make_context(argv[0], argv[1:], parent=parent).params


def _view(client, argv: list[str], json_mode: bool) -> int:
    params = _parse(argv)
    if params.get("follow"):
        raise UsageError("barca logs --follow is not available with --server yet",
                         "follow the run with `barca get ... --server URL` itself, or run "
                         "`barca logs -f` on the server's machine")
    # the server's command prints to a pipe: tell it when this one prints to a terminal
    args = argv[1:] + (["--pretty"] if not json_mode and not {"--json", "--pretty"} & set(argv)
                       else [])
    response = client.get(f"/cli/{argv[0]}", params=[("arg", a) for a in args])
    body = _body(response)
    sys.stdout.write(body["stdout"])
    sys.stdout.flush()
    sys.stderr.write(body["stderr"])
    return body["exit_code"]


def _run(client, argv: list[str], json_mode: bool) -> int:
    from barca.discover.files import is_path_arg

    params = _parse(argv)
    args = list(params["args"])
    target = args.pop(0) if args and not is_path_arg(args[0]) else None
    mode = "json" if json_mode else "pretty"
    if params["json_flag"] or params["pretty"]:
        mode = "json" if params["json_flag"] else "pretty"
    if params["executor"]:
        raise UsageError("--executor chooses what runs steps here; a server's runs use its own",
                         "drop --executor (set [executor] kind where the server runs), or run "
                         "here with --local")
    if params["output"] in ("json", "pretty"):
        mode = params["output"]
    elif params["output"] or params["fields"]:  # the server's run prints the whole result
        raise UsageError(f"{'--fields' if params['fields'] else '-o ' + params['output']} "
                         "is not available with --server yet",
                         "run here with --local, or drop it and read the JSON result")
    request = {"command": argv[0], "targets": target.split(",") if target else [],
               "files": args, "refresh": params["refresh"].split(",") if params["refresh"]
               else [], "refresh_all": params["refresh_all"],
               "cascade": not params["no_cascade"], "dry_run": params["dry_run"],
               "batch": list(params["batch"]), "partition": list(params["partition"]),
               "output": mode}
    response = client.post("/runs", content=orjson.dumps(request),
                           headers={"Content-Type": "application/json"})
    # a run that started, even one answered at its end (a dry run, or refused by the
    # command): its lines, stdout and exit code, as the local command prints them
    run_id = response.headers.get(RUN_ID_HEADER) or _body(response)["run_id"]
    return _follow(client, run_id, params["agent"])


def _follow(client, run_id: str, agent: bool) -> int:
    """Print the run's lines as they come; its stdout and exit code at the end. Ctrl-C
    cancels the run and keeps following it; a second Ctrl-C stops following."""
    interrupted = []

    def cancel(signum, frame):
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(signum)
        client.delete(f"/runs/{run_id}")

    previous = {s: signal.signal(s, cancel) for s in (signal.SIGINT, signal.SIGTERM)}
    last = 0
    try:
        while True:  # reconnect where it left off if the stream breaks
            ended = _stream(client, run_id, last, agent)
            if isinstance(ended, dict):
                _print_stdout(client, run_id, ended)
                return ended["exit_code"]
            if ended == last:
                raise InfraError(f"the server lost run {run_id}",
                                 f"see `barca history {run_id}` on the server")
            last = ended
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _print_stdout(client, run_id: str, ended: dict) -> None:
    """The command's stdout: in its last event, or fetched when too large for one."""
    if ended.get("stdout") is None and ended.get("stdout_bytes"):
        with client.stream("GET", f"/runs/{run_id}/stdout") as response:
            for chunk in response.iter_bytes():
                sys.stdout.buffer.write(chunk)
    else:
        sys.stdout.write(ended.get("stdout") or "")
    sys.stdout.flush()


def _stream(client, run_id: str, after: int, agent: bool) -> Any:
    """Follow the events after `after`: the final event, or the last id seen."""
    import httpx

    try:
        with client.stream("GET", f"/runs/{run_id}/events",
                           headers={"Last-Event-ID": str(after)},
                           timeout=httpx.Timeout(TIMEOUT_SECONDS, read=None)) as response:
            if response.status_code == 204:
                return after
            event_id = after
            for line in response.iter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: "):
                    event = orjson.loads(line[6:])
                    if event["type"] == "run_finished":
                        return event
                    text = event.get("line")
                    if text is not None and (agent or event["type"] not in QUIET):
                        note(text)
            return event_id
    except httpx.RemoteProtocolError:
        return after


QUIET = ("step_finished", "step_cached")  # shown with --agent only, as locally


def _body(response) -> dict:
    """A JSON answer; an error answer becomes the CLI's error (and exit code)."""
    try:
        body = response.json()
    except ValueError:
        raise InfraError(f"the server answered {response.status_code} without JSON",
                         "is --server the address of `barca serve`?") from None
    if response.status_code < 400:
        return body
    error = BarcaError(body.get("error", "error"), body.get("remediation"))
    error.exit_code = 2 if response.status_code < 500 else 3
    error.kind = body.get("kind", "usage")
    raise error
