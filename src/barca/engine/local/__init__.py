"""Running steps on this machine: worker processes, forked from a per-project warm pool where
one can run. Private to the engine; the driver reaches it only through `local_executor`.
Imports stay inside the functions: the `barca` launcher imports this package on every tick."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from barca.engine.executor import NewExecutor


def local_executor(root: Path, files: Sequence[str]) -> NewExecutor:
    """A factory of local executors for a run over `files`; its settings are read (and a bad
    one reported) now, its processes start only when the coordinator first needs one."""
    size, warm = pool_size(), warm_seconds()

    def new():
        from barca.engine.local.pool import LocalExecutor

        return LocalExecutor(root, size, files, warm_seconds=warm)

    return new


def pool_size() -> int:
    """BARCA_POOL_SIZE: how many worker processes a run uses at most; every core by default."""
    from barca.engine.local import settings

    return settings.pool_size()


def warm_seconds() -> float:
    """BARCA_WARM_SECONDS: how long a warm pool waits for the next run; 0 turns it off."""
    from barca.engine.local import settings

    return settings.warm_seconds()


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
