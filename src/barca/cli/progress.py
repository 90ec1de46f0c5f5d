"""The CLI's reporters: streamed step output, `--agent` lines, a progress bar in a terminal;
and `--events`, the same lines as typed JSON events for `barca serve`."""

from __future__ import annotations

import sys

import orjson

from barca.cli.output import note, note_exact
from barca.engine.events import Reporter
from barca.engine.protocol import StepOutcome
from barca.printable import printable


class CliReporter(Reporter):
    def __init__(self, agent: bool) -> None:
        self.agent = agent
        self.bar = None
        self.task = None
        self.total = 0
        self.finished = 0  # keys finished in this run, across its sensor and main phases
        self.env: dict[str, str] = {}  # node id -> ` env NAME=VALUE ...` for its step lines

    def run_started(self, total_steps: int) -> None:
        """Called for the sensors, then again for the rest: counts continue from the sensors'
        so that the bar and `--agent` lines end at the run's total, as its summary does."""
        self.total = self.finished + total_steps
        if self.agent or not sys.stderr.isatty() or self.total < 2:
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress("[barca]", BarColumn(), MofNCompleteColumn(), "steps",
                                TimeElapsedColumn(), transient=True,
                                console=_stderr_console())
            self.bar.start()
            self.task = self.bar.add_task("run", total=self.total, completed=self.finished)
        else:
            self.bar.update(self.task, total=self.total, completed=self.finished)

    def steps_submitted(self, node_id: str, keys: int, calls: int | None) -> None:
        self._say("steps_submitted", None, node_id=node_id, keys=keys, calls=calls)

    def step_finished(self, outcome: StepOutcome, done: int, total: int) -> None:
        self.finished += 1
        done = self.finished
        if self.bar is not None:
            self.bar.update(self.task, completed=done)
        total = max(done, self.total)
        fields = {"step_id": outcome.step_id, "node_id": outcome.node_id, "done": done,
                  "total": total, "ok": outcome.status == "success",
                  "elapsed_seconds": outcome.elapsed_seconds}
        if outcome.status == "success":
            line = f"[barca] step:{outcome.step_id} completed {outcome.elapsed_seconds:.2f}s " \
                   f"({done}/{total}){self.env.get(outcome.node_id, '')}"
        else:
            first = (outcome.error_message or "").strip().splitlines()
            fields["error"] = first[0] if first else ""
            line = f"[barca] step:{outcome.step_id} failed: {fields['error']}"
        self._say("step_finished", line if self.agent else None, **fields)

    def declared_env(self, values: dict[str, dict[str, str | None]]) -> None:
        from barca.cli.render import env_suffix, env_value

        self.env = {node_id: env_suffix({name: env_value(name, v) for name, v in env.items()})
                    for node_id, env in values.items()}

    def step_cached(self, node_id: str, keys: int) -> None:
        line = f"[barca] step:{node_id} cached" + (f" ({keys} keys)" if keys else "") + \
            self.env.get(node_id, "")
        self._say("step_cached", line if self.agent else None, node_id=node_id, keys=keys)

    def steps_waiting(self, node_id: str, keys: int, run_id: str, pid: int) -> None:
        what = f"{keys} key{'s' if keys != 1 else ''} of {node_id}" if keys else node_id
        self._say("steps_waiting", f"[barca] waiting for run {run_id} (pid {pid}), which is "
                  f"computing {what}", node_id=node_id, keys=keys, run_id=run_id)

    def still_running(self, step_id: str, seconds: float) -> None:
        self._say("still_running", f"[barca] still running ({int(seconds)}s): {step_id}",
                  step_id=step_id, elapsed_seconds=round(seconds, 3))

    def step_output(self, step_id: str, stream: str, text: str) -> None:
        self._say("log", f"[{step_id}] {text}", step_id=step_id, stream=stream, text=text)

    def sink_failed(self, step_id: str, message: str) -> None:
        self._say("sink_failed", f"[barca] SINK FAILED: {step_id}: {message}",
                  step_id=step_id, error=message)

    def warning(self, text: str) -> None:
        self._say("warning", f"[barca] warning: {text}", text=text)

    def run_note(self, text: str) -> None:
        self._say("note", f"[barca] {text}", text=text)

    def run_finished(self, executed: int, total: int, elapsed: float, status: str) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        word = {"success": "done in", "failed": "failed in", "cancelled": "cancelled after"}
        line = f"[barca] {executed}/{total} steps | {word.get(status, 'done in')} {elapsed:.1f}s"
        self._say("run_summary", line if executed else None, executed=executed, total=total,
                  elapsed_seconds=elapsed, status=status)

    def _say(self, kind: str, line: str | None, **fields) -> None:
        """A line on stderr (above the progress bar when there is one); `kind` and `fields`
        are what `--events` sends instead."""
        if line is None:
            return
        if self.bar is not None:
            self.bar.console.print(printable(line), markup=False, highlight=False)
        else:
            note(line)


EVENT_MARK = "\x1e"  # starts an event line on stderr: no step's printed text is mistaken for one


class EventReporter(CliReporter):
    """`--events`: every report as one line on stderr, EVENT_MARK then a JSON object with its
    `type`, its fields and the `line` that `--agent` prints (null when it prints none).
    `barca serve` runs commands this way and streams the events to its clients."""

    def __init__(self) -> None:
        super().__init__(agent=True)

    def run_accepted(self) -> None:
        self._say("run_accepted", None)

    def run_started(self, total_steps: int) -> None:
        self.total = self.finished + total_steps
        self._say("run_started", None, total=self.total)

    def _say(self, kind: str, line: str | None, **fields) -> None:
        """The fields exact; `line` as `--agent` prints it (escaped, barca.printable)."""
        shown = None if line is None else printable(line)
        note_exact(EVENT_MARK + orjson.dumps({"type": kind, **fields, "line": shown}).decode())


def _stderr_console():
    from rich.console import Console

    return Console(file=sys.stderr)
