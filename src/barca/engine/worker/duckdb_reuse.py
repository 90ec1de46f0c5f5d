"""Keep read-only DuckDB databases open in a worker for the length of a run.

Opening a DuckDB file costs tens of milliseconds (it reads the catalog); a step that calls
`duckdb.connect("warehouse.duckdb", read_only=True)` once per partition key would pay that for
every key. DuckDB reuses an open database instance for a new connection to the same file, so
the worker holds one cursor per (file, config) it has seen opened read-only; the step still
gets its own fresh connection. Read-write connections are left alone: holding them would keep
DuckDB's write lock beyond the step. Workers end with the run, and so do these cursors.
"""

from __future__ import annotations

from typing import Any

_held: dict[tuple, Any] = {}


def install(duckdb: Any) -> None:
    """Wrap `duckdb.connect` once; idempotent."""
    original = duckdb.connect
    if getattr(original, "_barca_reuse", False):
        return

    def connect(database: Any = ":memory:", read_only: bool = False, config: Any = None,
                **kwargs: Any) -> Any:
        con = original(database, read_only=read_only, config=config or {}, **kwargs)
        if read_only and isinstance(database, str) and database not in ("", ":memory:") \
                and not kwargs:
            key = (database, tuple(sorted((config or {}).items())))
            if key not in _held:
                _held[key] = con.cursor()
        return con

    connect._barca_reuse = True  # type: ignore[attr-defined]
    connect.__doc__ = original.__doc__
    duckdb.connect = connect
