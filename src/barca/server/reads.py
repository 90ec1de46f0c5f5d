"""What the server reads from the metadata database: runs, their steps and logs, a node's
timings. A connection per request (SQLite's WAL lets it read beside a writing run); in
read-only mode it is opened read-only and never created or upgraded."""

from __future__ import annotations

import collections
import copy
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import barca.store.history as history
from barca.views.times import iso_time
from barca.store.db import connect, connect_readonly


def open_reader(db_path: Path, read_only: bool) -> sqlite3.Connection | None:
    return connect_readonly(db_path) if read_only else connect(db_path, create=False)


@contextmanager
def reading(db_path: Path, read_only: bool) -> Iterator[sqlite3.Connection | None]:
    conn = open_reader(db_path, read_only)
    try:
        yield conn
    finally:
        if conn is not None:
            conn.close()


def run_summary(row: history.RunRow) -> dict[str, Any]:
    return {"id": row.run_id, "run_id": row.run_id, "command": row.command,
            "files": list(row.files), "target": row.target, "status": row.status,
            "triggered_by": row.triggered_by, "started_at": iso_time(row.started_at),
            "finished_at": iso_time(row.finished_at), "elapsed_seconds": row.elapsed_seconds,
            "steps_total": row.steps_total, "steps_executed": row.steps_executed or 0,
            "steps_cached": row.steps_cached or 0, "error": row.error}


def list_runs(conn: sqlite3.Connection | None, limit: int, offset: int,
              live: list[str]) -> tuple[list[dict], int, list[str]]:
    """A page of recorded runs, newest first, after the `live` runs not recorded yet (which
    come first); the total of both; those unrecorded ids."""
    if conn is None:
        return [], len(live), live
    recorded = history.recorded_runs(conn, live)
    unrecorded = [i for i in live if i not in recorded]
    rows = history.list_runs(conn, limit, offset=max(0, offset - len(unrecorded)))
    return ([run_summary(r) for r in rows], history.count_runs(conn) + len(unrecorded),
            unrecorded)


FINISHED_KEPT = 64  # details of ended runs kept (they no longer change)
_finished: collections.OrderedDict[str, dict] = collections.OrderedDict()
_finished_lock = threading.Lock()  # requests read on several threads


def run_detail(conn: sqlite3.Connection | None, run_id: str) -> dict | None:
    """A run's row, its steps (20 a node), per-node counts and last 200 log lines. A 200,000
    key run takes seconds to sum up: an ended run's is kept."""
    with _finished_lock:
        if run_id in _finished:
            _finished.move_to_end(run_id)
            return copy.deepcopy(_finished[run_id])
    row = history.get_run(conn, run_id) if conn is not None else None
    if row is None:
        return None
    summaries = history.node_summaries(conn, run_id)
    steps = [{"node_id": s.node_id, "step_id": s.step_id, "key": s.key, "status": s.status,
              "elapsed_seconds": s.elapsed_seconds, "error": s.error_message}
             for s in history.step_sample(conn, run_id, [n.node_id for n in summaries], 20)]
    nodes = [{"node_id": n.node_id, "keys": n.keys, "failed": n.failed,
              "elapsed_seconds": round(n.elapsed_seconds, 6), "calls": n.calls}
             for n in summaries]
    logs = [{"node_id": line.step_id, "seq": line.seq, "stream": line.stream,
             "line": line.line} for line in history.last_logs(conn, run_id, 200)]
    detail = {"run": run_summary(row), "steps": steps, "nodes": nodes, "logs": logs}
    if row.status != "running":
        with _finished_lock:
            _finished[run_id] = copy.deepcopy(detail)
            while len(_finished) > FINISHED_KEPT:
                _finished.popitem(last=False)
    return detail


def run_logs(conn: sqlite3.Connection | None, run_id: str) -> list[dict]:
    if conn is None:
        return []
    return [{"node_id": line.step_id, "seq": line.seq, "stream": line.stream,
             "line": line.line} for line in history.run_logs(conn, run_id)]


def node_stats(conn: sqlite3.Connection | None, node_id: str) -> dict:
    """Counts, recent timings and the last executions of a node (`barca stats` has the rest:
    its re-execution rate reads every row, too slow for a page that opens at each click)."""
    total, failed, recent = history.node_summary(conn, node_id) if conn else (0, 0, [])
    durations = history.recent_durations(conn, node_id) if conn else []
    return {"node_id": node_id, "total_runs": total, "failures": failed,
            "cache_hit_rate": None, "median_elapsed_seconds": history.median(durations),
            "p95_elapsed_seconds": history.percentile(durations, 0.95),
            "recent_runs": [{"key": s.key, "status": s.status,
                             "elapsed_seconds": s.elapsed_seconds,
                             "created_at": s.created_at, "error_message": s.error_message,
                             "attempts": s.attempts} for s in recent]}


def result_of_run(conn: sqlite3.Connection | None, run_id: str, node_id: str,
                  key: str) -> tuple[str, str] | None:
    return history.result_of_run(conn, run_id, node_id, key) if conn is not None else None
