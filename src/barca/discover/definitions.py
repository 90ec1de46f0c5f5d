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
from barca.discover.cone import Cone
from barca.discover.model import Definition, DimensionSpec, InputSpec
from barca.discover.modules import ModuleCache, search_dirs
from barca.discover.names import Uses, function_uses, uses_of
from barca.discover.parse import RawNode, parse_module
from barca.discover.resolve import NodeIndex, Resolver


def discover(root: Path, files: Sequence[str]) -> tuple[Definition, ...]:
    """Definitions of every barca node in `files` (root-relative posix paths), by node id.

    Raises UsageError for anything the planner could not trust: syntax errors (in pipeline
    files or the project helpers they import), bad decorator arguments, signatures that do
    not match their inputs, and references that name no node or several.
    """
    modules = ModuleCache(Path(root))
    nodes: list[RawNode] = []
    for file in sorted(set(files)):
        nodes.extend(parse_module(modules.load(file)))
    _check_unique(nodes)
    resolver = Resolver(modules, NodeIndex(nodes))
    uses_cache: dict[int, Uses] = {}
    built = [_definition(node, resolver, modules, uses_cache) for node in nodes]
    return tuple(sorted(built, key=lambda d: d.node_id))


def _check_unique(nodes: Sequence[RawNode]) -> None:
    first: dict[str, RawNode] = {}
    for node in nodes:
        other = first.setdefault(node.node_id, node)
        if other is not node:
            raise node.site.error(
                f"node id '{node.node_id}' is already used by {other.function} "
                f"(line {other.site.line})", "Give one of them a different name=")


def _definition(node: RawNode, resolver: Resolver, modules: ModuleCache,
                uses_cache: dict[int, Uses]) -> Definition:
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
    parts = _hash_parts(node, explicit, dimensions, modules, uses_cache)
    o = node.options
    return Definition(
        node_id=node.node_id, name=node.name, function=node.function, file=node.file,
        line=node.fn.lineno, kind=node.kind, params=node.params, annotations=node.annotations,
        inputs=tuple(inputs), dimensions=tuple(dimensions), freshness=o.freshness,
        schedule=o.schedule, serializer=o.serializer, retries=o.retries,
        retry_backoff=o.retry_backoff, timeout_seconds=o.timeout_seconds, env=o.env,
        cutoff=o.cutoff, weight=o.weight, batch=o.batch, description=o.description,
        tags=o.tags, definition_hash=hashing.definition_hash(parts), hash_parts=parts)


def _hash_parts(node: RawNode, inputs: Sequence[InputSpec],
                dimensions: Sequence[DimensionSpec], modules: ModuleCache,
                uses_cache: dict[int, Uses]) -> tuple[tuple[str, str], ...]:
    module = modules.load(node.file)
    fn = node.fn
    parts = dict([hashing.code_part(module.segment(fn.lineno, fn.end_lineno or fn.lineno)),
                  hashing.kind_part(node.kind)])
    if node.inputs_text is not None:
        parts.update([hashing.inputs_part(node.inputs_text)])
    elif node.inputs:
        parts.update([hashing.inputs_part([
            (i.param, f"collect({i.source})" if i.mode == "collect" else i.source)
            for i in inputs])])
    if node.options.serializer is not None:
        parts.update([hashing.serializer_part(node.options.serializer)])
    if dimensions:
        parts.update([hashing.partitions_part([(d.name, d.kind, d.source)
                                               for d in dimensions])])
    parts.update(hashing.decorator_parts(node.decorators))
    uses = function_uses(fn) | uses_of(node.decorators) | uses_of(node.counted)
    cone = Cone(modules, uses_cache, search_dirs(node.file), node.node_id,
                f"helper {node.file}:{fn.name}")
    parts.update(cone.walk(module, uses))
    return tuple(sorted(parts.items()))
