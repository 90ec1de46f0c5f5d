"""History queries about runs: listing, matching and reading run rows, and closing the rows of
runs that ended without saying so.

A `running` row whose process is gone (killed, out of memory, machine rebooted) is shown as
`interrupted`, and written so when the database is writable. Only rows from this host are
judged; a pid is matched with its kernel start time so that a reused pid is not mistaken for
the run's owner.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Sequence

import orjson

from barca.store.history_rows import RUN_COLUMNS, RunRow
from barca.store.history_table import ref
from barca.store.owners import owner_gone


def reconcile_interrupted(conn: sqlite3.Connection) -> list[str]:
    """Mark `running` rows whose process is gone as `interrupted`; returns their ids.

    A database that cannot be written right now (read-only, or locked for long) is left as
    it is: readers still show those rows as interrupted.
    """
    rows = conn.execute("SELECT run_id, pid, host, proc_start FROM runs "
                        "WHERE status = 'running'").fetchall()
    gone = [run_id for run_id, pid, host, start in rows if owner_gone(pid, host, start)]
    if not gone:
        return []
    try:
        conn.execute("PRAGMA busy_timeout = 2000")
        conn.executemany("UPDATE runs SET status = 'interrupted' "
                         "WHERE run_id = ? AND status = 'running'", [(r,) for r in gone])
    except sqlite3.Error:
        pass
    finally:
        conn.execute("PRAGMA busy_timeout = 60000")
    return gone


def mark_cancelled(conn: sqlite3.Connection, run_ids: Sequence[str]) -> None:
    """Close runs whose process was killed before it could record its end (a server that
    stops kills what does not stop in time)."""
    conn.executemany("UPDATE runs SET status = 'cancelled', finished_at = ?, "
                     "error = 'run cancelled' WHERE run_id = ? AND status = 'running'",
                     [(time.time(), r) for r in run_ids])


def count_runs(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def list_runs(conn: sqlite3.Connection, limit: int | None,
              statuses: Sequence[str] | None = None, since: float | None = None,
              offset: int = 0) -> list[RunRow]:
    """Newest first, past the first `offset`; `limit` None = every run; only these statuses,
    started at or after `since` (epoch seconds) when given. `interrupted` rows are stored as
    such once seen."""
    where, args = _run_filter(statuses, since)
    sql = f"SELECT {RUN_COLUMNS} FROM runs{where} ORDER BY started_at DESC, rowid DESC"
    args = [*args, limit or -1, offset]
    return [_run_row(conn, row) for row in conn.execute(sql + " LIMIT ? OFFSET ?",
                                                         args).fetchall()]


def count_matching_runs(conn: sqlite3.Connection, statuses: Sequence[str] | None,
                        since: float | None) -> int:
    where, args = _run_filter(statuses, since)
    return conn.execute(f"SELECT count(*) FROM runs{where}", args).fetchone()[0]


def _run_filter(statuses: Sequence[str] | None, since: float | None) -> tuple[str, list]:
    clauses, args = [], []
    if statuses:
        clauses.append(f"status IN ({','.join('?' * len(statuses))})")
        args += list(statuses)
    if since is not None:
        clauses.append("started_at >= ?")
        args.append(since)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def recorded_runs(conn: sqlite3.Connection, run_ids: list[str]) -> set[str]:
    """Which of `run_ids` have a row."""
    marks = ",".join("?" * len(run_ids))
    return {r[0] for r in conn.execute(
        f"SELECT run_id FROM runs WHERE run_id IN ({marks})", run_ids)} if run_ids else set()


def match_runs(conn: sqlite3.Connection, text: str) -> list[str]:
    """Run ids equal to `text`, else those starting with it (a unique prefix is enough)."""
    exact = conn.execute("SELECT run_id FROM runs WHERE run_id = ?", (text,)).fetchall()
    if exact or len(text) < 4:
        return [r[0] for r in exact]
    like = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = conn.execute("SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' "
                        "ORDER BY started_at DESC LIMIT 10", (like,)).fetchall()
    return [r[0] for r in rows]


def get_run(conn: sqlite3.Connection, run_id: str) -> RunRow | None:
    row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    return _run_row(conn, row) if row else None


def newest_run(conn: sqlite3.Connection) -> RunRow | None:
    runs = list_runs(conn, 1)
    return runs[0] if runs else None


def _run_row(conn: sqlite3.Connection, row: tuple) -> RunRow:
    (run_id, command, files, target, status, total, executed, cached, started, finished,
     elapsed, pid, host, start, failed_node, error, triggered_by, job, schedule_id,
     scheduled_at) = row
    if status == "running" and owner_gone(pid, host, start):
        status = "interrupted"
    if executed is None:  # still running, or never finished: count what it recorded
        executed = conn.execute("SELECT count(*) FROM executions WHERE run_ref = ?",
                                (ref(run_id),)).fetchone()[0]
    return RunRow(run_id, command, tuple(orjson.loads(files or "[]")), target, status, total,
                  executed, cached, started, finished, elapsed, failed_node, error,
                  triggered_by, job, schedule_id, scheduled_at, pid is not None)


def live_runs_started(conn: sqlite3.Connection) -> float | None:
    """Start time of the oldest run whose process still runs, None when none does."""
    rows = conn.execute("SELECT started_at, pid, host, proc_start FROM runs "
                        "WHERE status = 'running'").fetchall()
    alive = [started for started, pid, host, start in rows
             if not owner_gone(pid, host, start)]
    return min(alive) if alive else None


def changed_stamp(conn: sqlite3.Connection) -> tuple:
    """Changes whenever a run starts, records a step or ends: when what `status` says may
    have changed."""
    return conn.execute("SELECT (SELECT count(*) FROM runs), (SELECT max(id) FROM "
                        "executions), (SELECT max(finished_at) FROM runs)").fetchone()
