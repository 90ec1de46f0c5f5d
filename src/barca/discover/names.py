"""Which names a piece of source binds and which it uses, read from the AST alone.

Two questions every other discovery module asks: "what does this module-level statement
bind?" (to know whether `asset` is still barca's, and which names are safe to hash by their
own definition) and "which outside names does this function, class or expression read?"
(the seeds of the helper cone). Both answers are syntactic and conservative: a name we are
unsure about is reported as used or bound, which can only cause an extra rerun, never a
stale result. Nothing here resolves a name to a file; that is `modules.py` and `cone.py`.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, NamedTuple

COMPOUND_STATEMENTS = (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.With,
                       ast.AsyncWith, ast.Match, ast.TryStar)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class ImportBinding(NamedTuple):
    """One name bound by an import statement.

    `import a.b as m` -> ImportBinding("a.b", 0, None); `import a.b` binds `a` ->
    ImportBinding("a", 0, None); `from .x import f as g` binds `g` -> ImportBinding("x", 1, "f").
    """

    module: str  # dotted module as written, without leading dots ("" for `from . import x`)
    level: int  # number of leading dots of a relative import
    attr: str | None  # the imported name of a `from` import; None for a plain `import`
    line: int

    @property
    def written(self) -> str:
        """The module as the user wrote it, e.g. `pipelines.common` or `.common`."""
        return "." * self.level + self.module


def import_bindings(stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, ImportBinding]]:
    """(local name, binding) for each name an import binds; star imports bind `*`.

    >>> import_bindings(ast.parse("from .m import f as g").body[0])
    [('g', ImportBinding(module='m', level=1, attr='f', line=1))]
    """
    out: list[tuple[str, ImportBinding]] = []
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                out.append((alias.asname, ImportBinding(alias.name, 0, None, stmt.lineno)))
            else:
                head = alias.name.split(".")[0]
                out.append((head, ImportBinding(head, 0, None, stmt.lineno)))
        return out
    for alias in stmt.names:
        binding = ImportBinding(stmt.module or "", stmt.level or 0, alias.name, stmt.lineno)
        out.append((alias.asname or alias.name, binding))
    return out


def bound_names(stmts: Iterable[ast.stmt],
                skip: Callable[[ast.stmt], bool] | None = None) -> set[str]:
    """Every name the statements bind in the scope they run in (not inside nested defs).

    Covers assignments of every shape, loop and `with` targets, walrus, `del`, except-handler
    names, match captures, imports (`*` for a star import), and nested def/class names.
    Statements for which `skip` answers True (at any depth) bind nothing.

    >>> sorted(bound_names(ast.parse("for i in x: y = z = 1").body))
    ['i', 'y', 'z']
    """
    out: set[str] = set()
    for stmt in stmts:
        if skip is None or not skip(stmt):
            _bind_statement(stmt, out, skip)
    return out


def nested_statements(stmt: ast.stmt) -> list[ast.stmt]:
    """The statements directly inside a compound statement's blocks (every branch)."""
    out: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody"):
        out.extend(getattr(stmt, field, ()) or ())
    for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
        out.extend(part.body)
    return out


def header_names(stmt: ast.stmt) -> set[str]:
    """Names a compound statement binds itself (loop/with targets, except and match names),
    leaving out whatever its nested statements bind."""
    out: set[str] = set()
    _bind_statement(stmt, out, lambda _: True)
    return out


def _bind_statement(stmt: ast.stmt, out: set[str],
                    skip: Callable[[ast.stmt], bool] | None) -> None:
    if isinstance(stmt, _DEFS):
        out.add(stmt.name)
        return
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        out.update(name for name, _ in import_bindings(stmt))
        return
    if isinstance(stmt, COMPOUND_STATEMENTS):
        for field in ("body", "orelse", "finalbody"):
            out |= bound_names(getattr(stmt, field, ()) or (), skip)
        for handler in getattr(stmt, "handlers", ()):
            if handler.name:
                out.add(handler.name)
            out |= bound_names(handler.body, skip)
        for case in getattr(stmt, "cases", ()):
            _bind_walk(case.pattern, out)
            out |= bound_names(case.body, skip)
        for field in ("test", "target", "iter", "items", "subject"):
            value = getattr(stmt, field, None)
            if value is not None:
                for part in value if isinstance(value, list) else [value]:
                    _bind_walk(part, out)
        return
    _bind_walk(stmt, out)


def _bind_walk(node: ast.AST, out: set[str]) -> None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
            out.add(sub.id)
        elif isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name:
            out.add(sub.name)
        elif isinstance(sub, ast.MatchMapping) and sub.rest:
            out.add(sub.rest)


class Uses(NamedTuple):
    """What a piece of code reads from outside itself.

    names: bare names (`clean`, `RATE`); chains: dotted reads starting at a name
    (`("m", "f")` for `m.f`); imports: names bound by imports written inside the code
    (`def f(): from helpers import clean`), which win over the module's own bindings.
    """

    names: frozenset[str]
    chains: frozenset[tuple[str, ...]]
    imports: tuple[tuple[str, ImportBinding], ...]

    def __or__(self, other: Uses) -> Uses:
        return Uses(self.names | other.names, self.chains | other.chains,
                    self.imports + other.imports)


def uses_of(nodes: Iterable[ast.AST | None], exclude: frozenset[str] = frozenset()) -> Uses:
    """The names, dotted chains and local imports read by the given nodes.

    A function's parameters are not counted as uses inside its own body (they are always
    local there); its decorators, defaults and annotations are read in the outer scope.

    >>> sorted(uses_of([ast.parse("def f(x, y=K): return m.g(x) + RATE")]).names)
    ['K', 'RATE']
    """
    names: set[str] = set()
    chains: set[tuple[str, ...]] = set()
    imports: list[tuple[str, ImportBinding]] = []
    for node in nodes:
        if node is not None:
            _visit(node, exclude, names, chains, imports)
    return Uses(frozenset(names), frozenset(chains), tuple(imports))


def function_uses(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Uses:
    """Uses of a function's signature and body, leaving its decorators out."""
    names: set[str] = set()
    chains: set[tuple[str, ...]] = set()
    imports: list[tuple[str, ImportBinding]] = []
    _visit_function(fn, frozenset(), names, chains, imports, decorators=False)
    return Uses(frozenset(names), frozenset(chains), tuple(imports))


def _chain(node: ast.Attribute) -> tuple[str, ...] | None:
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    parts.append(current.id)
    return tuple(reversed(parts))


def _visit(node: ast.AST, exclude: frozenset[str], names: set[str],
           chains: set[tuple[str, ...]], imports: list[tuple[str, ImportBinding]]) -> None:
    if isinstance(node, ast.Name):
        if node.id not in exclude:
            names.add(node.id)
        return
    if isinstance(node, ast.Attribute):
        chain = _chain(node)
        if chain is not None:
            if chain[0] not in exclude:
                chains.add(chain)
            return
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        imports.extend(import_bindings(node))
        return
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        _visit_function(node, exclude, names, chains, imports, decorators=True)
        return
    for child in ast.iter_child_nodes(node):
        _visit(child, exclude, names, chains, imports)


def _visit_function(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
                    exclude: frozenset[str], names: set[str], chains: set[tuple[str, ...]],
                    imports: list[tuple[str, ImportBinding]], *, decorators: bool) -> None:
    args = fn.args
    outer: list[ast.AST | None] = [*args.defaults, *args.kw_defaults]
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    outer += [a.annotation for a in every]
    if not isinstance(fn, ast.Lambda):
        outer.append(fn.returns)
        if decorators:
            outer.extend(fn.decorator_list)
    for node in outer:
        if node is not None:
            _visit(node, exclude, names, chains, imports)
    inner = exclude | {a.arg for a in every}
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    for stmt in body:
        _visit(stmt, inner, names, chains, imports)
