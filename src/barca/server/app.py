"""The HTTP API: Starlette routes over the served pipeline, the runs and the metadata database.

Every answer is JSON (errors as `{error, kind, remediation}`), every GET also answers HEAD,
an unknown path is a 404 and a wrong verb a 405 with `Allow`. In read-only mode every route
that would start or stop a run answers 403 and nothing writes the database.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from barca import __version__
from barca.errors import BarcaError, UsageError
from barca.server import reads
from barca.server.events import sse
from barca.server.openapi import document
from barca.server.runs import Busy, RunRequest, Runs, parse_request, run_captured
from barca.server.scheduler import Scheduler
from barca.server.state import StateCache, with_timings
from barca.store.partition_pages import PartitionPages

ACCEPT_WAIT_SECONDS = 60.0
VIEW_COMMANDS = ("status", "list", "history", "logs", "stats")
MEDIA_TYPES = {"json": "application/json", "keyed-json": "application/json", "parquet": "application/vnd.apache.parquet",
               "csv": "text/csv", "pickle": "application/octet-stream"}  # how long a POST waits for the run to check its request


@dataclass
class Served:
    """What the routes read: the options, the pipeline, the runs and the scheduler."""

    options: Any  # ServeOptions
    pipeline: Any  # barca.engine.request.Pipeline
    runs: Runs | None = None
    scheduler: Scheduler | None = None
    state: StateCache | None = None
    pages: PartitionPages | None = None


class ApiError(Exception):
    def __init__(self, status: int, error: str, remediation: str = "",
                 kind: str = "usage") -> None:
        super().__init__(error)
        self.status, self.error, self.remediation, self.kind = status, error, remediation, kind


def json(body: Any, status: int = 200, headers: dict | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def build_app(served: Served, lifespan: Any = None) -> Starlette:
    s = served

    def writable() -> None:
        if s.options.read_only:
            raise ApiError(403, "this server is read-only (--read-only): it starts and "
                           "cancels no runs", "run `barca serve` without --read-only")

    def node_id(text: str) -> str:
        graph = s.pipeline.graph  # replaced when --watch reloads
        if text in graph.nodes:
            return text
        matches = sorted(i for i, d in graph.nodes.items() if d.name == text
                         or i.endswith(":" + text))
        if not matches:
            raise ApiError(404, f"unknown node '{text}'",
                           f"nodes: {', '.join(sorted(graph.nodes)) or 'none'}")
        if len(matches) > 1:
            raise ApiError(409, f"'{text}' is ambiguous: {', '.join(matches)}",
                           "name it by its full id")
        return matches[0]

    def asset(node: str) -> dict:
        graph = s.pipeline.graph
        d = graph.nodes[node]
        freshness = {"type": d.freshness.capitalize()}
        if d.schedule:
            freshness["value"] = d.schedule
        return {"id": node, "name": d.name, "kind": d.kind, "freshness": freshness,
                "inputs": list(graph.upstream[node]), "env": list(d.env),
                "partitioned": bool(d.dimensions), "batch": d.batch}

    def read(fn, *args):
        with reads.reading(s.pipeline.project.db_path, s.options.read_only) as conn:
            return fn(conn, *args)

    async def health(request: Request) -> Response:
        return json({"status": "ok", "version": __version__, "read_only": s.options.read_only,
                     "scheduler": s.options.scheduler_on,
                     "load_errors": list(s.pipeline.load_errors)})

    async def assets(request: Request) -> Response:
        return json([asset(n) for n in s.pipeline.graph.order])

    async def asset_detail(request: Request) -> Response:
        node = node_id(request.path_params["name"])
        stats = await asyncio.to_thread(read, reads.node_stats, node)
        return json({"asset": asset(node), "stats": stats})

    async def state(request: Request) -> Response:
        if not s.pipeline.files:
            return json([])  # nothing loaded (the load errors are in /health)
        nodes = await asyncio.to_thread(s.state.nodes_now)
        next_runs = {j["id"]: j["next_fire"] for j in
                     (s.scheduler.describe() if s.scheduler else [])}
        return json(await asyncio.to_thread(read, with_timings, nodes, next_runs))

    async def partitions(request: Request) -> Response:
        node = node_id(request.path_params["name"])
        if not s.pipeline.graph.nodes[node].dimensions:
            raise ApiError(400, f"'{node}' is not partitioned", f"see GET /assets/{node}")
        query = request.query_params
        status = query.get("status")
        if status not in (None, "", "success", "failed"):
            raise ApiError(400, f"status={status!r} is not success or failed",
                           "pass ?status=failed or ?status=success")
        offset, limit = _int(query, "offset", 0, 0, 10**9), _int(query, "limit", 100, 1, 500)
        page = await asyncio.to_thread(s.pages.page, node, status or None,
                                       query.get("q") or None, offset, limit)
        return json(page)

    async def schedule(request: Request) -> Response:
        return json(s.scheduler.describe() if s.scheduler else [])

    async def list_runs(request: Request) -> Response:
        text = request.query_params.get("limit", "100")
        if not text.isdigit():
            raise ApiError(400, f"limit={text!r} is not a whole number", "pass ?limit=1..1000")
        limit = min(max(int(text), 1), 1000)
        rows, total = await asyncio.to_thread(read, reads.list_runs, limit)
        recorded = {r["id"] for r in rows}
        pending = [_live_summary(r) for r in (s.runs.live_runs() if s.runs else [])
                   if r.run_id not in recorded]
        runs = (pending + rows)[:limit]
        return json({"runs": runs, "total": total + len(pending),
                     "truncated": total + len(pending) > len(runs)})

    async def run_detail(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        detail = await asyncio.to_thread(read, reads.run_detail, run_id)
        live = s.runs.get(run_id) if s.runs else None
        if detail is None and live is None:
            raise ApiError(404, f"no run '{run_id}'", "list runs with GET /runs")
        if detail is None:
            detail = {"run": _live_summary(live), "steps": [], "nodes": [], "logs": []}
        detail["result"] = live.outcome() if live and not live.live else None
        if live is not None and detail["run"]["status"] == "running":
            # recorded as running: what this server knows is newer (it ended, or not yet
            # begun); once the row says how it ended, the row is the truth
            detail["run"]["status"] = _durable_status(live.status)
        return json(detail)

    async def logs(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return json({"logs": await asyncio.to_thread(read, reads.run_logs, run_id)})

    async def events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        live = s.runs.get(run_id) if s.runs else None
        after = _last_event_id(request)
        if live is None:
            detail = await asyncio.to_thread(read, reads.run_detail, run_id)
            if detail is None:
                raise ApiError(404, f"no run '{run_id}'", "list runs with GET /runs")
            if after >= 1:
                return Response(status_code=204)
            run = detail["run"]
            if run["status"] == "running":
                raise ApiError(409, f"run '{run_id}' was not started by this server: its "
                               "progress is not streamed", f"poll GET /runs/{run_id}")
            # a run this server no longer follows: its end, from the database
            body = sse(1, {"type": "run_finished", "run_id": run_id, "status": run["status"],
                           "ok": run["status"] == "success", "outcome": None})
            return Response(body, media_type="text/event-stream", headers=SSE_HEADERS)
        if live.events.closed and after >= live.events.last_id:
            return Response(status_code=204)  # tells EventSource to stop reconnecting

        async def stream():
            async for item in live.events.follow(after):
                yield b": keep-alive\n\n" if item is None else sse(*item)
        return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)

    async def output(request: Request) -> Response:
        """The bytes of a run's result: its target's (or `?node=`'s), `?key=` when
        partitioned; the file as stored, typed by its format."""
        run_id = request.path_params["run_id"]
        detail = await asyncio.to_thread(read, reads.run_detail, run_id)
        if detail is None:
            raise ApiError(404, f"no run '{run_id}'", "list runs with GET /runs")
        targets = (detail["run"]["target"] or "").split(",")
        text = request.query_params.get("node") or (targets[0] if len(targets) == 1 else "")
        if not text:
            raise ApiError(400, f"run '{run_id}' has {len(targets)} targets",
                           f"pass ?node= one of {', '.join(targets)}")
        node = node_id(text)
        key = request.query_params.get("key", "")
        dims = s.pipeline.graph.nodes[node].dimensions
        if len(dims) == 1 and key.startswith(dims[0].name + "="):
            key = key.split("=", 1)[1]  # as the CLI names keys: DIM=VALUE
        found = await asyncio.to_thread(read, reads.result_of_run, run_id, node, key)
        if found is None:
            raise ApiError(404, f"run '{run_id}' left no result for {node}"
                           + (f" key {key!r}" if key else ""),
                           "pass ?key=DIM=VALUE for a partitioned node" if not key else "")
        path, fmt = found
        root = s.pipeline.project.root
        full = (root / path).resolve()
        if not full.is_relative_to((root / ".barca").resolve()) or not full.is_file():
            raise ApiError(404, f"the result file {path} is not there",
                           "it was removed (barca gc?): get the node again")
        return FileResponse(full, media_type=MEDIA_TYPES.get(fmt, "application/octet-stream"))

    async def stdout(request: Request) -> Response:
        """What the run's command printed on stdout, whole (kept as long as the run is)."""
        run_id = request.path_params["run_id"]
        live = s.runs.get(run_id) if s.runs else None
        if live is None or live.live or live.stdout_path is None or \
                not live.stdout_path.exists():
            raise ApiError(404, f"no finished run '{run_id}' on this server",
                           "a run's output is kept an hour after it ends")
        return FileResponse(live.stdout_path, media_type="text/plain; charset=utf-8")

    async def start_run(request: Request) -> Response:
        writable()
        try:
            body = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, f"the request body is not JSON: {exc}",
                           'send e.g. {"command": "get", "targets": ["summary"]}')
        run_request = parse_request(body, s.pipeline.files)
        return await _start(run_request, durable=True)

    async def legacy_trigger(request: Request) -> Response:
        writable()
        target = request.path_params["target"]
        if not target:
            raise ApiError(404, "a target is needed: POST /get/<asset> or /run/<task>")
        command = request.url.path.rsplit("/" + target, 1)[0].rsplit("/", 1)[-1]
        run_request = RunRequest(command, (target,), refresh_all=command == "run")
        return await _start(run_request, durable=False)

    def target(text: str) -> str:
        """A run's target, resolved as the CLI resolves it (and refused with its words)."""
        try:
            return s.pipeline.graph.resolve_target(text)
        except UsageError as exc:
            raise ApiError(409 if "ambiguous" in exc.message else 404, exc.message,
                           exc.remediation or "") from None

    async def _start(run_request: RunRequest, durable: bool) -> Response:
        for text in run_request.targets:  # checked here, passed on as typed (and recorded so)
            target(text)
        assert s.runs is not None
        try:
            run = s.runs.start(run_request, "api")
        except Busy as exc:
            raise ApiError(503, str(exc), "retry later", kind="busy")
        if run_request.dry_run:
            await asyncio.to_thread(run.ended.wait)
        else:
            await asyncio.to_thread(run.settled.wait, ACCEPT_WAIT_SECONDS)
        if run.ended.is_set() and run.exit_code != 0 and (
                run_request.dry_run or not run.accepted):  # refused, or the dry run failed
            error = run.error or {"error": f"the run ended with exit code {run.exit_code}",
                                  "kind": "infra"}
            return json(error, 400 if run.exit_code == 2 else 500)
        if run_request.dry_run:
            return json(run.outcome(limit=None))  # a plan lists at most 20 keys a node
        return json({"run_id": run.run_id}, 202 if durable else 200)

    async def cancel(request: Request) -> Response:
        writable()
        run_id = request.path_params["run_id"]
        live = s.runs.get(run_id) if s.runs else None
        if live is None:
            raise ApiError(404, f"no run '{run_id}' in flight on this server")
        if not live.live:
            raise ApiError(409, f"run '{run_id}' already ended ({live.status})")
        s.runs.cancel(live)
        return json({"run_id": run_id, "status": "cancelling"})

    async def status(request: Request) -> Response:
        live = s.runs.get(request.path_params["run_id"]) if s.runs else None
        if live is None:
            raise ApiError(404, f"no run '{request.path_params['run_id']}' on this server",
                           "finished runs are kept an hour; see GET /runs/{id}")
        error = (live.error or {}).get("error") if live.status in ("failed", "cancelled") \
            else None
        return json({"handle": live.run_id, "status": live.status,
                     "result": live.outcome() if not live.live else None, "error": error,
                     "started_at": live.started_at, "finished_at": live.finished_at})

    async def cli_view(request: Request) -> Response:
        """A read-only command as `--server` clients type it, run as typed (its output is
        then exactly the local command's)."""
        command = request.path_params["command"]
        args = request.query_params.getlist("arg")
        if command not in VIEW_COMMANDS and not (command in ("get", "run")
                                                 and "--dry-run" in args):
            raise ApiError(404, f"`barca {command}` does not run here",
                           f"commands: {', '.join(VIEW_COMMANDS)}, and get/run --dry-run")
        if any(a == "--server" or a.startswith("--server=") for a in args):
            raise ApiError(400, "--server cannot be passed on to the server")
        argv = [command, *args, *(["--env", s.options.env] if s.options.env else [])]
        return json(await asyncio.to_thread(run_captured, s.pipeline.project.root, argv))

    async def openapi(request: Request) -> Response:
        return json(document(__version__))

    routes = [
        Route("/health", health), Route("/assets", assets), Route("/state", state),
        Route("/assets/{name:path}/partitions", partitions),
        Route("/assets/{name:path}", asset_detail), Route("/schedule", schedule),
        Route("/runs", list_runs), Route("/runs", start_run, methods=["POST"]),
        Route("/runs/{run_id}", run_detail), Route("/runs/{run_id}", cancel, methods=["DELETE"]),
        Route("/runs/{run_id}/events", events), Route("/logs/{run_id}", logs),
        Route("/runs/{run_id}/output", output), Route("/runs/{run_id}/stdout", stdout),
        Route("/get/{target:path}", legacy_trigger, methods=["POST"]),
        Route("/run/{target:path}", legacy_trigger, methods=["POST"]),
        Route("/status/{run_id}", status), Route("/openapi.json", openapi),
        Route("/cli/{command}", cli_view),
    ]
    routes = _merge_methods(routes) + [
        Route("/", _to_ui), Route("/ui", _to_ui),
        Mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        HTTPException: _http_error, ApiError: _api_error, BarcaError: _barca_error,
        Exception: _crash})
    return app


UI_DIR = Path(__file__).parent / "ui"


async def _to_ui(request: Request) -> Response:
    """Relative, so that the UI works under any path prefix behind a proxy."""
    return Response(status_code=303, headers={"Location": "ui/"})


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _merge_methods(routes: list[Route]) -> list[Route]:
    """One route per path, dispatching on the verb, so that a wrong verb is a 405 naming
    every allowed one (Starlette stops at the first route whose path matches)."""
    by_path: dict[str, dict[str, Any]] = {}
    for route in routes:
        for method in route.methods or ():
            by_path.setdefault(route.path, {})[method] = route.endpoint
    merged = []
    for path, endpoints in by_path.items():
        async def dispatch(request: Request, endpoints=endpoints) -> Response:
            return await endpoints[request.method](request)
        merged.append(Route(path, dispatch, methods=list(endpoints)))
    return merged


def _live_summary(run) -> dict:
    return {"id": run.run_id, "run_id": run.run_id, "command": run.request.command,
            "files": [], "target": ",".join(run.request.targets) or None,
            "status": _durable_status(run.status), "triggered_by": run.triggered_by,
            "started_at": reads.rfc3339(run.started_at),
            "finished_at": reads.rfc3339(run.finished_at), "elapsed_seconds": None,
            "steps_total": None, "steps_executed": 0, "steps_cached": 0, "error": None}


def _durable_status(status: str) -> str:
    return "success" if status == "complete" else status


def _int(query, name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None:
        return default
    if not text.isdigit():
        raise ApiError(400, f"{name}={text!r} is not a whole number",
                       f"pass ?{name}={low}..{high}")
    return min(max(int(text), low), high)


def _last_event_id(request: Request) -> int:
    text = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    return int(text) if text.isdigit() else 0


async def _http_error(request: Request, exc: HTTPException) -> Response:
    text = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on "
            f"{request.url.path}"}.get(exc.status_code, exc.detail)
    return json({"error": text, "kind": "usage", "remediation": "see /openapi.json"},
                exc.status_code, exc.headers)


async def _api_error(request: Request, exc: ApiError) -> Response:
    return json({"error": exc.error, "kind": exc.kind, "remediation": exc.remediation},
                exc.status)


async def _barca_error(request: Request, exc: BarcaError) -> Response:
    return json({"error": exc.message, "kind": exc.kind, "remediation": exc.remediation},
                400 if isinstance(exc, UsageError) else 500)


async def _crash(request: Request, exc: Exception) -> Response:
    return json({"error": f"{type(exc).__name__}: {exc}", "kind": "infra",
                 "remediation": "this is a bug in barca serve: the server's stderr has the "
                                "traceback"}, 500)
