"""The worker process: read leases from a pipe, run each step with the step runner, send back
outcomes, log lines and the libraries its steps imported.

Started by the local executor as `python -m barca.engine.local.worker IN_FD OUT_FD`, or forked
by the warm pool. It never opens the metadata database. Its file descriptors 1 and 2 are pipes
it reads itself (`OutputCapture`): what a step's subprocesses or C code write there becomes
the step's log lines, like its `print`s, and never reaches barca's own stdout (which may be
`--json`) or the caller's pipes. Output printed outside any step (a pipeline file's top level,
imported ahead of its steps) goes back as log lines too, with an empty step id. A worker whose
coordinator is gone (killed) kills itself and whatever its steps started.
"""

from __future__ import annotations

import _thread
import atexit
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from barca.engine.local.frames import (Computed, Imported, Lease, Outcomes, Shutdown,
                                       StoreFailed, Warm, ends_step, out_of_band, read_frame,
                                       write_frame)
from barca.engine.worker.project_code import is_project_file
from barca.engine.local.uploads import Outbox
from barca.engine.protocol import CallFinished, LogLine, StepOutcome, StepStarted
from barca.engine.worker.step_runner import StepRunner, StepStream
from barca.errors import InfraError

# outcomes per message at most (and small results per pack, store.packs: the pack is
# written before the outcomes that name it)...
FLUSH_EVERY = 128
FLUSH_SECONDS = 1.0  # ...and never held longer than this (a pack per second or 128 results: few
# blocks wasted at the end of each, still under a second behind for progress)


# never preloaded by the warm pool: barca itself, and the tracing libraries barca's telemetry
# imports (a run without telemetry imports none of them, in any process)
NOT_PRELOADED = ("__main__", "barca", "ddtrace", "opentelemetry")


class OutputCapture:
    """Makes fds 1 and 2 pipes whose lines go to `emit` as log lines of the current step."""

    def __init__(self, emit: Any) -> None:
        self.emit = emit
        self.step_id = ""
        self.lock = threading.Lock()
        self.pipes: dict[int, list] = {}  # read end -> [stream name, partial line]
        for target, stream in ((1, "stdout"), (2, "stderr")):
            read_end, write_end = os.pipe()
            os.dup2(write_end, target)
            os.close(write_end)
            os.set_blocking(read_end, False)
            self.pipes[read_end] = [stream, b""]
        _thread.start_new_thread(self._pump, ())  # see `Worker.serve`

    def _pump(self) -> None:
        while self.pipes:
            ready, _, _ = select.select(list(self.pipes), [], [])
            with self.lock:
                for fd in ready:
                    self._read(fd)

    def _read(self, fd: int) -> None:
        entry = self.pipes[fd]
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            if not data:
                del self.pipes[fd]
                return
            *lines, entry[1] = (entry[1] + data).split(b"\n")
            for line in lines:
                self.emit(LogLine(self.step_id, entry[0], line.decode("utf-8", "replace")))

    def switch(self, step_id: str) -> None:
        """Between steps: what the last one wrote, up to now, is its own."""
        with self.lock:
            for fd in select.select(list(self.pipes), [], [], 0)[0]:
                self._read(fd)
            for entry in self.pipes.values():
                if entry[1]:
                    self.emit(LogLine(self.step_id, entry[0],
                                      entry[1].decode("utf-8", "replace")))
                    entry[1] = b""
            self.step_id = step_id


def _near_timeout(step: Any, outcomes: list) -> bool:
    """Whether a held outcome could reach the pool after the step's timeout: the pool times a
    step from the outcomes before it (or the `Computed` naming them) to its own, so an
    outcome held FLUSH_SECONDS must leave at once when the step took nearly all of its time."""
    took = max((getattr(o, "elapsed_seconds", 0.0) for o in outcomes), default=0.0)
    return bool(step.timeout_seconds) and took >= step.timeout_seconds - 2 * FLUSH_SECONDS


class Worker:
    def __init__(self, in_fd: int, out_fd: int, root: Path) -> None:
        self.in_fd, self.out_fd, self.root = in_fd, out_fd, root
        self.runner = StepRunner(root, hold_uploads=True)  # made by the outbox's thread
        self.finished: list[StepOutcome | CallFinished] = []
        self.lock = threading.Lock()  # the finished list; the pipe is the outbox's
        self.outbox = Outbox(lambda message: write_frame(out_fd, message))
        # what the process had before any step (barca's, or the pool's preloads) is never
        # news: a forked worker would otherwise look up the files of some 300 modules
        # after its first step, on the tick's path
        self.modules_seen = len(sys.modules)
        count, names = _loaded_at_fork
        self.loaded_before = names if count == len(sys.modules) else _top_level_names()
        self.reported: set[str] = set()
        self.stopping = False
        self.announced = False  # the first step this process runs was said to have started
        self.store_failed = False  # a pack could not be written: nothing more is reported

    def send(self, message: Any) -> None:
        self.outbox.send(message)

    def finish(self, outcome: StepOutcome | CallFinished) -> None:
        if getattr(outcome, "key_columns", None) is not None:  # megabytes: sent from where they are
            columns = outcome.key_columns
            outcome = outcome._replace(key_columns=columns._replace(
                keys=out_of_band(columns.keys),
                values=None if columns.values is None else out_of_band(columns.values),
                order=None if columns.order is None else out_of_band(columns.order)))
        with self.lock:
            self.finished.append(outcome)
            full = len(self.finished) >= FLUSH_EVERY
        if full:
            self.flush()

    def flush(self) -> None:
        """Report finished steps; many small steps share one message, sent once the packs
        holding their results are written whole (store.packs) and a remote store has every
        result they name, uploaded in the background (engine.local.uploads: the pool hears
        at once that the steps are done, `Computed`, and leases more). When a pack cannot be
        written, the coordinator is told (`StoreFailed`, it stops the run) and this worker
        reports nothing more: what it holds is not in the store."""
        with self.lock:
            if self.finished and not self.store_failed and not self.outbox.failed:
                try:
                    self.runner.packs.flush()
                except InfraError as exc:
                    self.store_failed = True
                    self.send(StoreFailed(exc.message, exc.remediation))
                    return
                done = tuple(o.step_id for o in self.finished if ends_step(o))
                self.outbox.send(Outcomes(tuple(self.finished)),
                                 tuple(self.runner.held_uploads()),
                                 Computed(done) if done else None)
                self.finished = []

    def _flush_regularly(self) -> None:
        """No outcome waits longer than FLUSH_SECONDS, even behind a long step."""
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except OSError:
                return

    def serve(self) -> None:
        capture = OutputCapture(self.send)
        sys.stdout = StepStream(self.send, "stdout")
        sys.stderr = StepStream(self.send, "stderr")
        # bare threads: threading's waits until each has started, a scheduler slice or more
        # on a busy machine while the sensor's worker is on a tick's path; this process ends
        # with os._exit and never joins them
        _thread.start_new_thread(self._flush_regularly, ())
        _thread.start_new_thread(self._die_with_coordinator, ())
        while True:
            try:
                message = read_frame(self.in_fd)
            except EOFError:
                return
            if isinstance(message, Shutdown):
                self.stopping = True
                self.flush()  # nothing the coordinator was told to wait for is held back
                self.outbox.drain()
                return
            if isinstance(message, Lease):
                self.runner.side_by_side = message.workers
                steps = message.steps
                for i, step in enumerate(steps):
                    if not self.announced:  # the pool timed it from the lease, when this
                        self.announced = True  # process may still have been starting
                        self.send(StepStarted(step.step_id, 1))
                    if capture.step_id != step.step_id:
                        capture.switch(step.step_id)
                    outcomes = self.runner.run(step, self.send_step_event)
                    # what it wrote is its own; what comes next, the next step's (one look
                    # at the pipes between two steps of a lease, not two)
                    capture.switch(steps[i + 1].step_id if i + 1 < len(steps) else "")
                    for outcome in outcomes:
                        self.finish(outcome)
                    if _near_timeout(step, outcomes):
                        self.flush()
                if not self._more_to_do():  # else the next lease's keys share the pack
                    self.flush()
                self.runner.let_go()
                self._report_imports()
            elif isinstance(message, Warm):
                self.runner.warm(message.files)

    def _more_to_do(self) -> bool:
        """A message is waiting already (the coordinator refills a lease at half)."""
        poller = select.poll()
        poller.register(self.in_fd, select.POLLIN)
        return any(events & select.POLLIN for _, events in poller.poll(0))

    def _die_with_coordinator(self) -> None:
        """The coordinator holds the only write end of our input pipe: when it closes without
        a `Shutdown`, the run was killed, and so is this worker, with what its step started
        (a worker leads its own process group)."""
        poller = select.poll()
        poller.register(self.in_fd, 0)  # POLLHUP is reported whatever the mask
        poller.poll()
        if not self.stopping:
            os.killpg(os.getpgid(0), signal.SIGKILL)

    def send_step_event(self, message: Any) -> None:
        """A step's log line goes out at once; a retry's start after the outcomes before it;
        a key a batch call has written with the other outcomes, as they are flushed."""
        if isinstance(message, StepOutcome):
            self.finish(message)
            return
        if not hasattr(message, "text"):
            self.flush()
        self.send(message)

    def _report_imports(self) -> None:
        """Tell the coordinator which libraries steps imported, for the warm pool to preload."""
        if len(sys.modules) == self.modules_seen:
            return
        self.modules_seen = len(sys.modules)
        new = _top_level_names() - self.loaded_before - self.reported
        self.reported |= new
        third_party = []
        for name in sorted(new):
            origin = getattr(sys.modules.get(name), "__file__", None)
            if not name.startswith("_") and name not in NOT_PRELOADED and \
                    not (origin and is_project_file(str(self.root), origin)):
                third_party.append(name)
        if third_party:
            self.send(Imported(tuple(third_party)))


def _top_level_names() -> frozenset[str]:
    return frozenset(name.partition(".")[0] for name in list(sys.modules))


# how many modules the warm pool had loaded when it last settled, and their top-level names,
# worked out there (`remember_loaded`): a worker forked from it then never walks sys.modules
# as it starts, where each name it touches copies a page of the pool's memory (1.1-1.5 ms in
# a forked child, 0.1 in the pool)
_loaded_at_fork: tuple[int, frozenset[str]] = (-1, frozenset())


def remember_loaded() -> None:
    global _loaded_at_fork
    _loaded_at_fork = len(sys.modules), _top_level_names()


def run(in_fd: int, out_fd: int, root: Path) -> None:
    """Serve leases until told to stop; shared by a fresh worker and one forked warm."""
    from barca import fanout
    from barca.engine.local import settings
    from barca.engine.worker import project_code

    project_code.install(str(root))
    fanout.set_workers(settings.pool_size())  # parallel() in a step forks its branches
    try:
        Worker(in_fd, out_fd, root).serve()
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # interrupted, or the coordinator stopped listening: nothing is left to report
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    _exit_without_teardown(out_fd)


def _exit_without_teardown(out_fd: int) -> None:
    """Leave without unloading pandas, duckdb and the like, which takes a tenth of a second
    the run would wait for. Exit handlers (a library flushing its buffers) still run; as in a
    forked multiprocessing worker, module-level objects are not finalized."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    close_all_but(out_fd)
    os.close(out_fd)  # the coordinator, reading it, now knows all the rest is let go
    os._exit(0)


def close_all_but(keep: int) -> None:
    """Close every descriptor but `keep`. At exit the kernel frees a process's memory before
    it closes its descriptors: closed first, what the process held (files and their locks, a
    database's among them, sockets, a caller's stdout) is free without waiting for that (8 ms
    for a worker that ran a DuckDB query)."""
    os.closerange(0, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))


def main() -> None:
    run(int(sys.argv[1]), int(sys.argv[2]), Path.cwd())


if __name__ == "__main__":
    main()
