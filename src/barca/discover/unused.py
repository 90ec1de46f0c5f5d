"""Inputs a function never uses: each is still computed and loaded before the step runs, which
is usually a mistake (a misspelt name, a leftover after an edit). Read from the function's
source with `ast`; the warning itself is made where a run or `barca plan` is planned.

A parameter counts as used when its name appears anywhere in the body as a name (not only in
`del`), or as a whole word inside a string literal other than a bare statement string (SQL
naming a table it reads). Nothing is reported for a stub body (docstring, `pass`, `...`,
`raise`), a function with `**kwargs`, one that reaches its arguments dynamically (`locals()`,
`vars()`, `eval`, frames), or one that hands a non-literal to a query call (`sql`, `execute`,
`query`, ...) which may name the input in text built at run time.
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Iterable

_DYNAMIC = frozenset({"locals", "vars", "eval", "exec", "currentframe", "_getframe",
                      "f_locals", "f_back", "getargvalues", "stack"})
_QUERY_CALLS = frozenset({"sql", "execute", "executemany", "query", "from_query", "table",
                          "view", "read_sql", "read_sql_query", "SQLContext"})
_UNRELATED = frozenset(
    "pyarrow numpy matplotlib scipy sklearn requests httpx aiohttp urllib3 yaml orjson torch "
    "tensorflow xgboost lightgbm statsmodels seaborn plotly networkx sympy boto3 botocore "
    "fsspec tqdm pydantic click rich PIL cv2 jinja2 dateutil pytz barca".split())


def unused_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, params: Iterable[str]
                  ) -> tuple[str, ...]:
    """The parameters among `params` that the function's body never mentions."""
    candidates = [p for p in params if not p.startswith("_")]
    if not candidates or fn.args.kwarg is not None or _is_stub(fn.body):
        return ()
    names: set[str] = set()
    texts: list[str] = []
    bare = {id(stmt.value) for stmt in ast.walk(fn) if isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)}
    for body in fn.body:
        for node in ast.walk(body):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Del):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and node.attr in _DYNAMIC:
                names.add(node.attr)  # sys._getframe(), frame.f_locals
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    id(node) not in bare:
                texts.append(node.value)
            elif isinstance(node, ast.Call) and _dynamic_query(node):
                return ()
    if names & _DYNAMIC:
        return ()
    text = "\n".join(texts)
    return tuple(p for p in candidates if p not in names and
                 not re.search(rf"(?<![\w]){re.escape(p)}(?![\w])", text))


def _is_stub(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, (ast.Pass, ast.Raise)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and (
                isinstance(stmt.value.value, str) or stmt.value.value is Ellipsis):
            continue
        return False
    return True


def _dynamic_query(call: ast.Call) -> bool:
    """A query call given text that is not a literal, on something that may run SQL."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    if name not in _QUERY_CALLS:
        return False
    if isinstance(func, ast.Attribute):
        owner = func.value
        while isinstance(owner, ast.Attribute):
            owner = owner.value
        if isinstance(owner, ast.Name) and (owner.id in sys.stdlib_module_names or
                                            owner.id in _UNRELATED):
            return False
    args = [*call.args, *(k.value for k in call.keywords)]
    return any(not (isinstance(a, ast.Constant) and isinstance(a.value, str)) for a in args)
