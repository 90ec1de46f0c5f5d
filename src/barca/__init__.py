"""barca: cached Python functions as a dependency graph, recomputed only where they changed."""

from barca.api import (Always, Failed, Manual, Schedule, asset, asset_ref, batches, batches_by,
                       collect, partitions, partitions_from, sensor, sink, task)
from barca.errors import BarcaError, Cancelled, InfraError, StepFailed, UsageError
from barca.fanout import ParallelError, parallel, parallel_map
from barca.python_api import get, history, plan, run, stats

__version__ = "0.1.0"

__all__ = [
    "Always", "BarcaError", "Cancelled", "Failed", "InfraError", "Manual", "ParallelError",
    "Schedule", "StepFailed", "UsageError", "asset", "asset_ref", "batches", "batches_by",
    "collect", "get", "history", "parallel", "parallel_map", "partitions", "partitions_from",
    "plan", "run", "sensor", "sink", "stats", "task",
]
