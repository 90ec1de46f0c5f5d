"""Which names in a pipeline file are provably barca's.

A decorator only makes a node when its name is bound by a top-level barca import
(`from barca import asset`, `from barca import asset as a`, `import barca [as b]` then
`b.asset`) and nothing else at module level rebinds that name (an assignment, a def or
class, another import even inside `try`/`if`, a loop or `with` target, `global`, a star
import). That keeps Celery's or Prefect's `@task(bind=True)` out of barca's hands. The helper
markers (`partitions`, `collect`, `Schedule`, ...) are recognised the same way, and also by
their plain name when the file binds that name to nothing at all.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from barca.discover.names import COMPOUND_STATEMENTS, bound_names, nested_statements

BARCA_MODULES = ("barca", "barca.api")
DECORATORS = ("asset", "sensor", "task")
HELPERS = ("partitions", "partitions_from", "collect", "asset_ref", "Schedule", "Always",
           "Manual", "batches", "batches_by", "Failed")
SINK = "sink"  # stacked under @asset; read by discover.sinks
UNSAFE = "unsafe"  # a marker decorator: never hashed (discover.parse)
GROUP = "group"  # `name = group(...)` at module level: read by discover.groups
EXPORTS = frozenset(DECORATORS + HELPERS + (SINK, UNSAFE, GROUP))


class BarcaNames(NamedTuple):
    """The barca bindings of one module.

    aliases: local name -> barca name (`{"a": "asset"}` after `from barca import asset as a`);
    modules: local names bound to the barca module itself (`b` after `import barca as b`);
    unbound: barca helper names the module binds to nothing (legacy plain-name recognition).
    """

    aliases: tuple[tuple[str, str], ...]
    modules: frozenset[str]
    unbound: frozenset[str]

    def which(self, expr: ast.expr) -> str | None:
        """The barca name `expr` provably refers to (`asset`, `partitions`...), else None."""
        if isinstance(expr, ast.Name):
            for local, name in self.aliases:
                if local == expr.id:
                    return name
            return None
        if (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)
                and expr.value.id in self.modules and expr.attr in EXPORTS):
            return expr.attr
        return None

    def which_helper(self, expr: ast.expr) -> str | None:
        """Like `which`, but also accepts a helper's plain name that the file never binds."""
        found = self.which(expr)
        if found is None and isinstance(expr, ast.Name) and expr.id in self.unbound:
            return expr.id
        return found


def _is_barca_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        return not stmt.level and stmt.module in BARCA_MODULES
    if isinstance(stmt, ast.Import):
        return all(a.name == "barca" or a.name.startswith("barca.") for a in stmt.names)
    return False


def _declared_global(tree: ast.Module, source: str) -> set[str]:
    out: set[str] = set()
    if "global" not in source and "nonlocal" not in source:
        return out  # the walk below is the costliest part of reading a file; skip it
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


def _star_import_after(stmts: list[ast.stmt], line: int) -> bool:
    """Whether a non-barca `from x import *` at module level comes after `line` (it may then
    rebind any barca name; one written before the barca import is overridden by it)."""
    for stmt in stmts:
        if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
            if stmt.lineno > line and not _is_barca_import(stmt):
                return True
        elif isinstance(stmt, COMPOUND_STATEMENTS):
            if _star_import_after(nested_statements(stmt), line):
                return True
    return False


def barca_names(tree: ast.Module, source: str) -> BarcaNames:
    """Read the module's top-level barca imports and drop every name bound elsewhere too."""
    aliases: dict[str, str] = {}
    modules: set[str] = set()
    others: list[ast.stmt] = []
    last_barca_line = 0
    for stmt in tree.body:
        if not _is_barca_import(stmt):
            others.append(stmt)
            continue
        last_barca_line = stmt.lineno
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name == "*":
                    aliases.update({name: name for name in EXPORTS})
                elif alias.name in EXPORTS:
                    aliases[alias.asname or alias.name] = alias.name
        else:
            modules.update(alias.asname or "barca" for alias in stmt.names)
    competing = bound_names(others, skip=_is_barca_import) | _declared_global(tree, source)
    if "*" in competing and _star_import_after(others, last_barca_line):
        aliases, modules = {}, set()
    kept = tuple(sorted((k, v) for k, v in aliases.items() if k not in competing))
    bound = competing | set(aliases) | modules
    return BarcaNames(kept, frozenset(modules - competing),
                      frozenset(name for name in HELPERS if name not in bound))
