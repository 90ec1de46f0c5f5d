"""An executor that runs each step in the calling process, one at a time, when asked for events.

For unit tests of the coordinator and the executor contract: no processes, no pipes, the
same step runner as every other executor. Step timeouts are not enforced (nothing can stop a
step from outside in one thread). Project modules it imported are forgotten on `close`, so the
next run (another project with a `pipeline.py`, say) imports its own.

A step's peak memory is measured as in a worker (engine.peak_memory), but the process is the
caller's: it is the caller's resident memory at the step's start plus what the step added, as
its `cpu_seconds` is this process's CPU. Comparing two steps of one run is meaningful; the
absolute figure is the host's. Measuring resets this process's high-water mark, so a caller
that reads its own peak (VmHWM, `ru_maxrss`) afterwards gets the peak since the last step began.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

from barca.engine.worker import import_paths
from barca.engine.protocol import LogLine, StepOutcome, StepSpec
from barca.engine.worker.step_runner import StepRunner


class InProcessExecutor:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.runner = StepRunner(root)
        self.sources: collections.deque[Iterator[StepSpec]] = collections.deque()
        self.path_before = list(sys.path)
        self.modules_before = set(sys.modules)

    def submit(self, steps: Iterable[StepSpec], count: int, first: bool = False) -> None:
        if first:
            self.sources.appendleft(iter(steps))
        else:
            self.sources.append(iter(steps))

    def events(self, timeout: float) -> list[StepOutcome | LogLine]:
        """Runs the next step; returns what it printed and its outcome."""
        while self.sources:
            step = next(self.sources[0], None)
            if step is None:
                self.sources.popleft()
                continue
            out: list[Any] = []
            outcomes = self.runner.run(step, lambda event: out.append(event) if isinstance(
                event, (LogLine, StepOutcome)) else None)
            self.runner.packs.flush()  # the results' packs, before their outcomes go
            self.runner.let_go()
            return [*out, *outcomes]
        return []

    def close(self, cancel: bool = False) -> None:
        self.sources.clear()
        for name in set(sys.modules) - self.modules_before:
            if _under(self.root, sys.modules[name]):
                del sys.modules[name]
        sys.path[:] = self.path_before
        import_paths.for_root(str(self.root)).forget()

    def running(self) -> list[tuple[str, float]]:
        """None: each step runs inside `events`, so none is running between two calls."""
        return []

    def prestart(self) -> None:
        """Nothing to start."""

    def wind_down(self) -> None:
        """Nothing: `close` has nothing to wait for."""


def _under(root: Path, module: Any) -> bool:
    origin = getattr(module, "__file__", None)
    return bool(origin) and Path(origin).resolve().is_relative_to(root.resolve())
