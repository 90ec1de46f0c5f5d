"""What a worker is handed for one key of a node: the function, the key's arguments, the
store key of each input's result (or the key's own value, inline), and the key to write the
result to, in the run's artifact store (named by its address), with the digest of the pipeline
file the run was planned with.

Functions of the graph and the run's plans; `artifact(node_id, key)` finds the store key
of a result this run wrote or the state recorded (see `engine.result.locate_key`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from barca.discover.model import Definition
from barca.engine.protocol import CallSpec, InputRef, Known, StepSpec
from barca.graph import Graph
from barca.planner.keys import key_args, key_pairs, label_order, labels_of
from barca.planner.missing import reads_inline
from barca.planner.model import NodePlan
from barca.store.paths import artifact_stem, key_stem, node_dir_name
from barca.store.sinks import destination

Artifact = Callable[[str, str], tuple[str, str]]  # (node id, key) -> (store key, format)


class NodeSteps:
    """The steps of keys of one node's plan, reading and writing the store at address `store`
    (writing to `scratch` instead, when given: a dry run's); `known_chunks` for a key source
    (barca.store.key_source_chunks). What every key of the node shares (the definition, its
    directory, how each input is read, an input read whole) is worked out once: a first run
    makes one spec per key, 200,000 of them."""

    def __init__(self, graph: Graph, plans: Mapping[str, NodePlan], node_id: str,
                 plan: NodePlan, store: str, scratch: str, artifact: Artifact,
                 known_chunks: Known = ((), (), ())) -> None:
        d = self.d = graph.nodes[node_id]
        self.graph, self.plans, self.node_id, self.plan = graph, plans, node_id, plan
        self.artifact, self.store, self.scratch, self.known = artifact, store, scratch, known_chunks
        self.key_source = graph.is_key_source(node_id)
        self.retries = max(1, d.retries)
        # one dimension: its name, whose key is its value (key_args, key_pairs); else None
        self.dim = d.dimensions[0].name if len(d.dimensions) == 1 and plan.partitioned \
            else None
        self.directory = node_dir_name(d.file, d.name)
        self.inputs = [self._input_plan(spec) for spec in d.inputs]

    def _input_plan(self, spec: Any) -> tuple[str, Any]:
        """How a key reads one input: ("ref", the InputRef every key shares), ("inline", its
        param) or ("artifact", (param, source, whether keyed, annotation))."""
        d, plan = self.d, self.plan
        if spec.mode == "order":
            return "ref", InputRef(spec.param, "none")
        if spec.mode == "collect":  # every key reads the same results
            return "ref", _input_ref(self.graph, self.plans, d, spec, plan,
                                     plan.run[0] if plan.run else 0, self.artifact)
        if reads_inline(self.graph, plan, d.node_id, spec.source):
            return "inline", spec.param
        return "artifact", (spec.param, spec.source,
                            bool(self.graph.nodes[spec.source].dimensions),
                            d.annotation(spec.param))

    def spec(self, i: int, previous: tuple[str, str, str | None] | None = None) -> StepSpec:
        """The step for key `i` of the plan; `previous`, a sensor key's last observation,
        which a `(False, value)` return keeps."""
        d, plan = self.d, self.plan
        key = plan.keys[i]
        run_hash = plan.run_hashes[i]
        if self.dim is not None:
            step_id = f"{self.node_id}[{self.dim}={key}]"
            args = pairs = ((self.dim, key),)
        else:
            step_id = f"{self.node_id}[{plan.label(key)}]" if plan.partitioned else self.node_id
            args = tuple(key_args(d, key).items())
            pairs = key_pairs(d, key)
        inputs = []
        for how, what in self.inputs:
            if how == "ref":
                inputs.append(what)
            elif how == "inline":
                inputs.append(InputRef(what, "inline", value=plan.key_values[i]))
            else:
                param, source, keyed, annotation = what
                found = self.artifact(source, key if keyed else "")
                inputs.append(InputRef(param, "artifact", (found[0],), (found[1],),
                                       annotation=annotation))
        stem = f"{self.directory}/{key_stem(pairs)}.{run_hash}" if pairs \
            else f"{self.directory}/{run_hash}"
        return StepSpec(step_id, self.node_id, key, i, d.kind, d.file, d.function, args,
                        tuple(inputs), stem, run_hash, d.serializer, self.retries,
                        d.retry_backoff, d.timeout_seconds, self.key_source, self.known,
                        previous, sink_targets(d, key), d.weight, self.store, self.scratch,
                        d.source_digest)


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
                    plan.dims, keys,
                    tuple(f"{node_id}[{label}]" for label in labels_of(plan.dims, keys)),
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

