"""Empty the metadata database of a project (`POST /state/reset` of `barca serve`, `barca state
reset`), keeping a whole copy of it first (`store.state_backups`; `barca state restore` puts
it back).

The copy is taken with SQLite's backup API while this connection holds the write lock, so it
is the database exactly as the reset found it (what the write-ahead log held included) and no
run can record anything between the copy and the reset. The reset itself empties the
database in place, in the same transaction (every table dropped and created anew), rather
than moving the file: the server's own readers and any `barca` command with the database
open keep a valid file, and see it empty. The server's settings (`server_state`: a paused
queue or schedule) are kept: an operator's pause is not history.

Artifacts are not touched: they stay on disk, referenced by nothing (`barca gc` removes them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from barca.store.db import connect, create_tables, write_transaction
from barca.store.state_backups import check_idle, drop_all, take


def reset(db_path: Path) -> dict[str, Any]:
    """Copy the database to `metadata.db.reset-<UTC>` beside it, then empty it; what was done.
    UsageError (HTTP 409) while a run is queued or running on the project: its rows would be
    lost mid-run."""
    conn = connect(db_path, create=True)
    try:
        with write_transaction(conn):
            check_idle(conn)
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            executions = conn.execute("SELECT count(*) FROM materializations").fetchone()[0]
            backup = take(db_path, "reset")
            drop_all(conn)
            create_tables(conn)
        conn.execute("VACUUM")  # give the emptied pages back to the file system
    finally:
        conn.close()
    return {"database": str(db_path), "backup": str(backup), "runs_removed": runs,
            "materializations_removed": executions,
            "undo": f"barca state restore {backup.name}"}
