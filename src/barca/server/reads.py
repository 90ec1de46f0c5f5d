"""What the server reads from the metadata database: runs, their steps and logs, a node's
timings. A connection per request (SQLite's WAL lets it read beside a writing run); in
read-only mode it is opened read-only and never created or upgraded."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import barca.store.history as history
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


def rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def run_summary(row: history.RunRow) -> dict[str, Any]:
    return {"id": row.run_id, "run_id": row.run_id, "command": row.command,
            "files": list(row.files), "target": row.target, "status": row.status,
            "triggered_by": row.triggered_by, "started_at": rfc3339(row.started_at),
            "finished_at": rfc3339(row.finished_at), "elapsed_seconds": row.elapsed_seconds,
            "steps_total": row.steps_total, "steps_executed": row.steps_executed or 0,
            "steps_cached": row.steps_cached or 0, "error": row.error}


def list_runs(conn: sqlite3.Connection | None, limit: int) -> tuple[list[dict], int]:
    if conn is None:
        return [], 0
    return [run_summary(r) for r in history.list_runs(conn, limit)], history.count_runs(conn)


def run_detail(conn: sqlite3.Connection | None, run_id: str) -> dict | None:
    row = history.get_run(conn, run_id) if conn is not None else None
    if row is None:
        return None
    steps = [{"node_id": s.node_id, "step_id": s.step_id, "key": s.key, "status": s.status,
              "elapsed_seconds": s.elapsed_seconds, "error": s.error_message}
             for s in history.run_steps(conn, run_id, per_node=20)]
    nodes = [{"node_id": n.node_id, "keys": n.keys, "failed": n.failed,
              "elapsed_seconds": round(n.elapsed_seconds, 6), "calls": n.calls}
             for n in history.node_summaries(conn, run_id)]
    return {"run": run_summary(row), "steps": steps, "nodes": nodes,
            "logs": run_logs(conn, run_id)[-200:]}


def run_logs(conn: sqlite3.Connection | None, run_id: str) -> list[dict]:
    if conn is None:
        return []
    return [{"node_id": line.step_id, "seq": line.seq, "stream": line.stream,
             "line": line.line} for line in history.run_logs(conn, run_id)]


def node_stats(conn: sqlite3.Connection | None, node_id: str) -> dict:
    if conn is None:
        return {"node_id": node_id, "total_runs": 0, "failures": 0, "cache_hit_rate": None,
                "median_elapsed_seconds": None, "p95_elapsed_seconds": None, "recent_runs": []}
    stats = history.node_stats(conn, node_id)
    return {"node_id": node_id, "total_runs": stats.total_runs, "failures": stats.failures,
            "cache_hit_rate": stats.cache_hit_rate,
            "median_elapsed_seconds": history.median(stats.elapsed),
            "p95_elapsed_seconds": history.percentile(stats.elapsed, 0.95),
            "recent_runs": [{"key": s.key, "status": s.status,
                             "elapsed_seconds": s.elapsed_seconds,
                             "created_at": s.created_at, "error_message": s.error_message,
                             "attempts": s.attempts} for s in stats.recent]}


def result_of_run(conn: sqlite3.Connection | None, run_id: str, node_id: str,
                  key: str) -> tuple[str, str] | None:
    return history.result_of_run(conn, run_id, node_id, key) if conn is not None else None
