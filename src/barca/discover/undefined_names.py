"""Names a pipeline file's top-level code uses but never defines or imports.

Importing a file runs its top level: module statements, class bodies, decorators, default
values and (without `from __future__ import annotations`) annotations. A name read there that
nothing binds is a NameError on import, typically a forgotten `import pandas`. Found from the
source alone, so that `barca doctor` can say so without running the user's code.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

_ALWAYS_BOUND = set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__",
                                      "__loader__", "__package__", "__builtins__", "__path__",
                                      "__cached__", "__annotations__"}


@dataclass(frozen=True, slots=True)
class UndefinedName:
    name: str
    line: int


def undefined_names(source: str) -> list[UndefinedName]:
    """Each name read at import time that no statement of the file binds (first use only).
    A file with `from x import *` binds names that cannot be known: nothing is reported."""
    tree = ast.parse(source)
    bound = _ALWAYS_BOUND | _bound_names(tree)
    if "*" in bound:
        return []
    lazy = any(isinstance(s, ast.ImportFrom) and s.module == "__future__"
               and any(a.name == "annotations" for a in s.names) for s in tree.body)
    found: dict[str, int] = {}
    for node in _import_time_expressions(tree.body, lazy):
        for sub in _walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) \
                    and sub.id not in bound and sub.id not in found:
                found[sub.id] = sub.lineno
    return [UndefinedName(n, line) for n, line in sorted(found.items(), key=lambda i: i[1])]


def _walk(node: ast.AST):
    """ast.walk without the bodies of lambdas, which run only when called."""
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.Lambda):
            todo.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name any statement of the file binds, in any scope (a generous reading: a name
    bound only inside a function is not flagged either)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _import_time_expressions(body: list[ast.stmt], lazy: bool):
    """The parts of these statements that run when the module is imported."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from stmt.decorator_list
            yield from (d for d in stmt.args.defaults + stmt.args.kw_defaults if d is not None)
            if not lazy:
                args = stmt.args
                every = args.posonlyargs + args.args + args.kwonlyargs + \
                    [a for a in (args.vararg, args.kwarg) if a is not None]
                yield from (a.annotation for a in every if a.annotation is not None)
                if stmt.returns is not None:
                    yield stmt.returns
        elif isinstance(stmt, ast.ClassDef):
            yield from stmt.decorator_list
            yield from stmt.bases
            yield from (k.value for k in stmt.keywords)
            yield from _import_time_expressions(stmt.body, lazy)
        else:
            for field in ("test", "iter", "value", "exc", "msg", "subject", "items",
                          "targets", "target", "annotation"):
                part = getattr(stmt, field, None)
                if field == "annotation" and lazy:
                    continue
                if isinstance(part, list):
                    for item in part:
                        yield item.context_expr if isinstance(item, ast.withitem) else item
                elif isinstance(part, ast.AST):
                    yield part
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    yield from _import_time_expressions(inner, lazy)
            for handler in getattr(stmt, "handlers", []):
                if handler.type is not None:
                    yield handler.type
                yield from _import_time_expressions(handler.body, lazy)
            for case in getattr(stmt, "cases", []):
                yield from _import_time_expressions(case.body, lazy)
