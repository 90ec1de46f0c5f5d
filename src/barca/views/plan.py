"""The execution phases of a pipeline, with its capacity and weights: `barca plan` and
`barca.plan()`. Reads no stored state."""

from __future__ import annotations

from typing import Any, Sequence

from barca.engine.driver import capacity_warnings, open_pipeline, unused_warnings
from barca.engine.local import capacity, pool_size
from barca.views.warning_text import warning_json

def plan_json(paths: Sequence[str]) -> dict[str, Any]:
    """What `barca plan` prints (and `barca.plan` returns): each node's phase by depth, the
    capacity and the weights."""
    return plan_of(open_pipeline(paths))


def plan_of(pipeline: Any) -> dict[str, Any]:
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
                       *capacity_warnings(graph, graph.order, units, source)],
                      key=lambda w: (w["node"], w["param"] or "", w["kind"]))
    warnings = [warning_json(w) for w in warnings]
    workers, workers_source = _pool(units, source)
    return {"plan_version": 1, "total_steps": len(graph.order),
            "pool_size": workers, "pool_source": workers_source, "capacity": units,
            "capacity_source": source, "weights": weights, "phases": phases,
            "warnings": warnings}


def _pool(units: int, capacity_source: str) -> tuple[int, str]:
    """The workers a run starts at most, and what set that number: `BARCA_POOL_SIZE`, the
    machine's `cores`, or the capacity setting that caps it (`BARCA_CAPACITY`, `[run]
    capacity`)."""
    import os

    size = pool_size()
    if units < size:
        return units, capacity_source
    return size, "BARCA_POOL_SIZE" if os.environ.get("BARCA_POOL_SIZE") else "cores"
