"""A run's progress as typed events: what the CLI's progress bar and `--agent` lines are
drawn from and what a server streams to its clients, from one source.

Each event is a dict: its `type`, its fields, and `line`, the sentence `--agent` prints for it
(None when it prints none), escaped for a terminal (`barca.printable`).
"""

from __future__ import annotations

from typing import Any, Mapping

from barca.engine.events import Reporter, RunNote
from barca.engine.protocol import StepOutcome
from barca.printable import printable
from barca.views.plan_text import env_suffix, env_value
from barca.views.warning_text import note_text, sink_failed_text, warning_text

STEP_LINES = ("step_finished", "step_cached")  # said per key: a progress bar stands for them


class RunEvents(Reporter):
    """A Reporter that turns every report into an event and hands it to `emit`."""

    def __init__(self) -> None:
        self.total = 0
        self.finished = 0  # keys finished in this run, across its sensor and main phases
        self.env: dict[str, str] = {}  # node id -> ` env NAME=VALUE ...` for its step lines

    def emit(self, event: dict[str, Any]) -> None:
        """Where events go (nowhere here)."""

    def _say(self, kind: str, line: str | None, **fields: Any) -> None:
        self.emit({"type": kind, **fields, "line": None if line is None else printable(line)})

    def run_accepted(self) -> None:
        self._say("run_accepted", None)

    def run_started(self, total_steps: int) -> None:
        """Called for the sensors, then again for the rest: counts continue from the sensors'
        so that progress ends at the run's total, as its summary does."""
        self.total = self.finished + total_steps
        self._say("run_started", None, total=self.total)

    def steps_submitted(self, node_id: str, keys: int, calls: int | None) -> None:
        self._say("steps_submitted", None, node_id=node_id, keys=keys, calls=calls)

    def step_finished(self, outcome: StepOutcome, done: int, total: int) -> None:
        self.finished += 1
        done = self.finished
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
            fields["error_type"] = outcome.error_type
            line = f"[barca] step:{outcome.step_id} failed: {fields['error']}"
        self._say("step_finished", line, **fields)

    def declared_env(self, values: dict[str, dict[str, str | None]]) -> None:
        self.env = {node_id: env_suffix({name: env_value(name, v) for name, v in env.items()})
                    for node_id, env in values.items()}

    def step_cached(self, node_id: str, keys: int) -> None:
        line = f"[barca] step:{node_id} cached" + (f" ({keys} keys)" if keys else "") + \
            self.env.get(node_id, "")
        self._say("step_cached", line, node_id=node_id, keys=keys)

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
        self._say("sink_failed", sink_failed_text(f"{step_id}: {message}"),
                  step_id=step_id, error=message)

    def warning(self, code: str, evidence: Mapping[str, Any]) -> None:
        text = warning_text(code, evidence)
        self._say("warning", f"[barca] warning: {text}", text=text)

    def run_note(self, note: RunNote) -> None:
        text = note_text(note)
        self._say("note", f"[barca] {text}", text=text)

    def run_finished(self, executed: int, total: int, elapsed: float, status: str) -> None:
        word = {"success": "done in", "failed": "failed in", "cancelled": "cancelled after"}
        line = f"[barca] {executed}/{total} steps | {word.get(status, 'done in')} {elapsed:.1f}s"
        self._say("run_summary", line if executed else None, executed=executed, total=total,
                  elapsed_seconds=elapsed, status=status)
