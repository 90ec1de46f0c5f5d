"""What a server's child computes for the server's read routes (`barca.cli.served_run`,
orders of kind `list`, `nodes` and `view`): the JSON of `barca list` and `barca status` built
by the views, or a read-only command of a `--server` client parsed, checked and run here,
its stdout, stderr and exit code captured. Each writes its answer to stdout, which is the
result file by then; what it refuses is raised (the server reads the envelope of the child's
`error` event: `http_status` names the answer when it is not the usual 400).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from typing import Any

import orjson

from barca.errors import UsageError
from barca.server.run_request import ServedRun, resolve_node
from barca.view_commands import VIEW_COMMANDS


def list_nodes(order: ServedRun) -> None:
    """`/list`: `barca list --json` of the served files."""
    from barca.views.node_list import node_list

    _, body = node_list(order.files, order.request["limit"])
    _answer(body)


def status_nodes(order: ServedRun) -> None:
    """`/nodes`: `barca status --json` of the served files (of the targets' cone, node ids
    the server resolved)."""
    from barca.views.status import status_page, status_report

    target = ",".join(order.request["targets"]) or None
    report = status_report(target, list(order.files), order.env)
    _, body = status_page(report, target, order.request["limit"])
    _answer(body)


def view(order: ServedRun) -> None:
    """`GET /cli/{command}`: the command parsed by its own parser (what `view_args` refuses
    is refused), its files served ones, its target nodes of the served graph; then run here,
    on the served files and environment: {exit_code, stdout, stderr}."""
    from barca.cli.view_args import parse_view

    name, args = order.request["command"], order.request["args"]
    if name not in VIEW_COMMANDS:
        raise UsageError(f"`barca {name[:40]}` does not run here: this route runs only "
                         f"{', '.join(VIEW_COMMANDS)}", "see /openapi.json", http_status=404)
    line = parse_view(name, args)
    for text in line.files:
        if text not in order.files:
            raise UsageError(f"'{text[:200]}' is not a file this server serves",
                             f"files served: {', '.join(order.files) or 'none'} (a target "
                             "goes first)")
    if line.target is not None:
        _check_target(line.target, order)
    _answer(_captured(line.argv(order.files, order.env)))


def _check_target(text: str, order: ServedRun) -> None:
    """Each name of the target names a node of the served graph (the server's: without the
    nodes its own load left out): 404 unknown, 409 ambiguous, in the resolver's words."""
    from barca.engine.driver import open_pipeline

    try:
        graph = open_pipeline(order.files, order.env,
                              leave_out=order.request.get("left_out", ())).graph
    except UsageError:  # a served file does not load: the command fails as it loads them,
        return  # saying why, before it reads anything for the target
    for part in text.split(","):
        resolve_node(graph, part)


def _captured(argv: list[str]) -> dict[str, Any]:
    """`barca ARGV` run in this process as the entry point runs it, its stdout and stderr
    captured: {exit_code, stdout, stderr}."""
    from barca.cli.app import main

    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            main(argv)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
        except Exception:  # a bug: said as Python says an uncaught exception, exit 1
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        out.seek(0)
        err.seek(0)
        return {"exit_code": code, "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}


def _answer(body: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(body, default=str))
