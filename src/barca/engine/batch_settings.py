"""The grouping each batched node runs with in one request: its declared `batch=`, replaced
by the request's overrides (`--batch`, `barca.get(batch=...)`, a schedule's `batch=`), with
`batches(<expression>)` evaluated (the project importable, as for `partitions(<expr>)`).

A node without `batch=` is never batched; naming one in an override is a usage error.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from barca.engine.pipeline_expressions import evaluate
from barca.graph import Graph
from barca.planner.batching import (BatchSetting, effective_batch, groups_setting, node_overrides,
                                    parse_overrides, setting_from_text)


def override_texts(batch: str | int | Sequence[str] | Mapping[str, Any] | None) -> list[str]:
    """`"all"`, `20`, `{"scored": 20}` or `["scored=20", ...]` as `--batch` texts."""
    if batch is None:
        return []
    if isinstance(batch, Mapping):
        return [f"{name}={value}" for name, value in batch.items()]
    if isinstance(batch, (str, int)):
        return [str(batch)]
    return [str(text) for text in batch]


def batch_settings(graph: Graph, root: Any, cone: frozenset[str],
                   batch: str | int | Sequence[str] | Mapping[str, Any] | None
                   ) -> dict[str, BatchSetting]:
    """node id -> the setting it runs with, for every node of the cone that declares batch=."""
    overrides = parse_overrides(override_texts(batch))
    named = node_overrides(overrides, graph.resolve_target,
                           lambda node_id: graph.nodes[node_id].batch is not None,
                           graph.partitioned)
    out = {}
    for node_id in sorted(cone):
        d = graph.nodes[node_id]
        if d.batch is None:
            continue
        declared = setting_from_text(node_id, d.batch)
        if declared is not None and declared.kind == "groups" and declared.groups is None:
            declared = _evaluated_groups(root, d, declared.strict)
        setting = effective_batch(declared, overrides.every, named.get(node_id))
        if setting is not None:
            out[node_id] = setting
    return out


def _evaluated_groups(root: Any, d: Any, strict: bool) -> BatchSetting:
    """`batches(GROUPS)`: the expression evaluated in the pipeline's module."""
    import ast

    expr = ast.unparse(ast.parse(d.batch, mode="eval").body.args[0])
    groups = evaluate(root, d.file, expr, f"the groups of {d.node_id} (batches({expr}))",
                      "make the expression give a list of lists of keys, e.g. "
                      '[["r1", "r2"], ["r3"]]')
    return groups_setting(d.node_id, groups, strict)
