"""History queries about a schedule's job: the runs it started (its ticks, and the fires an
operator asked for), newest first, for the web UI's schedule page."""

from __future__ import annotations

import sqlite3

from barca.store.history_rows import RunRow
from barca.store.history_runs import get_run


def job_runs(conn: sqlite3.Connection, job_id: str, limit: int) -> list[RunRow]:
    """The newest `limit` runs whose `schedule_id` (job ids, comma-separated when several
    were due together) names `job_id`."""
    sql = ("SELECT run_id FROM runs WHERE schedule_id IS NOT NULL "
           "AND instr(',' || schedule_id || ',', ',' || ? || ',') > 0 "
           "ORDER BY started_at DESC, rowid DESC LIMIT ?")
    rows = (get_run(conn, run_id) for (run_id,) in conn.execute(sql, (job_id, limit)))
    return [row for row in rows if row is not None]
