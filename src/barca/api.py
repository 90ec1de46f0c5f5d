"""The decorators and marker objects users write in pipeline files.

Importing a pipeline file must never start work: every decorator here only attaches a
`NodeSpec` to the function and returns the function itself, so decorated functions stay plain
callables that can be unit-tested directly. barca plans from the source text (see
`barca.discover`), not from these objects; workers use them only to find the callable.

The calls `get`, `run`, `plan`, `history` and `stats` (barca.python_api) are re-exported at
the end: the published barca defines them in `barca.api`, and scripts call `barca.api.run`.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# Accepted keyword arguments per decorator; discovery validates source against these lists.
ASSET_ARGS = (
    "name", "inputs", "partitions", "serializer", "freshness", "timeout_seconds", "retries",
    "retry_backoff", "description", "tags", "env", "batch", "cutoff", "weight", "deterministic",
)
SENSOR_ARGS = (
    "name", "partitions", "serializer", "freshness", "timeout_seconds", "retries",
    "retry_backoff", "description", "tags", "env", "weight",
)
TASK_ARGS = (
    "name", "inputs", "partitions", "serializer", "freshness", "timeout_seconds", "retries",
    "retry_backoff", "description", "tags", "env", "batch", "weight",
)
DECORATOR_ARGS = {"asset": ASSET_ARGS, "sensor": SENSOR_ARGS, "task": TASK_ARGS}


_MISSING: Any = object()  # a helper's positional argument not given


class _Marker:
    """A small immutable record; plain slots instead of dataclasses keep `import barca` fast."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, *values: Any) -> None:
        for name, value in zip(self.__slots__, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash((type(self).__name__, *(repr(getattr(self, n)) for n in self.__slots__)))

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({args})"


class _Freshness:
    """Base of the freshness markers; only recorded and shown, it never changes a hash."""

    label = "always"

    def __repr__(self) -> str:
        return type(self).__name__


class _AlwaysType(_Freshness):
    label = "always"


class _ManualType(_Freshness):
    label = "manual"


Always = _AlwaysType()
Manual = _ManualType()


class Schedule(_Marker, _Freshness):
    """Fires under `barca serve` on a cron expression (5 fields, or 6 with leading seconds)."""

    __slots__ = ("cron", "batch", "max_failures", "timeout_seconds")
    label = "schedule"

    def __init__(self, cron: str = _MISSING, /, *, batch: Any = None, max_failures: int = 5,
                 timeout_seconds: float | None = None, **wrong: Any) -> None:
        _one_positional("Schedule", cron, "the cron expression", wrong)
        super().__init__(cron, batch, max_failures, timeout_seconds)


class Partitions(_Marker):
    """Static keys of one dimension: `partitions(["emea", "amer"])`."""

    __slots__ = ("values",)


def partitions(values: Any = _MISSING, /, **wrong: Any) -> Partitions:
    _one_positional("partitions", values, "the key list", wrong)
    return Partitions(tuple(values))


class PartitionsFrom(_Marker):
    """Keys taken from another node: a partitioned asset, a list, or a `{key: version}` dict."""

    __slots__ = ("source",)


def partitions_from(source: Any = _MISSING, /, **wrong: Any) -> PartitionsFrom:
    _one_positional("partitions_from", source, "the upstream", wrong)
    return PartitionsFrom(source)


class Collect(_Marker):
    """Fan-in: every current key's value of a partitioned upstream, as one list."""

    __slots__ = ("upstream",)


def collect(upstream: Any = _MISSING, /, **wrong: Any) -> Collect:
    _one_positional("collect", upstream, "the partitioned upstream", wrong)
    return Collect(upstream)


class AssetRef(_Marker):
    """Names a node by id (`"other.py:func"`) without importing it."""

    __slots__ = ("node_id",)


def asset_ref(node_id: Any = _MISSING, /, **wrong: Any) -> AssetRef:
    _one_positional("asset_ref", node_id, "the node id", wrong)
    return AssetRef(node_id)


def _one_positional(helper: str, given: Any, what: str, wrong: dict[str, Any]) -> None:
    """A helper given its one argument by keyword (`collect(asset_fn=part)`, as the published
    barca names it) or not at all: say how to write it, as discovery does for a file."""
    if not wrong:
        if given is _MISSING:
            raise TypeError(f"{helper}() takes {what} as its one positional argument")
        return
    name, value = next(iter(wrong.items()))
    if given is not _MISSING:
        raise TypeError(f"{helper}() got an unexpected keyword argument {name!r}")
    shown = getattr(value, "__name__", None) or repr(value)
    raise TypeError(f"{helper}() takes {what} as its one positional argument, not as "
                    f"{name}=: write {helper}({shown if len(shown) <= 40 else '...'})")


class Batches(_Marker):
    """Explicit groups of keys that share a call (`batch=batches([...])`)."""

    __slots__ = ("groups", "strict")


def batches(groups: Any, /, *, strict: bool = False) -> Batches:
    return Batches(tuple(tuple(g) for g in groups), strict)


class BatchesBy(_Marker):
    """Keys with the same label share a call (`batch=batches_by(fn)`)."""

    __slots__ = ("fn", "max_size")


def batches_by(fn: Callable[[Any], Any], /, *, max_size: int | None = None) -> BatchesBy:
    return BatchesBy(fn, max_size)


class Failed(_Marker):
    """A batch function's value for one key that failed; the other keys still succeed."""

    __slots__ = ("reason",)


class NodeSpec(_Marker):
    """What a decorator attached to a function; read by workers, never by the planner."""

    __slots__ = ("kind", "options")


def sink(path: str, /, *, serializer: str | None = None) -> Callable[[F], F]:
    """Export an asset's result to `path` too, whenever the asset runs (stacked under
    @asset). A local path, `file://...`, or an fsspec URL; ending in `/`, a directory."""
    def attach(f: F) -> F:
        return f

    return attach


def unsafe(fn: F) -> F:
    """Mark a function whose result barca cannot reason about (it reads globals or does
    I/O). A marker only, as in the published barca: caching is unchanged, and it is not part
    of the definition hash."""
    return fn


class Group(_Marker):
    """What `group()` returns: a label for a set of nodes and groups, for `barca list
    --groups` and the UI. It never adds a step, an input or a hash part."""

    __slots__ = ("name", "members", "output", "description")


def group(name: str, /, *, members: Any, output: Any, description: str | None = None
          ) -> Group:
    """Organise nodes (and other groups) under a name: `training = group("Training",
    members=[rows, model], output=model)`. barca reads it from the source (`barca docs
    assets`); at import time it only keeps the references."""
    return Group(name, tuple(members), output, description)


def duckdb_connection() -> Any:
    """The DuckDB connection relation inputs (`duckdb.DuckDBPyRelation`) are opened on: one per
    worker process, duckdb's default connection (what `duckdb.sql()` uses). Configure it once
    at import time (extensions, `SET`, macros); it lasts for the worker's life."""
    import duckdb

    found = duckdb.default_connection
    return found() if callable(found) else found


def _decorator(kind: str) -> Callable[..., Any]:
    def decorator(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        def attach(f: F) -> F:
            f.__barca__ = NodeSpec(kind, options)  # type: ignore[attr-defined]
            return f

        return attach(fn) if fn is not None else attach

    decorator.__name__ = kind
    return decorator


def asset(fn: F | None = None, /, *, name: str | None = None, inputs: dict | None = None,
          partitions: dict | None = None, serializer: str | None = None,
          freshness: Any = Always, timeout_seconds: float = 300, retries: int = 1,
          retry_backoff: float = 0.0, description: str | None = None,
          tags: dict | None = None, env: list | None = None, batch: Any = None,
          cutoff: bool = False, weight: int = 1, deterministic: bool = True) -> Any:
    """Declare a cached function: it reruns only when its run hash changes."""
    opts = {k: v for k, v in locals().items() if k != "fn"}
    return _decorator("asset")(fn, **opts) if fn is not None else _decorator("asset")(**opts)


def sensor(fn: F | None = None, /, *, name: str | None = None, partitions: dict | None = None,
           serializer: str | None = None, freshness: Any = Manual,
           timeout_seconds: float = 300, retries: int = 1, retry_backoff: float = 0.0,
           description: str | None = None, tags: dict | None = None,
           env: list | None = None, weight: int = 1) -> Any:
    """Declare an observer of the outside world: it runs every time, its value feeds readers."""
    opts = {k: v for k, v in locals().items() if k != "fn"}
    return _decorator("sensor")(fn, **opts) if fn is not None else _decorator("sensor")(**opts)


def task(fn: F | None = None, /, *, name: str | None = None, inputs: dict | None = None,
         partitions: dict | None = None, serializer: str | None = None,
         freshness: Any = Always, timeout_seconds: float = 300, retries: int = 1,
         retry_backoff: float = 0.0, description: str | None = None,
         tags: dict | None = None, env: list | None = None, batch: Any = None,
         weight: int = 1) -> Any:
    """Declare a side effect: it always runs and is never served from cache."""
    opts = {k: v for k, v in locals().items() if k != "fn"}
    return _decorator("task")(fn, **opts) if fn is not None else _decorator("task")(**opts)


from barca.errors import BarcaError  # noqa: E402,F401  (see the module docstring)
from barca.python_api import get, history, plan, run, stats  # noqa: E402,F401
