"""The CLI's read-only views over HTTP: typed routes answering what `barca list`, `status`,
`history` and `stats` print with --json, and `GET /cli/{command}`, which `--server` clients
use to print exactly what the local command prints (see `server.views`).

`/history`, `/history/{run_id}` and `/stats/{name}` need only the metadata database and the
served graph: they are answered here, from `barca.views` over a read connection of their
own (a snapshot on a read-only server), on the read threads. `/list` and `/nodes` import the
served files (key expressions, next fires) and `/cli/` runs a command: each is a typed order
to a child process (`server.views`), on the command threads.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.server import blocking
from barca.server.http import ApiError, Served, bool_param, int_param, json, only_params
from barca.server.views import check_view_name, run_view, view_json
from barca.views.history import DEFAULT_RUNS, recorded_run_json, runs_json, select_runs
from barca.views.listing import DEFAULT_NODES
from barca.views.server_runs import matching_runs
from barca.views.stats import recorded_stats_json

MAX_LIMIT = 1_000_000  # a listing's --limit: past it, ask for all


def view_routes(s: Served) -> list[Route]:
    def paging(request: Request, default: int) -> int | None:
        """`?limit=N` and `?all=1` as the command's --limit and --all: None for all."""
        query = request.query_params
        limit = int_param(query, "limit", default, 1, MAX_LIMIT)
        return None if bool_param(query, "all") else limit

    async def in_child(kind: str, request: dict) -> Response:
        pipeline = s.pipeline
        return json(await blocking.command(view_json, pipeline.project.root, kind, request,
                                           list(pipeline.files), s.options.env))

    async def list_nodes(request: Request) -> Response:
        """`barca list --json`: every node, its kind, freshness, inputs and next fire."""
        only_params(request.query_params, "limit", "all")
        return await in_child("list", {"limit": paging(request, DEFAULT_NODES)})

    async def nodes(request: Request) -> Response:
        """`barca status [TARGETS] --json`: cache state of each node (of the targets' cone)."""
        query = request.query_params
        only_params(query, "targets", "limit", "all")
        text = query.get("targets") or ""
        targets = list(dict.fromkeys(s.node_id(t) for t in text.split(","))) if text else []
        return await in_child("nodes", {"targets": targets,
                                        "limit": paging(request, DEFAULT_NODES)})

    async def history(request: Request) -> Response:
        """`barca history --json`: recent runs, newest first."""
        only_params(request.query_params, "limit", "all")
        return json(await blocking.read(s.read, _runs, paging(request, DEFAULT_RUNS)))

    async def run_history(request: Request) -> Response:
        """`barca history RUN_ID --json`: one run's steps (`?limit=N` of them, or all)."""
        query = request.query_params
        only_params(query, "limit")
        limit = int_param(query, "limit", 0, 1, MAX_LIMIT) if "limit" in query else None
        return json(await blocking.read(s.read, _one_run, request.path_params["run_id"],
                                        limit))

    async def stats(request: Request) -> Response:
        """`barca stats NAME --json`: timings, failures and re-execution rate of a node."""
        only_params(request.query_params)
        node = s.node_id(request.path_params["name"])
        kind = s.pipeline.graph.nodes[node].kind
        return json(await blocking.read(s.read, recorded_stats_json, node, kind))

    async def cli_view(request: Request) -> Response:
        """A read-only command as a `--server` client typed it, parsed, checked and run by a
        child: what it printed and its exit code."""
        name = request.path_params["command"]
        check_view_name(name)
        pipeline = s.pipeline
        return json(await blocking.command(
            run_view, pipeline.project.root, name, request.query_params.getlist("arg"),
            list(pipeline.files), s.options.env, list(pipeline.left_out)))

    return [Route("/list", list_nodes), Route("/nodes", nodes), Route("/history", history),
            Route("/history/{run_id}", run_history), Route("/stats/{name:path}", stats),
            Route("/cli/{command}", cli_view)]


def _runs(conn, limit: int | None) -> dict:
    return runs_json(*select_runs(conn, limit))


def _one_run(conn, text: str, limit: int | None) -> dict:
    """The run an id (or a unique prefix of one, as the CLI takes it) names, with its first
    `limit` steps: 404 none, 409 several."""
    matches = matching_runs(conn, text)
    if len(matches) > 1:
        raise ApiError(409, f"run id '{text[:64]}' is ambiguous: {', '.join(matches)}",
                       "pass more characters of the run id")
    detail = recorded_run_json(conn, matches[0], limit) if matches else None
    if detail is None:
        raise ApiError(404, f"unknown run id '{text[:64]}'", "list runs with GET /history")
    return detail
