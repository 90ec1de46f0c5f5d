"""The history's rows read whole, newest first, a page at a time (`GET /materializations`
of `barca serve`)."""

from __future__ import annotations

import sqlite3
from typing import Any

ROW_COLUMNS = ("run_id", "node_id", "step_id", "status", "run_hash", "artifact_path",
               "format", "size_bytes", "output_hash", "elapsed_seconds", "attempts",
               "error_type", "error_message", "max_rss_bytes", "cpu_seconds", "worker_exit",
               "batch", "created_at")


def newest_rows(conn: sqlite3.Connection, limit: int, offset: int
                ) -> tuple[list[dict[str, Any]], int]:
    """(rows past the `offset` newest, at most `limit` of them, newest first; every row's
    count)."""
    rows = conn.execute(f"SELECT {', '.join(ROW_COLUMNS)} FROM materializations "
                        "ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset)).fetchall()
    total = conn.execute("SELECT count(*) FROM executions").fetchone()[0]
    return [dict(zip(ROW_COLUMNS, row)) for row in rows], total

