"""Reading one barca decorator's keyword arguments from the AST into plain values.

Each reader takes the argument's expression as written and returns what it means
(`retries=3` -> 3, `inputs={"raw": raw}` -> an unresolved reference to `raw`), or raises a
`UsageError` that names the node, the line and the fix. Upstream references stay unresolved
here (`Ref`): turning `raw` into `pipeline.py:raw` needs every file's nodes, which is
`resolve.py`'s job. Nothing here is evaluated: a value that is not literal enough is an error,
except `partitions(<expr>)` and `batch=`, whose text is kept for later evaluation.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable, NamedTuple

from barca.discover.bindings import BarcaNames
from barca.discover.modules import ModuleInfo
from barca.errors import UsageError

SERIALIZERS = ("json", "pickle", "parquet", "csv")
# The wait before attempt n is retry_backoff * n seconds; with these the longest (27 years)
# stays within what a sleep can take (292 years), far above any sensible setting.
MAX_RETRIES = 10_000
MAX_RETRY_BACKOFF = 86_400.0
_EXAMPLES = {
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


class Options(NamedTuple):
    """The decorator arguments that are plain settings (none of them is a reference)."""

    freshness: str = "always"
    schedule: str | None = None
    serializer: str | None = None
    retries: int = 1
    retry_backoff: float = 0.0
    timeout_seconds: float = 300.0
    env: tuple[str, ...] = ()
    cutoff: bool = False
    deterministic: bool = True
    weight: int = 1
    batch: str | None = None
    description: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    schedule_batch: tuple[str, ...] = ()  # Schedule(cron, batch=...) as --batch texts


def one_argument(call: ast.Call, helper: str, site: Site,
                 allowed_keywords: tuple[str, ...] = ()) -> ast.expr:
    """The single positional argument of a barca helper call, or a UsageError."""
    bad_kw = [k for k in call.keywords if k.arg not in allowed_keywords]
    if len(call.args) != 1 or isinstance(call.args[0], ast.Starred) or bad_kw:
        # `collect(asset_fn=part)`: the fix is that very argument, moved to the front
        example = (f"{helper}({ast.unparse(bad_kw[0].value)})"
                   if not call.args and len(bad_kw) == 1 and bad_kw[0].arg else
                   _EXAMPLES.get(helper, helper))
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
                         f"`{ast.unparse(arg)}`", _EXAMPLES["asset_ref"], expr)
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
    value = _literal(expr)
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
        value = _literal(element)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        keys.append(str(value))
    return tuple(keys)


_MISSING = object()


def _literal(expr: ast.expr) -> Any:
    try:
        return ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


def read_options(keywords: dict[str, ast.keyword], kind: str, names: BarcaNames, site: Site,
                 module: ModuleInfo) -> Options:
    """Every settings argument, with the defaults of the decorator `kind`."""
    values: dict[str, Any] = {"freshness": "manual" if kind == "sensor" else "always"}
    for arg, keyword in keywords.items():
        expr = keyword.value
        if arg == "freshness":
            values["freshness"], values["schedule"] = _freshness(expr, names, site, kind)
            values["schedule_batch"] = _schedule_batch(expr, site)
        elif arg == "serializer":
            values["serializer"] = _serializer(expr, site, module)
        elif arg == "batch":
            values["batch"] = _batch(module_constant(expr, module), site, names)
        elif arg in ("description", "tags"):  # DESCRIPTION = "..." at module level, say
            values[arg] = _READERS[arg](module_constant(expr, module, arg), expr, site)
        elif arg in _READERS:
            values[arg] = _READERS[arg](expr, site)
    return Options(**values)


def _freshness(expr: ast.expr, names: BarcaNames, site: Site,
               kind: str) -> tuple[str, str | None]:
    marker = names.which_helper(expr)
    if isinstance(expr, ast.Constant) and expr.value is None:
        return ("manual" if kind == "sensor" else "always"), None
    if marker in ("Always", "Manual"):
        label, cron = marker.lower(), None
    elif isinstance(expr, ast.Call) and names.which_helper(expr.func) == "Schedule":
        label, cron = "schedule", _cron(expr, site, names)
    else:
        raise site.error(f"freshness= must be Always, Manual or Schedule(\"<cron>\"), not "
                         f"`{ast.unparse(expr)}`",
                         "Import the marker from barca: from barca import Manual", expr)
    if kind == "sensor" and label == "always":
        raise site.error("a sensor cannot use freshness=Always",
                         "Use Manual (the default) or Schedule(\"<cron>\")", expr)
    return label, cron


def _cron(call: ast.Call, site: Site, names: BarcaNames) -> str:
    arg = one_argument(call, "Schedule", site, allowed_keywords=("batch",))
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        raise site.error(f"Schedule() needs a literal cron string, not `{ast.unparse(arg)}`",
                         _EXAMPLES["Schedule"], call)
    fields = len(arg.value.split())
    if fields not in (5, 6) or not _valid_cron(arg.value, seconds_first=fields == 6):
        raise site.error(f"Schedule(\"{arg.value}\") is not a cron expression: it needs 5 "
                         "fields (minute hour day month weekday), or 6 with leading seconds, "
                         "each in range",
                         'Write it like Schedule("*/15 * * * *")', call)
    return arg.value


def _schedule_batch(expr: ast.expr, site: Site) -> tuple[str, ...]:
    """`Schedule(cron, batch=...)`: the override of the schedule's ticks as `--batch` texts:
    "none", "all", N, or {"node": V}; kept for `barca serve`."""
    batch = next((k.value for k in getattr(expr, "keywords", ()) if k.arg == "batch"), None)
    if batch is None or isinstance(batch, ast.Constant) and batch.value is None:
        return ()
    value = _literal(batch)
    fix = 'Write it like Schedule("0 * * * *", batch="all") or batch={"scored": 20}'
    items = value.items() if isinstance(value, dict) else [(None, value)]
    texts = []
    for node, v in items:
        if not (v in ("none", "all") or type(v) is int and v >= 1) or \
                node is not None and not isinstance(node, str):
            raise site.error(f"Schedule(batch=) takes \"none\", \"all\", a positive integer "
                             f"or a dict of node name to one of them, not `{ast.unparse(batch)}`",
                             fix, batch)
        texts.append(str(v) if node is None else f"{node}={v}")
    return tuple(texts)


def _valid_cron(text: str, seconds_first: bool) -> bool:
    """croniter's reading of the fields; imported only for a file that has a Schedule."""
    from croniter import croniter

    return croniter.is_valid(text, second_at_beginning=seconds_first)


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


def _serializer(expr: ast.expr, site: Site, module: ModuleInfo) -> str | None:
    """A literal, or a module-level name bound once to one; None only when written so (an
    expression barca cannot read is refused, never taken for the default)."""
    source = module_constant(expr, module)
    value = _literal(source)
    if value in SERIALIZERS or isinstance(source, ast.Constant) and source.value is None:
        return value
    raise site.error(f"serializer= must be one of {', '.join(map(repr, SERIALIZERS))}, not "
                     f"`{ast.unparse(expr)}`", 'Write it like serializer="json"', expr)


def _number(name: str, minimum: float, strict: bool, integer: bool,
            maximum: float = math.inf) -> Callable[..., Any]:
    """A reader of a number literal in a range; never infinity or NaN (`1e999` is infinity),
    and a maximum where a larger value would overflow what uses it (a retry's wait)."""
    def read(expr: ast.expr, site: Site) -> Any:
        value = _literal(expr)
        kinds = (int,) if integer else (int, float)
        if isinstance(value, kinds) and not isinstance(value, bool):
            try:
                number = value if integer else float(value)
            except OverflowError:
                number = math.inf
            if (integer or math.isfinite(number)) and number <= maximum and (
                    number > minimum if strict else number >= minimum):
                return number
        what = "an integer" if integer else "a finite number"
        bound = f"above {minimum:g}" if strict else f"of at least {minimum:g}"
        if maximum != math.inf:
            bound += f" and at most {maximum:g}"
        raise site.error(f"{name}= must be {what} literal {bound}, not `{ast.unparse(expr)}`",
                         f"Write it as a number, e.g. {name}={int(minimum) + 1}", expr)
    return read


def _env(expr: ast.expr, site: Site) -> tuple[str, ...]:
    value = _literal(expr) if isinstance(expr, ast.List) else _MISSING
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
            isinstance(v, str) and v and "=" not in v and "\0" not in v for v in value):
        raise site.error(f"env= must be a literal list of variable names as strings (no '=' "
                         f"or NUL in a name), not `{ast.unparse(expr)}`",
                         'Write the names out, e.g. env=["API_URL", "REGION"]', expr)
    return tuple(dict.fromkeys(value))


def _flag(name: str, example: str) -> Callable[..., bool]:
    """A reader of a True / False literal."""
    def read(expr: ast.expr, site: Site) -> bool:
        value = _literal(expr)
        if isinstance(value, bool):
            return value
        raise site.error(f"{name}= must be True or False, not `{ast.unparse(expr)}`",
                         f"Write {name}={example}", expr)
    return read


_cutoff = _flag("cutoff", "True")


_BOUND_ONCE = "or a module-level name bound once to one"


def _description(source: ast.expr, written: ast.expr, site: Site) -> str | None:
    """`source`: what `written` reads (module_constant)."""
    value = _literal(source)
    if value is None or isinstance(value, str):
        return value
    raise site.error(f"description= must be a string literal {_BOUND_ONCE}, not "
                     f"`{ast.unparse(written)}`",
                     'Write it like description="Daily sales per region"', written)


def _tags(source: ast.expr, written: ast.expr, site: Site) -> tuple[tuple[str, str], ...]:
    """`source`: what `written` reads (module_constant)."""
    value = _literal(source)
    if value is None:
        return ()
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                       for k, v in value.items()):
        return tuple(value.items())
    raise site.error(f"tags= must be a dict literal of strings {_BOUND_ONCE} and not changed "
                     f"after, not `{ast.unparse(written)}`",
                     'Write it like tags={"team": "finance"}', written)


def _batch(expr: ast.expr, site: Site, names: BarcaNames) -> str | None:
    """batch= as written, once its form is right: a positive integer, "all", batches(...) or
    batches_by(...); the groups of a literal batches([...]) are checked here too."""
    if isinstance(expr, ast.Constant) and expr.value is None:
        return None
    value = _literal(expr)
    helper = names.which_helper(expr.func) if isinstance(expr, ast.Call) else None
    if helper == "batches":
        _groups(expr, site)
    elif helper == "batches_by":
        _labels_function(expr, site)
    elif not (value == "all" or isinstance(value, int) and not isinstance(value, bool)
              and value >= 1):
        raise site.error(f"batch= must be a positive integer, \"all\", batches([...]) or "
                         f"batches_by(fn), not `{ast.unparse(expr)}`",
                         'Write it like batch=20 or batch="all"', expr)
    if helper is not None:  # kept under the helper's own name, whatever it was imported as
        return ast.unparse(ast.Call(ast.Name(helper), expr.args, expr.keywords))
    return ast.unparse(expr)


def _labels_function(call: ast.Call, site: Site) -> None:
    """batches_by(fn, max_size=N): one function, read when the pipeline loads."""
    fn = one_argument(call, "batches_by", site, allowed_keywords=("max_size",))
    if isinstance(fn, ast.Constant):
        raise site.error(f"batches_by() needs a function that labels a key, not "
                         f"`{ast.unparse(fn)}`", "Write it like batches_by(region_of)", call)
    size = next((k.value for k in call.keywords if k.arg == "max_size"), None)
    if size is not None and not (isinstance(size, ast.Constant) and type(size.value) is int
                                 and size.value >= 1):
        raise site.error(f"batches_by(max_size=) must be a positive integer, not "
                         f"`{ast.unparse(size)}`", "Write it like batches_by(region_of, "
                         "max_size=20)", call)


def _groups(call: ast.Call, site: Site) -> None:
    """A literal batches([[...], ...]): no empty group, no key in two groups."""
    arg = one_argument(call, "batches", site, allowed_keywords=("strict",))
    groups = _literal(arg)
    if groups is _MISSING:
        return  # an expression, evaluated when the pipeline loads
    seen: set[str] = set()
    for group in groups if isinstance(groups, (list, tuple)) else [groups]:
        if not isinstance(group, (list, tuple)) or not group:
            raise site.error(f"batches() needs non-empty lists of keys, not `{group!r}`",
                             'Write it like batches([["r1", "r2"], ["r3"]])', call)
        for key in map(str, group):
            if key in seen:
                raise site.error(f"batches() puts key '{key}' in two groups",
                                 "Put each key in one group", call)
            seen.add(key)


_READERS: dict[str, Callable[..., Any]] = {
    "env": _env, "cutoff": _cutoff, "tags": _tags,  # tags, description: (source, written, site)
    "deterministic": _flag("deterministic", "False"),
    "description": _description,
    "retries": _number("retries", 1, strict=False, integer=True, maximum=MAX_RETRIES),
    "weight": _number("weight", 1, strict=False, integer=True),
    "retry_backoff": _number("retry_backoff", 0, strict=False, integer=False,
                             maximum=MAX_RETRY_BACKOFF),
    "timeout_seconds": _number("timeout_seconds", 0, strict=False, integer=False),  # 0: none
}
