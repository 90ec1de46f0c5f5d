"""A scheduled job as the web UI operates it: `POST /schedule/{job}/fire` starts the run its
tick starts, now, whatever its cron and its pause say (an operator asked for it); and
`GET /schedule/{job}/fires` answers its next fires, in the server's time zone as the scheduler
computes them, and the last runs its fires started (ticks and fires asked for alike).

A fire is the tick's run (`get` of an asset, `run` of a task, the sensor and its `Always`
readers), recorded as triggered by `api` with the job's `schedule_id` and the moment asked;
it moves no cron anchor (the next tick comes when it was due). Like a tick, it never overlaps
the job's run in flight (409), and the scheduler's next tick sees it as the job's last run.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.schedules import next_fire
from barca.server import blocking
from barca.server.http import ApiError, Served, int_param, json, only_params
from barca.server.run_request import RunRequest
from barca.server.runs import Busy, Paused
from barca.server.scheduler import Job, scheduled_jobs
from barca.views.job_runs import job_outcomes_json
from barca.views.times import iso_time

MAX_FIRES, MAX_RUNS = 20, 100


def schedule_routes(s: Served) -> list[Route]:
    def job_of(request: Request) -> Job:
        node = s.node_id(request.path_params["job"])
        job = next((j for j in scheduled_jobs(s.pipeline.graph) if j.id == node), None)
        if job is None:
            raise ApiError(404, f"'{node}' has no Schedule: it has no fires",
                           "GET /schedule lists the scheduled nodes")
        return job

    def next_fires(job: Job, count: int) -> list[str]:
        """The job's next `count` fires as the scheduler sees them; none without a
        scheduler (`--no-schedule`, `--read-only`: nothing fires)."""
        scheduler = s.scheduler
        if scheduler is None or job.id not in scheduler.anchor or \
                job.cron != next((j.cron for j in scheduler.jobs if j.id == job.id), None):
            return []
        out, at = [], scheduler.next_fire(job)
        for _ in range(count):
            out.append(iso_time(at))
            at = next_fire(job.cron, scheduler.when(at)).timestamp()
        return out

    async def fires(request: Request) -> Response:
        query = request.query_params
        only_params(query, "next", "runs")
        job = job_of(request)
        count = int_param(query, "next", 5, 1, MAX_FIRES)
        limit = int_param(query, "runs", 10, 1, MAX_RUNS)
        runs = await blocking.read(s.read, job_outcomes_json, job.id, limit)
        return json({"id": job.id, "cron": job.cron,
                     "timezone": s.scheduler.zone_name if s.scheduler else None,
                     "next_fires": next_fires(job, count), "runs": runs})

    async def fire(request: Request) -> Response:
        s.writable()
        only_params(request.query_params)
        job = job_of(request)
        scheduler = s.scheduler
        previous = s.runs.get(scheduler.last_run.get(job.id, "")) if scheduler else None
        if previous is not None and previous.live:
            raise ApiError(409, f"'{job.id}' is running already (run {previous.run_id}): a "
                           "job never overlaps itself",
                           f"wait for it to end, or cancel it (DELETE /runs/{previous.run_id})")
        request_ = RunRequest(job.command, job.targets, batch=job.batch, value=False,
                              schedule_id=job.id, scheduled_at=time.time())
        try:
            run = await s.runs.start(request_, "api")
        except Busy as exc:
            raise ApiError(503, str(exc), "retry later", kind="busy")
        except Paused as exc:
            raise ApiError(409, str(exc), "resume it with POST /queue/resume")
        if scheduler is not None:
            scheduler.last_run[job.id] = run.run_id
        return json({"id": job.id, "run_id": run.run_id}, 202)

    return [Route("/schedule/{job:path}/fires", fires),
            Route("/schedule/{job:path}/fire", fire, methods=["POST"])]
