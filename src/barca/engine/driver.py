"""The one way in: open a project, check the request, run it, return a `RunResult`.

The CLI, `barca.get` / `barca.run` and the inspection commands all come through here, and a
server or another executor would too: none of them discovers, selects a cone or builds an
executor on its own. Nothing here changes the process's working directory; paths typed by the
user are taken from `cwd`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from barca.engine.coordinator import execute
from barca.engine.events import Reporter
from barca.engine.executor import NewExecutor
from barca.engine.request import Pipeline, build_request
from barca.engine.result import RunResult
from barca.errors import BarcaError
from barca.project import open_project
from barca.store.artifact_store import ArtifactStore


def open_pipeline(paths: Sequence[str], env: str | None = None, write_cache: bool = False,
                  cwd: Path | None = None, lenient: bool = False,
                  leave_out: Sequence[str] = ()) -> Pipeline:
    """Discover the pipeline `paths` name (relative to `cwd`, default the current directory).
    `write_cache`: keep the discovery in `.barca/` for the next command (only commands that
    write `.barca/` anyway pass it; a dry run writes nothing). `lenient` (a server): a file
    that does not load, or whose nodes do not fit the graph, is left out and named in
    `load_errors` instead of failing the whole pipeline, and so is a node whose
    `partitions(<expr>)` or `batches(<expr>)` raises (`engine.load_checks`), with what reads
    it. `leave_out`: node ids left out with what reads them (what a server's `/state` asks of
    `barca status`, for the nodes its own load left out)."""
    pipeline = _discover(paths, env, write_cache, cwd, lenient)
    if leave_out:
        pipeline = _without(pipeline, leave_out, [])
    if lenient:
        from barca.engine.load_checks import expression_errors

        errors = expression_errors(pipeline.project.root, pipeline.files, env,
                                   dict(pipeline.graph.nodes))
        if errors:
            pipeline = _without(pipeline, [e["node"] for e in errors], errors)
    return pipeline


def _discover(paths: Sequence[str], env: str | None, write_cache: bool, cwd: Path | None,
              lenient: bool) -> Pipeline:
    from barca.discover import load_definitions
    from barca.graph import build_graph
    from barca.store.sink_clashes import refuse_clashes

    cwd = cwd or Path.cwd()
    project = open_project(env, cwd)
    cache = project.root / ".barca" / "discovery.pickle"
    write_cache = write_cache and (project.root / ".barca").is_dir()
    try:
        definitions = load_definitions(project.root, list(paths), cwd, cache_file=cache,
                                       write_cache=write_cache)
        graph = build_graph(definitions)
        refuse_clashes(definitions)
    except BarcaError:
        if not lenient:
            raise
        return _open_leniently(project, paths, cwd)
    files = tuple(sorted({d.file for d in definitions}))
    return Pipeline(project, files, graph)


def _without(pipeline: Pipeline, nodes: Sequence[str], errors: Sequence[dict]) -> Pipeline:
    """The pipeline without `nodes` (those it has) and what reads them; each of `errors`
    ({node, error, remediation}) becomes a load error naming the nodes it takes out."""
    from barca.graph import build_graph

    graph = pipeline.graph
    known = [n for n in nodes if n in graph.nodes]
    gone = graph.descendants(known)
    kept = build_graph(d for n, d in graph.nodes.items() if n not in gone)
    added = tuple({"file": graph.nodes[e["node"]].file, "node": e["node"],
                   "error": e["error"], "remediation": e["remediation"],
                   "affected_nodes": sorted(graph.descendants([e["node"]]))} for e in errors)
    return Pipeline(pipeline.project, pipeline.files, kept, pipeline.load_errors + added,
                    pipeline.left_out + tuple(known))


def _open_leniently(project, paths: Sequence[str], cwd: Path) -> Pipeline:
    """Each file on its own, then the graph of those that load, leaving out any file whose
    nodes break it (they read a node of a file left out, say) until what is left builds."""
    from barca.discover import find_files, load_definitions
    from barca.graph import build_graph
    from barca.store.sink_clashes import refuse_clashes

    errors: list[dict] = []
    loaded: dict[str, tuple] = {}
    for file in find_files(project.root, list(paths), cwd):
        try:
            loaded[file] = tuple(load_definitions(project.root, [file], project.root))
        except BarcaError as exc:
            errors.append({"file": file, "error": exc.message, "affected_nodes": []})
    while True:
        try:
            definitions = [d for defs in loaded.values() for d in defs]
            graph = build_graph(definitions)
            refuse_clashes(definitions)
            break
        except BarcaError as exc:
            file = next((f for f in loaded if f in exc.message), next(reversed(loaded)))
            errors.append({"file": file, "error": exc.message,
                           "affected_nodes": sorted(d.node_id for d in loaded.pop(file))})
    return Pipeline(project, tuple(sorted(loaded)), graph, tuple(errors))


def keep_warm(pipeline: Pipeline, start: bool) -> None:
    """A server's warm pool: started with the server (`start`), so that its first tick finds
    the pipeline's libraries imported; stopped with it (`start` False)."""
    from barca.engine.local import start_warm_pool, stop_warm_pools

    if start:
        start_warm_pool(pipeline.project.root, _files_in(pipeline, frozenset(
            pipeline.graph.nodes)))
    else:
        stop_warm_pools(pipeline.project.root)


def end_pools_with_this_process() -> None:
    """See `barca.engine.local.end_pools_with_this_process` (a server's pools)."""
    from barca.engine.local import end_pools_with_this_process as end

    end()


def shared_capacity_env(socket_path: Path) -> dict[str, str]:
    """What a server puts in its runs' environment to share its `--capacity` between them
    (`barca.engine.local.shared_capacity`)."""
    from barca.engine.local import shared_capacity_env as env

    return env(socket_path)


def start_served_run(root: Path, env: dict[str, str], fds: tuple[int, int, int]):
    """A server's run in a child process (`barca.cli.served_run`: its order on stdin, its
    events on stdout): a `CommandProcess` with its pid, `signal()` and `wait()`."""
    from barca.engine.local import start_served_run as start

    return start(root, env, fds)


def run(command: str, target_text: str | None, paths: Sequence[str] = (), *,
        refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
        partition: Sequence[str] | str | dict | None = None, cascade: bool = True,
        dry_run: bool = False, env: str | None = None, observe_sensors: bool = True,
        include_tasks: bool = False, reporter: Reporter | None = None,
        pipeline: Pipeline | None = None, new_executor: NewExecutor | None = None,
        cwd: Path | None = None, batch: Any = None, run_id: str | None = None,
        triggered_by: str = "cli", schedule: tuple[str, float] | None = None,
        store: ArtifactStore | None = None, ledger: Any = None,
        executor: str | None = None) -> RunResult:
    """Run `command` ("get" or "run") on `target_text` (None: every asset and sensor).

    `batch` overrides the grouping of batched nodes: "all", 20, "none", {"scored": 20} or
    ["scored=20"] (as `--batch`). `run_id` names the run (default: a new random id; a server
    picks it so that it can answer before the run starts; an id already recorded is refused,
    exit 2); `triggered_by` is recorded with it ("cli", "python", "api", "schedule",
    "catch_up"), and `schedule`: (schedule id, tick time) of a run a schedule started.
    `new_executor` builds the executor when a step first must run (default:
    local worker processes, see `engine.local`); a fully cached run never calls it.
    `store`: where results live (default: the project's `.barca/artifacts/`); a store only
    this process can reach (a MemoryStore) needs an in-process `new_executor`. `ledger`: an
    engine.ledger_client.LedgerClient whose server decides which results exist (checked
    before anything runs); a successful run that is not a dry run is then posted to it.
    `executor`: "local" or "ray" (`--executor`; default BARCA_EXECUTOR, else `[executor] kind`
    in barca.toml, else "local"); a dry run observes its sensors here whatever it says.
    """
    pipeline = pipeline or open_pipeline(paths, env, write_cache=not dry_run, cwd=cwd)
    from barca.store.cache_limit import cache_limit

    limit = cache_limit(pipeline.project)  # a bad BARCA_CACHE_MAX_SIZE stops it here
    request = build_request(pipeline, command, target_text, refresh=refresh,
                            refresh_all=refresh_all, partition=partition, cascade=cascade,
                            dry_run=dry_run, observe_sensors=observe_sensors,
                            include_tasks=include_tasks, batch=batch)
    reporter = reporter or Reporter()
    order = [n for n in pipeline.graph.order if n in request.cone]
    warnings = unused_warnings(pipeline.graph, order)
    kind = executor_kind(executor, pipeline.project.settings)  # a bad one stops it here
    if new_executor is None and kind == "ray" and not dry_run:
        from barca.engine.ray_executor import ray_executor

        new_executor = ray_executor(pipeline.project.root, sorted(
            {name for n in request.cone for name in pipeline.graph.nodes[n].env}))
    if new_executor is None:
        from barca.engine.local import capacity, local_executor

        configured = pipeline.project.settings.capacity
        new_executor = local_executor(pipeline.project.root, _files_in(pipeline, request.cone),
                                      configured, shared=None if ledger is None
                                      else ledger.shared_capacity)
        warnings += capacity_warnings(pipeline.graph, order, *capacity(configured))
    warnings += undeclared_env_warnings(pipeline.graph, order)
    warnings.sort(key=lambda w: (w["node"], w["param"] or "", w["kind"]))
    for warning in warnings:
        if warning["kind"] != "undeclared_env":
            reporter.warning(warning["kind"], warning)
    summary = undeclared_env_summary(warnings)
    if summary is not None:  # one line for them all, as 0.33 says it
        reporter.warning("undeclared_env_summary", summary)
    if ledger is not None:
        store = ledger.open(pipeline.project)
    result = execute(pipeline.project, pipeline.graph, request, reporter, new_executor,
                     run_id=run_id, triggered_by=triggered_by, warnings=warnings,
                     schedule=schedule, store=store)
    computed = [n for n in result.order if result.results.get(n)
                and pipeline.graph.nodes[n].kind == "asset"]
    if ledger is not None and not dry_run and result.status == "success" and computed:
        ledger.post(pipeline.project, store, result.run_id, computed)
    if limit.bytes is not None and not dry_run:
        from barca.store.gc import trim

        trimmed = trim(pipeline.project, limit.bytes, lambda: run_files(result),
                       result.run_id, lazy=limit.default)
        if trimmed is not None:
            result.cache, result.cache_warnings = trimmed
            result.cache.update(limit_source=limit.source, limit_setting=limit.written)
    return result


def executor_kind(chosen: str | None, settings: Any) -> str:
    """What runs a run's steps: `chosen` (--executor), else BARCA_EXECUTOR, else `[executor]
    kind` in barca.toml, else "local"; a bad value is exit 2 naming where it was set."""
    import os

    from barca.config import executor_kind as checked

    if chosen:
        return checked(chosen, "--executor")
    named = os.environ.get("BARCA_EXECUTOR")
    if named:
        return checked(named, "BARCA_EXECUTOR")
    return settings.executor_kind or "local"


def run_files(result: RunResult) -> set[Path]:
    """The files holding every result a run computed or served from cache (for a packed
    result its pack's, store.packs): what it prints and returns, so its trim keeps them."""
    from barca.store.packs import file_of

    files = set()
    for node_id in result.order:
        plan = result.plans.get(node_id)
        if plan is None or plan.unknown:
            continue
        for key in plan.keys:
            found = result.key_of(node_id, key)
            if found is not None:
                files.add(file_of(found[0]))
    artifacts = result.artifacts_dir.resolve()
    return {artifacts / name for name in files}


def unused_warnings(graph: Any, order: Sequence[str]) -> list[dict[str, Any]]:
    """An input the function never uses (discover.unused), said before anything runs: it is
    computed and loaded all the same. Not for a sensor's value (reading one is how a node asks
    to rerun when it changes) nor a DuckDB relation (its SQL may name it as a view)."""
    out = []
    for node_id in order:
        d = graph.nodes[node_id]
        for param in d.unused:
            source = next(i.source for i in d.inputs if i.param == param)
            if graph.nodes[source].kind == "sensor" or \
                    "DuckDBPyRelation" in (d.annotation(param) or ""):
                continue
            out.append({"kind": "unused_input", "node": node_id, "param": param})
    return out


def undeclared_env_warnings(graph: Any, order: Sequence[str]) -> list[dict[str, Any]]:
    """An asset whose code reads an environment variable that its env= does not declare
    (discover.env_reads): one `warnings[]` item per node and variable (`param`); its value
    is not part of the run hash."""
    return [{"kind": "undeclared_env", "node": n, "param": name}
            for n in order for name in graph.nodes[n].undeclared_env]


def undeclared_env_summary(warnings: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The evidence of the one stderr line that stands for every undeclared_env warning of
    a command (None without any): how many steps, and which variables."""
    found = [w for w in warnings if w["kind"] == "undeclared_env"]
    if not found:
        return None
    return {"kind": "undeclared_env_summary", "node": None, "param": None,
            "steps": len({w["node"] for w in found}),
            "names": sorted({w["param"] for w in found})}


def capacity_warnings(graph: Any, order: Sequence[str], units: int, source: str
                      ) -> list[dict[str, Any]]:
    """A node heavier than the capacity, whose steps run alone: said before anything runs
    (`warnings[]` of `plan`, `get` and `run`)."""
    return [{"kind": "over_capacity", "node": n, "param": None, "name": graph.nodes[n].name,
             "weight": graph.nodes[n].weight, "units": units, "source": source}
            for n in order if graph.nodes[n].weight > units]


def _files_in(pipeline: Pipeline, cone: frozenset[str]) -> list[str]:
    """The pipeline files of the cone's nodes: what workers import."""
    return sorted({pipeline.graph.nodes[n].file for n in cone})
