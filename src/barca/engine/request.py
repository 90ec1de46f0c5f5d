"""What a `get` or `run` is asked to do, checked: targets of the right kind, refresh names
inside the cone, partition selections that can match, and what the planner needs from the
environment (declared env values, evaluated key expressions).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from barca.engine.batch_settings import batch_settings
from barca.engine.pipeline_expressions import evaluate
from barca.errors import UsageError
from barca.graph import Graph
from barca.planner.model import PlanOptions
from barca.project import Project


@dataclass(frozen=True, slots=True)
class CheckedRequest:
    """A checked request: what the coordinator runs."""

    command: str  # "get" | "run"
    targets: tuple[str, ...]  # node ids; empty = every asset and sensor
    cone: frozenset[str]  # the targets and everything they read
    files: tuple[str, ...]
    target_text: str | None
    options: PlanOptions = PlanOptions()
    dry_run: bool = False
    observe_sensors: bool = True  # False: predict from each sensor's last recorded output
    expr_keys: Mapping[tuple[str, str], Sequence[str]] = field(default_factory=dict)


def build_request(pipeline: Pipeline, command: str, target_text: str | None, *,
                  refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
                  partition: Sequence[str] | str | dict | None = None, cascade: bool = True,
                  dry_run: bool = False, observe_sensors: bool = True,
                  include_tasks: bool = False, batch: Any = None) -> CheckedRequest:
    """Check what the user asked for against the graph; select the cone, once.
    `include_tasks` (a read-only view, `barca status`): tasks belong to it, every task when no
    target is named, and a task may be a target (a dry run plans it `always_runs`)."""
    graph = pipeline.graph
    targets = resolve_targets(graph, target_text)
    if not (include_tasks and dry_run):
        check_target_kinds(graph, command, targets, target_text)
    refresh_ids = _refresh_ids(graph, targets, refresh, cascade)
    cone = graph.cone(targets) if targets else graph.cone(
        [n for n, d in graph.nodes.items() if d.kind != "task" or include_tasks])
    if not dry_run:
        check_sink_backends(graph, cone)
    expr_keys = evaluate_key_expressions(pipeline, cone)
    selection = parse_partition(partition)
    check_selection(graph, cone, selection, expr_keys)
    check_not_skipped(graph, cone, selection, targets, refresh_ids)
    batching = batch_settings(graph, pipeline.project.root, cone, batch)
    options = PlanOptions(refresh_ids, refresh_all, cascade, _env_values(pipeline, cone), selection,
                          batching)
    return CheckedRequest(command, targets, cone, pipeline.files, target_text, options, dry_run,
                      observe_sensors, expr_keys)


def check_sink_backends(graph: Graph, cone: frozenset[str]) -> None:
    """A sink to an fsspec URL needs fsspec (and the scheme's package) here, where the
    workers run: found out before anything runs, not after the asset computed."""
    from barca.store.sinks import missing_backend

    for node_id in sorted(cone):
        for sink in graph.nodes[node_id].sinks:
            why = missing_backend(sink.path)
            if why is not None:
                raise UsageError(f"{why} (@sink of {node_id})",
                                 "pip install fsspec (and the package for the URL's scheme, "
                                 "e.g. s3fs for s3://), or write to a local path")


def resolve_targets(graph: Graph, text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    names = text.split(",")
    if any(not n for n in names):
        raise UsageError(f"empty target in '{text}'", "separate targets by single commas: a,b")
    return tuple(dict.fromkeys(graph.resolve_target(n) for n in names))


def parse_partition(spec: Sequence[str] | str | dict | None) -> dict[str, frozenset[str]]:
    """`--partition region=emea,amer` (repeatable) or a JSON object {"region": ["emea"]}."""
    if not spec:
        return {}
    items = [spec] if isinstance(spec, (str, dict)) else list(spec)
    out: dict[str, set[str]] = {}
    for item in items:
        if isinstance(item, str) and item.lstrip().startswith("{"):
            import orjson

            try:
                item = orjson.loads(item)
            except orjson.JSONDecodeError as exc:
                raise UsageError(f"--partition {item!r} is not valid JSON: {exc}",
                                 'write --partition \'{"region": ["emea"]}\'') from exc
        if isinstance(item, dict):
            for dim, values in item.items():
                values = values if isinstance(values, list) else [values]
                out.setdefault(dim, set()).update(str(v) for v in values)
            continue
        dim, sep, values = item.partition("=")
        if not sep or not dim.isidentifier() or not values:
            raise UsageError(f"--partition {item!r} is not DIM=VALUE[,VALUE]",
                             "write e.g. --partition region=emea,amer")
        out.setdefault(dim, set()).update(values.split(","))
    return {dim: frozenset(values) for dim, values in out.items()}


def check_selection(graph: Graph, cone: frozenset[str], selection: dict[str, frozenset[str]],
                    expr_keys: dict) -> None:
    """Each selected dimension exists in the cone, and keys known in advance hold each value."""
    dims: dict[str, set[str] | None] = {}
    for node_id in cone:
        for dim in graph.nodes[node_id].dimensions:
            known = dims.setdefault(dim.name, set())
            values = values_known_in_advance(graph, node_id, dim.name, expr_keys)
            if values is None:
                dims[dim.name] = None  # keys known only when a source has run
            elif known is not None:
                known.update(values)
    for dim, values in selection.items():
        if dim not in dims:
            raise UsageError(f"--partition names dimension '{dim}', which no node in this "
                             "command's cone has",
                             f"use one of: {', '.join(sorted(dims)) or '(no dimensions)'}")
        known = dims[dim]
        missing = sorted(values - known) if known is not None else []
        if missing:
            raise UsageError(f"--partition {dim}={','.join(missing)} matches no key",
                             f"valid values include: {', '.join(sorted(known)[:10])}")


def check_not_skipped(graph: Graph, cone: frozenset[str], selection: dict[str, frozenset[str]],
                      targets: Sequence[str], refresh_ids: frozenset[str]) -> None:
    """A node the selection skips (it reads every key of a narrowed node) cannot be what the
    command is asked to compute or refresh: refused before anything runs."""
    from barca.planner.planner import skipped_by_selection

    skipped = skipped_by_selection(graph, cone, selection)
    for node_id in (*targets, *sorted(refresh_ids)):
        if node_id in skipped:
            asked = "refreshes" if node_id in refresh_ids and node_id not in targets \
                else "targets"
            chosen = " ".join(f"{dim}={','.join(sorted(values))}"
                              for dim, values in sorted(selection.items()))
            raise UsageError(f"--partition {chosen} would skip '{node_id}', which this command "
                             f"{asked}: it reads every key of '{skipped[node_id]}'",
                             "run it without --partition, or target the partitioned nodes "
                             "it reads")


def values_known_in_advance(graph: Graph, node_id: str, dim: str,
                             expr_keys: dict) -> Sequence[str] | None:
    """A dimension's values before anything runs: through partitions_from mirrors down to
    a partitions([...]) list; None when they come from a node's output."""
    d = graph.nodes[node_id]
    spec = next(x for x in d.dimensions if x.name == dim)
    if spec.kind == "static":
        return spec.keys or ()
    if spec.kind == "expr":
        return expr_keys[(node_id, dim)]
    source = graph.nodes[spec.source]
    if not source.dimensions:
        return None
    return values_known_in_advance(graph, source.node_id, source.dimensions[0].name, expr_keys)


def check_target_kinds(graph: Graph, command: str, targets: Sequence[str],
                       text: str | None) -> None:
    if command == "run" and not targets:
        raise UsageError("barca run needs a task to run", "barca run TASK pipeline.py")
    if command == "serve":  # a server's shared run: jobs of every kind due together
        if not targets:
            raise UsageError("a shared run needs its targets", "name the nodes to run")
        return
    for node_id in targets:
        kind = graph.nodes[node_id].kind
        if command == "get" and kind == "task":
            raise UsageError(f"'{node_id}' is a task; barca get computes assets and sensors",
                             f"run it with: barca run {text}")
        if command == "run" and kind != "task":
            raise UsageError(f"'{node_id}' is an {kind}; barca run runs tasks",
                             f"compute it with: barca get {text}")


def _refresh_ids(graph: Graph, targets: Sequence[str], refresh: str | Sequence[str] | None,
                 cascade: bool) -> frozenset[str]:
    if refresh == "":
        raise UsageError("--refresh is empty", "name the assets to recompute: --refresh a,b")
    if not refresh:
        if not cascade:
            raise UsageError("--no-cascade only applies together with --refresh",
                             "add --refresh NAME, or drop --no-cascade")
        return frozenset()
    names = refresh.split(",") if isinstance(refresh, str) else list(refresh)
    cone = graph.cone(targets) if targets else frozenset(graph.nodes)
    valid = sorted(graph.nodes[n].name for n in cone if graph.nodes[n].kind == "asset")
    ids = set()
    for name in names:
        try:
            node_id = graph.resolve_target(name)
        except UsageError:
            node_id = None
        if node_id is None or node_id not in cone or graph.nodes[node_id].kind != "asset":
            raise UsageError(f"--refresh '{name}' is not an asset in this command's cone",
                             f"refresh one of: {', '.join(valid) or '(no assets)'}")
        ids.add(node_id)
    return frozenset(ids)


def _env_values(pipeline: Pipeline, cone: frozenset[str]) -> dict[str, str | None]:
    """The declared env= values of the cone: the environment's, else the project's `.env`'s
    (barca.env_file)."""
    from barca.env_file import declared_values

    names = {name for n in cone for name in pipeline.graph.nodes[n].env}
    return declared_values(pipeline.project.root, names) if names else {}


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A project's discovered pipeline: its files (root-relative) and graph."""

    project: Project
    files: tuple[str, ...]
    graph: Graph
    # lenient loading (a server): files left out, as {file, error, affected_nodes}, and
    # nodes whose decorator expressions failed, as {file, node, error, remediation,
    # affected_nodes}
    load_errors: tuple[dict, ...] = ()
    left_out: tuple[str, ...] = ()  # the nodes left out for a load error (not what reads them)


def evaluate_key_expressions(pipeline: Pipeline, cone: frozenset[str]) -> dict:
    """Keys written as expressions (`partitions(REGIONS)`), evaluated with the project
    importable."""
    out: dict = {}
    for node_id in sorted(cone):
        d = pipeline.graph.nodes[node_id]
        for dim in d.dimensions:
            if dim.kind != "expr":
                continue
            keys = evaluate(pipeline.project.root, d.file, dim.expr,
                            f"the keys of {node_id} (partitions({dim.expr}))",
                            "make the expression return a list of str or int", _key_texts)
            if len(set(keys)) != len(keys):
                twice = next(k for k, n in Counter(keys).items() if n > 1)
                raise UsageError(f"partitions({dim.expr}) of {node_id} gives key '{twice}' "
                                 "twice", "make the expression give each key once")
            out[(node_id, dim.name)] = keys
    return out


def _key_texts(values: Any) -> tuple[str, ...]:
    from barca.planner.keys import key_text

    if isinstance(values, (str, bytes)):
        raise TypeError(f"it is a {type(values).__name__}, not a list of keys")
    return tuple(key_text(v) for v in values)
