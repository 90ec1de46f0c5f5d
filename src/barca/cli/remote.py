"""`--server URL` (or BARCA_SERVER): run a command against a `barca serve` project over HTTP
and print what the same command prints locally: the same stdout, the same progress lines,
the same exit code. `--local` runs here whatever BARCA_SERVER says.

`get` and `run` start a run (`POST /runs`, a dry run too: it observes sensors; `-o value`,
`-o path` and `--fields` are the server's to print) and follow its event stream, printing
each line the local command would print; a dropped stream is followed again for
BARCA_SERVER_RECONNECT seconds; Ctrl-C cancels the remote run and keeps following it until
it stopped (a second one exits 130 at once). `status`, `list`, `history`, `logs`, `stats`
and `doctor` are parsed here (a usage error, or --help, is answered here as the local
command would), then run by the server (`GET /cli/<command>`, which parses them again and
refuses what is not a read), and their output printed as it came; `logs -f` follows the
server's run here (`barca.cli.remote_logs`). `sql` asks the server where each view's files
are and runs the query here (`barca.cli.remote_sql`).
"""

from __future__ import annotations

import sys
from typing import Any

from barca.errors import UsageError
from barca.printable import note
from barca.server_client import (Interrupts, connected, error_of, follow,
                                 reconnect_seconds, start_run)


def run_remote(url: str, argv: list[str], json_mode: bool) -> int:
    """Run `barca ARGV` on the server at `url`; the exit code."""
    with connected(url) as client:
        params = _parse(argv)
        argv = _same_env(client, url, argv, params.get("env_name"))
        if argv[0] in ("get", "run"):
            return _run(client, argv, json_mode)
        if argv[0] == "sql":
            from barca.cli.remote_sql import remote_sql

            return remote_sql(client, params)
        if argv[0] == "logs" and params.get("follow"):
            from barca.cli.remote_logs import follow_logs

            return follow_logs(client, params)
        return _view(client, argv, json_mode)


def _parse(argv: list[str]) -> dict[str, Any]:
    """The command's parameters, parsed as the local command would parse them (--help
    printed here; a usage error raised here)."""
    import click

    from barca.cli.app import cli

    parent = click.Context(cli, info_name="barca", **cli.context_settings)
    return cli.get_command(parent, argv[0]).make_context(argv[0], argv[1:], parent=parent).params


def _same_env(client, url: str, argv: list[str], env_name: str | None) -> list[str]:
    """`--env NAME` must name the environment the server serves (`GET /project`), else exit
    2 naming both; then it is left out: the server runs in its own (and its `/cli/` routes
    take no --env)."""
    if env_name is None:
        return argv
    from barca.server_client import answer

    served = answer(client.get("/project"))["env"]
    if served != env_name:
        raise UsageError(f"--env {env_name}: the server {url} serves the environment "
                         f"{served}", f"pass --env {served}, or leave --env out, for that "
                         f"server; or run here with --local --env {env_name}")
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--env":
            skip = True
        elif not arg.startswith("--env="):
            out.append(arg)
    return out


def _view(client, argv: list[str], json_mode: bool) -> int:
    from barca.server_client import answer

    # the server's command prints to a pipe: tell it when this one prints to a terminal
    args = argv[1:] + (["--pretty"] if not json_mode and not {"--json", "--pretty"} & set(argv)
                       else [])
    body = answer(client.get(f"/cli/{argv[0]}", params=[("arg", a) for a in args]))
    sys.stdout.write(body["stdout"])
    sys.stdout.flush()
    sys.stderr.write(body["stderr"])
    return body["exit_code"]


def _run(client, argv: list[str], json_mode: bool) -> int:
    from barca.cli.get import link_seconds, output_mode
    from barca.cli.output import parse_fields
    from barca.discover.files import is_path_arg
    from barca.views.run_report import STEP_FIELDS

    params = _parse(argv)
    args = list(params["args"])
    target = args.pop(0) if args and not is_path_arg(args[0]) else None
    if params["executor"]:
        raise UsageError("--executor chooses what runs steps here; a server's runs use its own",
                         "drop --executor (set [executor] kind where the server runs), or run "
                         "here with --local")
    # checked here as the local command checks them, in its order
    mode, values = output_mode(params["json_flag"], params["pretty"], params["output"],
                               params["fields"], params["dry_run"])
    if params["output"] == "url":
        raise UsageError("-o url is not available with --server: its links are signed with "
                         "the store credentials of the machine that prints them",
                         "run here with --local, or use -o path for the server's files")
    link_seconds(params["output"], params["expires"], params["env_name"])
    fields = parse_fields(params["fields"], STEP_FIELDS)
    reconnect_seconds()  # a bad setting is refused before the run starts
    request = {"command": argv[0], "targets": target.split(",") if target else [],
               "files": args, "refresh": params["refresh"].split(",") if params["refresh"]
               else [], "refresh_all": params["refresh_all"],
               "cascade": not params["no_cascade"], "dry_run": params["dry_run"],
               "batch": list(params["batch"]), "partition": list(params["partition"]),
               "output": mode, **({"values": values} if values else {}),
               **({"fields": fields} if fields else {})}
    # a run that started, even one answered at its end (a dry run, or refused by the
    # command): its lines, stdout and exit code, as the local command prints them
    # Ctrl-C cancels the run and keeps following it until it stopped; a second exits 130
    with Interrupts(client) as interrupts:
        run_id = interrupts.started(start_run(client, request))
        return _follow(client, run_id, params["agent"], json_mode)


def _follow(client, run_id: str, agent: bool, json_mode: bool) -> int:
    """Print the run's lines as they come; its stdout and exit code at the end."""
    def on_event(event: dict) -> None:
        text = event.get("line")
        if text is not None and (agent or event["type"] not in QUIET):
            note(text)

    ended = follow(client, run_id, on_event)
    if ended.get("rebuilt") and ended.get("error"):  # ended while the stream was away
        from barca.cli.app import report_error

        report_error(error_of(ended["error"], ended["exit_code"]), json_mode)
    elif ended.get("rebuilt"):
        note(f"[barca] note: run {run_id} succeeded on the server while its event stream was "
             "away; its output is gone: run the same command again for it (from cache)")
    _print_stdout(client, run_id, ended)
    return ended["exit_code"]


def _print_stdout(client, run_id: str, ended: dict) -> None:
    """The command's stdout: in its last event, or fetched when too large for one."""
    if ended.get("stdout") is None and ended.get("stdout_bytes"):
        with client.stream("GET", f"/runs/{run_id}/stdout") as response:
            for chunk in response.iter_bytes():
                sys.stdout.buffer.write(chunk)
    else:
        sys.stdout.write(ended.get("stdout") or "")
    sys.stdout.flush()


QUIET = ("step_finished", "step_cached")  # shown with --agent only, as locally
