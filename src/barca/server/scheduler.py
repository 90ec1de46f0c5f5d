"""The scheduler: every `Schedule(cron)` node fires on its cron, in the server's time zone.

- A tick is a cache-aware command: `get` of a scheduled asset, `run` of a scheduled task, and
  for a scheduled sensor `get` of the sensor and of the assets that read it (through `Always`
  assets only: a `Manual` or scheduled reader waits for its own refresh or tick). With keyed
  partitions that runs the sensor and the keys whose version changed, nothing else.
- A job never overlaps itself: a fire while its last run is in flight is skipped (and said).
- Jobs due at the same instant that have a step in common share one run where that delays
  none of them (`sharing.py`; one run per `Schedule(batch=)` setting): `get` for assets and
  sensors, `run` for tasks, and a run of command `serve` when both are due.
- A paused job (`pause`, kept in the database through restarts, until a moment or until
  `resume`) fires nothing: its ticks are skipped (and said), and not caught up after.
- A job whose last `Schedule(max_failures=N)` ticks (5 by default) all failed pauses itself,
  says why (the log, `/schedule`) and stays paused until resumed; a tick that succeeds, or a
  resume, counts from 0 again. In a run shared with other jobs, a tick failed when a step of
  its own cone did (or the run failed before any step did). The count is kept in the
  database: a restart between two failed ticks does not reset it. A cancelled tick (an
  operator, a stopping server) is neither a failure nor a success.
- `Schedule(timeout_seconds=S)`: a tick still running after S seconds is cancelled (and
  fails); without it the server's `--run-timeout` applies. Jobs with different limits never
  share a run.
- Each fire is kept in `schedule_state`. At start, a job whose next fire after its last one
  has passed fires once (a catch-up), however many it missed; a job never seen is anchored
  at now and does not fire.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, tzinfo
from types import MappingProxyType
from typing import Any, Callable, Mapping

from barca.schedules import next_fire
from barca.printable import note
from barca.errors import BarcaError
from barca.server.run_request import RunRequest
from barca.server.runs import Busy, Runs
from barca.server.sharing import depths, share
from barca.engine.serving import (Fired, count_failures, load_fires, load_pauses,
                                  pause_schedule, record_fires)
from barca.views.times import iso_time

MAX_SLEEP_SECONDS = 60.0


@dataclass(frozen=True)
class Job:
    id: str  # the scheduled node
    cron: str
    kind: str  # asset | task | sensor
    batch: tuple[str, ...]  # Schedule(cron, batch=...) as --batch texts
    targets: tuple[str, ...]  # what a tick gets (or runs)
    cone: Mapping[str, int]  # what a tick runs or reads, with each node's depth
    max_failures: int = 5  # failed ticks in a row that pause the job
    timeout: float | None = None  # seconds a tick may run (0: no limit); None: the server's

    @property
    def command(self) -> str:
        return "run" if self.kind == "task" else "get"


def scheduled_jobs(graph: Any) -> list[Job]:
    jobs, depth = [], depths(graph.order, graph.upstream)
    for node_id in graph.order:
        d = graph.nodes[node_id]
        if d.freshness != "schedule" or not d.schedule:
            continue
        targets = [node_id]
        if d.kind == "sensor":
            targets += _always_readers(graph, node_id)
        cone = MappingProxyType({n: depth[n] for n in graph.cone(targets)})
        jobs.append(Job(node_id, d.schedule, d.kind, tuple(d.schedule_batch), tuple(targets),
                        cone, d.schedule_max_failures, d.schedule_timeout))
    return jobs


def _always_readers(graph: Any, sensor: str) -> list[str]:
    """The assets that read `sensor` through `Always` assets only, in graph order."""
    found: set[str] = set()
    stack = list(graph.downstream[sensor])
    while stack:
        node = stack.pop()
        d = graph.nodes[node]
        if node in found or d.kind != "asset" or d.freshness != "always":
            continue
        found.add(node)
        stack.extend(graph.downstream[node])
    return [n for n in graph.order if n in found]


class Scheduler:
    def __init__(self, jobs: list[Job], runs: Runs, db_path: Any, zone: tzinfo | None,
                 zone_name: str, clock: Callable[[], float] = time.time) -> None:
        """`clock`: what time it is (epoch seconds); tests give one they set, to test what
        fires when on data, without waiting for a real cron."""
        self.jobs, self.runs, self.db_path = jobs, runs, db_path
        self.zone, self.zone_name = zone, zone_name
        self.clock = clock
        self.anchor: dict[str, float] = {}  # the instant each job last fired (or was seen)
        self.last_run: dict[str, str] = {}  # job -> run id of its last fire
        self.kept_out_said: set[str] = set()  # jobs told once why they run apart
        self.paused: dict[str, float | None] = {}  # job -> paused until (epoch), None: resumed
        self.reasons: dict[str, str] = {}  # job -> why it paused itself
        self.failures: dict[str, int] = {}  # job -> its ticks that failed in a row
        self.following: set[asyncio.Task] = set()  # each waiting for a tick's end
        self.wake = asyncio.Event()
        self.stopped = False

    def when(self, epoch: float) -> datetime:
        return datetime.fromtimestamp(epoch, self.zone) if self.zone else \
            datetime.fromtimestamp(epoch).astimezone()

    def next_fire(self, job: Job) -> float:
        return next_fire(job.cron, self.when(self.anchor[job.id])).timestamp()

    def describe(self) -> list[dict]:
        """The `/schedule` jobs, their moments as all JSON writes them (`iso_time`)."""
        out = []
        for job in self.jobs:
            run = self.runs.get(self.last_run.get(job.id, ""))
            out.append({"id": job.id, "cron": job.cron, "kind": job.kind,
                        "next_fire": iso_time(self.next_fire(job))
                        if job.id in self.anchor else None,
                        "last_fired": iso_time(self.anchor.get(job.id)),
                        "last_run": self.last_run.get(job.id),
                        "last_status": run.status if run else None,
                        "paused": self.is_paused(job.id),
                        "paused_until": iso_time(self.paused.get(job.id))
                        if self.is_paused(job.id) else None,
                        "paused_reason": self.reasons.get(job.id)
                        if self.is_paused(job.id) else None,
                        "failures": self.failures.get(job.id, 0),
                        "max_failures": job.max_failures,
                        "failing": self.is_paused(job.id) and job.id in self.reasons,
                        "timeout_seconds": job.timeout})
        return out

    def is_paused(self, job_id: str) -> bool:
        if job_id not in self.paused:
            return False
        until = self.paused[job_id]
        return until is None or self.clock() < until

    def pause(self, job_id: str, until: float | None, reason: str | None = None) -> None:
        """Fire `job_id` no more until `until` (epoch; None: until resumed), kept in the
        database first; `reason`: why it paused itself (blocks)."""
        pause_schedule(self.db_path, job_id, True, until, reason)
        self.paused[job_id] = until
        if reason:
            self.reasons[job_id] = reason
        else:
            self.reasons.pop(job_id, None)

    def resume(self, job_id: str) -> None:
        """Fire `job_id` on its cron again, from its next fire on, its failed ticks counted
        from 0 (blocks)."""
        pause_schedule(self.db_path, job_id, False, None)
        self.paused.pop(job_id, None)
        self.reasons.pop(job_id, None)
        self.failures.pop(job_id, None)

    def stop(self) -> None:
        """Fire nothing more (callable from any thread)."""
        self.stopped, self.jobs = True, []
        self.runs.loop.call_soon_threadsafe(self.wake.set)

    def close(self) -> None:
        """Stop waiting for the ticks still running (on the event loop, at shutdown)."""
        for task in self.following:
            task.cancel()

    async def reload(self, jobs: list[Job]) -> None:
        """The jobs of an edited pipeline: a new job, or one whose cron changed, is anchored
        at now (it does not fire for the past); the others keep their last fire."""
        now = self.clock()
        before = {j.id: j.cron for j in self.jobs}
        fresh = [(j.id, Fired(j.cron, self.zone_name, now, None)) for j in jobs
                 if before.get(j.id) != j.cron]
        for job_id, _ in fresh:
            self.anchor[job_id] = now
        self.jobs = jobs
        self.wake.set()
        note(f"[barca] schedule reloaded: {len(jobs)} job{'s' * (len(jobs) != 1)}")
        if fresh:
            await asyncio.to_thread(self._record, fresh)

    async def run(self, missed: list[Job]) -> None:
        """Fire what `load_state` found missed, then each job at its time until stopped."""
        if missed:
            now = self.clock()
            for job in missed:
                self.anchor[job.id] = now
            await self._fire(missed, now, "catch_up")
        while not self.stopped:
            now = self.clock()
            for at, jobs in self.due(now):
                await self._fire(jobs, at, "schedule")
            pause = min((self.next_fire(j) for j in self.jobs),
                        default=now + MAX_SLEEP_SECONDS) - self.clock()
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), min(max(pause, 0.0), MAX_SLEEP_SECONDS))
            except asyncio.TimeoutError:
                pass

    def due(self, now: float) -> list[tuple[float, list[Job]]]:
        """The fires due at `now` (instant, the jobs due then), earliest first; each of these
        jobs is anchored at its fire. A job far behind (a suspended machine) fires once and
        is anchored at now: then it keeps to its cron, it does not replay what it missed."""
        due: dict[float, list[Job]] = {}
        for job in self.jobs:
            at = self.next_fire(job)
            if at <= now:
                due.setdefault(at, []).append(job)
        for at, jobs in due.items():
            for job in jobs:
                self.anchor[job.id] = at if next_fire(job.cron, self.when(at)).timestamp() \
                    > now else now
        return sorted(due.items())

    def load_state(self) -> list[Job]:
        """Anchor every job at its last fire (or now, if never seen, or if its cron or zone
        changed) and load the pauses; the jobs whose next fire after their last one has
        passed. Called before the server answers, so `/schedule` never shows a state without
        the pauses kept across restarts."""
        seen = load_fires(self.db_path)
        pauses = load_pauses(self.db_path)
        self.paused, self.reasons = dict(pauses.schedules), dict(pauses.reasons)
        self.failures = dict(pauses.failures)
        now = self.clock()
        missed, anchors = [], []
        for job in self.jobs:
            row = seen.get(job.id)
            if row and (row.cron, row.timezone) == (job.cron, self.zone_name):
                self.anchor[job.id] = row.last_fired
                if row.last_run_id:
                    self.last_run[job.id] = row.last_run_id
                if self.next_fire(job) <= now:
                    missed.append(job)
            else:
                self.anchor[job.id] = now
                anchors.append((job.id, Fired(job.cron, self.zone_name, now, None)))
        record_fires(self.db_path, anchors)
        return missed

    async def _fire(self, jobs: list[Job], at: float, why: str) -> None:
        groups: dict[tuple, list[Job]] = {}
        for job in jobs:
            if self.is_paused(job.id):
                until, reason = self.paused[job.id], self.reasons.get(job.id)
                note(f"[barca] scheduled run {job.id} skipped — paused"
                     + (f" until {iso_time(until)}" if until is not None else "")
                     + (f": {reason}" if reason else ""))
                continue
            previous = self.runs.get(self.last_run.get(job.id, ""))
            if previous is not None and previous.live:
                note(f"[barca] scheduled run {job.id} skipped — previous run {previous.run_id} "
                     "still in flight")
                continue
            groups.setdefault((job.batch, job.timeout), []).append(job)
        fired = []
        for (batch, timeout), due in groups.items():
            shared, kept_out = share(due)
            for job_id, (waiting, node) in kept_out.items():
                if job_id not in self.kept_out_said:
                    self.kept_out_said.add(job_id)
                    note(f"[barca] {job_id} runs apart from the jobs due with it: in one run "
                         f"{waiting} would wait for {node}, which it does not read")
            for group in shared:
                fired += await self._start(group, batch, timeout, at, why)
        if fired:
            await asyncio.to_thread(self._record, fired)

    async def _start(self, group: list[Job], batch: tuple[str, ...], timeout: float | None,
                     at: float, why: str) -> list:
        """Start one run for `group`; the fires to record."""
        targets = tuple(dict.fromkeys(t for job in group for t in job.targets))
        commands = {job.command for job in group}
        command = commands.pop() if len(commands) == 1 else "serve"
        names = ", ".join(j.id for j in group)
        try:
            run = await self.runs.start(
                RunRequest(command, targets, batch=batch, value=False,
                           schedule_id=",".join(j.id for j in group), scheduled_at=at), why,
                time_limit=timeout, limit_by=None if timeout is None else
                f"Schedule(timeout_seconds=) of {names}")
        except (Busy, OSError, BarcaError) as exc:
            note(f"[barca] scheduled run {names} not started: {exc}")
            return []
        note(f"[barca] {'catch-up' if why == 'catch_up' else 'scheduled'} run {names} → "
             f"{run.run_id}")
        for job in group:
            self.last_run[job.id] = run.run_id
        task = asyncio.create_task(self._count(run, group))
        self.following.add(task)
        task.add_done_callback(self.following.discard)
        return [(job.id, Fired(job.cron, self.zone_name, at, run.run_id)) for job in group]

    async def _count(self, run: Any, group: list[Job]) -> None:
        """Once the tick ended: each job's failed ticks in a row, and the jobs that reach
        their `max_failures` pause themselves."""
        await run.wait(run.ended)
        for job in group:
            failed = _tick_failed(run, job)
            if failed is None or not failed and not self.failures.get(job.id):
                continue
            count = self.failures.get(job.id, 0) + 1 if failed else 0
            try:
                await asyncio.to_thread(self._keep_count, job, count)
            except BarcaError as exc:
                note(f"[barca] warning: the failed ticks of {job.id} could not be counted: "
                     f"{exc.message}")

    def _keep_count(self, job: Job, count: int) -> None:
        count_failures(self.db_path, job.id, count)
        self.failures[job.id] = count
        if count < job.max_failures or self.is_paused(job.id):
            return
        reason = (f"{count} consecutive failed tick{'s' * (count != 1)} "
                  f"(max_failures={job.max_failures})")
        self.pause(job.id, None, reason)
        note(f"[barca] {job.id} failing: {reason}; paused until resumed (POST "
             f"/schedule/{job.id}/resume)")

    def _record(self, fired: list) -> None:
        record_fires(self.db_path, fired)


def _tick_failed(run: Any, job: Job) -> bool | None:
    """Whether `job`'s tick failed in `run` (ended): None when it was cancelled, which counts
    neither way. In a run shared with other jobs only a failed step of its own cone counts."""
    if run.status == "complete":
        return False
    if run.status != "failed":
        return None
    return not run.failed_nodes or any(node in job.cone for node in run.failed_nodes)
