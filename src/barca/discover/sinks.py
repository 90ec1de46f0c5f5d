"""Reading `@sink(path, serializer=...)` decorators from a function's source.

A sink is an extra export of an asset's result, written by the worker when the asset runs.
It is not a node: it has no id and nothing reads it, so it is read here as a part of the
asset it decorates. Everything that cannot work is refused before anything runs (exit 2):
a sink on a sensor or a task, on a function without @asset, a path that is not a string,
a serializer barca does not write, two sinks on one path.
"""

from __future__ import annotations

import ast

from barca.discover.arguments import Site
from barca.discover.bindings import SINK, BarcaNames
from barca.discover.literals import literal, module_constant
from barca.discover.model import SinkSpec
from barca.discover.modules import ModuleInfo
from barca.discover.options import SERIALIZERS

_FORM = 'write it like @sink("exports/summary.parquet") or @sink("out.json", serializer="json")'


def sink_decorators(fn: ast.FunctionDef | ast.AsyncFunctionDef,
                    names: BarcaNames) -> list[ast.expr]:
    """The function's decorators that are barca's `sink`, in written order."""
    return [d for d in fn.decorator_list
            if names.which(d.func if isinstance(d, ast.Call) else d) == SINK]


def read_sinks(decorators: list[ast.expr], kind: str, site: Site,
               module: ModuleInfo) -> tuple[SinkSpec, ...]:
    """The sinks of a node of `kind`, checked."""
    if decorators and kind != "asset":
        raise site.error(f"@sink exports an asset's result, but {site.function} is a @{kind}",
                         "make it an @asset, or write the file in the function's body",
                         decorators[0])
    out: list[SinkSpec] = []
    for decorator in decorators:
        spec = _read(decorator, site, module)
        if any(other.path == spec.path for other in out):
            raise site.error(f"two @sink decorators write '{spec.path}'",
                             "keep one, or give each its own path", decorator)
        out.append(spec)
    return tuple(out)


def refuse_lone_sink(fn: ast.FunctionDef | ast.AsyncFunctionDef, names: BarcaNames,
                     site: Site) -> None:
    """@sink on a function that is not a node would export nothing, silently: say so."""
    found = sink_decorators(fn, names)
    if found:
        raise site.error(f"@sink on {fn.name}, which is not an @asset: nothing would run it",
                         "stack it under @asset: @asset() then @sink(\"...\") on the next "
                         "line", found[0])


def _read(decorator: ast.expr, site: Site, module: ModuleInfo) -> SinkSpec:
    if not isinstance(decorator, ast.Call):
        raise site.error("@sink needs the path to write to", _FORM, decorator)
    bad = [k.arg or f"**{ast.unparse(k.value)}" for k in decorator.keywords
           if k.arg != "serializer"]
    if len(decorator.args) != 1 or isinstance(decorator.args[0], ast.Starred) or bad:
        shown = f"; it has no argument '{bad[0]}'" if bad else ""
        raise site.error(f"@sink takes one positional argument, the path, and serializer=, "
                         f"not `{ast.unparse(decorator)}`{shown}", _FORM, decorator)
    written = decorator.args[0]
    path = literal(module_constant(written, module))
    if not isinstance(path, str) or not path.strip():
        raise site.error(f"the path of @sink must be a non-empty string literal (or a "
                         f"module-level name bound once to one), not `{ast.unparse(written)}`",
                         _FORM, written)
    serializer = None
    for keyword in decorator.keywords:
        value = literal(module_constant(keyword.value, module))
        if value is not None and value not in SERIALIZERS:
            raise site.error(f"@sink serializer= must be one of "
                             f"{', '.join(map(repr, SERIALIZERS))}, not "
                             f"`{ast.unparse(keyword.value)}`",
                             'write it like serializer="parquet", or leave it out to follow '
                             "the path's extension", keyword.value)
        serializer = value
    return SinkSpec(path, serializer)
