"""`[barca] still running (<n>s): <id>`: a step that has run for BARCA_PROGRESS_SECS (15 by
default; 0 turns it off) is named again every that many seconds, in every output mode, so
that a long step is not taken for a hung run.

The executor says which steps are running and for how long (`Executor.running`); one
without that method (a test double) is taken to have none.
"""

from __future__ import annotations

from typing import Any

from barca import env_settings
from barca.engine.events import Reporter

DEFAULT_SECONDS = 15.0


def progress_seconds() -> float:
    """BARCA_PROGRESS_SECS as seconds; 0: never say it. Exit 2 for anything else."""
    return env_settings.seconds("BARCA_PROGRESS_SECS", DEFAULT_SECONDS,
                                "set it to a number of seconds such as 15, 0 to never print "
                                "`still running` lines, or unset it")


class StillRunning:
    """Says each long step once per interval it has run (at 15 s, 30 s, ...)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.every = progress_seconds()
        self.said: dict[str, int] = {}  # step id -> intervals already said

    def check(self, executor: Any) -> None:
        running = getattr(executor, "running", None) if self.every else None
        if running is None:
            return
        for step_id, seconds in running():
            intervals = int(seconds // self.every)
            if intervals > self.said.get(step_id, 0):
                self.said[step_id] = intervals
                self.reporter.still_running(step_id, seconds)
