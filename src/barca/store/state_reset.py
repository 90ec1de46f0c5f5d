"""Empty the metadata database of a project (`POST /state/reset` of `barca serve`), keeping a
whole copy of it first.

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

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from barca.errors import UsageError
from barca.store.db import connect, create_tables, write_transaction
from barca.store.owners import owner_gone

KEPT = ("server_state",)
BACKUP_SUFFIX = ".reset-"


def reset(db_path: Path) -> dict[str, Any]:
    """Copy the database to `metadata.db.reset-<UTC>` beside it, then empty it; what was done.
    UsageError (HTTP 409) while a run is queued or running on the project: its rows would be
    lost mid-run."""
    conn = connect(db_path, create=True)
    try:
        with write_transaction(conn):
            _check_idle(conn)
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            executions = conn.execute("SELECT count(*) FROM materializations").fetchone()[0]
            backup = _backup(db_path)
            _empty(conn)
        conn.execute("VACUUM")  # give the emptied pages back to the file system
    finally:
        conn.close()
    return {"database": str(db_path), "backup": str(backup), "runs_removed": runs,
            "materializations_removed": executions,
            "undo": f"stop the server, then replace {db_path.name} with {backup.name} "
                    f"(and delete {db_path.name}-wal and {db_path.name}-shm)"}


def _check_idle(conn: sqlite3.Connection) -> None:
    queued = [r[0] for r in conn.execute("SELECT run_id FROM run_queue ORDER BY seq")]
    running = [run_id for run_id, pid, host, start in conn.execute(
        "SELECT run_id, pid, host, proc_start FROM runs WHERE status = 'running'")
        if not owner_gone(pid, host, start)]
    if queued or running:
        busy = running + queued
        raise UsageError(f"{len(busy)} run{'s' * (len(busy) != 1)} "
                         f"{'is' if len(busy) == 1 else 'are'} queued or running on this "
                         f"project ({', '.join(busy[:5])}{', ...' if len(busy) > 5 else ''})",
                         "wait for them to end, or cancel them (DELETE /runs/{id}), then "
                         "reset", http_status=409)


def _backup(db_path: Path) -> Path:
    """The whole database copied beside it (written to a temporary name, then renamed)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = db_path.with_name(f"{db_path.name}{BACKUP_SUFFIX}{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = db_path.with_name(f"{db_path.name}{BACKUP_SUFFIX}{stamp}-{n}")
    partial = target.with_name(target.name + f".{os.getpid()}.tmp")
    source = sqlite3.connect(db_path)
    copy = sqlite3.connect(partial)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    os.replace(partial, target)
    return target


def _empty(conn: sqlite3.Connection) -> None:
    """Drop every table, view and index but the kept ones, and create the schema anew."""
    objects = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE "
                           "'sqlite_%' AND type IN ('view', 'table')").fetchall()
    for kind, name in sorted(objects, key=lambda o: o[0] != "view"):  # views first
        if name not in KEPT:
            conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    create_tables(conn)
