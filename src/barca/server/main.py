"""`barca serve`: load the pipeline (leniently), bind, serve until SIGINT or SIGTERM.

Shutdown drains: the scheduler stops, no run starts any more (new ones are still accepted,
queued), the running runs get `--drain-timeout` seconds to finish; then those still running
are asked to stop (each records itself `cancelled`), what has not within STOP_SECONDS is
killed and its row closed, and the HTTP server goes; exit 0. The runs still waiting stay in
the database's queue, for the next server on the project. A second signal ends the drain at
once (its runs cancelled) and the server exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime

import uvicorn

from barca.engine.driver import end_pools_with_this_process, keep_warm, open_pipeline
from barca.engine.serving import check_readable, close_killed, read_through_snapshots
from barca.engine.serving import hold_project
from barca.printable import note
from barca.config import CONFIG_FILE
from barca.server.app import build_app
from barca.server.capacity import SharedCapacity
from barca.server.connections import BoundedH11Protocol
from barca.server.guard import Guard
from barca.server.http import Served
from barca.server.options import ServeOptions, check, resolve_token, zone
from barca.server.runs import Runs
from barca.server.scheduler import Scheduler, scheduled_jobs
from barca.server.state import StateCache
from barca.views.node_pages import KeyPages

STOP_SECONDS = 7.0
POOL_IDLE_SECONDS = 3600


def serve(options: ServeOptions) -> int:
    check(options)
    if options.read_only:
        _read_only()
    pipeline = open_pipeline(options.paths, options.env, lenient=True)
    configured = pipeline.project.settings.serve_token
    options = check(replace(options, token=resolve_token(options.token, configured)))
    if configured and options.token == configured:
        _warn_if_others_read(pipeline.project.root / CONFIG_FILE)
    tz = zone(options.timezone)
    if options.read_only:
        check_readable(pipeline.project.db_path)
    else:
        pipeline.project.ensure_state_dir()
    hold_project(pipeline.project.db_path, options.read_only)  # no restore under a server
    jobs = scheduled_jobs(pipeline.graph) if options.scheduler_on else []
    served = Served(options, pipeline)
    served.state = StateCache(pipeline.project.root, pipeline.files, options.env, served.read,
                              pipeline.left_out)
    served.pages = KeyPages(pipeline.project.db_path, options.read_only)
    sock = _bind(options.host, options.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    files = len(pipeline.files)
    watching = " · watch" if options.watch else ""
    note(f"[barca] serving on http://{shown}:{port}  ({files} file{'s' * (files != 1)}{watching})")
    note(f"[barca] web UI: http://{shown}:{port}/ui/")
    _describe(options, pipeline, jobs, tz)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        loop = asyncio.get_running_loop()
        served.runs = Runs(pipeline.project.root, pipeline.files, options.env, loop,
                           slots=options.run_slots, time_limit=options.run_timeout,
                           db_path=pipeline.project.db_path, read_only=options.read_only)
        if options.capacity:
            served.runs.capacity = SharedCapacity(options.capacity,
                                                  served.runs.spool / "capacity.sock",
                                                  served.runs.run_of_pid)
            await served.runs.capacity.start()
        await asyncio.to_thread(served.runs.load_pause)  # a paused queue stays paused
        await served.runs.resume(pipeline.graph)  # before any new run: they were first
        tasks, stop = [], asyncio.Event()
        if options.scheduler_on:
            served.scheduler = Scheduler(jobs, served.runs, pipeline.project.db_path, tz,
                                         options.timezone)
            missed = await asyncio.to_thread(served.scheduler.load_state)
            tasks.append(asyncio.create_task(served.scheduler.run(missed)))
            tasks[-1].add_done_callback(_scheduler_ended)
        if options.watch:
            from barca.server.watch import watch

            tasks.append(asyncio.create_task(
                watch(pipeline.project.root, lambda: _reload(served), stop)))
        yield
        stop.set()
        for task in tasks:
            task.cancel()
        if served.scheduler is not None:
            served.scheduler.close()
        if served.runs.capacity is not None:
            served.runs.capacity.close()
        served.runs.close()
        served.pages.close()

    _hold_pool_longer()
    threading.Thread(target=keep_warm, args=(pipeline, True), daemon=True).start()
    app = build_app(served, lifespan)
    app = Guard(app, options.host, options.allow_hosts, options.token)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2,
                            lifespan="on", access_log=False, http=BoundedH11Protocol)
    server = _Server(config, served, options.drain_timeout)
    try:
        server.run(sockets=[sock])
    finally:
        keep_warm(served.pipeline, False)
    return 1 if server.hurried else 0


class _Server(uvicorn.Server):
    """uvicorn's server, whose exit first drains the runs (in a thread: a signal handler must
    not block the loop that streams their last events). A second signal cuts the drain short;
    a third exits at once."""

    def __init__(self, config: uvicorn.Config, served: Served, drain_seconds: float) -> None:
        super().__init__(config)
        self.served, self.drain_seconds = served, drain_seconds
        self.stopping = self.hurried = False
        self.hurry = threading.Event()

    def handle_exit(self, sig: int, frame) -> None:
        # uvicorn's own would re-raise the signal once stopped; a stop asked for is exit 0
        name = signal.Signals(sig).name
        if self.hurried:
            self.should_exit = self.force_exit = True
        elif self.stopping:
            self.hurried = True
            note(f"[barca] {name} received again: cancelling the running runs now")
            self.hurry.set()
        else:
            self.stopping = True
            threading.Thread(target=self._stop, args=(name,), daemon=True).start()

    def _stop(self, name: str) -> None:
        served = self.served
        if served.scheduler is not None:
            served.scheduler.stop()
        if served.runs is not None:
            running, waiting = served.runs.drain()
            kept = f"; {len(waiting)} waiting stay queued for the next start" if waiting else ""
            if running and self.drain_seconds:
                one = len(running) == 1
                note(f"[barca] {name} received: draining — {len(running)} running "
                     f"run{'s' * (not one)} get{'s' * one} up to {self.drain_seconds:g}s to "
                     f"finish{kept}")
                self._wait_for(running, time.monotonic() + self.drain_seconds)
            else:
                note(f"[barca] {name} received: stopping runs and shutting down{kept}")
            left = [r for r in running if r.live]
            if left:
                note(f"[barca] run{'s' * (len(left) != 1)} cancelled: server shutdown "
                     f"({', '.join(r.run_id for r in left)})")
            killed = served.runs.stop_all(time.monotonic() + STOP_SECONDS)
            close_killed(served.pipeline.project.db_path, [r.run_id for r in killed])
        self.should_exit = True

    def _wait_for(self, runs: list, deadline: float) -> None:
        """Until each of `runs` ended, `deadline` (monotonic) passed, or a second signal."""
        for run in runs:
            while not run.ended.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
                if self.hurry.is_set() or time.monotonic() >= deadline:
                    return


async def _reload(served: Served) -> None:
    """Load the edited pipeline and make the routes, runs and scheduler use it."""
    options = served.options
    try:
        pipeline = await asyncio.to_thread(open_pipeline, options.paths, options.env,
                                           lenient=True)
    except Exception as exc:  # noqa: BLE001 - the served pipeline stays as it was
        note(f"[barca] warning: reload failed, still serving the previous pipeline: {exc}")
        return
    before, served.pipeline = served.pipeline, pipeline
    _note_undeclared_env(pipeline, before)
    served.generation += 1
    served.loaded_at = time.time()
    served.runs.files = served.state.files = pipeline.files
    served.state.left_out = pipeline.left_out
    _note_load_errors(pipeline)
    if served.scheduler is not None:
        await served.scheduler.reload(scheduled_jobs(pipeline.graph))


def _scheduler_ended(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        error = task.exception()
        note(f"[barca] error: the scheduler stopped: {type(error).__name__}: {error}; no schedule "
             "fires until the server restarts")


def _hold_pool_longer() -> None:
    """The warm pool a server's runs fork from waits an hour between runs, not the CLI's 15
    minutes, so that an hourly schedule finds it warm; the server stops it when it stops
    (BARCA_WARM_SECONDS set by the user wins; 0 keeps the pool off). A server killed with -9
    cannot: the pools it and its commands start exit once it is gone."""
    if "BARCA_WARM_SECONDS" not in os.environ:
        os.environ["BARCA_WARM_SECONDS"] = str(POOL_IDLE_SECONDS)
    end_pools_with_this_process()


def _read_only() -> None:
    """Make this process and every command it runs read the database through private
    snapshots (`barca.store.snapshot`), sharing one directory, and write no bytecode cache
    beside the pipeline modules they import (to evaluate `partitions(<expr>)`, say)."""
    os.environ["BARCA_READ_ONLY"] = "1"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    read_through_snapshots()


def _warn_if_others_read(path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & 0o077:
        note(f"[barca] warning: {path} holds the server's token and other users may read it: "
             f"chmod 600 {path}")


def _bind(host: str, port: int) -> socket.socket:
    from barca.errors import UsageError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on connections whose
    # proto is IPPROTO_TCP; with 0, each answer's body waited for the client's delayed ACK of
    # its head, 40 ms a request on a kept-alive connection (benchmarks/serve.py --load)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}",
                         "pick another --port, or stop what listens there") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def _describe(options: ServeOptions, pipeline, jobs, tz) -> None:
    if options.token:
        note("[barca] every request but GET /health needs the server's token")
    elif not options.loopback:
        note(f"[barca] warning: listening on {options.host}:{options.port} with no token "
             "(--insecure-no-token): anyone who can reach it can start runs unless a proxy "
             "in front authenticates them")
    if options.read_only:
        note("[barca] read-only: no runs are started or cancelled, nothing fires, the database is "
             "only read")
    _note_load_errors(pipeline)
    if options.capacity:
        graph = pipeline.graph
        for node in graph.order:
            if graph.nodes[node].weight > options.capacity:
                note(f"[barca] warning: '{graph.nodes[node].name}' has weight="
                     f"{graph.nodes[node].weight}, more than the capacity {options.capacity} "
                     "(--capacity); it runs alone")
    _note_undeclared_env(pipeline)
    if not options.scheduler_on:
        return
    if not jobs:
        note("[barca] no scheduled nodes — scheduler idle")
        return
    from barca.schedules import next_fire_text

    now = datetime.now(tz) if tz else datetime.now().astimezone()
    note(f"[barca] scheduling {len(jobs)} node{'s' * (len(jobs) != 1)}:")
    for job in jobs:
        note(f"  {job.id} — {job.cron} (next {next_fire_text(job.cron, now)})")


def _note_undeclared_env(pipeline, before=None) -> None:
    """Environment variables the served assets read without declaring them: said once when
    the server starts (and after a reload that changes them), not by every tick."""
    lines = _undeclared_env_lines(pipeline)
    if before is None or lines != _undeclared_env_lines(before):
        for line in lines:
            note(line)


def _undeclared_env_lines(pipeline) -> list[str]:
    from barca.engine.driver import undeclared_env_warnings
    from barca.views.warning_text import warning_json, warning_lines

    graph = pipeline.graph
    return warning_lines([warning_json(w) for w in undeclared_env_warnings(graph, graph.order)])


def _note_load_errors(pipeline) -> None:
    for error in pipeline.load_errors:
        what = error.get("node") or error["file"]
        note(f"[barca] warning: {what} not loaded: {error['error']}")
