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
from barca.project import open_project


def open_pipeline(paths: Sequence[str], env: str | None = None, write_cache: bool = False,
                  cwd: Path | None = None) -> Pipeline:
    """Discover the pipeline `paths` name (relative to `cwd`, default the current directory).
    `write_cache`: keep the discovery in `.barca/` for the next command (only commands that
    write `.barca/` anyway pass it; a dry run writes nothing)."""
    from barca.discover import load_definitions
    from barca.graph import build_graph

    cwd = cwd or Path.cwd()
    project = open_project(env, cwd)
    cache = project.root / ".barca" / "discovery.pickle"
    definitions = load_definitions(project.root, list(paths), cwd, cache_file=cache,
                                   write_cache=write_cache and (project.root / ".barca").is_dir())
    files = tuple(sorted({d.file for d in definitions}))
    return Pipeline(project, files, build_graph(definitions))


def run(command: str, target_text: str | None, paths: Sequence[str] = (), *,
        refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
        partition: Sequence[str] | str | dict | None = None, cascade: bool = True,
        dry_run: bool = False, env: str | None = None, observe_sensors: bool = True,
        include_tasks: bool = False, reporter: Reporter | None = None,
        pipeline: Pipeline | None = None, new_executor: NewExecutor | None = None,
        cwd: Path | None = None, batch: Any = None) -> RunResult:
    """Run `command` ("get" or "run") on `target_text` (None: every asset and sensor).

    `batch` overrides the grouping of batched nodes: "all", 20, "none", {"scored": 20} or
    ["scored=20"] (as `--batch`). `new_executor` builds the executor when a step first must run (default: local worker
    processes, see `engine.local`); a fully cached run never calls it.
    """
    pipeline = pipeline or open_pipeline(paths, env, write_cache=not dry_run, cwd=cwd)
    request = build_request(pipeline, command, target_text, refresh=refresh,
                            refresh_all=refresh_all, partition=partition, cascade=cascade,
                            dry_run=dry_run, observe_sensors=observe_sensors,
                            include_tasks=include_tasks, batch=batch)
    if new_executor is None:
        from barca.engine.local import local_executor

        new_executor = local_executor(pipeline.project.root, _files_in(pipeline, request.cone))
    return execute(pipeline.project, pipeline.graph, request, reporter or Reporter(),
                   new_executor)


def _files_in(pipeline: Pipeline, cone: frozenset[str]) -> list[str]:
    """The pipeline files of the cone's nodes: what workers import."""
    return sorted({pipeline.graph.nodes[n].file for n in cone})
