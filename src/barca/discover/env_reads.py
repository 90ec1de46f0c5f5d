"""Environment variables a step's code reads without declaring them in `env=`: found from the
source with `ast` in the function and every project definition its hash follows (cone.py), as
the published barca 0.33 does. Their values are not part of the run hash, so a change of one
reruns nothing; barca says so (a warning, `undeclared_env` in status and dry runs) and never
hashes them.

Reads found: `os.environ[NAME]`, `os.environ.get/setdefault/pop(NAME)`, `NAME in os.environ`,
`os.getenv(NAME)` (also as `environ` / `getenv` imported from `os`), and the fields of a
pydantic `BaseSettings` class (`env_prefix` + the field's name in capitals, or the name its
`Field(alias=|validation_alias=|env=)` gives). A name built by an f-string with literal parts
becomes a pattern (`f"{kind}_CSV"` is `*_CSV`); a name held in a variable cannot be known and
is not reported. Writes (`os.environ[NAME] = ...`) are not reads, and `BARCA_*` variables are
barca's own.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatchcase
from typing import Iterable

_METHODS = frozenset({"get", "setdefault", "pop"})
_ALIASES = ("validation_alias", "alias", "env")


def env_reads(trees: Iterable[ast.AST]) -> frozenset[str]:
    """The variable names (or `*` patterns) the code in `trees` reads."""
    out: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_settings(node):
                out.update(_settings_fields(node))
                continue
            name = _read_name(node)
            if name is not None:
                out.add(name)
    return frozenset(n for n in out if not n.startswith("BARCA_"))


def undeclared(reads: Iterable[str], declared: Iterable[str]) -> tuple[str, ...]:
    """The reads no declared name covers (a pattern is covered by a declared name it matches),
    sorted."""
    declared = tuple(declared)
    return tuple(sorted(r for r in reads if r not in declared and
                        not ("*" in r and any(fnmatchcase(d, r) for d in declared))))


def _read_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
            _is_environ(node.value):
        return _literal(node.slice)
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _METHODS and _is_environ(func.value):
            return _literal(node.args[0])
        if _is_os_name(func, "getenv"):
            return _literal(node.args[0])
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_environ(node.comparators[0]):
        return _literal(node.left)
    return None


def _is_environ(node: ast.AST) -> bool:
    return _is_os_name(node, "environ")


def _is_os_name(node: ast.AST, name: str) -> bool:
    """`os.<name>` or a bare `<name>` (`from os import <name>`)."""
    if isinstance(node, ast.Attribute):
        return node.attr == name and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == name


def _literal(node: ast.AST) -> str | None:
    """A string literal's text; an f-string with literal parts as a `*` pattern."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value or None
    if isinstance(node, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) else "*" for v in node.values]
        if all(p == "*" for p in parts):
            return None
        text = "".join(parts)
        while "**" in text:
            text = text.replace("**", "*")
        return text
    return None


def _is_settings(node: ast.ClassDef) -> bool:
    return any((isinstance(b, ast.Name) and b.id == "BaseSettings") or
               (isinstance(b, ast.Attribute) and b.attr == "BaseSettings") for b in node.bases)


def _settings_fields(node: ast.ClassDef) -> set[str]:
    prefix = _env_prefix(node)
    out = set()
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        field = stmt.target.id
        if field == "model_config" or "ClassVar" in ast.unparse(stmt.annotation):
            continue
        alias = _field_alias(stmt.value)
        out.add(alias if alias is not None else (prefix + field).upper())
    return out


def _env_prefix(node: ast.ClassDef) -> str:
    """`model_config = SettingsConfigDict(env_prefix=...)` (or a dict literal), or pydantic 1's
    `class Config: env_prefix = ...`."""
    for stmt in node.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == "model_config" for t in targets):
                value = stmt.value
                if isinstance(value, ast.Call):
                    for keyword in value.keywords:
                        if keyword.arg == "env_prefix":
                            return _literal(keyword.value) or ""
                if isinstance(value, ast.Dict):
                    for key, item in zip(value.keys, value.values):
                        if key is not None and _literal(key) == "env_prefix":
                            return _literal(item) or ""
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            for inner in stmt.body:
                if isinstance(inner, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "env_prefix" for t in inner.targets):
                    return _literal(inner.value) or ""
    return ""


def _field_alias(value: ast.expr | None) -> str | None:
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None
    if name != "Field":
        return None
    for wanted in _ALIASES:
        for keyword in value.keywords:
            if keyword.arg == wanted:
                return _literal(keyword.value)
    return None
