"""History queries about one key of a node (or an unpartitioned node's one result): its
attempts newest first, each with its run and error, what the web UI's key page shows."""

from __future__ import annotations

import sqlite3

from barca.store.history_rows import STEP_COLUMNS, StepRow
from barca.store.history_table import ref


def key_attempts(conn: sqlite3.Connection, node_id: str, key: str, limit: int,
                 run_id: str | None = None) -> list[StepRow]:
    """The newest `limit` executions of `key` of `node_id` ("" for an unpartitioned node),
    of run `run_id` alone when it is given; by the (node, key) index."""
    where, args = "node_id = ? AND key = ?", [node_id, key]
    if run_id is not None:
        where += " AND run_ref = ?"
        args.append(ref(run_id))
    rows = conn.execute(f"SELECT {STEP_COLUMNS} FROM materializations WHERE {where} "
                        "ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    return [StepRow(*r) for r in rows]
