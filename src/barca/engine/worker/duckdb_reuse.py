"""Keep read-only DuckDB databases open in a worker for the length of a run, sharing the cores.

Opening a DuckDB file costs tens of milliseconds (it reads the catalog); a step that calls
`duckdb.connect("warehouse.duckdb", read_only=True)` once per partition key would pay that for
every key. The worker holds one connection per file it has seen opened read-only, and each
`connect` to it gets a new connection to that open database (`cursor()`: a connection of its
own, as `connect` gives, without looking the database up again). A `connect` to a held file
with another configuration, or read-write, first closes the held one when no connection handed
out from it is still in use, as earlier steps' own connections would have been closed in a
fresh process (else DuckDB refuses it, as it would there). Workers end with the run, and so do
these connections.

A database opened this way by a per-key step (or a batch call) that runs beside other workers
gets the cores' share of DuckDB's threads (cores / workers, at least one, never more than
DuckDB's own number), unless the step's `config` names `threads`: DuckDB gives every connection all the cores, so two workers on two
cores would each keep two threads busy on queries of a millisecond, 5-10 % more CPU
a query. Any other step gets DuckDB's default.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

_held: dict[str, tuple[tuple, Any]] = {}  # absolute path -> (its config, the connection)
_handed: dict[str, list[weakref.ref]] = {}  # absolute path -> the connections handed out
_threads: dict[str, int | None] = {}  # absolute path -> threads set on it (None: DuckDB's)
_default: dict[str, int] = {}  # absolute path -> DuckDB's own number of threads for it
_wanted: int | None = None  # threads for the databases handed out now (None: DuckDB's)
_CORES = os.cpu_count() or 1  # read once: os.cpu_count() reads a file under /sys each time


def side_by_side(workers: int) -> None:
    """The step about to run shares the machine with `workers` - 1 other workers' steps
    like it (1: it has the machine, or is not a per-key step)."""
    global _wanted
    _wanted = max(1, _CORES // workers) if workers > 1 else None


def install(duckdb: Any) -> None:
    """Wrap `duckdb.connect` once; idempotent."""
    original = duckdb.connect
    if getattr(original, "_barca_reuse", False):
        return

    def connect(database: Any = ":memory:", read_only: bool = False, config: Any = None,
                **kwargs: Any) -> Any:
        config = config or {}
        if not (isinstance(database, str) and database not in ("", ":memory:")
                and not kwargs):
            return original(database, read_only=read_only, config=config, **kwargs)
        path = os.path.abspath(database)  # a relative path names another file elsewhere
        settings = tuple(sorted(config.items()))
        held = _held.get(path)
        if held is not None and (not read_only or held[0] != settings):
            if any(ref() is not None for ref in _handed[path]):
                return original(database, read_only=read_only, config=config)
            del _held[path]
            held[1].close()
        if not read_only:
            return original(database, read_only=False, config=config)
        if held is None or held[0] != settings:
            held = _held[path] = (settings, original(database, read_only=True, config=config))
            _threads[path], _handed[path] = None, []
            _default[path] = held[1].execute("select current_setting('threads')").fetchone()[0]
        # never more than DuckDB's own (which may heed a container's CPU quota)
        wanted = _wanted if _wanted is not None and _wanted < _default[path] else None
        if "threads" not in config and _threads[path] != wanted:
            held[1].execute("RESET threads" if wanted is None else f"SET threads={wanted}")
            _threads[path] = wanted
        handed = _handed[path]
        if len(handed) >= 64:  # a step's connections end with it, as a rule
            handed[:] = [ref for ref in handed if ref() is not None]
        connection = held[1].cursor()
        handed.append(weakref.ref(connection))
        return connection

    connect._barca_reuse = True  # type: ignore[attr-defined]
    connect.__doc__ = original.__doc__
    duckdb.connect = connect
