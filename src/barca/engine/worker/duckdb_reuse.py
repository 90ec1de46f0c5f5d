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
DuckDB's own number), unless the step's `config` names `threads`: DuckDB gives every
connection all the cores, so two workers on two cores would each keep two threads busy on
queries of a millisecond, 5-10 % more CPU a query. Any other step gets DuckDB's default.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

_wanted: int | None = None  # threads for the databases handed out now (None: DuckDB's)
_CORES = os.cpu_count() or 1  # read once: os.cpu_count() reads a file under /sys each time


class _Held:
    """A read-only database the worker keeps open, and what it handed out from it."""

    def __init__(self, settings: tuple, connection: Any) -> None:
        self.settings, self.connection = settings, connection
        self.handed: list[weakref.ref] = []  # the connections handed out
        self.threads: int | None = None  # threads set on it (None: DuckDB's)
        # DuckDB's own number (which may heed a container's CPU quota): never more than it
        self.default = connection.execute("select current_setting('threads')").fetchone()[0]

    def in_use(self) -> bool:
        return any(ref() is not None for ref in self.handed)

    def hand_out(self, wanted: int | None) -> Any:
        """A connection of its own to the database, with `wanted` threads (None: DuckDB's)."""
        if wanted is not None and wanted >= self.default:
            wanted = None
        if self.threads != wanted:
            self.connection.execute("RESET threads" if wanted is None
                                    else f"SET threads={wanted}")
            self.threads = wanted
        if len(self.handed) >= 64:  # a step's connections end with it, as a rule
            self.handed[:] = [ref for ref in self.handed if ref() is not None]
        connection = self.connection.cursor()
        self.handed.append(weakref.ref(connection))
        return connection


_held: dict[str, _Held] = {}  # absolute path -> the database open for it


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
        if held is not None and (not read_only or held.settings != settings):
            if held.in_use():
                return original(database, read_only=read_only, config=config)
            del _held[path]
            held.connection.close()
            held = None
        if not read_only:
            return original(database, read_only=False, config=config)
        if held is None:
            held = _held[path] = _Held(settings, original(database, read_only=True,
                                                          config=config))
        # a `config` naming threads: the step's own choice, set when the file was opened
        return held.hand_out(None if "threads" in config else _wanted)

    connect._barca_reuse = True  # type: ignore[attr-defined]
    connect.__doc__ = original.__doc__
    duckdb.connect = connect
