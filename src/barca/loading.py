"""Loading a project for any entry point (CLI, Python API): root, discovery, graph, targets."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from barca.errors import UsageError
from barca.graph import Graph, build_graph
from barca.project import Project, open_project


@dataclass(frozen=True, slots=True)
class Loaded:
    project: Project
    files: tuple[str, ...]
    graph: Graph


def load(paths: Sequence[str], env: str | None = None, write_cache: bool = False) -> Loaded:
    """Discover the pipeline. `write_cache`: keep the result in `.barca/` for the next command
    (only commands that write `.barca/` anyway pass it; a dry run writes nothing)."""
    from barca.discover import load_definitions

    cwd = Path.cwd()
    project = open_project(env, cwd)
    absolute = [str((cwd / p).resolve()) for p in paths]
    os.chdir(project.root)
    cache = project.root / ".barca" / "discovery.pickle"
    definitions = load_definitions(project.root, absolute, cache_file=cache,
                                   write_cache=write_cache and (project.root / ".barca").is_dir())
    files = tuple(sorted({d.file for d in definitions}))
    return Loaded(project, files, build_graph(definitions))


def resolve_targets(graph: Graph, text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    names = text.split(",")
    if any(not n for n in names):
        raise UsageError(f"empty target in '{text}'", "separate targets by single commas: a,b")
    return tuple(dict.fromkeys(graph.resolve_target(n) for n in names))
