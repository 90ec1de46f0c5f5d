"""Running steps on this machine: worker processes, forked from a per-project warm pool where
one can run. Private to the engine; the driver reaches it only through `local_executor`."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from barca.engine.executor import NewExecutor
from barca.engine.local.settings import pool_size, warm_seconds

__all__ = ["local_executor", "pool_size", "running_pool", "warm_pool_supported",
           "warm_seconds"]


def local_executor(root: Path, files: Sequence[str]) -> NewExecutor:
    """A factory of local executors for a run over `files`; its settings are read (and a bad
    one reported) now, its processes start only when the coordinator first needs one."""
    size, warm = pool_size(), warm_seconds()

    def new():
        from barca.engine.local.pool import LocalExecutor

        return LocalExecutor(root, size, files, warm_seconds=warm)

    return new


def running_pool(root: Path) -> tuple[int, int] | None:
    """(pid, number of imported modules) of the project's warm pool, if one answers."""
    from barca.engine.local import warm_pool

    pool = warm_pool.WarmPool.connect(root)
    if pool is None:
        return None
    pool.close()
    return pool.pid, len(pool.modules)


def warm_pool_supported() -> bool:
    from barca.engine.local import warm_pool

    return warm_pool.supported()
