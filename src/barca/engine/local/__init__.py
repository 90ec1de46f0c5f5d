"""Running steps on this machine: worker processes, forked from a per-project warm pool where
one can run. Private to the engine; the driver reaches it only through `local_executor`.
Imports stay inside the functions: the `barca` launcher imports this package on every tick."""

from __future__ import annotations

TYPE_CHECKING = False  # typing and pathlib are not imported for it
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Callable, Sequence

    from barca.engine.executor import NewExecutor


def local_executor(root: Path, files: Sequence[str], capacity: int | None = None,
                   shared: Callable[[], tuple | None] | None = None) -> NewExecutor:
    """A factory of local executors for a run over `files`; its settings are read (and a bad
    one reported) now, its processes start only when the coordinator first needs one.
    `capacity`: `[run] capacity` from barca.toml, if set (BARCA_CAPACITY wins over it).
    `shared`: asked when the executor starts, (server URL, headers, say) of a server whose
    `--capacity` the steps are admitted against as well (a ledger client's, leased_capacity),
    or None."""
    from barca.engine.local import settings

    size, warm = pool_size(), warm_seconds()
    units, _ = settings.capacity(capacity, size)
    settings.max_pools()  # a bad BARCA_WARM_POOLS is reported before anything runs
    settings.spare_heap_bytes()  # and a bad BARCA_SPARE_HEAP_MB

    def new():
        from barca.engine.local.pool import LocalExecutor

        return LocalExecutor(root, size, files, warm_seconds=warm, capacity=units,
                             shared=shared() if shared is not None else None)

    return new


def pool_size() -> int:
    """BARCA_POOL_SIZE: how many worker processes a run uses at most; every core by default."""
    from barca.engine.local import settings

    return settings.pool_size()


def capacity(configured: int | None) -> tuple[int, str]:
    """BARCA_CAPACITY, else `[run] capacity` (`configured`), else the pool size; and which."""
    from barca.engine.local import settings

    return settings.capacity(configured, pool_size())


def warm_seconds() -> float:
    """BARCA_WARM_SECONDS: how long a warm pool waits for the next run; 0 turns it off."""
    from barca.engine.local import settings

    return settings.warm_seconds()


def environment_identity(root: str | Path) -> str:
    """What a process started now inherits and what shapes it, hashed (the warm pool's
    identity: the interpreter, the installed packages, barca's own files, the environment
    without BARCA_* and shell bookkeeping); a kept answer (engine.cached_get) holds only
    while it is the same."""
    from barca.engine.local import warm_pool

    return warm_pool.identity(root)


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


def warm_pools() -> list[dict]:
    """This user's running warm pools, most recently used first: pid, project, memory (its
    own, and its spares' of their own), idle time, and whether one is stopped (SIGSTOP) and so
    answers nobody."""
    import time

    from barca.engine.local import pool_registry

    now = time.time()
    return [{"pid": info.pid, "project": info.root, "rss_bytes": info.rss_bytes,
             "spare_bytes": pool_registry.spare_bytes(info.pid),
             "idle_seconds": round(max(0.0, now - info.last_used), 1),
             "exits_after_idle_seconds": info.idle_seconds,
             "started_at": info.started, "stopped": info.stopped}
            for info in pool_registry.live_pools()]


def stop_warm_pools(root: Path | None) -> list[int]:
    """Stop the warm pool of the project at `root`, or every one of this user's (None); the
    pids stopped."""
    import os

    from barca.engine.local import pool_registry

    real = None if root is None else os.path.realpath(root)
    return [info.pid for info in pool_registry.live_pools()
            if (real is None or info.root == real) and pool_registry.stop(info)]


def shared_capacity_env(socket_path: Path) -> dict[str, str]:
    """The environment entry that gives a server's run its share of the server's capacity
    (`engine.local.shared_capacity`)."""
    from barca.engine.local.shared_capacity import SHARED_CAPACITY_ENV

    return {SHARED_CAPACITY_ENV: str(socket_path)}


def start_served_run(root: Path, env: dict[str, str], fds: tuple[int, int, int]):
    """Run a server's run in a child process: see `engine.local.commands`."""
    from barca.engine.local.commands import start_served_run as start

    return start(root, env, fds)


def start_warm_pool(root: Path, files: Sequence[str]) -> None:
    """Start the project's warm pool now, preloading what `files` import, unless one is up or
    BARCA_WARM_SECONDS is 0 (a server does this at start, so that its first tick is warm)."""
    from barca.engine.local import warm_pool

    idle = warm_seconds()
    if not idle:
        return
    pool = warm_pool.WarmPool.connect(root)
    if pool is not None:
        pool.close()
        return
    warm_pool.start_pool_process(root, warm_pool.top_level_imports(root, files), idle)


def end_pools_with_this_process() -> None:
    """Warm pools started from now on by this process or the commands it starts exit once
    this process is gone, even killed with -9 (a server's pools)."""
    import os

    from barca.engine.local.pool_registry import SERVED_BY, served_by_me

    os.environ[SERVED_BY] = served_by_me()
