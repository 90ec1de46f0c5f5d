"""What a run checks besides running steps, said as codes with evidence (the words are
barca.views.warning_text's): a Manual asset asked for before it was ever computed (refused), a
forced table format that fell back to pickle, a recompute that wrote different bytes; and the
environment variables its nodes declare, said before it starts.

A warning is a dict: `kind` (its code), `node`, `param` (None when it names none) and the
evidence its words are made of.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from barca.engine.request import CheckedRequest
from barca.engine.run_state import RunState
from barca.errors import UsageError
from barca.graph import Graph
from barca.planner.planner import refreshed_nodes
from barca.state import unpack_entry

TABLE_FORMATS = ("parquet", "csv")  # a forced one falls back to pickle for other values


def check_manual_computed(graph: Graph, request: CheckedRequest, order: Sequence[str],
                          has_success: Callable[[str], bool]) -> None:
    """A Manual asset is computed only when `--refresh` names it: one that has no result
    yet cannot be read, and nothing runs until it is refreshed once."""
    refreshed = refreshed_nodes(graph, request.cone, request.options)
    for node_id in order:
        d = graph.nodes[node_id]
        if d.pinned and node_id not in refreshed and not has_success(node_id):
            words = ["barca", request.command, request.target_text or "", *request.files,
                     "--refresh", d.name]
            raise UsageError(
                f"'{node_id}' has freshness=Manual and has never been computed; barca "
                "computes it only when --refresh names it",
                "compute it once: " + " ".join(w for w in words if w))


def declared_env(graph: Graph, order: Sequence[str], env: Mapping[str, str | None]
                 ) -> dict[str, dict[str, str | None]]:
    """The environment variables each node of the run declares (`env=`), with their values."""
    return {n: {name: env.get(name) for name in graph.nodes[n].env}
            for n in order if graph.nodes[n].env}


def table_format_fallback(graph: Graph, run: RunState, node_id: str) -> dict[str, Any] | None:
    """A finished node with a forced table format whose values (some keys') were not tables
    and were stored as pickle: one warning for the node, with how many keys."""
    forced = graph.nodes[node_id].serializer
    ran = run.results.get(node_id)
    if forced not in TABLE_FORMATS or not ran:
        return None
    other = [k for k, entry in ran.items() if unpack_entry(entry)[1] != forced]
    if not other:
        return None
    plan = run.plans[node_id]
    return {"kind": "serializer_fallback", "node": node_id, "param": None,
            "serializer": forced, "keys": len(other), "of": len(ran),
            "first": plan.label(min(other)) if plan.partitioned else None}


def bytes_changed_warnings(run: RunState, changed: Mapping[str, list[str]]
                           ) -> list[dict[str, Any]]:
    """Recomputes at an unchanged run hash that wrote different bytes (engine.byte_checks):
    the count, and the first five keys of a partitioned node."""
    out = []
    for node_id, keys in changed.items():
        plan = run.plans[node_id]
        out.append({"kind": "bytes_changed", "node": node_id, "param": None,
                    "count": len(keys),
                    "keys": [plan.label(k) for k in keys[:5]] if plan.partitioned else None})
    return out
