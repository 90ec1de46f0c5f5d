"""Cached results a run is about to use whose files are gone (deleted by hand, a disk cleaned):
found before dispatch, so the coordinator recomputes them first instead of failing a step.

Only what something reads is checked (and a target's own results, which the user asked for),
so pruned intermediates cost nothing. `exists(node_id, key)` says whether a result's file is
on disk.
"""

from __future__ import annotations

from typing import Callable, Collection, Mapping

from barca.engine.step_specs import reads_inline
from barca.graph import Graph
from barca.plan.model import NodePlan

Exists = Callable[[str, str], bool]
TARGET_CHECK_LIMIT = 1000  # a target with more keys is not stat-ed key by key


def missing_target_keys(node_id: str, plan: NodePlan, exists: Exists) -> list[str]:
    """Keys of a cached target asset whose result file is gone."""
    if plan.unknown or plan.kind != "asset" or len(plan.keys) > TARGET_CHECK_LIMIT:
        return []
    ran = {plan.keys[i] for i in plan.run}
    return [k for k in plan.keys if k not in ran and not exists(node_id, k)]


def missing_inputs(graph: Graph, plans: Mapping[str, NodePlan], node_id: str,
                   failed_keys: Mapping[str, list[str]], results: Mapping[str, Mapping],
                   complete: Collection[str], exists: Exists) -> dict[str, list[str]]:
    """Per node this one reads: the keys its stale keys will read that did not run here, will
    not run, did not fail, and whose files are gone."""
    plan = plans[node_id]
    out: dict[str, list[str]] = {}
    if not plan.run:
        return out
    for spec in graph.nodes[node_id].inputs:
        if spec.mode == "order":
            continue
        if reads_inline(graph, plan, node_id, spec.source):
            continue  # no file is read
        up = plans[spec.source]
        bad = set(failed_keys.get(spec.source, ()))
        partitioned_up = bool(graph.nodes[spec.source].dimensions)
        if bad and (spec.mode == "collect" or not partitioned_up):
            continue  # the whole node is blocked; dispatch skips it
        if spec.mode == "collect":
            wanted = up.keys
        elif partitioned_up:
            wanted = tuple(plan.keys[i] for i in plan.run)
        else:
            wanted = ("",)
        ran = results.get(spec.source, {})
        will_run = {up.keys[i] for i in up.run} if spec.source not in complete else ()
        out.setdefault(spec.source, []).extend(
            k for k in wanted if k not in ran and k not in bad and k not in will_run
            and not exists(spec.source, k))
    # a node read twice (say, as two parameters) names its keys once
    return {source: list(dict.fromkeys(keys)) for source, keys in out.items() if keys}
