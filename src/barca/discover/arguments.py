"""The decorator arguments that shape the graph (`name=`, `inputs=`, `partitions=`), read
from the AST into plain values, and what every argument reader shares (`Site`, `one_argument`).

Each reader takes the argument's expression as written and returns what it means
(`inputs={"raw": raw}` -> an unresolved reference to `raw`), or raises a `UsageError` that
names the node, the line and the fix. Upstream references stay unresolved here (`Ref`):
turning `raw` into `pipeline.py:raw` needs every file's nodes, which is `resolve.py`'s job.
Nothing here is evaluated: a value that is not literal enough is an error, except
`partitions(<expr>)`, whose text is kept for later evaluation. The settings arguments are
`options.py`'s.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from barca.discover.bindings import BarcaNames
from barca.discover.literals import literal
from barca.errors import UsageError

EXAMPLES = {  # the right form of each helper call, shown when one is written wrong
    "partitions": 'partitions(["emea", "amer"])',
    "partitions_from": "partitions_from(upstream)",
    "collect": "collect(upstream)",
    "asset_ref": 'asset_ref("pipeline.py:function")',
    "Schedule": 'Schedule("0 * * * *")',
}


class Site(NamedTuple):
    """Where a node is written, for error messages: file, function name and `def` line."""

    file: str
    function: str
    line: int

    def error(self, message: str, remediation: str,
              at: ast.AST | int | None = None) -> UsageError:
        line = at if isinstance(at, int) else getattr(at, "lineno", None) or self.line
        return UsageError(f"Parse error: {self.file}:{self.function} (line {line}): {message}",
                          remediation)


class Ref(NamedTuple):
    """An upstream as written: kind "name" (`raw`), "dotted" (`m.raw`) or "id" (asset_ref)."""

    kind: str
    text: str
    line: int

    @property
    def written_name(self) -> str:
        """The last name written: `raw` for `raw`, `m.raw` and `asset_ref("p.py:raw")`."""
        if self.kind == "id":
            return self.text.rsplit(":", 1)[-1]
        return self.text.rsplit(".", 1)[-1]


class RawInput(NamedTuple):
    param: str
    ref: Ref
    mode: str  # "value" | "collect" | "order"


class RawDimension(NamedTuple):
    name: str
    kind: str  # "static" | "expr" | "from"
    keys: tuple[str, ...] | None = None
    expr: str | None = None
    ref: Ref | None = None



def one_argument(call: ast.Call, helper: str, site: Site,
                 allowed_keywords: tuple[str, ...] = ()) -> ast.expr:
    """The single positional argument of a barca helper call, or a UsageError."""
    bad_kw = [k for k in call.keywords if k.arg not in allowed_keywords]
    if len(call.args) != 1 or isinstance(call.args[0], ast.Starred) or bad_kw:
        # `collect(asset_fn=part)`: the fix is that very argument, moved to the front
        example = (f"{helper}({ast.unparse(bad_kw[0].value)})"
                   if not call.args and len(bad_kw) == 1 and bad_kw[0].arg else
                   EXAMPLES.get(helper, helper))
        raise site.error(f"{helper}() takes exactly one positional argument, not "
                         f"`{ast.unparse(call)}`", f"pass it as the first argument: {example}",
                         call)
    return call.args[0]


def read_ref(expr: ast.expr, names: BarcaNames, site: Site, what: str) -> Ref:
    """A node reference: `name`, `module.name`, `asset_ref("file.py:name")` or that id as a
    plain string (`"file.py:name"`), which reads as asset_ref does."""
    if isinstance(expr, ast.Name):
        return Ref("name", expr.id, expr.lineno)
    chain = _dotted(expr)
    if chain is not None:
        return Ref("dotted", chain, expr.lineno)
    if isinstance(expr, ast.Call) and names.which_helper(expr.func) == "asset_ref":
        arg = one_argument(expr, "asset_ref", site)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and ":" in arg.value:
            return Ref("id", arg.value, expr.lineno)
        raise site.error(f"asset_ref() needs a literal 'file.py:function' string, not "
                         f"`{ast.unparse(arg)}`", EXAMPLES["asset_ref"], expr)
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and ":" in expr.value:
        return Ref("id", expr.value, expr.lineno)
    raise site.error(f"{what} must name a node, not `{ast.unparse(expr)}`",
                     "Write the upstream function's name, module.name, collect(upstream), "
                     'asset_ref("file.py:function") or its id as text, "file.py:function"',
                     expr)


def _dotted(expr: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not parts or not isinstance(expr, ast.Name):
        return None
    return ".".join([expr.id, *reversed(parts)])


def read_name(expr: ast.expr, site: Site) -> str:
    """A node's name: an identifier, as a function name is; it names the node's id, its
    `barca sql` view and its directory under .barca/artifacts/, so it may hold no path."""
    value = literal(expr)
    if not isinstance(value, str) or not value.isidentifier():
        raise site.error(f"name= must be a non-empty string literal that is a Python "
                         f"identifier (letters, digits and _, not starting with a digit), not "
                         f"`{ast.unparse(expr)}`", 'Write it like name="daily_sales"', expr)
    return value


def read_inputs(expr: ast.expr, names: BarcaNames, site: Site) -> tuple[RawInput, ...] | None:
    """The inputs= mapping; None when it is not a dict literal (the caller refuses that)."""
    if not isinstance(expr, ast.Dict):
        return None
    out: list[RawInput] = []
    for key, value in zip(expr.keys, expr.values):
        if key is None or not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            shown = "**" + ast.unparse(value) if key is None else ast.unparse(key)
            raise site.error(f"inputs= keys must be parameter names as string literals, not "
                             f"`{shown}`", 'Write each input as "param": upstream', value)
        param = key.value
        if any(item.param == param for item in out):
            raise site.error(f"inputs= names parameter '{param}' twice",
                             f'Keep one entry for "{param}"', key)
        mode = "value"
        if isinstance(value, ast.Call) and names.which_helper(value.func) == "collect":
            value, mode = one_argument(value, "collect", site), "collect"
        ref = read_ref(value, names, site, f"input '{param}'")
        # an underscore name only orders the steps, unless collect() asks for the values
        out.append(RawInput(param, ref, "order" if param.startswith("_") and mode == "value"
                            else mode))
    return tuple(out)


def read_partitions(expr: ast.expr, names: BarcaNames, site: Site) -> tuple[RawDimension, ...]:
    """partitions={"dim": partitions([...]) | partitions(<expr>) | partitions_from(x)}."""
    fix = 'Write partitions={"dim": partitions(["a", "b"])} or {"dim": partitions_from(upstream)}'
    if not isinstance(expr, ast.Dict):
        raise site.error(f"partitions= must be a dict literal, not `{ast.unparse(expr)}`",
                         fix, expr)
    out: list[RawDimension] = []
    for key, value in zip(expr.keys, expr.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)
                and key.value.isidentifier()):
            raise site.error(f"partitions= keys must be dimension names, string literals that "
                             f"are Python identifiers (each is a parameter of the function), "
                             f"not `{ast.unparse(key) if key else '**'}`", fix, value)
        if any(dim.name == key.value for dim in out):
            raise site.error(f"partitions= declares dimension '{key.value}' twice",
                             f"Keep one entry for '{key.value}'", key)
        helper = names.which_helper(value.func) if isinstance(value, ast.Call) else None
        if helper == "partitions_from":
            arg = one_argument(value, helper, site)  # type: ignore[arg-type]
            ref = read_ref(arg, names, site, f"partitions_from() of dimension '{key.value}'")
            out.append(RawDimension(key.value, "from", ref=ref))
        elif helper == "partitions":
            arg = one_argument(value, helper, site)  # type: ignore[arg-type]
            out.append(_partitions(key.value, arg, site))
        else:
            raise site.error(f"dimension '{key.value}' must be partitions(...) or "
                             f"partitions_from(...), not `{ast.unparse(value)}`", fix, value)
    return tuple(out)


def _partitions(dim: str, arg: ast.expr, site: Site) -> RawDimension:
    keys = _static_keys(arg)
    if keys is None:
        return RawDimension(dim, "expr", expr=ast.unparse(arg))
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise site.error(f"partition key '{key}' appears twice in dimension '{dim}'",
                             "List each key once", arg)
        seen.add(key)
    return RawDimension(dim, "static", keys=keys)


def _static_keys(arg: ast.expr) -> tuple[str, ...] | None:
    """Keys of a literal list or tuple of strings and ints (ints become their text)."""
    if not isinstance(arg, (ast.List, ast.Tuple)):
        return None
    keys: list[str] = []
    for element in arg.elts:
        value = literal(element)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        keys.append(str(value))
    return tuple(keys)

