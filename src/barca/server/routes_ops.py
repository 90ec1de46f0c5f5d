"""The operator's routes: the run queue (look, pause, resume), a schedule's pause and resume,
and the reset of the metadata database. Each change is kept in the database before it is
answered, so that it holds across a restart; each is refused by a read-only server (403),
and passes the guard's checks for a change (token, Origin, JSON body) like every POST.
"""

from __future__ import annotations

import time
from datetime import datetime

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import barca.engine.serving as serving
from barca.server import blocking
from barca.server.http import ApiError, Served, json, only_params
from barca.views.times import iso_time

RESET_CONFIRMATION = {"confirm": True}


def ops_routes(s: Served) -> list[Route]:
    def queue_json() -> dict:
        runs = s.runs
        running, waiting = runs.in_queue() if runs else ([], [])
        return {"paused": bool(runs and runs.paused_at is not None),
                "paused_at": iso_time(runs.paused_at) if runs else None,
                "draining": bool(runs and (runs.draining or runs.closing)),
                "max_runs": runs.slots if runs else 0,
                "running": [_run_json(r) for r in running],
                "queued": [{**_run_json(r), "position": i}
                           for i, r in enumerate(waiting, 1)]}

    async def queue_body() -> dict:
        """The queue, and the shared capacity (read on the event loop, which changes it)."""
        body = await blocking.read(queue_json)
        capacity = s.runs.capacity if s.runs else None
        return {**body, "capacity": capacity.describe() if capacity else None}

    async def queue(request: Request) -> Response:
        only_params(request.query_params)
        return json(await queue_body())

    async def pause_queue(request: Request) -> Response:
        s.writable()
        only_params(request.query_params)
        await blocking.read(s.runs.pause_queue)
        return json(await queue_body())

    async def resume_queue(request: Request) -> Response:
        s.writable()
        only_params(request.query_params)
        await blocking.read(s.runs.resume_queue)
        return json(await queue_body())

    def job_id(request: Request) -> str:
        node = s.node_id(request.path_params["job"])
        if not s.pipeline.graph.nodes[node].schedule:
            raise ApiError(404, f"'{node}' has no Schedule: there is nothing to pause",
                           "GET /schedule lists the scheduled nodes")
        return node

    async def pause_schedule(request: Request) -> Response:
        s.writable()
        only_params(request.query_params, "until")
        node = job_id(request)
        until = _moment(request.query_params.get("until"))
        if s.scheduler is not None:
            await blocking.read(s.scheduler.pause, node, until)
        else:  # --no-schedule: kept for the next server that schedules
            await blocking.read(serving.pause_schedule, s.pipeline.project.db_path, node,
                                True, until)
        return json({"id": node, "paused": True, "paused_until": iso_time(until)})

    async def resume_schedule(request: Request) -> Response:
        s.writable()
        only_params(request.query_params)
        node = job_id(request)
        if s.scheduler is not None:
            await blocking.read(s.scheduler.resume, node)
        else:
            await blocking.read(serving.pause_schedule, s.pipeline.project.db_path, node,
                                False, None)
        return json({"id": node, "paused": False, "paused_until": None})

    async def reset_state(request: Request) -> Response:
        s.writable()
        only_params(request.query_params)
        try:
            body = orjson.loads(await request.body() or b"null")
        except orjson.JSONDecodeError:
            body = None
        if body != RESET_CONFIRMATION:
            raise ApiError(400, "a reset empties the metadata database (every run, result "
                           "record and key state; a copy is kept beside it) and needs "
                           "its confirmation", 'send the body {"confirm": true}')
        runs = s.runs
        if runs.closing or runs.draining:
            raise ApiError(503, "the server is shutting down", "reset after it restarts",
                           kind="busy")
        return json(await blocking.read(_reset, s))

    return [Route("/queue", queue),
            Route("/queue/pause", pause_queue, methods=["POST"]),
            Route("/queue/resume", resume_queue, methods=["POST"]),
            Route("/schedule/{job:path}/pause", pause_schedule, methods=["POST"]),
            Route("/schedule/{job:path}/resume", resume_schedule, methods=["POST"]),
            Route("/state/reset", reset_state, methods=["POST"])]


def _reset(s: Served) -> dict:
    """The reset, holding the runs' lock: no run of this server starts meanwhile (blocks)."""
    with s.runs.lock:
        live = [r.run_id for r in s.runs.live_runs()]
        if live:
            raise ApiError(409, f"{len(live)} run{'s' * (len(live) != 1)} of this server "
                           f"{'is' if len(live) == 1 else 'are'} waiting or running "
                           f"({', '.join(live[:5])})",
                           "wait for them to end, or cancel them (DELETE /runs/{id}), then "
                           "reset")
        return serving.reset_state(s.pipeline.project.db_path)


def _run_json(run) -> dict:
    return {"run_id": run.run_id, "command": run.request.command,
            "targets": list(run.request.targets), "triggered_by": run.triggered_by,
            "accepted_at": iso_time(run.started_at)}


def _moment(text: str | None) -> float | None:
    """`?until=` as epoch seconds: an RFC 3339 moment with its offset, in the future."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ApiError(400, f"until={text[:40]!r} is not an RFC 3339 moment with its offset",
                       "pass e.g. ?until=2026-12-05T18:00:00Z")
    if moment.timestamp() <= time.time():
        raise ApiError(400, f"until={text[:40]!r} has passed",
                       "pass a moment to come, or no `until` (paused until resumed)")
    return moment.timestamp()
