"""The local executor (`engine.executor.Executor`): a pool of worker processes on this machine.

Scheduling policy of `LocalExecutor`: steps queue in the order submitted; each worker holds a
lease of up to `lease_size` steps, refilled when it falls to half, so many small steps share a
round trip while long steps never hold back idle workers for long. A worker is started only
when there is work for it. A step that outlives its timeout has its worker killed; the other
steps of that lease go back to the front of the queue and a fresh worker takes over.

Capacity (`weight=`): a worker runs its lease one step at a time, so it holds the weight of
the heaviest step leased to it until its lease is empty, and the workers' holdings never add
up to more than the run's capacity. A lease takes steps from the head of the queue only while
they weigh no more than what the worker holds or the capacity has room for, so a heavy step
at the head waits for room (lighter steps behind it do not overtake it), and a step heavier
than the whole capacity waits until nothing else runs, then runs alone. With every weight 1
and the capacity at least the pool size this never holds anything back; its cost is one
integer comparison per step. Under `barca serve --capacity` the units are also held in the
server's budget shared by all its runs (`shared_capacity`), and by the runs of its ledger's
clients that ask to share it (`leased_capacity`): a step waits at the head for both.

A worker whose outcomes wait for their uploads to a remote store says at once which steps are
done (`Computed`): they leave its lease (it is refilled, and its next step is timed, as if
they had been reported) but are kept aside until their outcomes arrive, and run again if the
worker is lost before (engine.local.uploads).

Workers are forked from the project's warm pool where one can run, else fresh interpreters
(`worker_processes`: starting, ending and telling how one ended).
"""

from __future__ import annotations

import collections
import math
import os
import select
import selectors
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from barca.errors import InfraError
from barca.engine.local.frames import (Computed, FrameBuffer, Imported, Lease, Outcomes,
                                       Shutdown, StoreFailed, Warm, ends_step, write_frame)
from barca.engine.local.leased_capacity import LeasedBudget
from barca.engine.local.shared_capacity import SharedBudget
from barca.engine.local.worker_processes import Starter, WorkerProcess, end, exit_status
from barca.engine.protocol import (CallFinished, CallSpec, LogLine, StepOutcome, StepSpec,
                                  StepStarted, call_lost, failed_outcomes,
                                  unreported_part, unreported_steps)


STARTUP_SECONDS = 60.0  # a new worker process's start-up, past which its first step's clock runs


@dataclass(slots=True)
class _Worker:
    process: WorkerProcess
    to_worker: int
    from_worker: int
    buffer: FrameBuffer = field(default_factory=FrameBuffer)
    leased: collections.deque = field(default_factory=collections.deque)  # not done yet
    computed: dict = field(default_factory=dict)  # step id -> done step, its outcome to come
    running: StepSpec | CallSpec | None = None
    started: float = 0.0  # monotonic time the running step started (its first attempt)
    deadline: float = 0.0
    attempt: int = 0
    held: int = 0  # capacity units held: the weight of the heaviest leased step
    # a call's batch id -> the key step ids it wrote that were reported, until its end is
    reported: dict = field(default_factory=dict)
    begun: bool = False  # the process has begun a step: its start-up is over
    told_to_stop: bool = False  # sent its `Shutdown`


class LocalExecutor:
    def __init__(self, root: Path, pool_size: int, files: Sequence[str] = (),
                 lease_size: int = 256, warm_seconds: float = 0.0,
                 capacity: int | None = None, shared: tuple | None = None) -> None:
        self.files = tuple(files)  # the pipeline files, root-relative: what workers import
        self.starter = Starter(root, self.files, warm_seconds)
        self.imported: set[str] = set()
        self.pool_size = max(1, pool_size)
        self.capacity = max(1, capacity or self.pool_size)  # units of weight= at once
        self.used = 0  # units the workers hold
        self.lease_size = lease_size
        self.queue: collections.deque[StepSpec | CallSpec] = collections.deque()  # requeued steps first
        self.sources: collections.deque[Iterator[StepSpec | CallSpec]] = collections.deque()
        self.waiting = 0  # steps queued or not yet drawn from sources
        self.workers: list[_Worker] = []
        self.selector = selectors.DefaultSelector()
        self.timeout_attempts: dict[str, int] = {}
        self.crashes = 0
        # the server's capacity: a server's run's (--capacity), or a ledger client's that
        # asked for it (`shared`: the server's URL, headers, and where warnings go)
        self.shared = LeasedBudget(*shared) if shared else SharedBudget.connect()
        if self.shared is not None:
            self.selector.register(self.shared.fileno(), selectors.EVENT_READ, self.shared)

    # -- the seam -----------------------------------------------------------------------------

    def submit(self, steps: Iterable[StepSpec | CallSpec], count: int,
               first: bool = False) -> None:
        if first:
            self.sources.appendleft(iter(steps))
        else:
            self.sources.append(iter(steps))
        self.waiting += count
        self._start_workers()
        self._refill()

    def events(self, timeout: float) -> list[StepOutcome | LogLine]:
        out: list[StepOutcome | LogLine] = []
        wait = min(timeout, self._next_deadline())
        for key, _ in self.selector.select(max(0.0, wait)):
            if key.data is self.shared:
                self.shared.readable()
                continue
            worker: _Worker = key.data
            try:
                data = os.read(worker.from_worker, 1 << 20)
            except OSError:
                data = b""
            if not data:
                out.extend(self._lost(worker, "the worker process exited unexpectedly"))
                continue
            for message in worker.buffer.feed(data):
                out.extend(self._handle(worker, message))
        out.extend(self._expire_timeouts())
        self._refill()
        return out

    def running(self) -> list[tuple[str, float]]:
        """(step id, seconds since it started) of each step a worker is running now."""
        now = time.monotonic()
        return [(w.running.step_id, now - w.started) for w in self.workers
                if w.running is not None]

    def wind_down(self) -> None:
        """Tell every worker to stop now, all at once: they exit (the kernel freeing their
        memory) while the caller records the run's end, and `close` then waits for them."""
        for worker in self.workers:
            if not worker.told_to_stop and worker.process.poll() is None:
                worker.told_to_stop = True
                self._send(worker, Shutdown())

    def close(self, cancel: bool = False) -> None:
        if not cancel:
            self.wind_down()
        for worker in list(self.workers):
            self._stop(worker, kill=cancel)
        self.workers.clear()
        if self.shared is not None:
            self.selector.unregister(self.shared.fileno())
            self.shared.close()
            self.shared = None
        if self.starter.warm_seconds > 0 and not cancel:
            self.starter.leave(self.imported)

    def prestart(self) -> None:
        """Start one worker now and have it import the pipeline, while the caller plans."""
        if not self.workers:
            worker = self._spawn()
            self.workers.append(worker)
            self._send(worker, Warm(self.files))

    # -- internals ----------------------------------------------------------------------------

    def _start_workers(self) -> None:
        # every step weighs at least 1: no more than `capacity` of them ever run at once
        wanted = min(self.pool_size, self.capacity, self.waiting + self._busy())
        while len(self.workers) < wanted:
            self.workers.append(self._spawn())

    def _busy(self) -> int:
        return sum(1 for w in self.workers if w.leased)

    def _spawn(self) -> _Worker:
        worker = _Worker(*self.starter.start())
        self.selector.register(worker.from_worker, selectors.EVENT_READ, worker)
        return worker

    def _refill(self) -> None:
        if not self.waiting:
            return
        self._start_workers()
        # a lease is small while the queue is short, so one slow step never holds back steps
        # another worker could take; long queues of tiny steps share round trips
        share = max(1, min(self.lease_size, self.waiting // (4 * len(self.workers))))
        idle = [w for w in self.workers if len(w.leased) <= share // 2]
        for worker in idle:
            lease = self._draw(share - len(worker.leased), worker)
            if not lease:
                if not self.waiting:
                    break
                continue  # the next step waits for capacity; a worker holding less may fit it
            if not worker.leased:  # an idle worker starts on the first step at once
                self._mark_running(worker, lease[0], 1)
            worker.leased.extend(lease)
            self._send(worker, Lease(lease, len(self.workers)))

    def _draw(self, n: int, worker: _Worker) -> tuple[StepSpec | CallSpec, ...]:
        """Up to `n` steps from the head of the queue for `worker`, stopping at one that the
        capacity has no room for (it stays at the head)."""
        out: list[StepSpec | CallSpec] = []
        while len(out) < n:
            if self.queue:
                step = self.queue.popleft()
            elif self.sources:
                step = next(self.sources[0], None)
                if step is None:
                    self.sources.popleft()
                    continue
            else:
                break
            if step.weight > worker.held and not self._hold(worker, step.weight):
                self.queue.appendleft(step)
                break
            out.append(step)
        self.waiting -= len(out)
        return tuple(out)

    def _hold(self, worker: _Worker, weight: int) -> bool:
        """Raise what `worker` holds to `weight` if the capacity has room, or if nothing else
        holds any (a step heavier than the capacity runs alone)."""
        others = self.used - worker.held
        if others + weight > self.capacity and others:
            return False
        if self.shared is not None and not self.shared.take(weight - worker.held):
            return False
        self.used = others + weight
        worker.held = weight
        return True

    def _release(self, worker: _Worker) -> None:
        """The worker's lease is empty (or the worker is gone): it holds nothing now."""
        if self.shared is not None:
            self.shared.give(worker.held)
        self.used -= worker.held
        worker.held = 0

    def _send(self, worker: _Worker, message: Any) -> None:
        try:
            write_frame(worker.to_worker, message)
        except OSError:
            pass  # the worker died; its read side reports it

    def _handle(self, worker: _Worker, message: Any) -> list[StepOutcome | LogLine]:
        if isinstance(message, StepStarted):
            step = next((s for s in worker.leased if s.step_id == message.step_id), None)
            if step is None:  # queued behind uploads, overtaken by the step's `Computed`
                return []
            if not worker.begun:  # its first step: timed from now, not from the lease
                worker.begun, worker.running = True, None
            self._mark_running(worker, step, message.attempt)
            return []
        if isinstance(message, Computed):  # their outcomes follow, once uploaded
            self.crashes = 0
            moved_on = False
            for step_id in message.step_ids:
                step = self._retire(worker, step_id)
                if step is not None:
                    worker.computed[step_id] = step
                    moved_on = True
            if moved_on:
                self._moved_on(worker)
            return []
        if isinstance(message, Outcomes):
            self.crashes = 0
            moved_on = False
            for outcome in message.items:
                if not ends_step(outcome):  # a key a call has written, reported as written
                    worker.reported.setdefault(outcome.batch, set()).add(outcome.step_id)
                    continue
                if isinstance(outcome, CallFinished):  # a call's keys: at its end
                    worker.reported.pop(outcome.batch, None)
                if worker.computed.pop(outcome.step_id, None) is None:
                    moved_on = self._retire(worker, outcome.step_id) is not None or moved_on
            if moved_on:
                self._moved_on(worker)
            return list(message.items)
        if isinstance(message, Imported):
            self.imported.update(message.modules)
            return []
        if isinstance(message, StoreFailed):  # the run's error: no worker restarted for it
            raise InfraError(message.error, message.remediation)
        return [message]

    def _moved_on(self, worker: _Worker) -> None:
        """The worker is done with the steps before its next leased one, at the latest now."""
        if worker.leased:
            self._mark_running(worker, worker.leased[0], 1)
        else:
            worker.running = None
            self._release(worker)

    def _mark_running(self, worker: _Worker, step: StepSpec | CallSpec, attempt: int) -> None:
        if worker.running is not step:  # a retry in the same worker keeps its start
            worker.started = time.monotonic()
        worker.running, worker.attempt = step, attempt
        # 0: none; a starting process's first step is timed again when it says it began,
        # so its start-up counts only past STARTUP_SECONDS (a process that never starts)
        limit = step.timeout_seconds and \
            step.timeout_seconds + STARTUP_SECONDS * (not worker.begun)
        worker.deadline = time.monotonic() + (limit or math.inf)

    def _retire(self, worker: _Worker, step_id: str) -> StepSpec | CallSpec | None:
        """Take a done step out of the worker's lease (None: it is not there)."""
        for i, step in enumerate(worker.leased):
            if step.step_id == step_id:
                del worker.leased[i]
                return step
        return None

    def _next_deadline(self) -> float:
        deadlines = [w.deadline for w in self.workers if w.running is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else 3600.0

    def _expire_timeouts(self) -> list[StepOutcome | LogLine]:
        now = time.monotonic()
        out: list[StepOutcome | LogLine] = []
        for worker in list(self.workers):
            if worker.running is not None and now >= worker.deadline:
                step = worker.running
                out.extend(self._lost(
                    worker, f"step {step.step_id} timed out after {step.timeout_seconds:g}s",
                    error_type="TimeoutError"))
        return out

    def _lost(self, worker: _Worker, why: str,
              error_type: str = "WorkerLost") -> list[StepOutcome | CallFinished]:
        """A worker died or was killed: fail (or retry) its running step, requeue the rest,
        and the steps it had done whose outcomes had not arrived (their results may not be
        in the store: they run again, their attempts not counted)."""
        running = call = worker.running
        written = worker.reported.get(call.batch, set()) if isinstance(call, CallSpec) else ()
        if written:  # only what it had not written
            running = unreported_part(call, written)
        self._stop(worker, kill=True)
        self.workers.remove(worker)
        self._release(worker)
        again, ended_calls = unreported_steps(worker.computed.values(), worker.reported)
        rest = [s for s in worker.leased if running is None or s.step_id != running.step_id]
        self.queue.extendleft(reversed([*again, *rest]))
        self.waiting += len(again) + len(rest)
        if running is None:
            if not worker.computed:
                self.crashes += 1
            if self.crashes > 3:
                raise InfraError(f"worker processes keep exiting before running a step: {why}",
                                 "run `python -m barca.engine.local.worker` by hand to see the "
                                 "error")
            return ended_calls
        attempts = self.timeout_attempts.get(running.step_id, 0) + max(worker.attempt, 1)
        self.timeout_attempts[running.step_id] = attempts
        if isinstance(call, CallSpec) and not running.keys:  # it had written every key
            return [*ended_calls, call_lost(call, len(written), attempts)]
        if attempts < running.retries:
            self.queue.appendleft(running)
            self.waiting += 1
            return ended_calls
        ended = exit_status(worker.process) if error_type == "WorkerLost" else None
        if ended:
            why += f" ({ended})"
        failed = failed_outcomes(running, attempts, error_type, why, ended)
        if isinstance(call, CallSpec):  # the call is over: the coordinator waits for its end
            failed.append(call_lost(call, len(written), attempts))
        return [*ended_calls, *failed]

    def _read_until_exit(self, worker: _Worker, timeout: float = 5.0) -> bool:
        """Wait for a stopping worker to close its pipe, collecting what it still has to say
        (its last `Imported`); False if it has not within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([worker.from_worker], [], [],
                                        max(0.0, deadline - time.monotonic()))
            if not ready:
                return False
            data = os.read(worker.from_worker, 1 << 20)
            if not data:
                return True
            for message in worker.buffer.feed(data):
                if isinstance(message, Imported):
                    self.imported.update(message.modules)

    def _stop(self, worker: _Worker, kill: bool) -> None:
        try:
            self.selector.unregister(worker.from_worker)
        except (KeyError, ValueError):
            pass
        # a worker that sees its pipe close unasked takes the run for dead
        closed = not kill and self._read_until_exit(worker)
        for fd in (worker.to_worker, worker.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        end(worker.process, kill, closed)

