"""Cached results a run is about to use whose files are gone (deleted by hand, a disk cleaned):
found before dispatch, so that they are computed again first instead of failing a step.

Only what something reads is checked (and a target's own results, which the user asked for),
so pruned intermediates cost nothing. Pure: these functions name the keys whose files must be
looked at, the caller looks, and `reopen` plans the ones found missing again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Container, Mapping, Sequence

from barca.graph import Graph
from barca.planner.keys import in_declared_order
from barca.planner.model import NodePlan, Reason

TARGET_CHECK_LIMIT = 1000  # a target with more keys is not stat-ed key by key


def reads_inline(graph: Graph, plan: NodePlan, node_id: str, source: str) -> bool:
    """The node reads its key source's value per key, carried in the step itself: each key gets
    only its own value (`key_values` is set only for a dict source that is not partitioned)."""
    return graph.key_source(node_id) == source and plan.key_values is not None


def target_keys_to_check(plan: NodePlan) -> list[str]:
    """Keys of a cached target asset whose files must be there."""
    if plan.unknown or plan.kind != "asset" or len(plan.keys) > TARGET_CHECK_LIMIT:
        return []
    ran = {plan.keys[i] for i in plan.run}
    return [k for k in plan.keys if k not in ran]


def input_keys_to_check(graph: Graph, plans: Mapping[str, NodePlan], node_id: str,
                        failed_keys: Mapping[str, list[str]], results: Mapping[str, Mapping],
                        complete: Container[str]) -> dict[str, list[str]]:
    """Per node this one reads: the keys its stale keys will read that did not run here, will
    not run and did not fail, so must be read from their cached files."""
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
            k for k in wanted if k not in ran and k not in bad and k not in will_run)
    # a node read twice (say, as two parameters) names its keys once
    return {source: list(dict.fromkeys(keys)) for source, keys in out.items() if keys}


def reopen(plan: NodePlan, keys: Sequence[str]) -> NodePlan:
    """The plan with `keys` (whose files are gone) to run again, as "artifact_missing"."""
    index = {k: i for i, k in enumerate(plan.keys)}
    extra = sorted(index[k] for k in keys)
    run = in_declared_order(set(plan.run) | set(extra), plan.order)
    reasons = {**plan.reasons, **{i: Reason("artifact_missing") for i in extra}}
    return replace(plan, run=run, reasons=reasons)
