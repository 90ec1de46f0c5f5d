"""The planner's vocabulary: why a key runs, what a node will do, what the caller must supply.

Reasons are codes with their evidence; sentences are written only by views/plan_text.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from barca.packed_columns import HashColumn, JsonColumn
from barca.planner.batching import BatchSetting
from barca.planner.keys import label_of


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a key will run.

    code: "task" | "sensor" | "refresh" | "refresh_cascade" | "refresh_all" | "never_run" |
          "new_key" | "changed" | "failed" | "artifact_missing"
    changed: part labels that differ from the last success ("code", "input pipeline.py:a",
             "value pipeline.py:versions", "helper helpers.py:clean", "env TOKEN", ...)
    origin: for refresh_cascade, the refreshed node it comes from; for failed, the error line
    """

    code: str
    changed: tuple[str, ...] = ()
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class KnownOutput:
    """What a node produced, when its readers depend on it (sensor, cutoff asset, key source).

    output_hashes: digest of each key's bytes, aligned with the node's keys
    keys, values:  for a `partitions_from` source, the keys it defines and (dict source) each
                   key's value, aligned
    order:         for a dict source, whose keys are sorted, each key's position in the dict's
                   own order (its declared key order); None when that is the sorted order
    """

    output_hashes: HashColumn
    keys: JsonColumn | None = None
    values: JsonColumn | None = None
    order: JsonColumn | None = None


@dataclass(frozen=True, slots=True)
class PlanOptions:
    refresh: frozenset[str] = frozenset()
    refresh_all: bool = False
    cascade: bool = True
    env: Mapping[str, str | None] = field(default_factory=dict)
    partition: Mapping[str, frozenset[str]] = field(default_factory=dict)  # dim -> values
    batch: Mapping[str, BatchSetting] = field(default_factory=dict)  # batched node -> grouping


@dataclass(frozen=True, slots=True)
class NodePlan:
    """One node's decision. Lists are aligned with `keys` and never mutated after planning.

    keys:        raw partition keys in declared order (see plan.keys), but sorted for keys
                 from a dict source (so that a dict's order changes nothing a tick compares);
                 [""] when unpartitioned
    order:       for keys from a dict source, each key's position in the declared order
                 (the dict's), None when that is the order of `keys`
    run_hashes:  the run hash of each key
    signatures:  one column per keyed hash part (signature_labels names them), aligned
    run:         indices of the keys that will execute, in declared order
    reasons:     index -> Reason, for each index in `run`
    key_values:  each key's value from a keyed source, passed to the step inline
    unknown:     set when the node cannot be decided before something else runs:
                 "partitions_unknown" | "cutoff_pending" | "upstream_unknown"
                 | "partition_selection" (a fan-in over keys that --partition left out)
    """

    node_id: str
    kind: str
    keys: JsonColumn = field(default_factory=JsonColumn)
    run_hashes: HashColumn = field(default_factory=HashColumn)
    context: str = ""
    context_parts: Mapping[str, str] = field(default_factory=dict)
    signatures: tuple[Any, ...] = ()
    signature_labels: tuple[str, ...] = ()
    run: tuple[int, ...] = ()
    reasons: Mapping[int, Reason] = field(default_factory=dict)
    key_values: JsonColumn | None = None
    unknown: str | None = None
    unknown_detail: str | None = None
    partitioned: bool = False
    dims: tuple[str, ...] = ()  # dimension names, sorted
    selected_from: int | None = None  # how many keys there were before --partition narrowed them
    # a Manual asset's keys that are stale but keep their last result (index -> why they
    # would run); their run_hashes are those of the kept results
    pinned: Mapping[int, Reason] = field(default_factory=dict)
    # the hash scheme 1 context whose keys this plan counts as recorded under `context`
    # (planner.upgrade); the caller stores the state with them moved
    upgraded_from: str | None = None
    order: JsonColumn | None = None

    def label(self, key: str) -> str:
        """`retailer=r1`: the key as users see it (see barca.planner.keys)."""
        return label_of(self.dims, key)

    def reasons_pinned_first(self) -> Reason:
        """Why the first pinned key (in key order) would run."""
        return self.pinned[min(self.pinned)]

    @property
    def cached_count(self) -> int:
        return len(self.keys) - len(self.run)

    @property
    def action(self) -> str:
        if self.unknown == "partition_selection":
            return "skipped"
        if self.unknown:
            return "unknown"
        if not self.run:
            return "cached"
        if self.partitioned and len(self.run) < len(self.keys):
            return "partial"
        return "run"
