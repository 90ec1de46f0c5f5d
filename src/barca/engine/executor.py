"""The executor seam: how the coordinator hands steps out and hears back, whatever runs them.

The coordinator knows only this protocol. `engine.local` runs steps in worker processes on
this machine (forked from the warm pool where it can), `engine.inprocess` runs them one by one
in the calling process (unit tests); a distributed engine is a third implementation. Each one
runs a step with `engine.step_runner.StepRunner`, so a step behaves the same however it was
delivered; `tests/engine/test_executor_contract.py` holds every implementation to that.
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol

from barca.engine.protocol import CallFinished, CallSpec, LogLine, StepOutcome, StepSpec


class Executor(Protocol):
    def submit(self, steps: Iterable[StepSpec | CallSpec], count: int,
               first: bool = False) -> None:
        """Queue `count` steps (or batch calls) to run; returns at once. Steps are drawn from
        the iterable only as they are needed, so 200,000 steps are never all in memory.
        `first`: ahead of the steps queued before (a reader's keys whose inputs ended, so
        that it keeps pace with them); else after them."""

    def events(self, timeout: float) -> list[StepOutcome | CallFinished | LogLine]:
        """Outcomes and log lines that arrived, waiting at most `timeout` seconds for one.
        Every submitted step yields exactly one outcome; a batch call one per key, then a
        `CallFinished` (none when its worker was lost)."""

    def close(self, cancel: bool = False) -> None:
        """Release what the executor holds; with cancel, abandon steps still running."""

    def running(self) -> list[tuple[str, float]]:
        """(step id, seconds since it started) of each step running now, for the `still
        running` lines (engine.still_running). Optional: an executor without it says none."""

    def prestart(self) -> None:
        """A hint that steps are coming: get ready (import the pipeline) while the caller
        plans. May do nothing."""

    def wind_down(self) -> None:
        """A hint that no step is coming: begin to stop (workers exit) while the caller records
        the run's end; `close` then waits. May do nothing."""


NewExecutor = Callable[[], Executor]  # called by the coordinator when a step first must run
