"""Decide, per node and per key, what is cached and what must run, and why.

Pure: stored state, observed sensor outputs and options come in as data; a `NodePlan` per node
comes out. No I/O, no clock. A dry run renders exactly these plans.

Cost follows change: for a key whose stored context and signature equal the current ones, the
stored run hash is reused without hashing; only changed or new keys are hashed. A node whose
readers depend on an output not known yet (a cutoff asset or a key source that will run) is
returned `unknown`, and the caller plans it again once that output exists.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import orjson

from barca.discover.model import Definition
from barca.graph import Graph
from barca.plan.hashes import context_digest, digest, run_hash
from barca.plan.keys import keys_from_value, static_keys
from barca.plan.model import KnownOutput, NodePlan, PlanOptions, Reason
from barca.state import CONTEXT, EMPTY_STATE, RUN_HASH, SIGNATURE, NodeState

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def refreshed_nodes(graph: Graph, cone: frozenset[str], options: PlanOptions) -> dict[str, Reason]:
    """Assets forced to run by --refresh / --refresh-all, with the reason each carries."""
    if options.refresh_all:
        return {n: Reason("refresh_all") for n in cone if graph.nodes[n].kind == "asset"}
    out = {n: Reason("refresh") for n in options.refresh}
    if options.cascade:
        for name in sorted(options.refresh):
            for n in sorted(graph.descendants([name]) & cone):
                if n not in out and graph.nodes[n].kind == "asset":
                    out[n] = Reason("refresh_cascade", origin=name)
    return out


def plan_nodes(graph: Graph, order: Sequence[str], states: Mapping[str, NodeState],
               known: Mapping[str, KnownOutput], options: PlanOptions,
               expr_keys: Mapping[tuple[str, str], Sequence[str]],
               refreshed: Mapping[str, Reason],
               prior: Mapping[str, NodePlan] | None = None) -> dict[str, NodePlan]:
    """Plan `order` (topological) on top of `prior` plans; returns prior plus the new ones."""
    plans: dict[str, NodePlan] = dict(prior or {})
    for node_id in order:
        plans[node_id] = plan_node(graph.nodes[node_id], graph, plans,
                                   states.get(node_id, EMPTY_STATE), known, options,
                                   expr_keys, refreshed.get(node_id))
    return plans


def plan_node(d: Definition, graph: Graph, plans: Mapping[str, NodePlan], state: NodeState,
              known: Mapping[str, KnownOutput], options: PlanOptions,
              expr_keys: Mapping[tuple[str, str], Sequence[str]],
              refresh: Reason | None) -> NodePlan:
    blocked = _unknown_upstream(d, graph, plans, known)
    if blocked:
        return NodePlan(d.node_id, d.kind, unknown=blocked[0], unknown_detail=blocked[1])
    keys, key_values = _node_keys(d, graph, plans, known, expr_keys)
    parts = _unkeyed_parts(d, graph, plans, known, options)
    labels, slots_of, value_slots = _keyed_layout(d, graph, plans, key_values)
    context = context_digest(d.definition_hash, parts)
    parts = {**dict(d.hash_parts), **parts}
    signatures = _signatures(keys, slots_of, key_values) if labels else None
    hashes, run, reasons = _decide(d, keys, context, signatures, value_slots, state, refresh)
    if reasons:
        reasons = _explain(reasons, keys, signatures, labels, context, parts, state)
    return NodePlan(d.node_id, d.kind, keys, hashes, context, parts, signatures, labels,
                    tuple(run), reasons, key_values)


def _unknown_upstream(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
                      known: Mapping[str, KnownOutput]) -> tuple[str, str] | None:
    for up_id in graph.upstream[d.node_id]:
        up_plan = plans.get(up_id)
        if up_plan is None or up_plan.unknown:
            return "upstream_unknown", up_id
        up = graph.nodes[up_id]
        needs_output = up.kind == "sensor" or up.cutoff or (
            graph.key_source(d.node_id) == up_id and not up.dimensions)
        if needs_output and up_id not in known:
            reason = "cutoff_pending" if up.cutoff else (
                "sensor_output_unknown" if up.kind == "sensor" else "partitions_unknown")
            return reason, up_id
    return None


def _node_keys(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
               known: Mapping[str, KnownOutput],
               expr_keys: Mapping[tuple[str, str], Sequence[str]]
               ) -> tuple[tuple[str, ...], dict[str, Any] | None]:
    if not d.dimensions:
        return ("",), None
    source = graph.key_source(d.node_id)
    if source is None:
        return static_keys(d, expr_keys), None
    if graph.nodes[source].dimensions:
        return plans[source].keys, None
    return keys_from_value(d.dimensions[0].name, known[source].value)


def _unkeyed_parts(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
                   known: Mapping[str, KnownOutput], options: PlanOptions) -> dict[str, str]:
    """Parts shared by every key: whole inputs, sensors read whole, the key source's code, env."""
    parts: dict[str, str] = {}
    mirrored = _mirrored_inputs(d, graph)
    source = graph.key_source(d.node_id)
    for up_id in graph.upstream[d.node_id]:
        if up_id in mirrored:
            continue
        up, up_plan = graph.nodes[up_id], plans[up_id]
        is_collect = any(s.source == up_id and s.mode == "collect" for s in d.inputs)
        if is_collect:
            hashes = known[up_id].output_hashes if up.cutoff else dict(
                zip(up_plan.keys, up_plan.run_hashes))
            parts[f"input {up_id}"] = digest([(k, hashes.get(k)) for k in up_plan.keys])
        elif up_id == source:
            if up.kind == "sensor" or not up.cutoff:
                parts[f"{'sensor' if up.kind == 'sensor' else 'input'} {up_id}"] = \
                    up_plan.run_hashes[0]
        elif up.kind == "sensor":
            parts[f"sensor {up_id}"] = digest((up_plan.run_hashes[0],
                                               known[up_id].output_hashes.get("")))
        elif up.cutoff:
            parts[f"input {up_id}"] = digest(("bytes", known[up_id].output_hashes.get("")))
        else:
            parts[f"input {up_id}"] = up_plan.run_hashes[0]
    for name in d.env:
        parts[f"env {name}"] = digest(("env", options.env.get(name)))
    return parts


def _mirrored_inputs(d: Definition, graph: Graph) -> set[str]:
    """Partitioned upstreams this node reads key by key."""
    if not d.dimensions:
        return set()
    out = set()
    for up_id in graph.upstream[d.node_id]:
        up = graph.nodes[up_id]
        if up.dimensions and not any(s.source == up_id and s.mode == "collect" for s in d.inputs):
            out.add(up_id)
    return out


def _keyed_layout(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
                  key_values: Mapping[str, Any] | None):
    """Labels of the per-key parts, where each comes from, and which slots are raw values."""
    labels: list[str] = []
    slots_of: list[Any] = []
    value_slots: list[int] = []
    for up_id in sorted(_mirrored_inputs(d, graph)):
        up = graph.nodes[up_id]
        labels.append(f"{'sensor' if up.kind == 'sensor' else 'input'} {up_id}")
        slots_of.append(plans[up_id])
    if key_values is not None:
        value_slots.append(len(labels))
        labels.append(f"value {graph.key_source(d.node_id)}")
        slots_of.append(None)
    return tuple(labels), slots_of, tuple(value_slots)


def _signatures(keys: tuple[str, ...], slots_of: list[Any],
                key_values: Mapping[str, Any] | None) -> list[list[Any]]:
    columns = []
    for source in slots_of:
        if source is None:
            columns.append([key_values[k] for k in keys])  # type: ignore[index]
        else:
            index = dict(zip(source.keys, source.run_hashes)) if source.keys != keys else None
            columns.append(source.run_hashes if index is None else [index[k] for k in keys])
    if len(columns) == 1:
        return [[v] for v in columns[0]]
    return [list(row) for row in zip(*columns)]


def _decide(d: Definition, keys: tuple[str, ...], context: str,
            signatures: list[list[Any]] | None, value_slots: tuple[int, ...],
            state: NodeState, refresh: Reason | None):
    always = d.kind in ("sensor", "task")
    done, failed = state.done, state.failed
    hashes: list[str] = []
    run: list[int] = []
    reasons: dict[int, Reason] = {}
    empty: list[Any] = []
    for i, key in enumerate(keys):
        sig = signatures[i] if signatures is not None else empty
        rec = done.get(key)
        if rec is not None and rec[CONTEXT] == context and _same_signature(rec[SIGNATURE], sig,
                                                                            value_slots):
            h = rec[RUN_HASH]
        else:
            h = run_hash(context, key, sig, value_slots)
        hashes.append(h)
        if always or refresh is not None:
            run.append(i)
            reasons[i] = refresh or Reason(d.kind)
        elif rec is None or rec[RUN_HASH] != h:
            run.append(i)
            reasons[i] = _why(key, h, rec, d, state, bool(done))
    return hashes, run, reasons


def _same_signature(stored: list[Any], current: list[Any], value_slots: tuple[int, ...]) -> bool:
    if stored != current:
        return False
    for slot in value_slots:
        a, b = stored[slot], current[slot]
        if a.__class__ is not str and (a.__class__ is not b.__class__ or
                                       orjson.dumps(a, option=_SORTED) !=
                                       orjson.dumps(b, option=_SORTED)):
            return False
    return True


def _why(key: str, h: str, rec: list[Any] | None, d: Definition, state: NodeState,
         has_any: bool) -> Reason:
    failure = state.failed.get(key)
    if failure is not None and failure[0] == h:
        return Reason("failed", origin=failure[1])
    if rec is None:
        return Reason("new_key" if has_any and d.dimensions else "never_run")
    return Reason("changed")


_PART_ORDER = ("code", "decorator argument", "decorator", "helper", "input", "sensor", "value",
               "env")


def _explain(reasons: dict[int, Reason], keys: tuple[str, ...], signatures: list[Any] | None,
             labels: tuple[str, ...], context: str, parts: Mapping[str, str],
             state: NodeState) -> dict[int, Reason]:
    """Fill in which parts changed for each "changed" key, comparing with its last success."""
    out = dict(reasons)
    for i, reason in reasons.items():
        if reason.code != "changed":
            continue
        rec = state.done[keys[i]]
        before = state.contexts.get(rec[CONTEXT])
        changed = _diff_parts(before, parts) if rec[CONTEXT] != context else []
        if signatures is not None:
            stored = rec[SIGNATURE] or []
            for slot, label in enumerate(labels):
                old = stored[slot] if slot < len(stored) else None
                if old != signatures[i][slot]:
                    changed.append(label)
        out[i] = Reason("changed", tuple(sorted(set(changed), key=_part_rank)))
    return out


def _diff_parts(before: Mapping[str, str] | None, now: Mapping[str, str]) -> list[str]:
    if before is None:
        return ["code"]
    labels = set(before) | set(now)
    return [label for label in labels if before.get(label) != now.get(label)]


def _part_rank(label: str) -> tuple[int, str]:
    for rank, prefix in enumerate(_PART_ORDER):
        if label == prefix or label.startswith(prefix + " "):
            return rank, label
    return len(_PART_ORDER), label
