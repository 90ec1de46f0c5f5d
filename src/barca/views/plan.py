"""The execution phases of a pipeline, with its capacity and weights: `barca plan` and
`barca.plan()`. Reads no stored state. With `--partition`, what the selection would narrow
and skip, as far as the keys are known before anything runs."""

from __future__ import annotations

from typing import Any, Sequence

from barca.engine.driver import (capacity_warnings, open_pipeline, undeclared_env_warnings,
                                 unused_warnings)
from barca.engine.local import capacity, pool_size
from barca.views.warning_text import warning_json

def plan_json(paths: Sequence[str], partition: Sequence[str] | str | dict | None = None
              ) -> dict[str, Any]:
    """What `barca plan` prints (and `barca.plan` returns): each node's phase by depth, the
    capacity and the weights; with `partition` (as `get --partition` takes it) also
    `partition_selection`."""
    return plan_of(open_pipeline(paths), partition)


def plan_of(pipeline: Any, partition: Sequence[str] | str | dict | None = None
            ) -> dict[str, Any]:
    """`plan_json` of a pipeline already open (a server's: `GET /plan`)."""
    graph = pipeline.graph
    units, source = capacity(pipeline.project.settings.capacity)
    depth: dict[str, int] = {}
    for node_id in graph.order:
        ups = graph.upstream[node_id]
        depth[node_id] = 1 + max((depth[u] for u in ups), default=-1)
    phases = []
    for level in sorted(set(depth.values())):
        ids = [n for n in graph.order if depth[n] == level]
        phases.append({"reason": {"type": "initial"} if level == 0 else
                       {"type": "fan_in", "node_id": ids[0]},
                       "streams": [{"stream_id": f"{level}.{i}", "steps": [n]}
                                   for i, n in enumerate(ids)]})
    weights = {n: graph.nodes[n].weight for n in graph.order if graph.nodes[n].weight > 1}
    warnings = sorted([*unused_warnings(graph, graph.order),
                       *capacity_warnings(graph, graph.order, units, source),
                       *undeclared_env_warnings(graph, graph.order)],
                      key=lambda w: (w["node"], w["param"] or "", w["kind"]))
    warnings = [warning_json(w) for w in warnings]
    workers, workers_source = _pool(units, source)
    body = {"plan_version": 1, "total_steps": len(graph.order),
            "pool_size": workers, "pool_source": workers_source, "capacity": units,
            "capacity_source": source, "weights": weights, "phases": phases,
            "warnings": warnings}
    if partition:
        body["partition_selection"] = _selection(pipeline, partition)
    return body


def _selection(pipeline: Any, partition: Sequence[str] | str | dict) -> dict[str, Any]:
    """`partition_selection` as a run gives it (views.run_report), from the graph alone: per
    node carrying a selected dimension, the keys it keeps and leaves out (null when they come
    from a node's output, known only once it ran), and the nodes it skips. The selection is
    checked as a run checks it (a dimension no node has, a value no known key has: exit 2)."""
    from barca.engine.request import (check_selection, evaluate_key_expressions,
                                      parse_partition, values_known_in_advance)
    from barca.planner.planner import skipped_by_selection

    graph = pipeline.graph
    everything = frozenset(graph.order)
    selection = parse_partition(partition)
    expr_keys = evaluate_key_expressions(pipeline, everything)
    check_selection(graph, everything, selection, expr_keys)
    skipped = skipped_by_selection(graph, everything, selection)
    nodes = []
    for node_id in graph.order:
        dims = graph.nodes[node_id].dimensions
        if node_id in skipped or not any(dim.name in selection for dim in dims):
            continue
        values = [values_known_in_advance(graph, node_id, dim.name, expr_keys) for dim in dims]
        if any(v is None for v in values):
            nodes.append({"id": node_id, "selected": None, "skipped": None})
            continue
        total = kept = 1
        for dim, known in zip(dims, values):
            total *= len(known)
            kept *= len(known) if dim.name not in selection else \
                sum(1 for v in known if v in selection[dim.name])
        nodes.append({"id": node_id, "selected": kept, "skipped": total - kept})
    return {"selection": {dim: sorted(values) for dim, values in sorted(selection.items())},
            "nodes": nodes, "skipped_nodes": [n for n in graph.order if n in skipped]}


def _pool(units: int, capacity_source: str) -> tuple[int, str]:
    """The workers a run starts at most, and what set that number: `BARCA_POOL_SIZE`, the
    machine's `cores`, or the capacity setting that caps it (`BARCA_CAPACITY`, `[run]
    capacity`)."""
    import os

    size = pool_size()
    if units < size:
        return units, capacity_source
    return size, "BARCA_POOL_SIZE" if os.environ.get("BARCA_POOL_SIZE") else "cores"
