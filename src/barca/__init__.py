"""barca: cached Python functions as a dependency graph, recomputed only where they changed.

The public names are loaded on first use (PEP 562), so that `barca --help` and the
`barca` command's other quick answers do not pay for the decorators' imports.
"""

__version__ = "0.1.0"

__all__ = [
    "Always", "BarcaError", "BranchResultError", "Cancelled", "Failed", "InfraError", "Manual",
    "ParallelError", "Schedule", "StepFailed", "UsageError", "asset", "asset_ref", "batches",
    "batches_by", "collect", "duckdb_connection", "get", "group", "history", "parallel",
    "parallel_map", "partitions", "partitions_from", "plan", "run", "sensor", "signed_url",
    "sink", "stats", "task", "unsafe",
]

_HOMES = {  # module -> the public names it defines
    "barca.api": ("Always", "Failed", "Manual", "Schedule", "asset", "asset_ref", "batches",
                  "batches_by", "collect", "duckdb_connection", "group", "partitions",
                  "partitions_from", "sensor", "sink", "task", "unsafe"),
    "barca.errors": ("BarcaError", "Cancelled", "InfraError", "StepFailed", "UsageError"),
    "barca.fanout": ("BranchResultError", "ParallelError", "parallel", "parallel_map"),
    "barca.python_api": ("get", "history", "plan", "run", "signed_url", "stats"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

TYPE_CHECKING = False  # typing is not imported for it: it costs the quick answers 5 ms
if TYPE_CHECKING:  # what editors and type checkers see
    from barca.api import (Always, Failed, Manual, Schedule, asset, asset_ref, batches,
                           batches_by, collect, duckdb_connection, group, partitions,
                           partitions_from, sensor, sink, task, unsafe)
    from barca.errors import BarcaError, Cancelled, InfraError, StepFailed, UsageError
    from barca.fanout import BranchResultError, ParallelError, parallel, parallel_map
    from barca.python_api import get, history, plan, run, signed_url, stats
del TYPE_CHECKING


def __getattr__(name: str) -> object:
    """A public name, loaded from its module; or a submodule not imported yet (`barca.api`,
    which the published barca's scripts call as `barca.api.run`)."""
    import importlib

    module = _HOME.get(name)
    if module is None:
        try:
            return importlib.import_module(f"barca.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"barca.{name}":
                raise
            raise AttributeError(f"module 'barca' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
