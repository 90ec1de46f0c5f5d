"""One file per module name across the pipeline files discovered together.

A worker imports a pipeline file's absolute imports from the file's own directory first, then
the root (modules.py), and one module name is one entry of `sys.modules`. When two pipeline
files of one run name the same module but find it in different files (`from helpers import
value` beside a/helpers.py and beside b/helpers.py), which code a step runs would depend on
which file a process imported first: the published barca refuses the layout before any user
code runs, and so do we, naming the module, both files and the fix (a qualified import,
`from b.helpers import value`). Every import statement counts, at any depth (a function's own
import runs when it does), in the pipeline files and, transitively, in the project modules
they import. Pipeline files that share one import path cannot disagree, so a project whose
pipeline files all live in one directory (or in packages) pays nothing.
"""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Sequence

from barca.discover.modules import ModRef, ModuleCache
from barca.discover.names import ImportBinding
from barca.errors import UsageError


class _Use(NamedTuple):
    """A project module an import names: as `name`, it is `file`, for `pipeline`."""

    name: str
    file: str
    pipeline: str
    importer: str
    statement: ast.Import | ast.ImportFrom


def check_import_identity(modules: ModuleCache, files: Sequence[str]) -> None:
    """UsageError when one module name is two project files for two of `files`."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for file in sorted(set(files)):
        groups.setdefault(modules.search_dirs(file), []).append(file)
    if len(groups) < 2:
        return
    seen: dict[str, _Use] = {}
    statements: dict[str, list[ast.Import | ast.ImportFrom]] = {}
    for dirs, pipelines in groups.items():
        for use in _uses(modules, pipelines, dirs, statements):
            first = seen.setdefault(use.name, use)
            if first.file != use.file:
                raise _clash(first, use)


def _uses(modules: ModuleCache, pipelines: list[str], dirs: tuple[str, ...],
          statements: dict[str, list[ast.Import | ast.ImportFrom]]) -> Iterator[_Use]:
    """Every project module the pipelines' imports name, following the ones they reach
    (`statements`: each file's import statements, found once for every search path)."""
    stack = [(pipeline, pipeline, None) for pipeline in reversed(pipelines)]
    visited: set[str] = set()
    while stack:
        file, pipeline, importer = stack.pop()
        if file in visited:
            continue
        visited.add(file)
        if file not in statements:
            tree = modules.load(file, importer=importer).tree
            statements[file] = [node for node in ast.walk(tree)
                                if isinstance(node, (ast.Import, ast.ImportFrom))]
        for statement in statements[file]:
            for name, ref in _targets(modules, statement, file, dirs):
                if ref.file is None:
                    continue
                if name is not None:
                    yield _Use(name, ref.file, pipeline, file, statement)
                stack.append((ref.file, pipeline, file))


def _targets(modules: ModuleCache, statement: ast.Import | ast.ImportFrom, file: str,
             dirs: tuple[str, ...]) -> Iterator[tuple[str | None, ModRef]]:
    """(dotted name, module) for each project module the statement imports, its parent
    packages included; the name is None for a relative import (its package's own name
    decides what it is)."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            yield from _chain(modules, alias.name, 0, file, dirs, statement.lineno)
        return
    level = statement.level or 0
    found: ModRef | None = None
    for name, found in _chain(modules, statement.module or "", level, file, dirs,
                              statement.lineno):
        yield name, found
    if found is None:
        return
    for alias in statement.names:
        sub = modules.submodule(found, alias.name) if alias.name != "*" else None
        if sub is not None:
            yield (f"{statement.module}.{alias.name}" if not level else None), sub


def _chain(modules: ModuleCache, dotted: str, level: int, file: str, dirs: tuple[str, ...],
           line: int) -> Iterator[tuple[str | None, ModRef]]:
    """The module `dotted` names and each package on the way to it."""
    parts = [part for part in dotted.split(".") if part]
    head = parts[:1] if not level else []
    found = modules.find(ImportBinding(".".join(head), level, None, line), file, dirs)
    if found is None:
        return
    yield (parts[0] if not level else None), found
    for i in range(len(head), len(parts)):
        found = modules.submodule(found, parts[i])
        if found is None:
            return
        yield (".".join(parts[:i + 1]) if not level else None), found


def _clash(first: _Use, other: _Use) -> UsageError:
    def where(use: _Use) -> str:
        via = f" (imported in {use.importer})" if use.importer != use.pipeline else ""
        return f"{use.file} for {use.pipeline}{via}"

    fixes = [fix for fix in (_qualified(first), _qualified(other)) if fix]
    remedy = (f"Import it by its path from the project root: {' and '.join(fixes)}; "
              "or rename one of the two files") if fixes else "Rename one of the two files"
    return UsageError(
        f"module '{first.name}' is {where(first)} but {where(other)}: one module name must "
        "be one file for every pipeline file of a run",
        remedy)


def _qualified(use: _Use) -> str | None:
    """The import statement rewritten to name the module by its path from the root, when
    that path is an importable name other than the one written."""
    path = use.file.removesuffix(".py").removesuffix("/__init__")
    parts = path.split("/")
    if len(parts) == 1 or not all(part.isidentifier() for part in parts):
        return None
    qualified = ".".join(parts)
    statement = use.statement
    where = f"in {use.importer}"
    if isinstance(statement, ast.ImportFrom):
        rest = (statement.module or "")[len(use.name):]
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "")
                          for a in statement.names)
        if (statement.module or "") == use.name or rest.startswith("."):
            return f"`from {qualified}{rest} import {names}` {where}"
        return f"`from {qualified.rpartition('.')[0]} import {parts[-1]}` {where}"
    for alias in statement.names:
        if alias.name == use.name:
            return f"`from {qualified.rpartition('.')[0]} import {parts[-1]}" \
                   f"{f' as {alias.asname}' if alias.asname else ''}` {where}"
        if alias.name.startswith(use.name + "."):
            return f"`import {qualified}{alias.name[len(use.name):]}` {where}"
    return None
