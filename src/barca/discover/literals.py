"""What a decorator argument's expression is worth, read without running the pipeline file.

`literal` is `ast.literal_eval` that answers `MISSING` instead of raising, so a reader can
refuse the expression with its own message. `module_constant` follows a module-level name to
the one plain assignment that binds it (`DESCRIPTION = "..."`, `description=DESCRIPTION`),
and refuses to guess when the file could change it before the decorator runs.
"""

from __future__ import annotations

import ast
from typing import Any

from barca.discover.modules import ModuleInfo

MISSING = object()  # what `literal` answers for an expression that is not a literal


def literal(expr: ast.expr) -> Any:
    """The literal's value, or MISSING."""
    try:
        return ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return MISSING


_MUTABLE = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def module_constant(expr: ast.expr, module: ModuleInfo, keyword: str | None = None) -> ast.expr:
    """What a module-level name is bound to, when one plain assignment binds it (not an
    import, nor a binding inside a module-level if/try/for, which cannot be read without
    running the file); any other expression as written. A dict, list or set only when its
    name is used nowhere but as `keyword=` arguments: any other use might change it."""
    if not isinstance(expr, ast.Name):
        return expr
    index = module.index
    stmts = index.defs.get(expr.id, [])
    if len(stmts) != 1 or not isinstance(stmts[0], (ast.Assign, ast.AnnAssign)) or \
            stmts[0].value is None or expr.id in index.conservative or expr.id in index.imports:
        return expr
    value = stmts[0].value
    if isinstance(value, _MUTABLE) and not _used_only_as(keyword, expr.id, stmts[0], module):
        return expr
    return value


def _used_only_as(keyword: str | None, name: str, binding: ast.stmt, module: ModuleInfo) -> bool:
    """`name`, bound by `binding` alone (no second name for the same object), appears nowhere
    in the file but there and as the value of `keyword=` arguments."""
    if keyword is None or isinstance(binding, ast.Assign) and len(binding.targets) != 1:
        return False
    uses = sum(1 for n in ast.walk(module.tree) if isinstance(n, ast.Name) and n.id == name)
    as_keyword = sum(1 for n in ast.walk(module.tree) if isinstance(n, ast.keyword)
                     and n.arg == keyword and isinstance(n.value, ast.Name)
                     and n.value.id == name)
    return uses == 1 + as_keyword

