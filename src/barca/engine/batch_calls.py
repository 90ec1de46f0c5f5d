"""A run's batch calls (`batch=`): which stale keys share a call, the calls' ids, and where
their time went.

The grouping rules are pure (plan.batching); this adds what they need from the run: each
node's effective setting, the labels of `batches_by` (engine.batch_labels, a separate
process), call ids unique within the run (`b1`, `b2`, ...), and the sums behind the
`[barca] batch:` lines and `batch_execution`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from barca.engine.batch_labels import batch_labels
from barca.engine.events import RunNote
from barca.engine.protocol import CallFinished
from barca.engine.result import BatchExecution
from barca.graph import Graph
from barca.planner.batching import LISTED, BatchPlan, BatchSetting, batch_calls, batch_plan
from barca.planner.model import NodePlan


class BatchCalls:
    def __init__(self, graph: Graph, root: Path, settings: Mapping[str, BatchSetting]) -> None:
        self.graph, self.root, self.settings = graph, root, settings
        self.made = 0
        self.execution: dict[str, BatchExecution] = {}  # node id -> its calls' sums
        self.planned: dict[str, BatchPlan] = {}  # a dry run's calls per node
        self.open: set[str] = set()  # ids of calls made and not finished

    def check_groups(self, plans: Mapping[str, NodePlan]) -> None:
        """A key in no group of batches(..., strict=True) is a usage error before any step
        runs, where the keys are known in advance."""
        for node_id, setting in self.settings.items():
            plan = plans.get(node_id)
            if setting.kind == "groups" and plan is not None and not plan.unknown:
                batch_calls(node_id, setting, [plan.keys[i] for i in plan.run], None, plan.dims)

    def plan_dry_run(self, plans: Mapping[str, NodePlan]) -> None:
        """A dry run's calls per batched node, over the keys it says will run."""
        for node_id, setting in self.settings.items():
            plan = plans.get(node_id)
            if plan is None or plan.unknown or not plan.run:
                continue
            keys = [plan.keys[i] for i in plan.run]
            labels = self._labels(node_id, plan, keys) if len(keys) <= LISTED else None
            self.planned[node_id] = batch_plan(node_id, setting, keys, labels, plan.dims)

    def group(self, node_id: str, plan: NodePlan, keys: Sequence[int]
              ) -> tuple[tuple[int, ...], ...]:
        """The node's keys about to run (indices into its plan), grouped into calls."""
        raw = [plan.keys[i] for i in keys]
        index = dict(zip(raw, keys))
        calls = batch_calls(node_id, self.settings[node_id], raw,
                            self._labels(node_id, plan, raw), plan.dims)
        return tuple(tuple(index[k] for k in call) for call in calls or ())

    def next_id(self) -> str:
        """A new call's id; the call is open until its `CallFinished` (which comes after its
        keys' outcomes: a run waits for it, to report the call)."""
        self.made += 1
        call_id = f"b{self.made}"
        self.open.add(call_id)
        return call_id

    def finished(self, call: CallFinished) -> None:
        """A call that wrote no key is not counted (its time is in its keys' elapsed)."""
        self.open.discard(call.batch)
        if call.written:
            self.execution.setdefault(call.node_id, BatchExecution()).add(call)

    def notes(self) -> list[RunNote]:
        """One note (`batch:<node> ...`) per batched node that wrote keys."""
        return [stats.note(node_id) for node_id, stats in self.execution.items()]

    def _labels(self, node_id: str, plan: NodePlan, keys: Sequence[str]) -> dict | None:
        if self.settings[node_id].kind != "labels":
            return None
        return batch_labels(self.root, self.graph.nodes[node_id], plan.dims, keys)
