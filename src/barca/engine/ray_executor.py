"""Steps as Ray tasks: the executor (engine.executor.Executor) of a run spread over a Ray cluster.

The CLI process stays the coordinator: it plans, hands steps out through this executor and is
the only writer of the metadata database. Ray runs *leases*: one task takes up to LEASE_MAX
steps (or batch calls) and runs them one after the other with the step runner, as a local
worker does, writing their small results into one pack per node (store.packs) before it
returns. What comes back is metadata (outcomes, log lines), never a value; inputs travel as
store keys. A task costs about 1 ms of Ray's own time, a key a few microseconds: so keys travel
together, and a short queue makes small leases (waiting // (4 x CPUs)) so that one slow step
never holds back steps another CPU could take. At most two leases per CPU of the cluster are
in flight, spread over its nodes; more steps are drawn only as leases finish.

Where things are. Without RAY_ADDRESS a Ray of this machine is started for the run (and
stopped after it). A cluster whose nodes are all on this machine shares its disk: steps run in
the project where it is, and the project's local store serves. A cluster with nodes on other
machines needs a store they reach (`[remote]`, else exit 2), and the project's files go to
them with the job (Ray's runtime_env `working_dir`, without `.barca/` and the usual
environment directories); each step checks that its pipeline file is the one the run was
planned with (engine.worker.source_check). barca itself must be installed on every node. The
store's settings and credentials (BARCA_REMOTE_URI, BARCA_STORAGE_OPTIONS, AWS_*, GOOGLE_*,
AZURE_*, FSSPEC_*), the trace settings (BARCA_TELEMETRY, OTEL_*, DD_*: a traced run's worker
spans join its trace from every node) and the variables the run's nodes declare with `env=`
travel with the job.

Failures. A step's own error is its outcome, retried up to its `retries=` by the step runner.
A task whose worker process or node is lost is sent again (MAX_RETRIES), less what it had
reported: what the lost attempt wrote is named by no outcome, so nothing half-written is
recorded. A lease lost that often runs again one step per task, so that only the step that
takes its worker down fails (WorkerLost). A task that fails with an OSError of barca's own
(a worker left behind by its dying node finds its sockets gone; a store fails for a moment)
is sent again the same way, and past that its steps fail with that error. barca counts these
losses, not Ray (its tasks have no retries of their own), so that a traced run's lost steps
get `barca.execute` spans ending with the loss (their own died with their node).
`timeout=`: each lease says when its steps start (engine.worker.ray_lease); one whose step
outlives its timeout has its task cancelled (its worker killed), and the step fails with the
local pool's TimeoutError (or is retried, as its `retries=` allow); its other unreported
steps are sent again. Ctrl-C cancels the tasks in flight (`ray.cancel(force=True)`). A step's
lines reach the coordinator with its lease's next chunk, about a second after the step ends
at most, not while it runs.
"""

from __future__ import annotations

import collections
import math
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from barca.engine.executor import NewExecutor
from barca.engine.protocol import (CallFinished, CallSpec, LogLine, StepOutcome, StepSpec,
                                   StepStarted, call_lost, failed_outcomes, unreported_part)
from barca.engine.ray_cluster import connect, other_machines
from barca.engine.worker.ray_lease import run_lease
from barca.errors import InfraError, UsageError

LEASE_MAX = 256  # steps of one task at most
IN_FLIGHT_PER_CPU = 2  # leases queued or running per CPU of the cluster
MAX_RETRIES = 3  # sends of a lease again after its worker or node was lost
WAIT_SLICE = 0.25  # seconds of one wait on Ray, so that Ctrl-C is handled at once
FORWARDED = ("BARCA_REMOTE_URI", "BARCA_STORAGE_OPTIONS", "BARCA_TELEMETRY")
FORWARDED_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_", "FSSPEC_", "OTEL_", "DD_")
Step = StepSpec | CallSpec
Event = StepOutcome | CallFinished | LogLine


def ray_executor(root: Path, declared_env: Sequence[str] = ()) -> NewExecutor:
    """A factory of Ray executors for a run of the project at `root`; Ray is checked to be
    installed now (exit 2 naming the extra) but imported, and connected to, only when the
    coordinator first needs to run a step. `declared_env`: the variables the run's nodes
    declare with env=, passed on to the workers as they are set here."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise UsageError("--executor ray needs Ray, which is not installed",
                         "pip install 'barca[ray]', or run with --executor local")
    env = {name: value for name, value in os.environ.items()
           if name in FORWARDED or name.startswith(FORWARDED_PREFIXES)
           or name in declared_env}
    return lambda: RayExecutor(root, env)


class _Lease:
    """Steps sent to Ray as one task, and what came back of them so far."""

    def __init__(self, steps: tuple[Step, ...], losses: int = 0) -> None:
        self.steps = steps
        self.losses = losses  # times its worker or node was lost
        self.sent = time.time()
        self.reported: set[str] = set()  # step ids (a call's keys' too) with an outcome
        self.running: Step | None = None  # the step it said it started, at `started`
        self.started = 0.0
        self.deadline = math.inf  # monotonic: when `running` outlives its timeout

    def note(self, event: Event) -> None:
        if isinstance(event, (StepOutcome, CallFinished)):
            self.reported.add(event.step_id)
            if self.running is not None and event.step_id == self.running.step_id:
                self.running, self.deadline = None, math.inf

    def unreported(self) -> list[Step]:
        """Its steps with no outcome yet; a call that wrote some keys, over the others."""
        out: list[Step] = []
        for step in self.steps:
            if step.step_id in self.reported:
                continue
            if isinstance(step, CallSpec) and self.reported.intersection(step.key_step_ids):
                step = unreported_part(step, self.reported)
            out.append(step)
        return out


class RayExecutor:
    def __init__(self, root: Path, env: dict[str, str] | None = None,
                 address: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.address = address or os.environ.get("RAY_ADDRESS") or "local"
        self.token = os.urandom(8).hex()  # this executor's runner, in each worker process
        self.sources: collections.deque[Iterator[Step]] = collections.deque()
        self.head: Step | None = None  # drawn, of another weight than its lease
        self.again: collections.deque[_Lease] = collections.deque()  # sent again, first
        self.waiting = 0
        self.in_flight: dict[Any, _Lease] = {}
        self.timed_out: dict[str, int] = {}  # step id -> its attempts that outlived timeout=
        self.checked_store = False
        self.ray = _ray()
        self.owned = not self.ray.is_initialized()  # connected here: disconnected on close
        if self.owned:
            connect(self.ray, self.address, env or {}, None)
            if other_machines(self.ray):  # the project's files go with the job
                self.ray.shutdown()
                connect(self.ray, self.address, env or {}, str(self.root))
        self.elsewhere = other_machines(self.ray)
        self.shipped = bool(self.ray.get_runtime_context().runtime_env.get("working_dir"))
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        self.cpus = max(1, int(sum(n["Resources"].get("CPU", 0) for n in nodes)))
        self.largest = max([int(n["Resources"].get("CPU", 0)) for n in nodes] + [1])
        self.task = self.ray.remote(max_retries=0)(run_lease)  # a generator task

    # -- the seam -----------------------------------------------------------------------------

    def submit(self, steps: Iterable[Step], count: int, first: bool = False) -> None:
        if first:
            self.sources.appendleft(iter(steps))
        else:
            self.sources.append(iter(steps))
        self.waiting += count
        self._dispatch()

    def events(self, timeout: float) -> list[Event]:
        out: list[Event] = []
        deadline = time.monotonic() + timeout
        while not out:
            left = deadline - time.monotonic()
            if not self.in_flight:
                time.sleep(max(0.0, min(left, WAIT_SLICE)))
            else:
                refs = list(self.in_flight)
                wait = min(left, WAIT_SLICE, self._next_deadline() - time.monotonic())
                ready, _ = self.ray.wait(refs, num_returns=1, timeout=max(0.0, wait))
                if ready:  # and whatever else finished meanwhile
                    ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
                for ref in ready:
                    out.extend(self._take(ref))
                out.extend(self._expire_timeouts())
                self._dispatch()
            if time.monotonic() >= deadline:
                break
        return out

    def close(self, cancel: bool = False) -> None:
        if cancel:
            for ref in self.in_flight:
                try:
                    self.ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - finished meanwhile, or its node is gone
                    pass
        self.in_flight.clear()
        self.sources.clear()
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()

    def running(self) -> list[tuple[str, float]]:
        """None said: a step a lease said it started may have ended since, unsaid (the
        lease tells what ended at most once a second)."""
        return []

    def prestart(self) -> None:
        """Nothing: connecting (or starting a local Ray) was done when this was made."""

    def wind_down(self) -> None:
        """Nothing: `close` lets go of the cluster at once."""

    # -- handing out leases -------------------------------------------------------------------

    def _dispatch(self) -> None:
        while len(self.in_flight) < IN_FLIGHT_PER_CPU * self.cpus:
            if self.again:
                lease = self.again.popleft()
            else:
                steps = self._draw(max(1, min(LEASE_MAX, self.waiting // (4 * self.cpus))))
                if not steps:
                    return
                lease = _Lease(steps)
            self._send(lease)

    def _send(self, lease: _Lease) -> None:
        self._check_store(lease.steps[0])
        weight = min(max(1, lease.steps[0].weight), self.largest)  # never a task no node fits
        ref = self.task.options(num_cpus=weight, scheduling_strategy="SPREAD").remote(
            "" if self.shipped else str(self.root), self.token, lease.steps)
        lease.sent = time.time()
        self.in_flight[ref] = lease

    def _draw(self, n: int) -> tuple[Step, ...]:
        """Up to `n` steps of one weight (a lease holds the CPUs of its weight, weight=)."""
        out: list[Step] = []
        while len(out) < n:
            step, self.head = self.head, None
            if step is None and self.sources:
                step = next(self.sources[0], None)
                if step is None:
                    self.sources.popleft()
                    continue
            if step is None:
                break
            if out and step.weight != out[0].weight:
                self.head = step
                break
            out.append(step)
        self.waiting -= len(out)
        return tuple(out)

    def _check_store(self, step: Step) -> None:
        """Workers on other machines cannot reach this machine's disk: refuse a local store."""
        if self.checked_store:
            return
        self.checked_store = True
        if self.elsewhere and not step.store.startswith("remote:"):
            raise UsageError(f"the Ray cluster at {self.address} has nodes on other machines, "
                             "which cannot reach this project's local store",
                             "set a store they share: [remote] uri in barca.toml or "
                             "BARCA_REMOTE_URI (barca docs remote)")

    # -- what comes back ----------------------------------------------------------------------

    def _take(self, ref: Any) -> list[Event]:
        """The chunks a lease's task sent so far (engine.worker.ray_lease)."""
        lease = self.in_flight[ref]
        try:
            out: list[Event] = []
            while ref.next_ready():
                chunk = next(ref, None)
                if chunk is None:  # its end, seen between the two calls
                    break
                out.extend(self._read(lease, self.ray.get(chunk)))
            if ref.is_finished():
                del self.in_flight[ref]
            return out
        except self.ray.exceptions.RayError as exc:
            self.in_flight.pop(ref, None)
            return self._failed(lease, exc)

    def _read(self, lease: _Lease, events: list) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, StepStarted):  # its next step begins
                lease.running = next(s for s in lease.steps if s.step_id == event.step_id)
                lease.started = time.monotonic()
                limit = lease.running.timeout_seconds
                lease.deadline = lease.started + limit if limit else math.inf
            else:
                lease.note(event)
                out.append(event)
        return out

    def _failed(self, lease: _Lease, exc: Exception) -> list[Event]:
        exceptions = self.ray.exceptions
        if isinstance(exc, exceptions.RuntimeEnvSetupError):
            raise InfraError(f"Ray could not set up the project on a node: {exc}",
                             "check that the project's files can be sent (Ray's working_dir) "
                             "and that barca is installed on every node") from None
        if isinstance(exc, exceptions.TaskCancelledError):
            return []
        if isinstance(exc, exceptions.RayTaskError):  # barca's own error in the task
            cause = exc.cause if exc.cause is not None else exc
            # an OSError is how a worker whose node is going away fails (its sockets are
            # gone), and how a store fails for a moment: sent again as a lost lease is, but
            # never step by step (no step of it is to blame)
            transient = isinstance(cause, OSError)
            return self._lost(lease, type(cause).__name__, str(cause), retry=transient,
                              alone=not transient, traceback=_plain(str(exc)))
        # its worker or node was lost
        return self._lost(lease, "WorkerLost", f"the Ray worker running it was lost "
                          f"({type(exc).__name__}) after {lease.losses + 1} attempts")

    def _lost(self, lease: _Lease, error_type: str, message: str, retry: bool = True,
              alone: bool = True, traceback: str | None = None) -> list[Event]:
        """A lease that ended before reporting all its steps: sent again (`retry`, up to
        MAX_RETRIES) less what it reported; past that (`alone`) each of its steps alone, so
        that only the one that brings its worker down fails; then its steps fail."""
        steps = lease.unreported()
        self._trace_lost(lease, steps, (error_type, message.splitlines()[0], ""))
        if not steps:
            return []
        if retry and lease.losses < MAX_RETRIES:
            self.again.append(_Lease(tuple(steps), lease.losses + 1))
            return []
        if alone and (len(steps) > 1 or len(lease.steps) > 1):
            self.again.extend(_Lease((step,)) for step in steps)
            return []
        out: list[Event] = []
        for step in steps:
            out += failed_outcomes(step, lease.losses + 1, error_type, message,
                                   traceback=traceback)
            if isinstance(step, CallSpec):
                out.append(call_lost(step, 0, lease.losses + 1))
        return out

    def _next_deadline(self) -> float:
        return min([lease.deadline for lease in self.in_flight.values()], default=math.inf)

    def _expire_timeouts(self) -> list[Event]:
        """Cancel the task of a lease whose step said to start outlived its timeout. Steps
        that end within STREAM_SECONDS of the last chunk say nothing, so the one running may
        be a later one: with steps after it unreported, each is sent again alone, to be timed
        exactly. The step alone (or last) fails as in a local run, or is retried."""
        now = time.monotonic()
        out: list[Event] = []
        for ref, lease in list(self.in_flight.items()):
            step = lease.running
            if step is None or now < lease.deadline:
                continue
            del self.in_flight[ref]
            self.ray.cancel(ref, force=True)
            rest = lease.unreported()
            if len(rest) != 1:
                self.again.extend(_Lease((s,)) for s in rest)
                continue
            step = rest[0]  # a call, over the keys it had not written
            message = f"step {step.step_id} timed out after {step.timeout_seconds:g}s"
            self._trace_lost(lease, [step], ("TimeoutError", message, ""))
            attempts = self.timed_out[step.step_id] = self.timed_out.get(step.step_id, 0) + 1
            if attempts < step.retries:
                self.again.append(_Lease((step,)))
                continue
            out.extend(failed_outcomes(step, attempts, "TimeoutError", message))
            if isinstance(step, CallSpec):
                out.append(call_lost(step, len(lease.reported.intersection(
                    step.key_step_ids)), attempts))
        return out

    def _trace_lost(self, lease: _Lease, steps: Sequence[Step], error: tuple) -> None:
        """A traced run's `barca.execute` span for each step the lost task did not report:
        its own died with the worker (telemetry.execute.lost)."""
        if not any(step.trace for step in steps):
            return
        from barca.telemetry.execute import lost

        for step in steps:
            if step.trace:
                lost(step, lease.sent, error, {"barca.ray.lost_attempts": lease.losses + 1})


def _plain(text: str) -> str:
    """Ray's text of a task's error without its terminal colours: where the worker failed, as
    much of the traceback as Ray keeps."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _ray() -> Any:
    import ray

    return ray
