"""The decorators and marker objects users write in pipeline files.

Importing a pipeline file must never start work: every decorator here only attaches a
`NodeSpec` to the function and returns the function itself, so decorated functions stay plain
callables that can be unit-tested directly. barca plans from the source text (see
`barca.discover`), not from these objects; workers use them only to find the callable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# Accepted keyword arguments per decorator; discovery validates source against these lists.
ASSET_ARGS = (
    "name", "inputs", "partitions", "serializer", "freshness", "timeout_seconds", "retries",
    "retry_backoff", "description", "tags", "env", "batch", "cutoff", "weight",
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


@dataclass(frozen=True)
class Schedule(_Freshness):
    """Fires under `barca serve` on a cron expression (5 fields, or 6 with leading seconds)."""

    cron: str
    batch: Any = None
    label = "schedule"

    def __init__(self, cron: str, /, *, batch: Any = None) -> None:
        object.__setattr__(self, "cron", cron)
        object.__setattr__(self, "batch", batch)


@dataclass(frozen=True)
class Partitions:
    """Static keys of one dimension: `partitions(["emea", "amer"])`."""

    values: tuple[Any, ...]


def partitions(values: Any, /) -> Partitions:
    return Partitions(tuple(values))


@dataclass(frozen=True)
class PartitionsFrom:
    """Keys taken from another node: a partitioned asset, a list, or a `{key: version}` dict."""

    source: Any


def partitions_from(source: Any, /) -> PartitionsFrom:
    return PartitionsFrom(source)


@dataclass(frozen=True)
class Collect:
    """Fan-in: every current key's value of a partitioned upstream, as one list."""

    upstream: Any


def collect(upstream: Any, /) -> Collect:
    return Collect(upstream)


@dataclass(frozen=True)
class AssetRef:
    """Names a node by id (`"other.py:func"`) without importing it."""

    node_id: str


def asset_ref(node_id: str, /) -> AssetRef:
    return AssetRef(node_id)


@dataclass(frozen=True)
class Batches:
    groups: tuple[tuple[Any, ...], ...]
    strict: bool = False


def batches(groups: Any, /, *, strict: bool = False) -> Batches:
    return Batches(tuple(tuple(g) for g in groups), strict)


@dataclass(frozen=True)
class BatchesBy:
    fn: Callable[[Any], Any]
    max_size: int | None = None


def batches_by(fn: Callable[[Any], Any], /, *, max_size: int | None = None) -> BatchesBy:
    return BatchesBy(fn, max_size)


@dataclass(frozen=True)
class Failed:
    """A batch function's value for one key that failed; the other keys still succeed."""

    reason: str


@dataclass(frozen=True)
class NodeSpec:
    """What a decorator attached to a function; read by workers, never by the planner."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)


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
          cutoff: bool = False, weight: int = 1) -> Any:
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
