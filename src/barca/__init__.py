"""barca: cached Python functions as a dependency graph, recomputed only where they changed."""

from barca.api import (Always, Failed, Manual, Schedule, asset, asset_ref, batches, batches_by,
                       collect, partitions, partitions_from, sensor, task)
from barca.errors import BarcaError, Cancelled, InfraError, StepFailed, UsageError
from barca.python_api import get, run

__version__ = "0.1.0"

__all__ = [
    "Always", "BarcaError", "Cancelled", "Failed", "InfraError", "Manual", "Schedule",
    "StepFailed", "UsageError", "asset", "asset_ref", "batches", "batches_by", "collect", "get",
    "partitions", "partitions_from", "run", "sensor", "task",
]
