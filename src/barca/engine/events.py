"""What the core tells its caller while it works; the core itself never prints.

The CLI renders these as progress bars, `--agent` lines and streamed step output; the Python
API ignores them. A reporter that does nothing is a valid reporter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

from barca.engine.protocol import StepOutcome


@dataclass(frozen=True, slots=True)
class BatchNote:
    """A batched node's calls in this run and where their time went, summed over the calls
    (which may run in parallel): `seconds` holds (part, seconds) for import, load, compute,
    split and write, in that order."""

    node_id: str
    calls: int
    keys: int
    seconds: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class MetadataNote:
    """The coordinator's own time in a batched run: handling finished keys and writing the
    metadata database."""

    seconds: float


@dataclass(frozen=True, slots=True)
class UpgradeNote:
    """Results recorded under hash scheme 1 (code hashed as text) that this run recognised
    for the code as it is and stored under scheme 2, without running them (planner.upgrade):
    said once, so that a user who upgraded sees why nothing reran."""

    nodes: int
    keys: int


RunNote = Union[BatchNote, MetadataNote, UpgradeNote]


class Reporter:
    def run_accepted(self) -> None:
        """The request was checked against the graph and, unless a dry run, the run's row is
        written: the run goes ahead (a server answers its client now; until here a bad
        request is the client's error, and a server killed now still finds the run)."""

    def run_started(self, total_steps: int) -> None:
        """The plan is known: `total_steps` keys will execute (sensors first)."""

    def steps_submitted(self, node_id: str, keys: int, calls: int | None) -> None:
        """`keys` keys of a node went to the executor (in `calls` batched calls, or one step
        each when `calls` is None): a batched call reports nothing else until it ends."""

    def declared_env(self, values: dict[str, dict[str, str | None]]) -> None:
        """Before any step runs: node id -> its `env=` variables' values as the run hash saw
        them (None: unset), for the nodes that declare some."""

    def step_finished(self, outcome: StepOutcome, done: int, total: int) -> None:
        """One key finished, successfully or not."""

    def step_cached(self, node_id: str, keys: int) -> None:
        """A node was served from cache: all of it, or `keys` of its keys when partitioned."""

    def steps_waiting(self, node_id: str, keys: int, run_id: str, pid: int) -> None:
        """Another run (`run_id`, process `pid`) is computing the node, or `keys` of its keys
        when partitioned: this run waits for it and then serves them from cache."""

    def still_running(self, step_id: str, seconds: float) -> None:
        """A step (a key, or a batch call) has been running for `seconds`: said every
        BARCA_PROGRESS_SECS it runs (engine.still_running)."""

    def step_output(self, step_id: str, stream: str, text: str) -> None:
        """A line a step printed."""

    def sink_failed(self, step_id: str, message: str) -> None:
        """A step succeeded but one of its @sink copies could not be written; the run goes
        on and its exit code is unchanged."""

    def warning(self, code: str, evidence: Mapping[str, Any]) -> None:
        """Something the user should know that does not stop the run: what (`code`,
        "unused_input", "missing_result", ...) and its evidence (`node`, `param` and the
        facts its words are made of: barca.views.warning_text)."""

    def run_note(self, note: RunNote) -> None:
        """A fact about the run as a whole (a batched node's calls, the time spent recording),
        also kept with the run's logs; its words are barca.views.warning_text's `note_text`."""

    def run_finished(self, executed: int, total: int, elapsed: float, status: str) -> None:
        """The run ended with `status` ("success", "failed", "cancelled")."""
