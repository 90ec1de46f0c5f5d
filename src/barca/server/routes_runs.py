"""The routes of runs: start one (the CLI's options as JSON), follow its events, cancel it,
read what it recorded and left; and the older trigger routes existing clients use."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Route

from barca.errors import UsageError
from barca.server import blocking
from barca.server.events import sse
from barca.server.http import ApiError, Served, int_param, json, only_params, whole_number
from barca.server.run_request import RunRequest, parse_request
from barca.server.runs import Busy, Paused
from barca.views import server_runs as views
from barca.views.log_lines import recorded_lines
from barca.views.times import iso_time

ACCEPT_WAIT_SECONDS = 60.0  # how long a POST waits for the run to check its request
RUN_ID_HEADER = "Barca-Run-Id"  # on every answer of a POST that started a run
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
MEDIA_TYPES = {"json": "application/json", "keyed-json": "application/json",
               "parquet": "application/vnd.apache.parquet", "csv": "text/csv",
               "pickle": "application/octet-stream"}


def run_routes(s: Served) -> list[Route]:
    async def list_runs(request: Request) -> Response:
        query = request.query_params
        limit = int_param(query, "limit", 100, 1, 1000)
        offset = int_param(query, "offset", 0, 0, 10**9)
        live = {r.run_id: r for r in (s.runs.live_runs() if s.runs else [])}
        rows, total, unrecorded = await blocking.read(s.read, views.list_runs, limit,
                                                          offset, list(live)[::-1])
        # runs not recorded yet (waiting for a slot, or starting) are the newest
        runs = ([_live_summary(live[i]) for i in unrecorded[offset:]] + rows)[:limit]
        return json({"runs": runs, "total": total, "truncated": offset + len(runs) < total})

    async def run_detail(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        detail = await blocking.read(s.read, views.run_detail, run_id)
        live = s.runs.get(run_id) if s.runs else None
        if detail is None and live is None:
            raise ApiError(404, f"no run '{run_id}'", "list runs with GET /runs")
        if detail is None:
            detail = views.unrecorded_run_detail(_live_summary(live))
        detail["result"] = live.outcome() if live and not live.live else None
        if live is not None and detail["run"]["status"] == "running":
            # recorded as running: what this server knows is newer (it ended, or not yet
            # begun); once the row says how it ended, the row is the truth
            detail["run"]["status"] = views.run_status_word(live.status)
        return json(detail)

    async def logs(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return json({"logs": await blocking.read(s.read, views.run_logs, run_id)})

    async def run_logs(request: Request) -> Response:
        """`barca logs RUN_ID --json`: the recorded lines, of `?step=` and `?stream=`."""
        query = request.query_params
        only_params(query, "step", "stream")
        stream = query.get("stream")
        if stream not in (None, "stdout", "stderr"):
            raise ApiError(400, f"stream={stream[:20]!r} is not stdout or stderr",
                           "pass ?stream=stdout or ?stream=stderr")
        run_id = request.path_params["run_id"]
        try:
            lines = await blocking.read(s.read, recorded_lines, run_id, query.get("step"),
                                        stream)
        except UsageError as exc:  # a step the run did not record (404), or several (409)
            raise ApiError(409 if "ambiguous" in exc.message else 404, exc.message,
                           exc.remediation or "") from None
        if lines is None:
            live = s.runs.get(run_id) if s.runs else None
            if live is None or not live.live:
                raise ApiError(404, f"no run '{run_id[:64]}'", "list runs with GET /runs")
            lines = []  # accepted, not recorded yet: it has written nothing
        return json({"run_id": run_id, "logs": lines})

    async def events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        live = s.runs.get(run_id) if s.runs else None
        after = _last_event_id(request)
        if live is None:
            detail = await blocking.read(s.read, views.run_detail, run_id)
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
                           "run_status": run["status"], "ok": run["status"] == "success",
                           "outcome": None})
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
        detail = await blocking.read(s.read, views.run_detail, run_id)
        if detail is None:
            raise ApiError(404, f"no run '{run_id}'", "list runs with GET /runs")
        targets = (detail["run"]["target"] or "").split(",")
        text = request.query_params.get("node") or (targets[0] if len(targets) == 1 else "")
        if not text:
            raise ApiError(400, f"run '{run_id}' has {len(targets)} targets",
                           f"pass ?node= one of {', '.join(targets)}")
        node = s.node_id(text)
        key = request.query_params.get("key", "")
        key = views.key_named(s.pipeline.graph.nodes[node], key)
        found = await blocking.read(s.read, views.result_of_run, run_id, node, key)
        if found is None:
            raise ApiError(404, f"run '{run_id}' left no result for {node}"
                           + (f" key {key!r}" if key else ""),
                           "pass ?key=DIM=VALUE (a key's label) for a partitioned node"
                           if not key else "")
        path, fmt = found
        root = s.pipeline.project.root
        media_type = MEDIA_TYPES.get(fmt, "application/octet-stream")
        packed = views.packed_bytes(root, path)  # a small result, in a pack of its node
        if packed is not None:
            return Response(packed, media_type=media_type)
        full = (root / path).resolve()
        if not full.is_relative_to((root / ".barca").resolve()) or not full.is_file():
            raise ApiError(404, f"the result file {path} is not there",
                           "it was removed (barca gc?): get the node again")
        return FileResponse(full, media_type=media_type)

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
        s.writable()
        try:
            body = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, f"the request body is not JSON: {exc}",
                           'send e.g. {"command": "get", "targets": ["summary"]}')
        run_request = parse_request(body, s.pipeline.files)
        return await _start(run_request, durable=True)

    async def run_everything(request: Request) -> Response:
        """`barca get` with no target: every asset and sensor (tasks only when named)."""
        s.writable()
        if (await request.body()).strip() not in (b"", b"{}"):
            raise ApiError(400, "POST /run takes no body: it gets every asset and sensor",
                           "to name targets or options, POST /runs with that body")
        graph = s.pipeline.graph
        if not any(graph.nodes[n].kind != "task" for n in graph.order):
            raise ApiError(400, "no loaded assets or sensors to get",
                           "GET /health lists what failed to load; run a task with "
                           "POST /runs {\"command\": \"run\", \"targets\": [...]}")
        return await _start(RunRequest("get", ()), durable=False)

    async def legacy_trigger(request: Request) -> Response:
        s.writable()
        target = request.path_params["target"]
        if not target:
            raise ApiError(404, "a target is needed: POST /get/<asset> or /run/<task>")
        command = request.url.path.rsplit("/" + target, 1)[0].rsplit("/", 1)[-1]
        run_request = RunRequest(command, (target,), refresh_all=command == "run")
        return await _start(run_request, durable=False)

    async def _start(run_request: RunRequest, durable: bool) -> Response:
        for text in run_request.targets:  # checked here, passed on as typed (and recorded so)
            s.node_id(text)
        assert s.runs is not None
        try:
            run = await s.runs.start(run_request, "api")
        except Busy as exc:
            raise ApiError(503, str(exc), "retry later", kind="busy")
        except Paused as exc:
            raise ApiError(409, str(exc), "resume it with POST /queue/resume")
        if run_request.dry_run:
            await run.wait(run.ended)
        else:
            await run.wait(run.settled, ACCEPT_WAIT_SECONDS)
        # its events and stdout stay readable (an hour), even when it answers at its end: a
        # `--server` client prints them as the local command would have
        headers = {RUN_ID_HEADER: run.run_id}
        # refused, or the dry run failed; one cancelled before it started is answered as
        # started: its events say how it ended, as for one cancelled later
        if run.ended.is_set() and run.exit_code != 0 and (run_request.dry_run or (
                not run.accepted and run.status != "cancelled")):
            error = run.error or {"error": f"the run ended with exit code {run.exit_code}",
                                  "kind": "infra"}
            return json(error, 400 if run.exit_code == 2 else 500, headers)
        if run_request.dry_run:  # a plan lists at most 20 keys a node
            return json(run.outcome(limit=None), headers=headers)
        return json({"run_id": run.run_id}, 202 if durable else 200, headers)

    async def cancel(request: Request) -> Response:
        s.writable()
        run_id = request.path_params["run_id"]
        live = s.runs.get(run_id) if s.runs else None
        if live is None:
            raise ApiError(404, f"no run '{run_id}' in flight on this server")
        if not live.live:
            raise ApiError(409, f"run '{run_id}' already ended ({live.status})")
        await blocking.read(s.runs.cancel, live)  # a waiting run's row is written
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
                     "started_at": iso_time(live.started_at),
                     "finished_at": iso_time(live.finished_at)})

    return [
        Route("/runs", list_runs), Route("/runs", start_run, methods=["POST"]),
        Route("/runs/{run_id}", run_detail), Route("/runs/{run_id}", cancel, methods=["DELETE"]),
        Route("/runs/{run_id}/events", events), Route("/events/{run_id}", events),
        Route("/logs/{run_id}", logs), Route("/runs/{run_id}/logs", run_logs),
        Route("/run", run_everything, methods=["POST"]),
        Route("/runs/{run_id}/output", output), Route("/runs/{run_id}/stdout", stdout),
        Route("/get/{target:path}", legacy_trigger, methods=["POST"]),
        Route("/run/{target:path}", legacy_trigger, methods=["POST"]),
        Route("/status/{run_id}", status),
    ]


def _live_summary(run) -> dict:
    return views.unrecorded_run_json(run.run_id, run.request.command, run.request.targets,
                                     run.status, run.triggered_by, run.started_at,
                                     run.finished_at)


def _last_event_id(request: Request) -> int:
    text = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    return whole_number(text) or 0
