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

from barca.discover.model import Definition
from barca.graph import Graph
from barca.planner.hashes import column_digest, context_digest, digest, run_hash
from barca.planner.keys import in_declared_order, key_args, label_order, static_keys
from barca.planner.model import KnownOutput, NodePlan, PlanOptions, Reason
from barca.planner.upgrade import legacy_context, upgraded
from barca.packed_columns import HashColumn, JsonColumn, same_value
from barca.state import EMPTY_STATE, NodeState

UNPARTITIONED = JsonColumn([""])
NEVER_RUN, NEW_KEY = Reason("never_run"), Reason("new_key")  # shared: one object, many keys

def refreshed_nodes(graph: Graph, cone: frozenset[str], options: PlanOptions) -> dict[str, Reason]:
    """Assets forced to run by --refresh / --refresh-all, with the reason each carries."""
    if options.refresh_all:
        return {n: Reason("refresh_all") for n in cone if graph.nodes[n].kind == "asset"}
    out = {n: Reason("refresh") for n in options.refresh}
    if options.cascade:
        for name in sorted(options.refresh):
            for n in sorted(_cascade(graph, name) & cone):
                if n not in out and graph.nodes[n].kind == "asset":
                    out[n] = Reason("refresh_cascade", origin=name)
    return out


def _cascade(graph: Graph, name: str) -> set[str]:
    """What a refresh of `name` forces to run: its readers, and theirs, but not past an asset
    whose readers hash its bytes (cutoff=True): they rerun only if those bytes change. A
    Manual asset reruns only when named, and its readers hash its bytes too."""
    seen: set[str] = set()
    stack = [] if graph.nodes[name].bytes_read else list(graph.downstream[name])
    while stack:
        node = stack.pop()
        if node in seen or graph.nodes[node].pinned:  # a Manual asset waits for its own
            continue
        seen.add(node)
        if not graph.nodes[node].bytes_read:
            stack.extend(graph.downstream[node])
    return seen


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
    blocked = _unknown_upstream(d, graph, plans, known) or _skipped_by_selection(
        d, graph, plans, options)
    if blocked:
        return NodePlan(d.node_id, d.kind, partitioned=bool(d.dimensions), unknown=blocked[0],
                        unknown_detail=blocked[1])
    keys, key_values, order = _node_keys(d, graph, plans, known, expr_keys)
    selected_from = None
    if any(dim.name in options.partition for dim in d.dimensions):
        source = plans.get(graph.key_source(d.node_id) or "")
        # keys taken from a node the selection already narrowed: count from its full set
        selected_from = source.selected_from if source is not None and \
            source.selected_from is not None else len(keys)
        keys, key_values, order = narrow_keys(d, keys, key_values, order, options.partition)
    parts = _unkeyed_parts(d, graph, plans, known, options)
    labels, columns, value_slots = _keyed_columns(d, graph, plans, known, keys, key_values)
    context = context_digest(d.definition_hash, parts)
    legacy = legacy_context(d.legacy_hash, parts, state, context)
    parts = {**dict(d.hash_parts), **parts}
    if legacy is not None:  # recorded under hash scheme 1 for this very code: cached
        state = upgraded(state, legacy, context, parts)
    hashes, run = _decide(keys, context, columns, value_slots, state)
    always = d.kind in ("sensor", "task")
    pinned: dict[int, Reason] = {}
    if always or refresh is not None:
        reasons = dict.fromkeys(range(len(keys)), refresh or Reason(d.kind))
        run = list(range(len(keys)))
    else:
        reasons = _explain(run, keys, hashes, columns, labels, context, parts, state, d)
        if d.pinned and run:
            run, hashes, pinned = _pin(run, keys, hashes, reasons, state)
    return NodePlan(d.node_id, d.kind, keys, hashes, context, parts, columns, labels,
                    in_declared_order(run, order), reasons, key_values,
                    partitioned=bool(d.dimensions),
                    dims=tuple(sorted(dim.name for dim in d.dimensions)),
                    selected_from=selected_from, pinned=pinned, upgraded_from=legacy,
                    order=order)


def _pin(run: list[int], keys: JsonColumn, hashes: HashColumn, reasons: dict[int, Reason],
         state: NodeState) -> tuple[list[int], HashColumn, dict[int, Reason]]:
    """A Manual asset's stale keys that have a result keep it (at its old run hash) instead
    of running; why each would have run is kept to be shown. Keys never computed still run."""
    pinned: dict[int, Reason] = {}
    old: dict[int, str] = {}
    left = []
    if len(run) > 16:
        state.keys.indexed()
    for i in run:
        j = state.find(keys[i])
        if j is None:
            left.append(i)
            continue
        pinned[i] = reasons.pop(i)
        old[i] = state.run_hash[j]
    return left, hashes.replaced(old) if old else hashes, pinned


def _unknown_upstream(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
                      known: Mapping[str, KnownOutput]) -> tuple[str, str] | None:
    for up_id in graph.upstream[d.node_id]:
        up_plan = plans.get(up_id)
        if up_plan is None or up_plan.unknown:
            skipped = up_plan is not None and up_plan.unknown == "partition_selection"
            return ("partition_selection" if skipped else "upstream_unknown"), up_id
        up = graph.nodes[up_id]
        needs_output = up.kind == "sensor" or up.bytes_read or (
            graph.key_source(d.node_id) == up_id and not up.dimensions)
        if needs_output and up_id not in known:
            reason = "cutoff_pending" if up.bytes_read else (
                "sensor_output_unknown" if up.kind == "sensor" else "partitions_unknown")
            return reason, up_id
    return None


def narrow_keys(d: Definition, keys: JsonColumn, key_values: JsonColumn | None,
                order: JsonColumn | None, selection: Mapping[str, frozenset[str]]
                ) -> tuple[JsonColumn, JsonColumn | None, JsonColumn | None]:
    """The keys `--partition` selects on the dimensions this node has (their values and
    declared positions too)."""
    names = [dim.name for dim in d.dimensions]
    if not any(name in selection for name in names):
        return keys, key_values, order
    if len(names) == 1:
        wanted = selection[names[0]]
        kept = [i for i, k in enumerate(keys) if k in wanted]
    else:
        kept = [i for i, k in enumerate(keys)
                if all(v in selection[n] for n, v in key_args(d, k).items() if n in selection)]
    values = None if key_values is None else JsonColumn([key_values[i] for i in kept])
    positions = None if order is None else JsonColumn([order[i] for i in kept])
    return JsonColumn([keys[i] for i in kept]), values, positions


def _skipped_by_selection(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
                          options: PlanOptions) -> tuple[str, str] | None:
    """A node reading every key of a narrowed node cannot run on part of them."""
    up_id = _reads_every_narrowed_key(d, graph, options.partition)
    return None if up_id is None else ("partition_selection", up_id)


def _reads_every_narrowed_key(d: Definition, graph: Graph,
                              selection: Mapping[str, frozenset[str]]) -> str | None:
    """The upstream whose keys `selection` narrows while `d` reads all of them, if any."""
    if not selection:
        return None
    own = {dim.name for dim in d.dimensions}
    for up_id in graph.upstream[d.node_id]:
        up = graph.nodes[up_id]
        up_dims = {dim.name for dim in up.dimensions}
        narrowed = bool(up_dims & set(selection))
        if narrowed and (own != up_dims or any(
                s.source == up_id and s.mode == "collect" for s in d.inputs)):
            return up_id
    return None


def skipped_by_selection(graph: Graph, cone: frozenset[str],
                         selection: Mapping[str, frozenset[str]]) -> dict[str, str]:
    """The nodes of `cone` that `--partition` skips, each with the narrowed node it reads every
    key of (directly or through a skipped upstream): known from the graph alone, so that a
    request naming one is refused before anything runs."""
    skipped: dict[str, str] = {}
    if not selection:
        return skipped
    for node_id in graph.order:
        if node_id not in cone:
            continue
        through = next((skipped[u] for u in graph.upstream[node_id] if u in skipped), None)
        through = through or _reads_every_narrowed_key(graph.nodes[node_id], graph, selection)
        if through is not None:
            skipped[node_id] = through
    return skipped


def _node_keys(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
               known: Mapping[str, KnownOutput],
               expr_keys: Mapping[tuple[str, str], Sequence[str]]
               ) -> tuple[JsonColumn, JsonColumn | None, JsonColumn | None]:
    """A node's keys, their values from a keyed source, their declared order (plan.order)."""
    if not d.dimensions:
        return UNPARTITIONED, None, None
    source = graph.key_source(d.node_id)
    if source is None:
        return JsonColumn(static_keys(d, expr_keys)), None, None
    if graph.nodes[source].dimensions:
        return plans[source].keys, None, plans[source].order
    return known[source].keys, known[source].values, known[source].order


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
        if any(s.source == up_id and s.mode == "collect" for s in d.inputs):
            hashes = known[up_id].output_hashes if up.bytes_read else up_plan.run_hashes
            parts[f"input {up_id}"] = column_digest(*_in_label_order(up_plan, hashes))
        elif up_id == source:
            if up.kind == "sensor" or not up.bytes_read and not _only_keys_from(d, up_id, known):
                parts[f"{'sensor' if up.kind == 'sensor' else 'input'} {up_id}"] = \
                    up_plan.run_hashes[0]
        elif up.kind == "sensor":
            parts[f"sensor {up_id}"] = digest((up_plan.run_hashes[0],
                                               known[up_id].output_hashes[0]))
        elif up.pinned:  # as the published barca: a refresh under new code reruns readers
            parts[f"input {up_id}"] = digest(("manual", up_plan.run_hashes[0],
                                              known[up_id].output_hashes[0]))
        elif up.bytes_read:
            parts[f"input {up_id}"] = digest(("bytes", known[up_id].output_hashes[0]))
        else:
            parts[f"input {up_id}"] = up_plan.run_hashes[0]
    for name in d.env:
        parts[f"env {name}"] = digest(("env", options.env.get(name)))
    return parts


def _in_label_order(plan: NodePlan, hashes: Any) -> tuple[Any, Any]:
    """A collect() input's keys and their hashes in the order the reader gets its list: by
    key label, so that the same keys declared in another order change no hash."""
    order = label_order(plan.dims, plan.keys)
    if order is None:
        return plan.keys, hashes
    keys, hexes = plan.keys.items, list(hashes)
    return JsonColumn([keys[i] for i in order]), HashColumn([hexes[i] for i in order])


def _only_keys_from(d: Definition, source: str, known: Mapping[str, KnownOutput]) -> bool:
    """An asset returning a list gives this node its keys and nothing else (no parameter
    reads the list): a key's result depends on the key alone, so a new element runs only its
    key, not every key again."""
    return known[source].values is None and not any(
        s.source == source and s.mode != "order" for s in d.inputs)


def _mirrored_inputs(d: Definition, graph: Graph) -> list[str]:
    """Partitioned upstreams this node reads key by key, sorted."""
    if not d.dimensions:
        return []
    return sorted(up_id for up_id in graph.upstream[d.node_id]
                  if graph.nodes[up_id].dimensions
                  and not any(s.source == up_id and s.mode == "collect" for s in d.inputs))


def _keyed_columns(d: Definition, graph: Graph, plans: Mapping[str, NodePlan],
                   known: Mapping[str, KnownOutput], keys: JsonColumn,
                   key_values: JsonColumn | None):
    """Each per-key part as a column aligned with `keys`: labels, columns, raw-value slots.

    A key of a partitioned upstream contributes its run hash, or the digest of its bytes when
    the upstream is a sensor (its code never changes what it observes) or a cutoff asset.
    """
    labels: list[str] = []
    columns: list[Any] = []
    value_slots: list[int] = []
    for up_id in _mirrored_inputs(d, graph):
        up = graph.nodes[up_id]
        source = plans[up_id]
        labels.append(f"{'sensor' if up.kind == 'sensor' else 'input'} {up_id}")
        column = known[up_id].output_hashes if up.kind == "sensor" or up.bytes_read \
            else source.run_hashes
        if source.keys is keys or source.keys == keys:
            columns.append(column)
        else:
            source.keys.indexed()
            columns.append(HashColumn(column[source.keys.index(k)] for k in keys))
    if key_values is not None:
        value_slots.append(len(labels))
        labels.append(f"value {graph.key_source(d.node_id)}")
        columns.append(key_values)
    return tuple(labels), tuple(columns), tuple(value_slots)


def _decide(keys: JsonColumn, context: str, columns: tuple[Any, ...],
            value_slots: tuple[int, ...], state: NodeState) -> tuple[HashColumn, list[int]]:
    """Run hash per key and the positions whose hash has no success on record.

    Whole columns are compared first (in C); single keys are visited only where they differ.
    """
    same_shape = (len(state) == len(keys) and len(state.signature) == len(columns)
                  and state.uniform_context() == context and state.keys == keys)
    if same_shape:
        differ = sorted({i for new, old in zip(columns, state.signature)
                         for i in new.differing(old)})
        if not differ:
            return state.run_hash, []
        changes = {i: run_hash(context, keys[i], [c[i] for c in columns], value_slots)
                   for i in differ}
        return state.run_hash.replaced(changes), [
            i for i in differ if changes[i] != state.run_hash[i]]
    if len(keys) > 16:
        state.keys.indexed()
    hashes: list[str] = []
    run: list[int] = []
    for i, key in enumerate(keys):
        sig = [c[i] for c in columns]
        j = state.find(key)
        if j is not None and state.context_at(j) == context and all(
                map(same_value, state.signature_at(j), sig)) and len(sig) == len(state.signature):
            hashes.append(state.run_hash[j])
            continue
        h = run_hash(context, key, sig, value_slots)
        hashes.append(h)
        if j is None or state.run_hash[j] != h:
            run.append(i)
    return HashColumn(hashes), run


_PART_ORDER = ("code", "decorator argument", "decorator", "helper", "input", "sensor", "value",
               "env")


def _explain(run: list[int], keys: JsonColumn, hashes: HashColumn, columns: tuple[Any, ...],
             labels: tuple[str, ...], context: str, parts: Mapping[str, str], state: NodeState,
             d: Definition) -> dict[int, Reason]:
    """Why each key runs: never run, new key, last attempt failed, or which parts changed."""
    reasons: dict[int, Reason] = {}
    has_any = len(state) > 0
    aligned = state.keys == keys  # same keys in the same places: no lookup needed
    if len(run) > 16 and not aligned:
        state.keys.indexed()
    for i in run:
        key = keys[i]
        failure = state.failed.get(key)
        if failure is not None and failure[0] == hashes[i]:
            reasons[i] = Reason("failed", origin=failure[1])
            continue
        j = i if aligned else state.find(key)
        if j is None:
            reasons[i] = NEW_KEY if has_any and d.dimensions else NEVER_RUN
            continue
        changed = []
        if state.context_at(j) != context:
            changed = _diff_parts(state.parts.get(state.context_at(j)), parts,
                                  dict(d.legacy_parts))
        old = state.signature_at(j)
        for slot, label in enumerate(labels):
            if slot >= len(old) or not same_value(old[slot], columns[slot][i]):
                changed.append(label)
        reasons[i] = Reason("changed", tuple(sorted(set(changed), key=_part_rank)))
    return reasons


def _diff_parts(before: Mapping[str, str] | None, now: Mapping[str, str],
                legacy: Mapping[str, str]) -> list[str]:
    """The labels whose digest differs; a part recorded under hash scheme 1 is compared with
    scheme 1's digest of it now (`legacy`), so that only what really changed is named."""
    if before is None:
        return ["code"]
    labels = set(before) | set(now)
    return [label for label in labels
            if before.get(label) not in (now.get(label), legacy.get(label, ""))]


def _part_rank(label: str) -> tuple[int, str]:
    for rank, prefix in enumerate(_PART_ORDER):
        if label == prefix or label.startswith(prefix + " "):
            return rank, label
    return len(_PART_ORDER), label
