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
AZURE_*, FSSPEC_*) and the variables the run's nodes declare with `env=` travel with the job.

Failures. A step's own error is its outcome, retried up to its `retries=` by the step runner.
A task whose worker process or node is lost is run again by Ray (MAX_RETRIES), whole: what the
lost attempt wrote is named by no outcome, so nothing half-written is recorded. A lease lost
past Ray's retries runs again one step per task, so that only the step that takes its worker
down fails (WorkerLost). Ctrl-C cancels the tasks in flight (`ray.cancel(force=True)`).
Not yet: `timeout=` is not enforced on Ray, and a step's lines reach the coordinator when its
lease ends, not as they are printed.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from barca.engine.executor import NewExecutor
from barca.engine.protocol import (CallFinished, CallSpec, LogLine, StepOutcome, StepSpec,
                                   call_lost, failed_outcomes)
from barca.errors import InfraError, UsageError

LEASE_MAX = 256  # steps of one task at most
IN_FLIGHT_PER_CPU = 2  # leases queued or running per CPU of the cluster
MAX_RETRIES = 3  # Ray's runs of a task again after its worker or node was lost
WAIT_SLICE = 0.25  # seconds of one wait on Ray, so that Ctrl-C is handled at once
# the project's files that never go to the cluster: barca's own state, and environments
EXCLUDES = [".barca", ".git", ".venv", "venv", "__pycache__", "node_modules"]
FORWARDED = ("BARCA_REMOTE_URI", "BARCA_STORAGE_OPTIONS")
FORWARDED_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_", "FSSPEC_")


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


class RayExecutor:
    def __init__(self, root: Path, env: dict[str, str] | None = None,
                 address: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.address = address or os.environ.get("RAY_ADDRESS") or "local"
        self.token = os.urandom(8).hex()  # this executor's runner, in each worker process
        self.sources: collections.deque[Iterator[StepSpec | CallSpec]] = collections.deque()
        self.head: StepSpec | CallSpec | None = None  # drawn, of another weight than its lease
        self.alone: collections.deque[StepSpec | CallSpec] = collections.deque()
        self.waiting = 0
        self.in_flight: dict[Any, tuple[StepSpec | CallSpec, ...]] = {}
        self.checked_store = False
        self.ray = _ray()
        self.owned = not self.ray.is_initialized()  # connected here: disconnected on close
        if self.owned:
            self._connect(env or {}, None)
            if self._other_machines():  # the project's files go with the job
                self.ray.shutdown()
                self._connect(env or {}, str(self.root))
        self.elsewhere = self._other_machines()
        self.shipped = bool(self.ray.get_runtime_context().runtime_env.get("working_dir"))
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        self.cpus = max(1, int(sum(n["Resources"].get("CPU", 0) for n in nodes)))
        self.largest = max([int(n["Resources"].get("CPU", 0)) for n in nodes] + [1])
        self.task = self.ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(run_lease)

    # -- the seam -----------------------------------------------------------------------------

    def submit(self, steps: Iterable[StepSpec | CallSpec], count: int) -> None:
        self.sources.append(iter(steps))
        self.waiting += count
        self._dispatch()

    def events(self, timeout: float) -> list[StepOutcome | CallFinished | LogLine]:
        out: list[StepOutcome | CallFinished | LogLine] = []
        deadline = time.monotonic() + timeout
        while not out:
            left = deadline - time.monotonic()
            if not self.in_flight:
                time.sleep(max(0.0, min(left, WAIT_SLICE)))
            else:
                refs = list(self.in_flight)
                ready, _ = self.ray.wait(refs, num_returns=1,
                                         timeout=max(0.0, min(left, WAIT_SLICE)))
                if ready:  # and whatever else finished meanwhile
                    ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
                for ref in ready:
                    out.extend(self._finished(ref))
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
        """None said: Ray runs a lease's steps out of sight, one after the other."""
        return []

    def prestart(self) -> None:
        """Nothing: connecting (or starting a local Ray) was done when this was made."""

    # -- connecting ---------------------------------------------------------------------------

    def _connect(self, env: dict[str, str], working_dir: str | None) -> None:
        self._check_reachable()
        runtime_env: dict[str, Any] = {"env_vars": env}
        if working_dir is not None:
            runtime_env.update(working_dir=working_dir, excludes=EXCLUDES)
        options: dict[str, Any] = {}
        if self.address == "local":
            options["include_dashboard"] = False
        # Ray sets its own SIGTERM handler in the driver: the run's handler (cancel) must stay
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.ray.init(address=self.address, runtime_env=runtime_env, log_to_driver=False,
                          logging_level=logging.ERROR, namespace="barca", **options)
        except (ConnectionError, TimeoutError, ValueError) as exc:
            raise InfraError(f"cannot reach the Ray cluster at {self.address}: {exc}",
                             "start it (`ray start --head`) and set RAY_ADDRESS to its "
                             "address, or unset RAY_ADDRESS to start a Ray of this machine"
                             ) from None
        except Exception as exc:  # noqa: BLE001 - e.g. the working_dir is too large to upload
            raise InfraError(f"Ray could not start the run: {type(exc).__name__}: {exc}",
                             "see Ray's message above; the project's files are sent without "
                             f"{', '.join(EXCLUDES)}") from None
        finally:
            for sig, handler in handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)
        _cluster_news_to_stderr()

    def _check_reachable(self) -> None:
        """Exit 3 at once when nothing listens at RAY_ADDRESS: Ray's own connect waits for
        minutes on a cluster that is not there."""
        if self.address in ("local", "auto"):
            return
        host, _, port = self.address.split("://")[-1].rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
        except (OSError, ValueError) as exc:
            raise InfraError(f"cannot reach the Ray cluster at {self.address}: {exc}",
                             "start it (`ray start --head`) and set RAY_ADDRESS to the "
                             "address it prints, or unset RAY_ADDRESS to start a Ray of this "
                             "machine") from None

    def _other_machines(self) -> bool:
        """Whether a node of the cluster is on another machine than this process's own."""
        mine = self.ray.get_runtime_context().get_node_id()
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        here = {n["NodeManagerAddress"] for n in nodes if n["NodeID"] == mine}
        return any(n["NodeManagerAddress"] not in here for n in nodes)

    # -- handing out leases -------------------------------------------------------------------

    def _dispatch(self) -> None:
        while len(self.in_flight) < IN_FLIGHT_PER_CPU * self.cpus:
            if self.alone:
                lease: tuple[StepSpec | CallSpec, ...] = (self.alone.popleft(),)
            else:
                lease = self._draw(max(1, min(LEASE_MAX, self.waiting // (4 * self.cpus))))
                if not lease:
                    return
            self._check_store(lease[0])
            weight = min(max(1, lease[0].weight), self.largest)  # never a task no node fits
            ref = self.task.options(num_cpus=weight, scheduling_strategy="SPREAD").remote(
                "" if self.shipped else str(self.root), self.token, lease)
            self.in_flight[ref] = lease

    def _draw(self, n: int) -> tuple[StepSpec | CallSpec, ...]:
        """Up to `n` steps of one weight (a lease holds the CPUs of its weight, weight=)."""
        out: list[StepSpec | CallSpec] = []
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

    def _check_store(self, step: StepSpec | CallSpec) -> None:
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

    def _finished(self, ref: Any) -> list[StepOutcome | CallFinished | LogLine]:
        lease = self.in_flight.pop(ref)
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except exceptions.RuntimeEnvSetupError as exc:
            raise InfraError(f"Ray could not set up the project on a node: {exc}",
                             "check that the project's files can be sent (Ray's working_dir) "
                             "and that barca is installed on every node") from None
        except exceptions.TaskCancelledError:
            return []
        except exceptions.RayTaskError as exc:  # barca's own error in the task, not a step's
            cause = exc.cause if exc.cause is not None else exc
            return self._lost(lease, type(cause).__name__, str(cause))
        except exceptions.RayError as exc:  # its worker or node was lost past Ray's retries
            return self._lost(lease, "WorkerLost", f"the Ray worker running it was lost "
                              f"({type(exc).__name__}) after {MAX_RETRIES + 1} attempts")

    def _lost(self, lease: tuple[StepSpec | CallSpec, ...], error_type: str, message: str
              ) -> list[StepOutcome | CallFinished | LogLine]:
        """A lease that came back with no outcomes: run each of its steps alone, so that only
        the one that brings its worker down fails; a step lost alone fails."""
        if len(lease) > 1:
            self.alone.extend(lease)
            return []
        [step] = lease
        out: list[StepOutcome | CallFinished | LogLine] = list(
            failed_outcomes(step, MAX_RETRIES + 1, error_type, message))
        if isinstance(step, CallSpec):
            out.append(call_lost(step, 0, MAX_RETRIES + 1))
        return out


def _ray() -> Any:
    import ray

    return ray


def _cluster_news_to_stderr() -> None:
    """Ray's driver prints what it hears of the cluster (a node that died, a worker killed by
    the memory monitor) on stdout, which is barca's result (`--json`): send it to stderr with
    barca's progress. This wraps a private function of Ray's (`ray._private.worker`), found by
    name; a Ray without it is left as it is (tests/e2e/test_ray_executor.py reads the JSON)."""
    from ray._private import worker

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "to_stderr", False):
        return

    def to_stderr(data: dict, ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


# -- in the Ray worker --------------------------------------------------------------------------

_RUNNERS: dict[tuple[str, str], Any] = {}  # (root, executor token) -> its StepRunner


def run_lease(root: str, token: str, steps: Sequence[StepSpec | CallSpec]
              ) -> list[StepOutcome | CallFinished | LogLine]:
    """Run a lease's steps in this Ray worker process; their log lines and outcomes, in the
    order they happened, once the packs holding their results are written whole. `root`: the
    project's directory, or "" for the copy Ray unpacked as the current directory; either is
    the steps' current directory, as a local worker's is the project root."""
    if root and os.getcwd() != root:
        os.chdir(root)
    runner = _runner(root or os.getcwd(), token)
    out: list[StepOutcome | CallFinished | LogLine] = []
    keep = out.append
    with _CapturedFds() as fds:
        for step in steps:
            done = runner.run(step, lambda e: keep(e) if isinstance(
                e, (LogLine, StepOutcome)) else None)
            out.extend(fds.lines(step.step_id))
            out.extend(done)
    runner.packs.flush()
    runner.last_value = None
    return out


def _runner(root: str, token: str) -> Any:
    """This executor's step runner; a runner of another run is dropped with the project
    modules it imported, so each run imports the pipeline as it is now."""
    from barca.engine.local import compile_project_from_source
    from barca.engine.worker import import_paths
    from barca.engine.worker.step_runner import StepRunner

    runner = _RUNNERS.get((root, token))
    if runner is None:
        for old_root, _ in list(_RUNNERS):
            _forget_modules(old_root)
            import_paths.for_root(old_root).forget()
        _RUNNERS.clear()
        compile_project_from_source(root)
        runner = _RUNNERS[root, token] = StepRunner(Path(root))
    return runner


def _forget_modules(root: str) -> None:
    top = os.path.join(os.path.realpath(root), "")
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and os.path.realpath(origin).startswith(top):
            del sys.modules[name]


class _CapturedFds:
    """What the lease's steps write to file descriptors 1 and 2 themselves (a subprocess, C
    code), kept in files for the lease and handed out as each step's log lines; Ray's own
    streams are put back after. Read with pread, so that writes go on at the files' ends."""

    def __init__(self) -> None:
        self.files: list[tuple[str, Any, int]] = []  # (stream, file, saved fd)
        self.read = [0, 0]

    def __enter__(self) -> "_CapturedFds":
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        for fd, name in ((1, "stdout"), (2, "stderr")):
            file = tempfile.TemporaryFile()
            self.files.append((name, file, os.dup(fd)))
            os.dup2(file.fileno(), fd)
        return self

    def lines(self, step_id: str) -> list[LogLine]:
        out = []
        for i, (name, file, _) in enumerate(self.files):
            size = os.fstat(file.fileno()).st_size
            data = os.pread(file.fileno(), size - self.read[i], self.read[i])
            self.read[i] += len(data)
            out += [LogLine(step_id, name, line.decode("utf-8", "replace"))
                    for line in data.splitlines()]
        return out

    def __exit__(self, *exc: Any) -> None:
        for fd, (_, file, saved) in zip((1, 2), self.files):
            os.dup2(saved, fd)
            os.close(saved)
            file.close()
