"""The routes that describe the pipeline: health, nodes, their state and keys, schedules and
the API document (the CLI's own views are in `routes_views`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca import __version__
from barca.engine.ledger_server import Ledger
from barca.server import blocking
from barca.server.http import ApiError, Served, int_param, json
from barca.server.openapi import document
from barca.server.routes_project import API_VERSION
from barca.views.node_pages import node_stats, with_timings
from barca.views.server_runs import run_status_word


def _capacity(s: Served) -> dict | None:
    """/health's view of --capacity (None without): what a client that shares it checks."""
    capacity = s.runs.capacity if s.runs is not None else None
    if capacity is None:
        return None
    return {"total": capacity.total, "in_use": capacity.in_use,
            "waiting": len(capacity.line)}


def inspect_routes(s: Served) -> list[Route]:
    def asset(node: str) -> dict:
        graph = s.pipeline.graph
        d = graph.nodes[node]
        freshness = {"type": d.freshness.capitalize()}
        if d.schedule:
            freshness["value"] = d.schedule
        return {"id": node, "name": d.name, "kind": d.kind, "freshness": freshness,
                "inputs": list(graph.upstream[node]), "env": list(d.env),
                "partitioned": bool(d.dimensions), "batch": d.batch}

    async def health(request: Request) -> Response:
        stopping = s.runs is not None and (s.runs.draining or s.runs.closing)
        return json({"status": "draining" if stopping else "ok", "version": __version__,
                     "api_version": API_VERSION, "read_only": s.options.read_only,
                     "store": Ledger(s.pipeline.project).store_name(),
                     "capacity": _capacity(s),
                     "scheduler": s.options.scheduler_on,
                     "load_errors": list(s.pipeline.load_errors), "generation": s.generation})

    async def assets(request: Request) -> Response:
        return json([asset(n) for n in s.pipeline.graph.order])

    async def asset_detail(request: Request) -> Response:
        node = s.node_id(request.path_params["name"])
        stats = await blocking.read(s.read, node_stats, node)
        return json({"asset": asset(node), "stats": stats})

    async def state(request: Request) -> Response:
        if not s.pipeline.files:
            return json([])  # nothing loaded (the load errors are in /health)
        nodes = await blocking.command(s.state.nodes_now)
        next_runs = {j["id"]: j["next_fire"] for j in
                     (s.scheduler.describe() if s.scheduler else [])}
        return json(await blocking.read(s.read, with_timings, nodes, next_runs))

    async def partitions(request: Request) -> Response:
        node = s.node_id(request.path_params["name"])
        definition = s.pipeline.graph.nodes[node]
        if not definition.dimensions:
            raise ApiError(400, f"'{node}' is not partitioned", f"see GET /assets/{node}")
        query = request.query_params
        status = query.get("status")
        if status not in (None, "", "success", "failed"):
            raise ApiError(400, f"status={status[:20]!r} is not success or failed",
                           "pass ?status=failed or ?status=success")
        offset, limit = int_param(query, "offset", 0, 0, 10**9), int_param(query, "limit", 100, 1, 500)
        page = await blocking.read(s.pages.page, definition, status or None,
                                   query.get("q") or None, offset, limit, query.get("error"))
        return json(page)

    async def schedule(request: Request) -> Response:
        """The jobs; `last_status` in the words of a live run (`complete`), `last_run_status`
        in those of run rows (`success`), which the web UI shows."""
        jobs = s.scheduler.describe() if s.scheduler else []
        return json([{**job, "last_run_status": job["last_status"] and
                      run_status_word(job["last_status"])} for job in jobs])

    async def openapi(request: Request) -> Response:
        return json(document(__version__))

    return [
        Route("/health", health), Route("/assets", assets), Route("/state", state),
        Route("/assets/{name:path}/partitions", partitions),
        Route("/assets/{name:path}", asset_detail), Route("/schedule", schedule),
        Route("/openapi.json", openapi),
    ]
