"""The read-only commands the server runs for its clients, and only those.

A request never becomes a command line as typed: `GET /cli/{command}` names one of the
CLI's view commands, whose own parser reads the arguments (`barca.cli.view_args`: nothing may
choose another environment or another server, and the command line is written anew from the
parsed values); here, files must be files this server serves and a target must name nodes of
the served graph. None of these commands runs a sensor or a step: `status` plans from stored
state (it imports a served file only to evaluate a `partitions(<expr>)` or `batches(<expr>)`
there, as `/state` does), and the child runs with BARCA_READ_ONLY=1, so that SQLite refuses
any write it might attempt. A dry run observes sensors: it is a run, and goes through
`POST /runs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.cli.view_args import VIEW_COMMANDS, checked, parse_view
from barca.server.http import ApiError
from barca.server.commands import child_env, run_captured


def cli_argv(name: str, args: Sequence[str], served: Any) -> list[str]:
    """`barca NAME ARGS` as the server will run it; 404 (not a view, or an unknown target),
    409 (an ambiguous one), 400 (refused or unparsable: a UsageError)."""
    if name not in VIEW_COMMANDS:
        remedy = ('start a run (a dry run too) with POST /runs {"dry_run": true, ...}'
                  if name in ("get", "run") else "see /openapi.json")
        raise ApiError(404, f"`barca {name[:40]}` does not run here: this route runs only "
                       f"{', '.join(VIEW_COMMANDS)}", remedy)
    line = parse_view(name, args)  # a UsageError is a 400 (app.barca_error)
    files = served.pipeline.files
    for text in line.files:
        if text not in files:
            raise ApiError(400, f"'{text[:200]}' is not a file this server serves",
                           f"files served: {', '.join(files) or 'none'} (a target goes first)")
    if line.target is not None:
        for part in line.target.split(","):
            served.node_id(part)
    return line.argv(files, served.options.env)


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
