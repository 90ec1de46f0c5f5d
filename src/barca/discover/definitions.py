"""`discover()`: from pipeline files to frozen, sorted `Definition`s, without importing them.

This is the only module that sees every layer of discovery at once: it parses each file
(`parse.py`), resolves upstream references once all nodes are known (`resolve.py`), adds the
implicit input of a `partitions_from` source, and hashes each definition (`hashing.py`,
`cone.py`). One `ModuleCache` per call means every file, pipeline or helper, is read and
parsed once, however many nodes use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from barca.discover import hashing
from barca.discover.cone import ConeGraph
from barca.discover.env_reads import env_reads, undeclared
from barca.discover.groups import NodeGroup, read_groups
from barca.discover.import_identity import check_import_identity
from barca.discover.model import Definition, DimensionSpec, InputSpec
from barca.discover.modules import ModuleCache
from barca.discover.names import function_uses, uses_of
from barca.discover.parse import RawNode, parse_module, unsupplied, unsupplied_error
from barca.discover.resolve import NodeIndex, Resolver
from barca.discover.unused import unused_params


def discover(root: Path, files: Sequence[str],
             modules: ModuleCache | None = None) -> tuple[Definition, ...]:
    """Definitions of every barca node in `files` (root-relative posix paths), by node id.

    Raises UsageError for anything the planner could not trust: syntax errors (in pipeline
    files or the project helpers they import), bad decorator arguments, signatures that do
    not match their inputs, references that name no node or several, and one module name
    that two pipeline files import as two different files.
    """
    modules = modules or ModuleCache(Path(root))
    nodes, resolver = _nodes(modules, files)
    read_groups([modules.load(file) for file in sorted(set(files))], resolver)  # checked only
    hasher = _Hasher(modules, {node.node_id: f"{node.file}:{node.function}" for node in nodes})
    built = [_definition(node, resolver, hasher) for node in nodes]
    check_import_identity(modules, files)
    _check_task_parameters(nodes, built)
    return tuple(sorted(built, key=lambda d: d.node_id))


def discover_groups(root: Path, files: Sequence[str]) -> tuple[NodeGroup, ...]:
    """The groups (`group(...)`, discover.groups) declared in `files`, their references
    resolved to node ids as discover() resolves inputs."""
    modules = ModuleCache(Path(root))
    _, resolver = _nodes(modules, files)
    return read_groups([modules.load(file) for file in sorted(set(files))], resolver)


def _nodes(modules: ModuleCache, files: Sequence[str]) -> tuple[list[RawNode], Resolver]:
    nodes: list[RawNode] = []
    for file in sorted(set(files)):
        nodes.extend(parse_module(modules.load(file)))
    _check_unique(nodes)
    return nodes, Resolver(modules, NodeIndex(nodes))


def _check_task_parameters(nodes: Sequence[RawNode], built: Sequence[Definition]) -> None:
    """A task parameter that nothing supplies fails as a step (TypeError), unless the task is
    also called by other code, as a `parallel()` branch is, which passes its arguments: a
    task some node's code reaches (its helper cone holds the task's function) is let be, as
    the published barca lets every task be."""
    called = {label for d in built for label, _ in d.hash_parts if label.startswith("helper ")}
    for node in nodes:
        if node.kind != "task" or f"helper {node.file}:{node.function}" in called:
            continue
        for param in unsupplied(node.fn, node.inputs, node.dimensions):
            raise unsupplied_error(node.site, node.function, param, node.kind)


def _check_unique(nodes: Sequence[RawNode]) -> None:
    first: dict[str, RawNode] = {}
    for node in nodes:
        other = first.setdefault(node.node_id, node)
        if other is not node:
            raise node.site.error(
                f"node id '{node.node_id}' is already used by {other.function} "
                f"(line {other.site.line})", "Give one of them a different name=")


def _definition(node: RawNode, resolver: Resolver, hasher: _Hasher) -> Definition:
    inputs = [InputSpec(i.param, resolver.resolve(node, i.ref, f"input '{i.ref.text}'"), i.mode)
              for i in node.inputs]
    explicit = tuple(inputs)
    dimensions = []
    taken = {i.param for i in inputs}
    for dim in node.dimensions:
        source = None
        if dim.ref is not None:
            source = resolver.resolve(node, dim.ref, f"partitions_from({dim.ref.text})")
            param = dim.ref.written_name
            if param in node.params and param not in taken and param != dim.name:
                inputs.append(InputSpec(param, source, "value"))
                taken.add(param)
        dimensions.append(DimensionSpec(dim.name, dim.kind, dim.keys, dim.expr, source))
    parts, legacy = hasher.parts(node, explicit, dimensions)
    o = node.options
    return Definition(
        node_id=node.node_id, name=node.name, function=node.function, file=node.file,
        line=node.fn.lineno, kind=node.kind, params=node.params, annotations=node.annotations,
        inputs=tuple(inputs), dimensions=tuple(dimensions), freshness=o.freshness,
        schedule=o.schedule, serializer=o.serializer, retries=o.retries,
        retry_backoff=o.retry_backoff, timeout_seconds=o.timeout_seconds, env=o.env,
        cutoff=o.cutoff, weight=o.weight, batch=o.batch, description=o.description,
        tags=o.tags, definition_hash=hashing.definition_hash(parts), hash_parts=parts,
        legacy_hash=hashing.definition_hash(
            [(label, legacy.get(label, value)) for label, value in parts],
            hashing.LEGACY_SCHEME), legacy_parts=tuple(sorted(legacy.items())),
        schedule_batch=o.schedule_batch,
        schedule_max_failures=o.schedule_max_failures, schedule_timeout=o.schedule_timeout,
        sinks=node.sinks, deterministic=o.deterministic,
        unused=unused_params(node.fn, (i.param for i in inputs if i.mode != "order")),
        undeclared_env=hasher.undeclared_env(node, parts),
        source_digest=hasher.modules.digests[node.file])


class _Hasher:
    """Hash parts of each node; shares parsed modules and the helper graph across nodes.

    Upstreams enter the inputs and partitions parts as the location of their function
    (`file:function`), which is the resolved node id unless `name=` renamed it: a rename then
    reruns nothing below (the published 0.33 rule), while pointing a parameter at a different
    node, in any spelling, changes the part.
    """

    def __init__(self, modules: ModuleCache, locations: dict[str, str]) -> None:
        self.modules = modules
        self.locations = locations
        self.cones = ConeGraph(modules)

    def parts(self, node: RawNode, inputs: Sequence[InputSpec],
              dimensions: Sequence[DimensionSpec]
              ) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
        """The hash parts, and scheme 1's digest of those that scheme 2 hashes differently
        (code and helpers: text then, syntax trees now)."""
        module = self.modules.load(node.file)
        fn = node.fn
        parts = dict([hashing.code_part(fn), hashing.kind_part(node.kind)])
        parts.update(self._argument_parts(node, inputs, dimensions))
        parts.update(hashing.decorator_parts(node.decorators))
        uses = function_uses(fn) | uses_of(node.decorators) | uses_of(node.counted)
        parts.update(self.cones.parts(module, uses, self.modules.search_dirs(node.file),
                                      node.node_id, f"helper {node.file}:{fn.name}"))
        legacy = {label: self.cones.legacy[label] for label in parts
                  if label in self.cones.legacy}
        legacy["code"] = hashing.legacy_code_part(
            module.segment(fn.lineno, fn.end_lineno or fn.lineno))[1]
        return tuple(sorted(parts.items())), legacy

    def undeclared_env(self, node: RawNode, parts: Sequence[tuple[str, str]]
                       ) -> tuple[str, ...]:
        """The environment variables an asset's code (the function and every helper its hash
        follows) reads without declaring them in env= (env_reads.py). Not for a sensor or a
        task: they run every time, so no result of theirs is reused under another value."""
        if node.kind != "asset":
            return ()
        reads = set(env_reads([node.fn]))
        for label, _ in parts:
            if label.startswith("helper "):
                reads |= self.cones.env_reads(label)
        return undeclared(reads, node.options.env)

    def _argument_parts(self, node: RawNode, inputs: Sequence[InputSpec],
                        dimensions: Sequence[DimensionSpec]) -> list[tuple[str, str]]:
        where = self.locations
        out = []
        if node.inputs:
            out.append(hashing.inputs_part([
                (i.param, f"collect({where[i.source]})" if i.mode == "collect"
                 else where[i.source]) for i in inputs]))
        if node.options.serializer is not None:
            out.append(hashing.serializer_part(node.options.serializer))
        if node.sinks:
            out.append(hashing.sinks_part([(s.path, s.serializer) for s in node.sinks]))
        if dimensions:
            out.append(hashing.partitions_part([
                (d.name, d.kind, where[d.source] if d.source else None) for d in dimensions]))
        return out
