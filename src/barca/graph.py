"""The dependency graph built from discovered definitions: edges, cones, order, validation.

Pure data in, frozen data out. It knows nothing about stored state, hashing or execution;
every structural mistake in a pipeline (cycle, task feeding an asset, a partitioned input
without `collect`) is a UsageError raised here, before anything runs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from barca.discover.model import Definition
from barca.errors import UsageError


@dataclass(frozen=True, slots=True)
class Graph:
    nodes: Mapping[str, Definition]
    upstream: Mapping[str, tuple[str, ...]]
    downstream: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]  # topological, ties broken by node id

    def cone(self, targets: Iterable[str]) -> frozenset[str]:
        """The targets and everything they need."""
        return self._walk(targets, self.upstream)

    def descendants(self, sources: Iterable[str]) -> frozenset[str]:
        """The sources and everything that reads them, directly or not."""
        return self._walk(sources, self.downstream)

    def _walk(self, start: Iterable[str], edges: Mapping[str, tuple[str, ...]]) -> frozenset[str]:
        seen: set[str] = set()
        stack = list(start)
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(edges[node])
        return frozenset(seen)

    def partitioned(self, node_id: str) -> bool:
        return bool(self.nodes[node_id].dimensions)

    def key_source(self, node_id: str) -> str | None:
        """The node a `partitions_from` dimension takes its keys from, if any."""
        for dim in self.nodes[node_id].dimensions:
            if dim.kind == "from":
                return dim.source
        return None

    def is_key_source(self, node_id: str) -> bool:
        """An unpartitioned node whose value (a list or dict) gives another node its keys."""
        return not self.nodes[node_id].dimensions and any(
            self.key_source(reader) == node_id for reader in self.downstream[node_id])

    def output_read(self, node_id: str) -> bool:
        """Readers depend on this node's output bytes, not only its run hash: a sensor, a
        cutoff or Manual asset, a key source."""
        d = self.nodes[node_id]
        return d.kind == "sensor" or d.bytes_read or self.is_key_source(node_id)

    def resolve_target(self, text: str) -> str:
        """A target as typed (bare name, `name=` or full id) to its node id; exact match only."""
        if text in self.nodes:
            return text
        matches = sorted(i for i, d in self.nodes.items() if d.name == text)
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise UsageError(
                f"target '{text}' is ambiguous: {', '.join(matches)}",
                f"name it by its full id, e.g. barca get {matches[0]}",
            )
        close = self.closest(text)
        guess = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(
            f"unknown target '{text}'{guess}",
            "Run `barca list <files>` to see available assets and tasks.",
        )

    def closest(self, text: str, n: int = 3) -> list[str]:
        """Node ids whose name (or id) is spelled most like `text`, best first."""
        import difflib

        by_name: dict[str, list[str]] = {}
        for node_id, d in self.nodes.items():
            by_name.setdefault(d.name, []).append(node_id)
            by_name.setdefault(node_id, []).append(node_id)
        out: list[str] = []
        for word in difflib.get_close_matches(text, list(by_name), n=n, cutoff=0.6):
            out += [i for i in sorted(by_name[word]) if i not in out]
        return out[:n]


def build_graph(definitions: Iterable[Definition]) -> Graph:
    nodes = {d.node_id: d for d in definitions}
    upstream = {i: tuple(sorted(_upstream_ids(d))) for i, d in nodes.items()}
    for node_id, ups in upstream.items():
        for up in ups:
            if up not in nodes:
                raise UsageError(
                    f"{node_id} reads '{up}', which is not a discovered node",
                    "pass the file that defines it, or run `barca list` to see the nodes",
                )
    for d in nodes.values():
        _validate_edges(d, nodes)
    downstream: dict[str, list[str]] = {i: [] for i in nodes}
    for node_id, ups in upstream.items():
        for up in ups:
            downstream[up].append(node_id)
    order = _topological_order(upstream, downstream, {i: d.line for i, d in nodes.items()})
    return Graph(
        MappingProxyType(nodes),
        MappingProxyType(upstream),
        MappingProxyType({k: tuple(sorted(v)) for k, v in downstream.items()}),
        order,
    )


def _upstream_ids(d: Definition) -> set[str]:
    ids = {spec.source for spec in d.inputs}
    ids.update(dim.source for dim in d.dimensions if dim.kind == "from" and dim.source)
    return ids


def _validate_edges(d: Definition, nodes: Mapping[str, Definition]) -> None:
    where = f"{d.file}:{d.function} (line {d.line})"
    kinds = {dim.kind for dim in d.dimensions}
    if "from" in kinds and len(d.dimensions) > 1:
        raise UsageError(
            f"Parse error: {where}: partitions_from() must be the only dimension of '{d.node_id}'",
            "declare one dimension with partitions_from(...), or use partitions([...]) for all",
        )
    for dim in d.dimensions:
        if dim.kind == "from":
            _validate_partitions_from(d, dim.name, nodes[dim.source], where)
    for spec in d.inputs:
        up = nodes[spec.source]
        if up.kind == "task" and d.kind != "task":
            raise UsageError(
                f"Parse error: {where}: task '{up.node_id}' (line {up.line}) cannot be an input "
                f"to {d.kind} '{d.node_id}'",
                "tasks always run and are never cached; make the upstream an @asset",
            )
        if spec.mode == "collect" and not up.dimensions:
            raise UsageError(
                f"Parse error: {where}: collect({up.name}) needs a partitioned upstream, "
                f"but '{up.node_id}' has no partitions",
                f"pass {up.name} directly in inputs=",
            )
        if spec.mode != "collect" and up.dimensions and not _same_keys(d, up):
            raise UsageError(
                f"Parse error: {where}: '{up.node_id}' is partitioned, but '{d.node_id}' "
                "does not read it key by key",
                f"wrap it as collect({up.name}) to receive every key as a list, or declare "
                f"partitions={{...: partitions_from({up.name})}} to run once per key",
            )


def _validate_partitions_from(d: Definition, dim: str, source: Definition, where: str) -> None:
    if source.kind == "task":
        raise UsageError(
            f"Parse error: {where}: partitions_from({source.name}) names a task",
            "take keys from an @asset or @sensor",
        )
    if not source.dimensions:
        return
    if len(source.dimensions) > 1:
        raise UsageError(
            f"Parse error: {where}: partitions_from({source.name}) needs a single-dimension "
            f"upstream, but '{source.node_id}' has {len(source.dimensions)}",
            "declare the same dimensions with partitions([...]) instead",
        )
    if source.dimensions[0].name != dim:
        raise UsageError(
            f"Parse error: {where}: partitions_from({source.name}) is declared under dimension "
            f"'{dim}', but '{source.name}' is partitioned by '{source.dimensions[0].name}'",
            f"rename the dimension to '{source.dimensions[0].name}'",
        )


def _same_keys(d: Definition, up: Definition) -> bool:
    """A partitioned reader gets an upstream key by key when both share the same dimensions."""
    if not d.dimensions:
        return False
    if any(dim.kind == "from" and dim.source == up.node_id for dim in d.dimensions):
        return True
    return sorted(x.name for x in d.dimensions) == sorted(x.name for x in up.dimensions)


def _topological_order(upstream: Mapping[str, tuple[str, ...]],
                       downstream: Mapping[str, list[str]],
                       lines: Mapping[str, int]) -> tuple[str, ...]:
    waiting = {i: len(ups) for i, ups in upstream.items()}
    ready = [i for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for child in downstream[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    if len(order) != len(upstream):
        cycle = [f"{n} (line {lines[n]})" for n in _find_cycle(upstream, set(order))]
        raise UsageError(f"cycle in the pipeline: {' -> '.join(cycle)}",
                         "remove one of these inputs so that the graph has no loop")
    return tuple(order)


def _find_cycle(upstream: Mapping[str, tuple[str, ...]], done: set[str]) -> list[str]:
    start = min(i for i in upstream if i not in done)
    path, seen = [start], {start}
    node = start
    while True:
        node = min(u for u in upstream[node] if u not in done)
        if node in seen:
            cycle = path[path.index(node):] + [node]
            return list(reversed(cycle))
        path.append(node)
        seen.add(node)
