"""What a run returns: plain data between the engine and every caller.

`RunResult.artifact_of` answers where a key's current result lives, whether this run wrote it
or it was served from cache; `value` and `values` read it from the run's artifact store. The
CLI and the Python API both read results through these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barca.discover.model import Definition
from barca.engine.events import BatchNote
from barca.engine.protocol import CallFinished, StepOutcome
from barca.graph import Graph
from barca.planner.batching import BatchPlan
from barca.planner.keys import key_pairs
from barca.planner.model import NodePlan, PlanOptions
from barca.state import EMPTY_STATE, NodeState, unpack_entry
from barca.store.artifact_store import ArtifactStore
from barca.store.artifacts import read_result
from barca.store.paths import artifact_key, node_dir_name


@dataclass(slots=True)
class BatchExecution:
    """A batched node's calls in one run, their time summed over calls (which may run in
    parallel, so the parts can add up to more than the run's wall time)."""

    calls: int = 0
    keys: int = 0
    import_seconds: float = 0.0
    load_seconds: float = 0.0
    compute_seconds: float = 0.0
    split_seconds: float = 0.0
    write_seconds: float = 0.0

    def add(self, call: CallFinished) -> None:
        self.calls += 1
        self.keys += call.keys
        self.import_seconds += call.import_seconds
        self.load_seconds += call.load_seconds
        self.compute_seconds += call.compute_seconds
        self.split_seconds += call.split_seconds
        self.write_seconds += call.write_seconds

    def as_json(self) -> dict[str, float | int]:
        return {"calls": self.calls, "keys": self.keys,
                **{part: round(getattr(self, part), 4) for part in _PARTS}}

    def note(self, node_id: str) -> BatchNote:
        """What the run says of the node's calls when it ends (`[barca] batch:<node> ...`)."""
        return BatchNote(node_id, self.calls, self.keys,
                         tuple((p.removesuffix("_seconds"), getattr(self, p)) for p in _PARTS))


_PARTS = ("import_seconds", "load_seconds", "compute_seconds", "split_seconds",
          "write_seconds")


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
    root: Path  # the project root, which displayed paths are relative to
    served: dict[str, dict[str, int]]  # node id -> run id -> keys that run computed for this one
    store: ArtifactStore  # where the results live
    batch_execution: dict[str, BatchExecution] = field(default_factory=dict)  # batched nodes
    metadata_seconds: float = 0.0  # handling finished keys and writing the metadata DB
    batch_plans: dict[str, BatchPlan] = field(default_factory=dict)  # a dry run's calls
    warnings: list[dict[str, Any]] = field(default_factory=list)  # {kind, node, param, evidence}
    # [cache] max_size: what the run's trim removed (store.gc.trim), when it was over
    cache: dict[str, int] | None = None
    cache_warnings: list[str] = field(default_factory=list)
    bytes_changed: dict[str, list[str]] = field(default_factory=dict)  # engine.byte_checks
    # node id -> (seconds its executed keys took, summed; the most attempts a key took)
    step_times: dict[str, tuple[float, int]] = field(default_factory=dict)
    # node id -> key -> where in a pack this run put the key's result (store.packs)
    packed: dict[str, dict[str, str]] = field(default_factory=dict)
    # node id -> what its state rows said when the run loaded them (store.metadata.Stored)
    stored: dict[str, Any] = field(default_factory=dict)

    def key_of(self, node_id: str, key: str) -> tuple[str, str] | None:
        """The store key of a key's current result (run here, or cached), with its format."""
        plan = self.plans.get(node_id)
        if plan is None or plan.unknown:
            return None
        return locate_key(self.graph.nodes[node_id], key, plan, self.results.get(node_id, {}),
                          self.states.get(node_id, EMPTY_STATE), self.packed.get(node_id))

    def keys_located(self, node_id: str) -> dict[str, tuple[str, str]]:
        """key_of for every key of the node at once: the state's columns are read whole, not
        looked up 200,000 times (`-o path`, `-o value` of a partitioned target)."""
        d, ran = self.graph.nodes[node_id], self.results.get(node_id, {})
        out = stored_keys(d, self.states.get(node_id, EMPTY_STATE))
        packed = self.packed.get(node_id)
        for key in ran:
            out[key] = locate_key(d, key, self.plans[node_id], ran, EMPTY_STATE, packed)
        return out

    def artifact_of(self, node_id: str, key: str) -> tuple[Path, str] | None:
        """The local file of a key's current result in the project's local store, with its
        format (what the command line prints and reads)."""
        found = self.key_of(node_id, key)
        return None if found is None else (self.artifacts_dir / found[0], found[1])

    def final_node(self) -> str | None:
        """The last target, or without one the last asset in topological order."""
        if self.targets:
            return self.targets[-1]
        assets = [n for n in self.order if self.graph.nodes[n].kind == "asset"]
        return assets[-1] if assets else None

    def value(self, node_id: str, key: str = "") -> Any:
        """A key's current value (None if it has no result)."""
        found = self.key_of(node_id, key)
        return None if found is None else read_result(self.store, *found)

    def values(self, node_id: str) -> Any:
        """The node's value, or {key label: value} for every key of a partitioned node."""
        plan = self.plans[node_id]
        if not plan.partitioned:
            return self.value(node_id)
        return {plan.label(key): self.value(node_id, key)
                for key in sorted(plan.keys, key=plan.label)}


def locate_key(d: Definition, key: str, plan: NodePlan, ran: dict[str, int],
               state: NodeState, packed: dict[str, str] | None = None
               ) -> tuple[str, str] | None:
    """The store key of a key's current result, with its format: written by this run (in
    its scratch store, in a dry run; `packed`: where in a pack it put each packed result)
    or its last recorded success."""
    hit = ran.get(key)
    if hit is not None:
        i, fmt = unpack_entry(hit)
        where = packed.get(key) if packed else None
        if where is not None:
            return f"{node_dir_name(d.file, d.name)}/{where}", fmt
        return artifact_key(d.file, d.name, key_pairs(d, key), plan.run_hashes[i], fmt), fmt
    return stored_key(d, state, key)


def stored_key(d: Definition, state: NodeState, key: str) -> tuple[str, str] | None:
    """The store key of the last success of a key, with its format."""
    i = state.find(key)
    return None if i is None else _stored_at(d, state, i, key)


def _stored_at(d: Definition, state: NodeState, i: int, key: str) -> tuple[str, str]:
    fmt, where = state.fmt_at(i), state.where_at(i)
    if where is not None:
        return f"{node_dir_name(d.file, d.name)}/{where}", fmt
    return artifact_key(d.file, d.name, key_pairs(d, key), state.run_hash[i], fmt), fmt


def stored_keys(d: Definition, state: NodeState) -> dict[str, tuple[str, str]]:
    """stored_key of every key of the state: {key: (store key, format)}."""
    if not len(state):
        return {}
    keys, prefix = state.keys.items, f"{node_dir_name(d.file, d.name)}/"
    where = state.where.items if state.where is not None else None
    if where is not None and isinstance(state.fmt, str) and None not in where:
        fmt = state.fmt  # the usual: every result packed, of one format
        return {key: (prefix + at, fmt) for key, at in zip(keys, where)}
    return {key: _stored_at(d, state, i, key) for i, key in enumerate(keys)}


def run_phases(graph: Graph, run: Any) -> int:
    """How many waves of execution the run took: the distinct depths of the nodes that ran,
    where a node's depth counts the nodes that ran on its longest path from a root. Sensors
    observe before the phases: they count in none."""
    depth: dict[str, int] = {}
    executed = {n for n in run.order if (n in run.results or n in run.failed_keys)
                and graph.nodes[n].kind != "sensor"}
    for n in run.order:
        ran = n in run.results or n in executed and n not in run.skipped_keys
        base = max((depth.get(u, 0) for u in graph.upstream[n]), default=0)
        depth[n] = base + (1 if ran else 0)
    return len({depth[n] for n in executed})
