"""The views a server computes in a child process, given a typed order (`server.commands`):
`/list` and `/nodes` (the served files are imported there, to evaluate their key
expressions), and `GET /cli/{command}`, the read-only commands of `--server` clients.

A `/cli/` request never becomes a command line as typed: it names one of VIEW_COMMANDS (any
other name is a 404 here, before anything starts), and the child reads the arguments with
the command's own parser (`barca.cli.view_args`: nothing may choose another environment or
another server, and the command line is written anew from the parsed values), checks that
named files are files this server serves and that a target names nodes of the served graph,
then runs the command in itself. None of these runs a sensor or a step: `status` plans from
stored state, and every child here runs with BARCA_READ_ONLY=1, so that SQLite refuses any
write it might attempt. A dry run observes sensors: it is a run, and goes through
`POST /runs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.server.commands import ChildAnswer, ask_child
from barca.server.http import ApiError
from barca.view_commands import VIEW_COMMANDS


def check_view_name(name: str) -> None:
    """404 for a command `GET /cli/{command}` does not run."""
    if name not in VIEW_COMMANDS:
        remedy = ('start a run (a dry run too) with POST /runs {"dry_run": true, ...}'
                  if name in ("get", "run") else "see /openapi.json")
        raise ApiError(404, f"`barca {name[:40]}` does not run here: this route runs only "
                       f"{', '.join(VIEW_COMMANDS)}", remedy)


def view_json(root: Path, kind: str, request: dict[str, Any], files: Sequence[str],
              env: str | None) -> Any:
    """The JSON of a view the child computes (`kind` "list" or "nodes"); its error as an
    ApiError (400 for a usage error, else 500), in the CLI's words (blocks)."""
    answer = ask_child(root, kind, request, files, env, read_only=True)
    if answer.code == 0:
        return orjson.loads(answer.result)
    raise _refused(answer, f"the served {kind} view")


def run_view(root: Path, name: str, args: Sequence[str], files: Sequence[str],
             env: str | None, left_out: Sequence[str]) -> dict:
    """`barca NAME ARGS` as a `--server` client typed it, checked and run in a child:
    {exit_code, stdout, stderr}; what the child refuses as an ApiError: 400 (refused or
    unparsable), 404 (an unknown target), 409 (an ambiguous one) (blocks)."""
    answer = ask_child(root, "view", {"command": name, "args": list(args),
                                      "left_out": list(left_out)}, files, env, read_only=True)
    if answer.code == 0:
        return orjson.loads(answer.result)
    raise _refused(answer, f"barca {name}")


def _refused(answer: ChildAnswer, what: str) -> ApiError:
    """The child's error as the server answers it: the HTTP status the child named, else
    400 for a usage error (exit 2) and 500 for anything else."""
    envelope = answer.error
    if envelope is None:
        return ApiError(500, f"{what} failed (exit {answer.code}): {answer.failure()}",
                        kind="infra")
    status = envelope.get("http_status")
    if status not in (400, 404, 409):
        status = 400 if answer.code == 2 else 500
    return ApiError(status, str(envelope.get("error")), envelope.get("remediation") or "",
                    envelope.get("kind", "infra"))
