"""A lease of steps in a Ray worker process: the worker-side half of engine.ray_executor.

A lease's steps run one after the other with this run's step runner, as in a local worker;
their small results go into one pack per lease (store.packs), written whole before any outcome
leaves. A lease is a Ray generator task whose chunks (lists of log lines and outcomes) go out
as it runs: one as it begins, then at the end of a step once STREAM_SECONDS have passed since
the last, and one at its end; each but the last names the step starting (`StepStarted`), so
that the coordinator can time it against its `timeout=`. A lease of short steps thus costs two
chunks, whatever its size; a long one tells what finished about every second.

A traced run's `barca.execute` spans say which Ray node ran them and are sent before the
lease ends (a Ray worker outlives its lease, and may never run exit handlers).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from barca.engine.protocol import (CallFinished, CallSpec, LogLine, StepOutcome, StepSpec,
                                   StepStarted)

STREAM_SECONDS = 1.0  # what finished waits, at most, past its step's end before it leaves
TRACE_FLUSH_SECONDS = 5.0  # what a traced lease waits at its end for its spans to be taken

Event = StepOutcome | CallFinished | LogLine | StepStarted
_RUNNERS: dict[tuple[str, str], Any] = {}  # (root, executor token) -> its StepRunner


def run_lease(root: str, token: str, steps: Sequence[StepSpec | CallSpec]
              ) -> Iterator[list[Event]]:
    """Run the steps in this process, yielding chunks as said above. `root`: the project's
    directory, or "" for the copy Ray unpacked as the current directory; either is the
    steps' current directory, as a local worker's is the project root."""
    if root and os.getcwd() != root:
        os.chdir(root)
    runner = _runner(root or os.getcwd(), token)
    traced = any(step.trace for step in steps)
    if traced:
        _say_where()
    out: list[Event] = []
    sent = time.monotonic()
    with _CapturedFds() as fds:
        for i, step in enumerate(steps):
            if i == 0 or time.monotonic() - sent >= STREAM_SECONDS:
                if out:
                    runner.packs.flush()  # outcomes leave once their results are whole
                yield out + [StepStarted(step.step_id, 1)]
                out.clear()
                sent = time.monotonic()
            done = runner.run(step, lambda e: out.append(e) if isinstance(
                e, (LogLine, StepOutcome)) else None)
            out.extend(fds.lines(step.step_id))
            out.extend(done)
    runner.packs.flush()
    runner.let_go()
    if traced:
        from barca.telemetry.execute import flush

        flush(TRACE_FLUSH_SECONDS)
    yield out


def _say_where() -> None:
    """The Ray node this process runs on, on each of its `barca.execute` spans."""
    import ray

    from barca.telemetry.execute import PLACE

    PLACE["barca.ray.node_id"] = ray.get_runtime_context().get_node_id()


def _runner(root: str, token: str) -> Any:
    """This executor's step runner; a runner of another run is dropped with the project
    modules it imported, so each run imports the pipeline as it is now."""
    from barca.engine.worker import import_paths, project_code
    from barca.engine.worker.step_runner import StepRunner

    runner = _RUNNERS.get((root, token))
    if runner is None:
        for old_root, _ in list(_RUNNERS):
            _forget_modules(old_root)
            import_paths.for_root(old_root).forget()
        _RUNNERS.clear()
        project_code.install(root)  # the project's modules from their source
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
