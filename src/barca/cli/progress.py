"""The CLI's reporter: streamed step output, `--agent` lines, a progress bar in a terminal."""

from __future__ import annotations

import sys

from barca.cli.output import note
from barca.engine.events import Reporter
from barca.engine.protocol import StepOutcome


class CliReporter(Reporter):
    def __init__(self, agent: bool) -> None:
        self.agent = agent
        self.bar = None
        self.task = None
        self.total = 0

    def run_started(self, total_steps: int) -> None:
        self.total = total_steps
        if self.agent or not sys.stderr.isatty() or total_steps < 2:
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress("[barca]", BarColumn(), MofNCompleteColumn(), "steps",
                                TimeElapsedColumn(), transient=True,
                                console=_stderr_console())
            self.bar.start()
            self.task = self.bar.add_task("run", total=total_steps)
        else:
            self.bar.update(self.task, total=total_steps, completed=0)

    def step_finished(self, outcome: StepOutcome, done: int, total: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)
        if not self.agent:
            return
        if outcome.status == "success":
            note(f"[barca] step:{outcome.step_id} completed {outcome.elapsed_seconds:.2f}s "
                 f"({done}/{max(total, self.total)})")
        else:
            first = (outcome.error_message or "").strip().splitlines()
            note(f"[barca] step:{outcome.step_id} failed: {first[0] if first else ''}")

    def step_cached(self, node_id: str, keys: int) -> None:
        if self.agent:
            note(f"[barca] step:{node_id} cached" + (f" ({keys} keys)" if keys else ""))

    def steps_waiting(self, node_id: str, keys: int, run_id: str, pid: int) -> None:
        what = f"{keys} key{'s' if keys != 1 else ''} of {node_id}" if keys else node_id
        self._note(f"[barca] waiting for run {run_id} (pid {pid}), which is computing {what}")

    def step_output(self, step_id: str, stream: str, text: str) -> None:
        self._note(f"[{step_id}] {text}")

    def _note(self, line: str) -> None:
        """A line on stderr, above the progress bar when there is one."""
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            note(line)

    def warning(self, text: str) -> None:
        note(f"[barca] warning: {text}")

    def run_note(self, text: str) -> None:
        self._note(f"[barca] {text}")

    def run_finished(self, executed: int, total: int, elapsed: float, status: str) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        if executed == 0:
            return
        word = {"success": "done in", "failed": "failed in", "cancelled": "cancelled after"}
        note(f"[barca] {executed}/{total} steps | {word.get(status, 'done in')} {elapsed:.1f}s")


def _stderr_console():
    from rich.console import Console

    return Console(file=sys.stderr)
