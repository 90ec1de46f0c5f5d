"""The runs this server started: each a child process (`driver.start_served_run`, the
process `barca.cli.served_run` describes) given its order (`ServedRun`) as a file, followed by
a thread that reads its typed events and one that keeps the other lines it says. Its result,
the JSON the CLI prints (all 200,000 values of a partitioned target: megabytes), goes to a
file in the server's spool directory (`spool.py`), read only when a client asks for it.

A run id is chosen here and given to the child, so a client has it before the run starts.
One run per slot (`--max-runs`, one per core by default: more at once would only share the
cores) runs at a time, dry runs included (a dry run runs sensors); the others wait in order, at most MAX_WAITING. A run that
must wait is first kept in the metadata database's queue (`engine.serving`), then answered
202: a server killed meanwhile leaves it there, and the next server on the project runs it,
or records it cancelled with the reason when the pipeline no longer has its target. A dry
run, answered only when it ends, waits in memory. A run that starts at once is answered when
its child has checked the request and recorded the run (`run_accepted`).

An operator may pause the queue (`pause_queue`, kept in the database: a restarted server starts
paused): runs in flight go on, new ones are still accepted and wait, and none starts until
`resume_queue`; a dry run, which a client waits for, is refused meanwhile (409).

A stopping server drains (`drain`): nothing starts any more, a new run is still accepted and
kept in the queue (a dry run is refused), the running ones get the drain timeout to finish
and are then cancelled (`stop_all`); the runs still waiting stay in the queue, paused or not,
and the next server on the project runs them.

A run is `pending` while it waits and until `run_accepted`, `running` until its child exits,
then `complete`, `failed` or `cancelled` by its exit code. A run that outlives its time
limit is cancelled and reported `failed` ("run timed out"). Each run's end is one line of the
server's log (`run_log`).

Locking: `lock` is taken in threads only, never on the event loop (it is held across a
process start and a database write).
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.printable import note
from barca.engine.driver import shared_capacity_env, start_served_run
import barca.engine.serving as serving
from barca.errors import BarcaError
from barca.server.capacity import SharedCapacity
from barca.server.commands import child_env
from barca.server.events import EventLog
from barca.server.live_run import LiveRun
from barca.server.run_log import ended_line
from barca.server.run_request import RunRequest, ServedRun, missing_target
from barca.server.spool import make_spool

CANCEL_GRACE_SECONDS = 5.0
KEEP_FINISHED_SECONDS = 3600.0
KEEP_FINISHED = 1000  # ended runs kept in memory at most (their rows stay in the database)
MAX_WAITING = 100  # runs queued for a slot; past this a request is refused (503)
STATUS_BY_CODE = {0: "complete", 1: "failed", 130: "cancelled"}


class Runs:
    """Start, follow, cancel and forget runs: at most `slots` running at once, the rest
    waiting in order; each stopped after `time_limit` seconds per target (0: never).
    `db_path`: the metadata database holding the queue; `read_only`: a server that runs
    nothing (it only lists the runs a stopped server left queued)."""

    def __init__(self, root: Path, files: Sequence[str], env: str | None,
                 loop: asyncio.AbstractEventLoop, slots: int, time_limit: float,
                 db_path: Path, read_only: bool = False) -> None:
        self.root, self.files, self.env, self.loop = root, files, env, loop
        self.slots, self.time_limit = slots, time_limit
        self.db_path, self.read_only = db_path, read_only
        self.runs: dict[str, LiveRun] = {}
        self.waiting: collections.deque[LiveRun] = collections.deque()
        self.spool = make_spool()  # runs' stdout files
        self.closing = False  # stopped: nothing is accepted any more
        self.draining = False  # stopping: nothing starts, runs are still accepted (queued)
        self.paused_at: float | None = None  # the queue paused since (epoch), None: running
        self.lock = threading.Lock()  # a run starts before shutdown sees it, or not at all
        self.capacity: SharedCapacity | None = None  # --capacity, shared by every run

    async def start(self, request: RunRequest, triggered_by: str = "api",
                    time_limit: float | None = None, limit_by: str | None = None) -> LiveRun:
        """Start a run now, or queue it for the next free slot; Busy (503) when MAX_WAITING
        runs wait already or the server is stopping. `time_limit`: seconds this run may take
        (0: no limit), set by `limit_by`; None: the server's per target. Called on the event
        loop (a run's EventLog belongs to it); the database write and the process start run
        in a thread."""
        run = LiveRun(os.urandom(6).hex(), request, triggered_by, EventLog(self.loop),
                      time_limit=time_limit, limit_by=limit_by)
        await asyncio.to_thread(self._admit, run)
        return run

    def _may_start(self) -> bool:
        return not self.closing and not self.draining and self.paused_at is None

    def _admit(self, run: LiveRun) -> None:
        with self.lock:
            self._forget_old()
            if self.closing:
                raise Busy("the server is shutting down")
            if len(self.waiting) >= MAX_WAITING:
                raise Busy(f"{MAX_WAITING} runs are already waiting for a slot")
            if self.draining and run.request.dry_run:
                raise Busy("the server is stopping: a dry run would wait for its next start")
            if self.paused_at is not None and run.request.dry_run:
                raise Paused("the run queue is paused: a dry run would wait until it is "
                             "resumed")
            if not self.waiting and self._running() < self.slots and self._may_start():
                self.runs[run.run_id] = run
                try:
                    self._launch(run)
                except BaseException:
                    del self.runs[run.run_id]
                    raise
                return
            if not run.request.dry_run:  # kept before it is answered: a 202 survives a kill
                serving.enqueue_run(self.db_path, serving.Queued(
                    run.run_id, run.request.to_json(), run.triggered_by, run.started_at))
                run.queued = True
            self.runs[run.run_id] = run
            self.waiting.append(run)
            run.settled.set()  # queued: the request is taken, its checks come when it starts

    async def resume(self, graph: Any) -> None:
        """Take over the runs that a server now gone had queued and never started (killed
        with -9, or the machine went down): they run first, in the order they were accepted;
        one whose target `graph` no longer has is recorded cancelled with the reason. A
        read-only server only lists them, as waiting."""
        found = await asyncio.to_thread(self._orphans)
        runs = [LiveRun(q.run_id, RunRequest.from_json(q.request), q.triggered_by,
                        EventLog(self.loop), started_at=q.accepted_at, queued=True)
                for q in found]
        if runs:
            await asyncio.to_thread(self._take_over, runs, graph)

    def _orphans(self) -> list[serving.Queued]:
        return serving.queued_orphans(self.db_path, adopt=not self.read_only)

    def _take_over(self, runs: list[LiveRun], graph: Any) -> None:
        with self.lock:
            for run in runs:
                self.runs[run.run_id] = run
                run.settled.set()
            if self.read_only:
                note(f"[barca] {len(runs)} run{'s' * (len(runs) != 1)} queued by a server "
                     "that stopped wait for a server that is not read-only")
                return
            unfit = [(run, f"not run after the server restarted: {why}") for run in runs
                     if (why := missing_target(run.request, graph)) is not None]
            try:
                self._record_unstarted(unfit, "cancelled")
            except BarcaError as exc:  # they stay queued, for the next start
                note(f"[barca] warning: runs queued for a target now gone could not be "
                     f"recorded cancelled: {exc.message}")
            for run, why in unfit:
                self._end_unstarted(run, "cancelled", why)
            kept = [run for run in runs if not run.ended.is_set()]
            self.waiting.extend(kept)  # past MAX_WAITING too: each was accepted
        note(f"[barca] {len(kept)} run{'s' * (len(kept) != 1)} accepted by a server that "
             f"stopped will run now" + (f"; {len(unfit)} cancelled: their target is gone"
                                        if unfit else ""))
        self._start_waiting()

    def _running(self) -> int:
        return sum(r.live and r.process is not None for r in list(self.runs.values()))

    def _start_waiting(self) -> None:
        """Launch queued runs while slots are free (a run just ended)."""
        with self.lock:
            while self.waiting and self._may_start() and self._running() < self.slots:
                run = self.waiting.popleft()
                try:
                    self._launch(run)
                except OSError as exc:
                    why = f"the run could not start: {exc}"
                    try:
                        self._record_unstarted([(run, why)] if run.queued else [], "failed")
                    except BarcaError as error:
                        note(f"[barca] warning: run {run.run_id} {why}, and could not be "
                             f"recorded so ({error.message}); the next server start runs it")
                    self._end_unstarted(run, "failed", why)

    def _record_unstarted(self, ended: Sequence[tuple[LiveRun, str]], status: str) -> None:
        """Close the queue rows of runs that end without having run: `runs` rows with this
        status and each one's reason, in one transaction."""
        serving.close_queued(self.db_path, [serving.Closing(
            r.run_id, status, why, r.request.command, tuple(self.files),
            ",".join(r.request.targets) or None) for r, why in ended])

    def _end_unstarted(self, run: LiveRun, status: str, error: str) -> None:
        """A waiting run ends without having started (cancelled, or it could not start)."""
        run.end_unstarted(status, error)
        note(ended_line(run))

    def _launch(self, run: LiveRun) -> LiveRun:
        run.stdout_path = self.spool / f"{run.run_id}.out"
        order = self.spool / f"{run.run_id}.order"
        order.write_bytes(ServedRun(run.request.to_json(), tuple(self.files), self.env,
                                    run.run_id, run.triggered_by, str(run.stdout_path)
                                    ).to_json())
        events_r, events_w = os.pipe()
        lines_r, lines_w = os.pipe()
        stdin = os.open(order, os.O_RDONLY)
        try:
            env = child_env()
            if self.capacity is not None:
                env.update(shared_capacity_env(self.capacity.path))
            process = start_served_run(self.root, env, (stdin, events_w, lines_w))
        except BaseException:
            os.close(events_r)
            os.close(lines_r)
            raise
        finally:
            for fd in (stdin, events_w, lines_w):
                os.close(fd)
            order.unlink(missing_ok=True)  # the child has it open, or never will
        run.process = process
        limit = run.time_limit if run.time_limit is not None else \
            self.time_limit * max(1, len(run.request.targets))
        if limit:  # a dry run too: it holds a slot while its sensors run
            run.timer = threading.Timer(limit, self._time_out, args=(run, limit))
            run.timer.daemon = True
            run.timer.start()
        lines = threading.Thread(target=self._read_lines, args=(run, lines_r), daemon=True,
                                 name=f"barca-run-{run.run_id}-lines")
        lines.start()
        threading.Thread(target=self._follow, args=(run, process, events_r, lines),
                         daemon=True, name=f"barca-run-{run.run_id}").start()
        return run

    def _read_lines(self, run: LiveRun, lines_r: int) -> None:
        """What the run says besides its events (notes, warnings, a library's output): kept
        as `line` events, as they come."""
        with os.fdopen(lines_r, "r", encoding="utf-8", errors="replace") as stream:
            for text in stream:
                run.events.append({"type": "line", "line": text.rstrip("\n")})

    def _follow(self, run: LiveRun, process, events_r: int, lines: threading.Thread) -> None:
        with os.fdopen(events_r, "rb") as stream:
            for data in stream:
                run.on_event(orjson.loads(data))
        lines.join()
        code = process.wait()
        if run.stop_asked and not run.accepted and not run.timed_out:
            code = 130  # stopped before it recorded itself: whatever the signal did there
        run.exit_code = code
        run.status = "failed" if run.timed_out else STATUS_BY_CODE.get(code, "failed")
        if run.timed_out:
            by = f" ({run.limit_by})" if run.limit_by else ""
            run.error = {"error": f"run timed out after {run.timed_out:g}s{by}",
                         "kind": "timeout", "remediation": f"raise {run.limit_by}"
                         if run.limit_by else "barca serve --run-timeout SECONDS allows "
                         "longer runs"}
        if run.queued and not run.accepted:
            self._record_unclaimed(run, code)
        run.finish()
        note(ended_line(run))
        self._start_waiting()

    def _record_unclaimed(self, run: LiveRun, code: int) -> None:
        """A queued run whose child ended before recording it (it refused the request, was
        cancelled or died): its 202 was answered, so its row says how it ended."""
        stopped = run.status == "cancelled" or self.closing
        why = (run.error or {}).get("error") or (
            "the server stopped before it started" if self.closing else
            "cancelled before it started" if stopped else
            f"the run ended with exit code {code} before it started")
        try:
            self._record_unstarted([(run, why)], "cancelled" if stopped else "failed")
        except BarcaError as exc:
            note(f"[barca] warning: run {run.run_id} ended before it started and could not "
                 f"be recorded ({exc.message}); the next server start runs it again")

    def _time_out(self, run: LiveRun, limit: float) -> None:
        if run.live:
            by = f" ({run.limit_by})" if run.limit_by else ""
            note(f"[barca] run {run.run_id} timed out after {limit:g}s{by}: cancelling it")
            run.timed_out = limit
            self.cancel(run)

    def load_pause(self) -> None:
        """Start paused if the queue was paused when the last server stopped (blocks)."""
        self.paused_at = serving.load_pauses(self.db_path).queue

    def pause_queue(self) -> None:
        """Start no run until `resume_queue` (kept first, then in effect: a pause said is a pause
        kept); pausing a paused queue changes nothing (blocks)."""
        with self.lock:
            if self.paused_at is None:
                now = time.time()
                serving.pause_queue(self.db_path, now)
                self.paused_at = now

    def resume_queue(self) -> None:
        """Start the waiting runs again, in order (blocks)."""
        with self.lock:
            if self.paused_at is not None:
                serving.pause_queue(self.db_path, None)
                self.paused_at = None
        self._start_waiting()

    def in_queue(self) -> tuple[list[LiveRun], list[LiveRun]]:
        """(running, waiting in order) right now."""
        with self.lock:
            return ([r for r in self.runs.values() if r.live and r.process is not None],
                    list(self.waiting))

    def get(self, run_id: str) -> LiveRun | None:
        return self.runs.get(run_id)

    def run_of_pid(self, pid: int) -> str | None:
        """The id of the run whose process has this pid (the shared capacity's peers)."""
        return next((r.run_id for r in list(self.runs.values())
                     if r.process is not None and r.process.pid == pid), None)

    def cancel(self, run: LiveRun) -> None:
        """Ask the run to stop (it records itself cancelled); killed if it has not within
        CANCEL_GRACE_SECONDS. A run still waiting ends at once, recorded cancelled (call from
        a thread: that writes the database)."""
        if not run.live:
            return
        with self.lock:
            if run in self.waiting:
                why = "cancelled before it started"
                # recorded first: if that fails (InfraError), it still waits
                self._record_unstarted([(run, why)] if run.queued else [], "cancelled")
                self.waiting.remove(run)
                self._end_unstarted(run, "cancelled", why)
                return
        run.stop_asked = True
        run.signal(signal.SIGTERM)
        timer = threading.Timer(CANCEL_GRACE_SECONDS, self._kill_if_live, args=(run,))
        timer.daemon = True  # shutdown does not wait for it: it stops every run itself
        timer.start()

    def _kill_if_live(self, run: LiveRun) -> None:
        if run.live:
            run.signal(signal.SIGKILL)

    def live_runs(self) -> list[LiveRun]:
        return [r for r in list(self.runs.values()) if r.live]

    def drain(self) -> tuple[list[LiveRun], list[LiveRun]]:
        """Start nothing more (runs are still accepted, and wait): the server is stopping.
        (running, waiting) now."""
        with self.lock:
            self.draining = True
        return self.in_queue()

    def stop_all(self, deadline: float) -> list[LiveRun]:
        """Stop accepting and cancel every running run; the waiting ones stay in the queue
        for the next server (a dry run, which nobody would see the end of, ends cancelled).
        Wait until `deadline` (monotonic) for them to end, then kill what is left. The runs
        killed (their rows may still say running)."""
        with self.lock:
            self.closing = True
            for run in [r for r in self.waiting if not r.queued]:
                self.waiting.remove(run)
                self._end_unstarted(run, "cancelled", "the server stopped before it started")
            live = [r for r in self.live_runs() if r.process is not None]
        for run in live:
            run.signal(signal.SIGTERM)
        for run in live:
            run.ended.wait(max(0.0, deadline - time.monotonic()))
        killed = [r for r in live if r.live]
        for run in killed:
            run.signal(signal.SIGKILL)
        return killed

    def _forget_old(self) -> None:
        """Ended runs are kept KEEP_FINISHED_SECONDS, at most KEEP_FINISHED of them (a script
        sending dry runs flat out must not grow the server without bound)."""
        cutoff = time.time() - KEEP_FINISHED_SECONDS
        ended = sorted((r for r in self.runs.values() if not r.live),
                       key=lambda r: r.finished_at or 0)
        for run_id in [r.run_id for i, r in enumerate(ended)
                       if (r.finished_at or 0) < cutoff or i < len(ended) - KEEP_FINISHED]:
            run = self.runs.pop(run_id)
            if run.stdout_path is not None:
                run.stdout_path.unlink(missing_ok=True)

    def close(self) -> None:
        """Remove the spool (the server is stopping; its runs have ended)."""
        shutil.rmtree(self.spool, ignore_errors=True)


class Busy(Exception):
    """No run can start now (503)."""


class Paused(Exception):
    """The queue is paused and the run cannot wait (a dry run: 409)."""
