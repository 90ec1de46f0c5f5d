"""Keep read-only DuckDB databases open in a worker for the length of a run.

Opening a DuckDB file costs tens of milliseconds (it reads the catalog); a step that calls
`duckdb.connect("warehouse.duckdb", read_only=True)` once per partition key would pay that for
every key. The worker holds one connection per (file, config) it has seen opened read-only,
and each `connect` to it gets a new connection to that open database (`cursor()`: a
connection of its own, as `connect` gives, without looking the database up again: about a
tenth of a millisecond less a key). Read-write connections are left alone: holding them would keep
DuckDB's write lock beyond the step. Workers end with the run, and so do these connections.
"""

from __future__ import annotations

import os
from typing import Any

_held: dict[tuple, Any] = {}


def install(duckdb: Any) -> None:
    """Wrap `duckdb.connect` once; idempotent."""
    original = duckdb.connect
    if getattr(original, "_barca_reuse", False):
        return

    def connect(database: Any = ":memory:", read_only: bool = False, config: Any = None,
                **kwargs: Any) -> Any:
        if not (read_only and isinstance(database, str) and database not in ("", ":memory:")
                and not kwargs):
            return original(database, read_only=read_only, config=config or {}, **kwargs)
        # a relative path names another file once the step changed directory
        key = (os.path.abspath(database), tuple(sorted((config or {}).items())))
        held = _held.get(key)
        if held is None:  # never handed out: a step that closes its connection closes its own
            held = _held[key] = original(database, read_only=True, config=config or {})
        return held.cursor()

    connect._barca_reuse = True  # type: ignore[attr-defined]
    connect.__doc__ = original.__doc__
    duckdb.connect = connect
