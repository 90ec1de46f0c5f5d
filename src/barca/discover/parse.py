"""Finding barca nodes in one parsed pipeline file and checking them against their signature.

A node is a top-level function whose decorator is provably barca's `asset`, `sensor` or
`task` (see `bindings.py`). This module reads that decorator's arguments (through
`arguments.py`), rejects what the planner cannot see (positional arguments, `*args`,
`**options`, unknown or misspelt names, `@sensor(inputs=...)`) and checks the function's
parameters against what will feed them. Every error is raised before any user code runs.
It produces `RawNode`s whose upstream references are still names as written; `resolve.py`
turns them into node ids once every file has been read.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from barca.api import DECORATOR_ARGS
from barca.discover.arguments import (RawDimension, RawInput, Site, read_inputs, read_name,
                                      read_partitions)
from barca.discover.bindings import DECORATORS, UNSAFE, BarcaNames, barca_names
from barca.discover.literals import module_constant
from barca.discover.modules import ModuleInfo
from barca.discover.model import SinkSpec
from barca.discover.options import Options, read_options
from barca.discover.sinks import read_sinks, refuse_lone_sink, sink_decorators

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class RawNode(NamedTuple):
    """One decorated function as read from its file, references not yet resolved."""

    file: str
    name: str
    kind: str
    site: Site
    fn: FunctionNode
    params: tuple[str, ...]
    annotations: tuple[tuple[str, str], ...]
    inputs: tuple[RawInput, ...]
    dimensions: tuple[RawDimension, ...]
    options: Options
    decorators: tuple[ast.expr, ...]  # the function's other (non-barca) decorators, in order
    counted: tuple[ast.expr, ...]  # counted argument expressions whose names the cone follows
    sinks: tuple[SinkSpec, ...] = ()  # @sink decorators, top to bottom

    @property
    def node_id(self) -> str:
        return f"{self.file}:{self.name}"

    @property
    def function(self) -> str:
        return self.fn.name


def parse_module(module: ModuleInfo) -> list[RawNode]:
    """Every barca node defined at the top level of `module`, in source order."""
    names = barca_names(module.tree, module.source)
    if not names.aliases and not names.modules:
        return []
    out: list[RawNode] = []
    for stmt in module.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = _node(stmt, names, module)
            if node is not None:
                out.append(node)
        elif isinstance(stmt, ast.ClassDef):
            _refuse_decorated_class(stmt, names, module)
    return out


def _refuse_decorated_class(cls: ast.ClassDef, names: BarcaNames, module: ModuleInfo) -> None:
    """A barca decorator on a class would make no node, without a word: say so."""
    for decorator in cls.decorator_list:
        kind = names.which(decorator.func if isinstance(decorator, ast.Call) else decorator)
        if kind in DECORATORS:
            raise Site(module.file, cls.name, cls.lineno).error(
                f"@{kind} decorates class {cls.name}; barca nodes are functions",
                f"Decorate a function that returns the value, e.g. def {cls.name.lower()}(): "
                f"return {cls.name}(...)", decorator)


def _barca_decorator(fn: FunctionNode, names: BarcaNames,
                     site: Site) -> tuple[ast.expr, str] | None:
    found = []
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        kind = names.which(target)
        if kind in DECORATORS:
            found.append((decorator, kind))
    if len(found) > 1:
        kinds = ", ".join(f"@{kind}" for _, kind in found)
        raise site.error(f"{fn.name} has more than one barca decorator ({kinds})",
                         "Keep exactly one of @asset, @sensor and @task", found[1][0])
    return found[0] if found else None


def _node(fn: FunctionNode, names: BarcaNames, module: ModuleInfo) -> RawNode | None:
    site = Site(module.file, fn.name, fn.lineno)
    found = _barca_decorator(fn, names, site)
    if found is None:
        refuse_lone_sink(fn, names, site)
        return None
    decorator, kind = found
    if isinstance(fn, ast.AsyncFunctionDef):
        raise site.error(f"{fn.name} is async: barca calls it and would never await what it "
                         "returns", "Define it with def, and run async code inside it with "
                         "asyncio.run(...)", fn)
    written = _keywords(decorator, kind, site)
    if kind == "sensor" and "inputs" in written:
        shown = written["name"].value if "name" in written else None
        name = read_name(shown, site) if shown is not None else fn.name
        raise site.error(f"sensor '{module.file}:{name}' cannot have inputs",
                         "Remove inputs=; a sensor observes the outside world. Make it an "
                         "@asset if it needs upstream values", written["inputs"].value)
    _check_accepted(written, kind, site)
    keywords = {arg: keyword for arg, keyword in written.items()
                if not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None)}
    return _read_node(fn, decorator, kind, keywords, names, module, site)


def _read_node(fn: FunctionNode, decorator: ast.expr, kind: str,
               keywords: dict[str, ast.keyword], names: BarcaNames, module: ModuleInfo,
               site: Site) -> RawNode:
    """Read the arguments (a `None` value counts as absent) and check the signature."""
    name = read_name(keywords["name"].value, site) if "name" in keywords else fn.name
    inputs: tuple[RawInput, ...] = ()
    if "inputs" in keywords:
        written = keywords["inputs"].value
        found = read_inputs(_inputs_constant(written, module), names, site)
        if found is None:
            raise site.error(f"inputs= must be a dict literal, or a module-level name bound "
                             f"once to one and not changed after, not `{ast.unparse(written)}`",
                             'write the mapping in the decorator: inputs={"orders": orders}',
                             written)
        inputs = found  # hashed as its entries, like a literal: moving it changes nothing
    dimensions: tuple[RawDimension, ...] = ()
    if "partitions" in keywords:
        dimensions = read_partitions(keywords["partitions"].value, names, site)
    options = read_options(keywords, kind, names, site, module)
    if options.batch is not None and not dimensions:
        raise site.error(f"batch= groups partition keys into calls, but {fn.name} has no "
                         "partitions", "Remove batch=, or declare partitions=",
                         keywords["batch"].value)
    _check_signature(fn, kind, inputs, dimensions, site)
    params, annotations = _signature(fn)
    if options.batch is not None:
        _check_batch_form(fn, dimensions, dict(annotations), site)
    counted = tuple(keywords[k].value for k in ("serializer",) if k in keywords)
    sink_list = sink_decorators(fn, names)
    sinks = read_sinks(sink_list, kind, site, module)
    others = tuple(d for d in fn.decorator_list if d is not decorator and d not in sink_list
                   and names.which(d) != UNSAFE)  # @unsafe is a marker: not hashed
    return RawNode(module.file, name, kind, site, fn, params, annotations, inputs,
                   dimensions, options, others, counted, sinks)


_SCALARS = {"str", "int", "float", "bool", "bytes", "builtins.str", "builtins.int"}


def _check_batch_form(fn: FunctionNode, dimensions: tuple[RawDimension, ...],
                      annotations: dict[str, str], site: Site) -> None:
    """With batch=, a partition parameter receives the call's list of keys: annotated as a
    single key, the function was written for one key at a time."""
    for dim in dimensions:
        written = annotations.get(dim.name, "").replace(" ", "")
        if written in _SCALARS:
            raise site.error(
                f"{fn.name} has batch=, so its partition parameter '{dim.name}' receives the "
                f"list of the call's keys, but it is annotated `{dim.name}: {written}`",
                f"Annotate it `{dim.name}: list[{written}]` and loop over the keys, or "
                f"remove batch= to take one key per call", fn)


def _inputs_constant(expr: ast.expr, module: ModuleInfo) -> ast.expr:
    """`inputs=INPUTS`, where INPUTS is bound once at module level to a dict literal and used
    nowhere else but as `inputs=`: that dict literal. Anything else comes back as written
    (a name that is rebound, mutated or imported cannot be read without running the file)."""
    value = module_constant(expr, module, "inputs")
    return value if isinstance(value, ast.Dict) else expr


def _keywords(decorator: ast.expr, kind: str, site: Site) -> dict[str, ast.keyword]:
    if not isinstance(decorator, ast.Call):
        return {}
    for arg in decorator.args:
        if isinstance(arg, ast.Starred):
            raise site.error(f"@{kind}({ast.unparse(arg)}) cannot be read without running "
                             "the file", "Write each argument out as a keyword", arg)
        raise site.error(f"@{kind} takes no positional arguments, got `{ast.unparse(arg)}`",
                         f"Pass every argument by keyword, e.g. @{kind}(name=...)", arg)
    out: dict[str, ast.keyword] = {}
    for keyword in decorator.keywords:
        if keyword.arg is None:
            raise site.error(f"@{kind}(**{ast.unparse(keyword.value)}) cannot be read without "
                             "running the file", "Write each argument out as a keyword",
                             keyword.value)
        out[keyword.arg] = keyword
    return out


def _check_accepted(keywords: dict[str, ast.keyword], kind: str, site: Site) -> None:
    accepted = DECORATOR_ARGS[kind]
    for arg, keyword in keywords.items():
        if arg in accepted:
            continue
        close = [name for name in accepted
                 if edit_distance(arg, name) <= (2 if len(arg) > 4 else 1)]
        fix = (f"Did you mean {close[0]}?" if len(close) == 1
               else f"Remove {arg}= or use one of the accepted arguments")
        raise site.error(f"@{kind} has no argument '{arg}'; accepted: {', '.join(accepted)}",
                         fix, keyword)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance.

    >>> edit_distance("input", "inputs"), edit_distance("retires", "retries")
    (1, 2)
    """
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _signature(fn: FunctionNode) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    args = fn.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    annotations = [(a.arg, ast.unparse(a.annotation)) for a in named if a.annotation]
    if fn.returns is not None:
        annotations.append(("return", ast.unparse(fn.returns)))
    return tuple(a.arg for a in named), tuple(annotations)


def _required(fn: FunctionNode) -> list[str]:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    out = [a.arg for a in positional[:len(positional) - len(args.defaults)]]
    out += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return out


def _check_signature(fn: FunctionNode, kind: str, inputs: tuple[RawInput, ...],
                     dimensions: tuple[RawDimension, ...], site: Site) -> None:
    params, _ = _signature(fn)
    open_ended = fn.args.kwarg is not None
    listed = ", ".join(params) or "none"
    for item in inputs:
        if item.param not in params and not open_ended:
            raise site.error(f"inputs= key '{item.param}' is not a parameter of {fn.name}",
                             f"Rename the key to one of {fn.name}'s parameters ({listed}), "
                             f"or add a parameter '{item.param}' to {fn.name}", item.ref.line)
    input_params = {item.param for item in inputs}
    for dim in dimensions:
        if dim.name not in params and not open_ended:
            raise site.error(f"partition dimension '{dim.name}' is not a parameter of "
                             f"{fn.name}", f"Add a parameter '{dim.name}' to {fn.name}: it "
                             "receives the partition key")
        if dim.name in input_params:
            raise site.error(f"'{dim.name}' is both an input and a partition dimension of "
                             f"{fn.name}", "Rename the input or the dimension")
    if kind == "task":
        return  # checked once every node is known (`unsupplied_error`)
    for param in unsupplied(fn, inputs, dimensions):
        raise unsupplied_error(site, fn.name, param, kind)


def unsupplied(fn: FunctionNode, inputs: tuple[RawInput, ...],
               dimensions: tuple[RawDimension, ...]) -> list[str]:
    """The parameters without a default that neither inputs= nor a partition dimension
    supplies: calling the function as a step would raise TypeError."""
    supplied = {item.param for item in inputs} | {d.name for d in dimensions}
    supplied |= {d.ref.written_name for d in dimensions if d.ref is not None}
    return [param for param in _required(fn) if param not in supplied]


def unsupplied_error(site: Site, function: str, param: str, kind: str):
    fix = (f"Give '{param}' a default or remove it (a sensor takes no inputs)"
           if kind == "sensor" else
           f"Add it to inputs= (inputs={{\"{param}\": upstream}}), give it a default, "
           "or remove it")
    return site.error(f"parameter '{param}' of {function} has no default and nothing "
                      "supplies it", fix)
