"""The local executor's settings, read from the environment (checked before anything runs)."""

from __future__ import annotations

import os

from barca import env_settings
from barca.errors import UsageError

DEFAULT_WARM_SECONDS = 900.0
DEFAULT_SPARE_HEAP = 64 << 20


def pool_size() -> int:
    """BARCA_POOL_SIZE: how many worker processes a run uses at most; every core by default."""
    text = os.environ.get("BARCA_POOL_SIZE")
    if not text:
        return os.cpu_count() or 1
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"BARCA_POOL_SIZE={text!r} is not a positive integer",
                         "set BARCA_POOL_SIZE to 1 or more, or unset it to use every core")
    return int(text)


def capacity(configured: int | None, pool: int) -> tuple[int, str]:
    """BARCA_CAPACITY, else `[run] capacity` in barca.toml, else the pool size: how many units
    of `weight=` the steps running at once may hold together, and which of the three it is."""
    text = os.environ.get("BARCA_CAPACITY")
    if not text:
        return (configured, "[run] capacity") if configured else (pool, "pool size")
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"BARCA_CAPACITY={text!r} is not a positive integer",
                         "set BARCA_CAPACITY to 1 or more, or unset it to use [run] capacity "
                         "in barca.toml or the pool size")
    return int(text), "BARCA_CAPACITY"


def warm_seconds() -> float:
    """BARCA_WARM_SECONDS: how long a warm pool waits for the next run; 0 turns it off."""
    return env_settings.seconds("BARCA_WARM_SECONDS", DEFAULT_WARM_SECONDS,
                                "set BARCA_WARM_SECONDS to 0 (start workers fresh every run) or "
                                "a number of seconds such as 900, or unset it")


def max_pools() -> int:
    """BARCA_WARM_POOLS: how many warm pools (one per project) this user keeps at most; the
    least recently used exits first. One per core, at least four, by default."""
    from barca.engine.local.pool_registry import default_limit

    text = os.environ.get("BARCA_WARM_POOLS")
    if not text:
        return default_limit()
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"BARCA_WARM_POOLS={text!r} is not a positive integer",
                         "set BARCA_WARM_POOLS to 1 or more, or unset it for one per core")
    return int(text)


def spare_heap_bytes(environ: dict[str, str] | None = None) -> int:
    """BARCA_SPARE_HEAP_MB: the most memory each of a warm pool's spares makes ready for the
    run it serves (engine.local.warm_heap), and the most of the pool's pages it copies ahead
    (engine.local.page_copies); 64 by default, 0 turns both off. The newest run's value
    applies to a pool already running."""
    text = (os.environ if environ is None else environ).get("BARCA_SPARE_HEAP_MB")
    if not text:
        return DEFAULT_SPARE_HEAP
    if not text.isdigit():
        raise UsageError(f"BARCA_SPARE_HEAP_MB={text!r} is not a whole number of MB",
                         "set BARCA_SPARE_HEAP_MB to 0 (spares prepare no memory) or a number "
                         "such as 64, or unset it")
    return int(text) << 20
