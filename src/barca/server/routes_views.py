"""The CLI's read-only views over HTTP: typed routes answering what `barca list`, `status`,
`history` and `stats` print with --json, and `GET /cli/{command}`, which `--server` clients
use to print exactly what the local command prints (see `views` for what it lets through).

Each runs the CLI's own command in a child process, built from validated values only (a
later read model answers in-process).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.server import blocking
from barca.server.http import ApiError, Served, bool_param, int_param, json, only_params
from barca.server.views import cli_argv, run_view, view_json
from barca.views.server_runs import matching_runs

MAX_LIMIT = 1_000_000  # a listing's --limit: past it, ask for all


def view_routes(s: Served) -> list[Route]:
    def files() -> list[str]:
        return list(s.pipeline.files)

    def paging(request: Request, default: int) -> list[str]:
        """`?limit=N` and `?all=1` as the command's --limit and --all."""
        query = request.query_params
        limit = int_param(query, "limit", default, 1, MAX_LIMIT)
        return ["--all"] if bool_param(query, "all") else [f"--limit={limit}"]

    def env() -> list[str]:
        return [f"--env={s.options.env}"] if s.options.env else []

    async def answer(argv: list[str]) -> Response:
        root = s.pipeline.project.root
        return json(await blocking.command(view_json, root, argv))

    async def list_nodes(request: Request) -> Response:
        """`barca list --json`: every node, its kind, freshness, inputs and next fire."""
        only_params(request.query_params, "limit", "all")
        return await answer(["list", "--json", *paging(request, 100), "--", *files()])

    async def nodes(request: Request) -> Response:
        """`barca status [TARGETS] --json`: cache state of each node (of the targets' cone)."""
        query = request.query_params
        only_params(query, "targets", "limit", "all")
        text = query.get("targets") or ""
        targets = list(dict.fromkeys(s.node_id(t) for t in text.split(","))) if text else []
        return await answer(["status", "--json", *paging(request, 100), *env(), "--",
                             *([",".join(targets)] if targets else []), *files()])

    async def history(request: Request) -> Response:
        """`barca history --json`: recent runs, newest first."""
        only_params(request.query_params, "limit", "all")
        return await answer(["history", "--json", *paging(request, 10), *env()])

    async def run_history(request: Request) -> Response:
        """`barca history RUN_ID --json`: one run's steps (`?limit=N` of them, or all)."""
        query = request.query_params
        only_params(query, "limit")
        run_id = await blocking.read(s.read, _run_id, request.path_params["run_id"])
        limit = [f"--limit={int_param(query, 'limit', 0, 1, MAX_LIMIT)}"] \
            if "limit" in query else []
        return await answer(["history", "--json", *limit, *env(), "--", run_id])

    async def stats(request: Request) -> Response:
        """`barca stats NAME --json`: timings, failures and re-execution rate of a node."""
        only_params(request.query_params)
        node = s.node_id(request.path_params["name"])
        return await answer(["stats", "--json", *env(), "--", node, *files()])

    async def cli_view(request: Request) -> Response:
        """A read-only command as a `--server` client typed it, parsed and checked: what it
        printed and its exit code."""
        argv = cli_argv(request.path_params["command"],
                        request.query_params.getlist("arg"), s)
        return json(await blocking.command(run_view, s.pipeline.project.root, argv))

    return [Route("/list", list_nodes), Route("/nodes", nodes), Route("/history", history),
            Route("/history/{run_id}", run_history), Route("/stats/{name:path}", stats),
            Route("/cli/{command}", cli_view)]


def _run_id(conn, text: str) -> str:
    """The recorded run an id (or a unique prefix of one, as the CLI takes it) names: 404
    none, 409 several."""
    matches = matching_runs(conn, text)
    if len(matches) > 1:
        raise ApiError(409, f"run id '{text[:64]}' is ambiguous: {', '.join(matches)}",
                       "pass more characters of the run id")
    if not matches:
        raise ApiError(404, f"unknown run id '{text[:64]}'", "list runs with GET /history")
    return matches[0]
