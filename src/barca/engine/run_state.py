"""Everything one run knows while it runs, in one dataclass shared by the coordinator (which
dispatches and records) and its planning (which decides, with the facts it gathers). Where
each node stands in the run (planned, running, done) is the step scheduler's `Schedule`, a
frozen value each transition replaces (engine.step_scheduler)."""

from __future__ import annotations

from dataclasses import dataclass, field

from barca.engine.protocol import StepOutcome
from barca.engine.step_scheduler import Edge, Schedule, new_schedule
from barca.graph import Graph
from barca.planner.model import KnownOutput, NodePlan, Reason
from barca.state import NodeState, ran_entry
from barca.store.artifact_store import ArtifactStore
from barca.store.metadata import Stored
from barca.store.packs import where_in_pack


@dataclass
class RunState:
    """
    order       the cone's node ids in topological order
    schedule    where each node stands: planned, running (keys outstanding), done
    states      node id -> NodeState (stored per-key state, plus older results found again)
    loaded      node id -> NodeState exactly as loaded; what a snapshot write is compared with
    stored      node id -> what each snapshot row said when loaded
    refreshed   assets forced to run by --refresh / --refresh-all, with their reason
    plans       node id -> NodePlan (the latest decision for it)
    known       node id -> KnownOutput (outputs readers depend on: sensors, cutoff, key sources)
    results     node id -> key -> its position in the plan and its format, packed in one int
                (see state.ran_entry): memory per key stays small at 200,000 keys
    digests     node id -> key -> output digest, only for nodes whose readers need bytes
    packed      node id -> key -> where in a pack of the node its result is (store.packs), for
                the keys this run wrote into packs
    failed_keys node id -> keys that failed or were skipped in this run (their readers skip them)
    skipped_keys node id -> keys skipped because an input failed
    failures    the StepOutcome of each failed key
    step_times  node id -> (seconds its executed keys took, summed over attempts and keys; the
                most attempts a key took)
    served      node id -> run id -> keys another run computed while this one waited (or
                between loading and claiming them), served from its results
    rewrite     nodes whose snapshot must be written even if no key ran (history hits, digests
                looked up, keys recorded under hash scheme 1 moved to the current one)
    upgraded    node id -> how many of its keys were moved from hash scheme 1 (planner.upgrade)
    store       the artifact store recorded results live in
    written     the store this run's steps write to (a scratch store in a dry run)
    """

    order: tuple[str, ...]
    store: ArtifactStore
    written: ArtifactStore
    schedule: Schedule
    states: dict[str, NodeState] = field(default_factory=dict)
    loaded: dict[str, NodeState] = field(default_factory=dict)
    stored: dict[str, Stored] = field(default_factory=dict)
    refreshed: dict[str, Reason] = field(default_factory=dict)
    plans: dict[str, NodePlan] = field(default_factory=dict)
    known: dict[str, KnownOutput] = field(default_factory=dict)
    results: dict[str, dict[str, int]] = field(default_factory=dict)
    digests: dict[str, dict[str, str]] = field(default_factory=dict)
    packed: dict[str, dict[str, str]] = field(default_factory=dict)
    failed_keys: dict[str, list[str]] = field(default_factory=dict)
    skipped_keys: dict[str, list[str]] = field(default_factory=dict)
    failures: list[StepOutcome] = field(default_factory=list)
    step_times: dict[str, tuple[float, int]] = field(default_factory=dict)
    served: dict[str, dict[str, int]] = field(default_factory=dict)
    executed: int = 0
    rewrite: set[str] = field(default_factory=set)
    upgraded: dict[str, int] = field(default_factory=dict)

    def took_states(self, loaded: tuple[dict[str, NodeState], dict[str, Stored]]) -> None:
        """Nodes' states as the recorder loaded them (RunRecorder.load_states)."""
        states, stored = loaded
        self.states.update(states)
        self.loaded.update(states)
        self.stored.update(stored)

    def succeeded(self, outcome: StepOutcome) -> None:
        """A key's result is there: where (its position and format, and its pack's range)."""
        self.results.setdefault(outcome.node_id, {})[outcome.key] = ran_entry(outcome.index,
                                                                              outcome.format)
        where = where_in_pack(outcome.artifact_key)
        if where is not None:
            self.packed.setdefault(outcome.node_id, {})[outcome.key] = where

    def total_keys(self) -> int:
        return sum(len(p.keys) for p in self.plans.values() if not p.unknown)

    def cached_keys(self) -> int:
        """Keys served from cache (or by a concurrent run): not every key this run did not
        execute, since a failed or cancelled run leaves keys that never ran at all."""
        return sum(p.cached_count for p in self.plans.values() if not p.unknown)

    def skipped(self) -> dict[str, list[str]]:
        """Node id -> keys skipped because an input failed; a node whose keys a failure left
        unknown is skipped whole (no key listed)."""
        out = dict(self.skipped_keys)
        if self.failures:
            out.update({n: [] for n in self.order if (p := self.plans.get(n)) is not None
                        and p.unknown})
        return out


def new_run_state(graph: Graph, order: tuple[str, ...], store: ArtifactStore) -> RunState:
    """A run's state over the cone `order` (topological), nothing planned yet. The scheduler
    sees each node's inputs: a failed key of a partitioned input blocks only the same key of
    a partitioned reader that reads it key for key (not collected), else every key."""
    inputs = {}
    for node_id in order:
        d = graph.nodes[node_id]
        collected = {s.source for s in d.inputs if s.mode == "collect"}
        inputs[node_id] = tuple(
            Edge(up, bool(graph.nodes[up].dimensions and d.dimensions) and up not in collected)
            for up in graph.upstream[node_id])
    return RunState(order, store, store, new_schedule(order, inputs))
