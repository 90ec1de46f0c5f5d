"""The CLI's progress: the run's events (`barca.views.run_events`) drawn as a progress bar in
a terminal, or as plain `--agent` lines; step output and warnings as lines either way."""

from __future__ import annotations

import sys
from typing import Any

from barca.printable import note_exact
from barca.views.run_events import STEP_LINES, RunEvents


class CliReporter(RunEvents):
    def __init__(self, agent: bool) -> None:
        super().__init__()
        self.agent = agent
        self.bar = None
        self.task = None

    def emit(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "run_started":
            self._show_bar()
        elif kind == "step_finished" and self.bar is not None:
            self.bar.update(self.task, completed=self.finished)
        elif kind == "run_summary" and self.bar is not None:
            self.bar.stop()
            self.bar = None
        line = event["line"]
        if line is None or kind in STEP_LINES and not self.agent:
            return
        if self.bar is not None:  # above the bar
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            note_exact(line)

    def step_finished(self, outcome: Any, done: int, total: int) -> None:
        """Without --agent a step's line is never shown: the bar moves, and the line (an
        event, its text made printable) is not made for each of 200,000 keys."""
        if self.agent:
            return super().step_finished(outcome, done, total)
        self.finished += 1
        if self.bar is not None:
            self.bar.update(self.task, completed=self.finished)

    def _show_bar(self) -> None:
        if self.agent or not sys.stderr.isatty() or self.total < 2:
            return
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress("[barca]", BarColumn(), MofNCompleteColumn(), "steps",
                                TimeElapsedColumn(), transient=True,
                                console=Console(file=sys.stderr))
            self.bar.start()
            self.task = self.bar.add_task("run", total=self.total, completed=self.finished)
        else:
            self.bar.update(self.task, total=self.total, completed=self.finished)
