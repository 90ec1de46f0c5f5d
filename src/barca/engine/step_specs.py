"""What a worker is handed for one key of a node: the function, the key's arguments, the
store key of each input's result (or the key's own value, inline), and the key to write the
result to, in the run's artifact store (named by its address), with the digest of the pipeline
file the run was planned with.

Pure functions of the graph and the run's plans; `artifact(node_id, key)` finds the store key
of a result this run wrote or the state recorded (see `engine.result.locate_key`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from barca.discover.model import Definition
from barca.engine.protocol import CallSpec, InputRef, Known, StepSpec
from barca.graph import Graph
from barca.planner.keys import key_args, key_pairs, label_order
from barca.planner.missing import reads_inline
from barca.planner.model import NodePlan
from barca.store.paths import artifact_stem
from barca.store.sinks import destination

Artifact = Callable[[str, str], tuple[str, str]]  # (node id, key) -> (store key, format)


def step_spec(graph: Graph, plans: Mapping[str, NodePlan], node_id: str, plan: NodePlan,
              i: int, store: str, scratch: str, artifact: Artifact,
              known_chunks: Known = ((), (), ()),
              previous: tuple[str, str, str | None] | None = None) -> StepSpec:
    """The step for key `i` of the node's plan, reading and writing the store at address
    `store` (writing to `scratch` instead, when given: a dry run's); `known_chunks` for a key
    source (barca.store.key_source_chunks); `previous`, a sensor key's last observation,
    which a `(False, value)` return keeps."""
    d = graph.nodes[node_id]
    key = plan.keys[i]
    step_id = f"{node_id}[{plan.label(key)}]" if plan.partitioned else node_id

    inputs = tuple(_input_ref(graph, plans, d, spec, plan, i, artifact) for spec in d.inputs)
    stem = artifact_stem(d.file, d.name, key_pairs(d, key), plan.run_hashes[i])
    return StepSpec(step_id, node_id, key, i, d.kind, d.file, d.function,
                    tuple(key_args(d, key).items()), inputs, stem, plan.run_hashes[i],
                    d.serializer, max(1, d.retries), d.retry_backoff, d.timeout_seconds,
                    graph.is_key_source(node_id), known_chunks, previous,
                    sink_targets(d, key), d.weight, store, scratch, d.source_digest)


def call_spec(graph: Graph, plans: Mapping[str, NodePlan], node_id: str, plan: NodePlan,
              indices: tuple[int, ...], batch: str, store: str, artifact: Artifact) -> CallSpec:
    """The batch call `batch` over the keys at `indices` of the node's plan; inputs read
    key for key carry one result (or value) per key of the call, in the call's order."""
    d = graph.nodes[node_id]
    keys = tuple(plan.keys[i] for i in indices)
    inputs = []
    for spec in d.inputs:
        per_key = spec.mode not in ("order", "collect")
        if per_key and reads_inline(graph, plan, node_id, spec.source):
            inputs.append(InputRef(spec.param, "keyed_inline",
                                   value=tuple(plan.key_values[i] for i in indices)))
        elif per_key and graph.nodes[spec.source].dimensions:
            found = [artifact(spec.source, key) for key in keys]
            inputs.append(InputRef(spec.param, "keyed", tuple(f[0] for f in found),
                                   tuple(f[1] for f in found),
                                   annotation=d.annotation(spec.param)))
        else:  # read whole, once per call
            inputs.append(_input_ref(graph, plans, d, spec, plan, indices[0], artifact))
    return CallSpec(f"{node_id}[batch={batch}]", node_id, batch, d.kind, d.file, d.function,
                    plan.dims, keys, tuple(f"{node_id}[{plan.label(k)}]" for k in keys),
                    indices, tuple(plan.run_hashes[i] for i in indices),
                    tuple(artifact_stem(d.file, d.name, key_pairs(d, plan.keys[i]),
                                        plan.run_hashes[i]) for i in indices),
                    tuple(inputs), d.serializer, max(1, d.retries), d.retry_backoff,
                    d.timeout_seconds,
                    tuple(sink_targets(d, k) for k in keys) if d.sinks else (), d.weight,
                    store, d.source_digest)


def sink_targets(d: Definition, key: str) -> tuple[tuple[str, str | None], ...]:
    """Where each @sink of the node writes this key, with its serializer."""
    if not d.sinks:
        return ()
    pairs = key_pairs(d, key)
    return tuple((destination(s.path, pairs), s.serializer) for s in d.sinks)


def _input_ref(graph: Graph, plans: Mapping[str, NodePlan], d: Definition, spec: Any,
               plan: NodePlan, i: int, artifact: Artifact) -> InputRef:
    annotation = d.annotation(spec.param)
    key = plan.keys[i]
    if spec.mode == "order":
        return InputRef(spec.param, "none")
    up = graph.nodes[spec.source]
    if spec.mode == "collect":  # every key's result, in label order (see plan.keys.label_order)
        up_plan = plans[spec.source]
        keys = up_plan.keys.items
        order = label_order(up_plan.dims, keys)
        found = [artifact(spec.source, k)
                 for k in (keys if order is None else [keys[i] for i in order])]
        return InputRef(spec.param, "artifacts", tuple(f[0] for f in found),
                        tuple(f[1] for f in found), annotation=annotation)
    if reads_inline(graph, plan, d.node_id, spec.source):
        return InputRef(spec.param, "inline", value=plan.key_values[i])
    found = artifact(spec.source, key if up.dimensions else "")
    return InputRef(spec.param, "artifact", (found[0],), (found[1],),
                    annotation=annotation)

