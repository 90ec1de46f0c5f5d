"""The decorator arguments that are plain settings (`retries=`, `freshness=`, `batch=`, ...).

Each reader takes the argument's expression as written and returns what it means
(`retries=3` -> 3), or raises a `UsageError` that names the node, the line and the fix.
Nothing is evaluated: a value that is not literal enough is an error, except `batch=`, whose
text is kept for later evaluation. None of these names another node (that is
`arguments.py`'s part), so they can be read in one pass with their defaults per decorator.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable, NamedTuple

from barca.discover.arguments import EXAMPLES, Site, one_argument
from barca.discover.bindings import BarcaNames
from barca.discover.literals import MISSING, literal, module_constant
from barca.discover.modules import ModuleInfo

SERIALIZERS = ("json", "pickle", "parquet", "csv")
# The wait before attempt n is retry_backoff * n seconds; with these the longest (27 years)
# stays within what a sleep can take (292 years), far above any sensible setting.
MAX_RETRIES = 10_000
MAX_RETRY_BACKOFF = 86_400.0
SCHEDULE_KEYWORDS = ("batch", "max_failures", "timeout_seconds")


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
    schedule_max_failures: int = 5  # Schedule(cron, max_failures=N)
    schedule_timeout: float | None = None  # Schedule(cron, timeout_seconds=S); None: the server's


def read_options(keywords: dict[str, ast.keyword], kind: str, names: BarcaNames, site: Site,
                 module: ModuleInfo) -> Options:
    """Every settings argument, with the defaults of the decorator `kind`."""
    values: dict[str, Any] = {"freshness": "manual" if kind == "sensor" else "always"}
    for arg, keyword in keywords.items():
        expr = keyword.value
        if arg == "freshness":
            values["freshness"], values["schedule"] = _freshness(expr, names, site, kind)
            values["schedule_batch"] = _schedule_batch(expr, site)
            values.update(_schedule_limits(expr, site))
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
    return label, cron  # a sensor may say Always, as in the published 0.33: it runs anyway


def _cron(call: ast.Call, site: Site, names: BarcaNames) -> str:
    arg = one_argument(call, "Schedule", site, allowed_keywords=SCHEDULE_KEYWORDS)
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        raise site.error(f"Schedule() needs a literal cron string, not `{ast.unparse(arg)}`",
                         EXAMPLES["Schedule"], call)
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
    value = literal(batch)
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


def _schedule_limits(expr: ast.expr, site: Site) -> dict[str, Any]:
    """`Schedule(cron, max_failures=N, timeout_seconds=S)`: after N failed ticks in a row the
    job pauses itself; a tick still running after S seconds is cancelled (0: never, instead
    of the server's --run-timeout)."""
    found = {k.arg: k.value for k in getattr(expr, "keywords", ())}
    out: dict[str, Any] = {}
    if "max_failures" in found:
        out["schedule_max_failures"] = _MAX_FAILURES(found["max_failures"], site)
    timeout = found.get("timeout_seconds")
    if timeout is not None and not (isinstance(timeout, ast.Constant) and timeout.value is None):
        out["schedule_timeout"] = _SCHEDULE_TIMEOUT(timeout, site)
    return out


def _valid_cron(text: str, seconds_first: bool) -> bool:
    """croniter's reading of the fields; imported only for a file that has a Schedule."""
    from croniter import croniter

    return croniter.is_valid(text, second_at_beginning=seconds_first)

def _serializer(expr: ast.expr, site: Site, module: ModuleInfo) -> str | None:
    """A literal, or a module-level name bound once to one; None only when written so (an
    expression barca cannot read is refused, never taken for the default)."""
    source = module_constant(expr, module)
    value = literal(source)
    if value in SERIALIZERS or isinstance(source, ast.Constant) and source.value is None:
        return value
    raise site.error(f"serializer= must be one of {', '.join(map(repr, SERIALIZERS))}, not "
                     f"`{ast.unparse(expr)}`", 'Write it like serializer="json"', expr)


def _number(name: str, minimum: float, strict: bool, integer: bool,
            maximum: float = math.inf) -> Callable[..., Any]:
    """A reader of a number literal in a range; never infinity or NaN (`1e999` is infinity),
    and a maximum where a larger value would overflow what uses it (a retry's wait)."""
    def read(expr: ast.expr, site: Site) -> Any:
        value = literal(expr)
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
    value = literal(expr) if isinstance(expr, ast.List) else MISSING
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
        value = literal(expr)
        if isinstance(value, bool):
            return value
        raise site.error(f"{name}= must be True or False, not `{ast.unparse(expr)}`",
                         f"Write {name}={example}", expr)
    return read


_cutoff = _flag("cutoff", "True")


_BOUND_ONCE = "or a module-level name bound once to one"


def _description(source: ast.expr, written: ast.expr, site: Site) -> str | None:
    """`source`: what `written` reads (module_constant)."""
    value = literal(source)
    if value is None or isinstance(value, str):
        return value
    raise site.error(f"description= must be a string literal {_BOUND_ONCE}, not "
                     f"`{ast.unparse(written)}`",
                     'Write it like description="Daily sales per region"', written)


def _tags(source: ast.expr, written: ast.expr, site: Site) -> tuple[tuple[str, str], ...]:
    """`source`: what `written` reads (module_constant)."""
    value = literal(source)
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
    value = literal(expr)
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
    groups = literal(arg)
    if groups is MISSING:
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
# Schedule()'s own keywords (not the decorator's)
_MAX_FAILURES = _number("max_failures", 1, strict=False, integer=True)
_SCHEDULE_TIMEOUT = _number("timeout_seconds", 0, strict=False, integer=False)
