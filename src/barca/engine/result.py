"""What a run is asked to do and what it returns: plain data between the engine and callers.

`RunResult.artifact_of` answers where a key's current result lives, whether this run wrote it
or it was served from cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from barca.discover.model import Definition
from barca.engine.protocol import StepOutcome
from barca.graph import Graph
from barca.plan.keys import key_pairs
from barca.plan.model import NodePlan, PlanOptions
from barca.state import EMPTY_STATE, NodeState, unpack_entry
from barca.store.paths import artifact_path


@dataclass(frozen=True, slots=True)
class RunRequest:
    command: str  # "get" | "run"
    targets: tuple[str, ...]  # node ids; empty = every asset and sensor
    files: tuple[str, ...]
    target_text: str | None
    options: PlanOptions = PlanOptions()
    dry_run: bool = False
    observe_sensors: bool = True  # False: predict from each sensor's last recorded output
    include_tasks: bool = False  # without targets: every node, tasks too (barca status)
    pool_size: int = 1
    warm_seconds: float = 0.0  # how long the warm pool outlives the run; 0: no warm pool


@dataclass(slots=True)
class RunResult:
    run_id: str
    targets: tuple[str, ...]
    options: PlanOptions
    status: str  # "success" | "failed" | "dry_run"
    elapsed: float
    graph: Graph
    cone: frozenset[str]
    order: tuple[str, ...]
    plans: dict[str, NodePlan]
    states: dict[str, NodeState]
    results: dict[str, dict[str, int]]  # key -> state.ran_entry(position, format)
    failed: list[StepOutcome]
    skipped: dict[str, list[str]]
    executed: int
    cached: int
    phases: int
    artifacts_dir: Path

    def artifact_of(self, node_id: str, key: str) -> tuple[Path, str] | None:
        """Where a key's current result lives (run here, or cached), with its format."""
        plan = self.plans.get(node_id)
        if plan is None or plan.unknown:
            return None
        return locate(self.graph.nodes[node_id], key, plan, self.results.get(node_id, {}),
                      self.states.get(node_id, EMPTY_STATE), self.artifacts_dir,
                      self.artifacts_dir)


def locate(d: Definition, key: str, plan: NodePlan, ran: dict[str, int], state: NodeState,
           run_dir: Path, stored_dir: Path) -> tuple[Path, str] | None:
    """Where a key's current result lives: written by this run (under `run_dir`, a scratch
    directory in a dry run) or its last recorded success (under `stored_dir`)."""
    hit = ran.get(key)
    if hit is not None:
        i, fmt = unpack_entry(hit)
        return artifact_path(run_dir, d.file, d.name, key_pairs(d, key), plan.run_hashes[i],
                             fmt), fmt
    return stored_artifact(stored_dir, d, state, key)


def stored_artifact(artifacts_dir: Path, d: Definition, state: NodeState,
                    key: str) -> tuple[Path, str] | None:
    """Where the last success of a key was written, with its format."""
    i = state.find(key)
    if i is None:
        return None
    fmt = state.fmt_at(i)
    return artifact_path(artifacts_dir, d.file, d.name, key_pairs(d, key), state.run_hash[i],
                         fmt), fmt
