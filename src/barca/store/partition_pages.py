"""Pages of a partitioned node's keys for a browser: each key's last attempt, filtered by
status or a substring, with the failures grouped by their error's first line. Only keys that
have an attempt are here; a key never run is in `barca status`, not in the database."""

from __future__ import annotations

import sqlite3

_LATEST = """
WITH latest AS (
    SELECT key, status, run_hash, error_type, error_message, created_at FROM materializations
    WHERE id IN (SELECT max(id) FROM materializations WHERE node_id = ? GROUP BY key)
)"""
_FIRST_LINE = ("CASE WHEN instr(error_message, char(10)) > 0 THEN "
               "substr(error_message, 1, instr(error_message, char(10)) - 1) "
               "ELSE coalesce(error_message, '') END")


def partition_page(conn: sqlite3.Connection, node_id: str, status: str | None = None,
                   q: str | None = None, offset: int = 0, limit: int = 100,
                   groups: int = 20) -> dict:
    where, params = [], [node_id]
    if status:
        where.append("status = ?")
        params.append(status)
    if q:
        where.append("instr(key, ?) > 0")
        params.append(q)
    filtered = " WHERE " + " AND ".join(where) if where else ""
    rows = conn.execute(
        f"{_LATEST} SELECT key, status, run_hash, error_type, error_message, created_at, "
        f"count(*) OVER () FROM latest{filtered} ORDER BY key LIMIT ? OFFSET ?",
        (*params, limit, offset)).fetchall()
    matched = rows[0][6] if rows else conn.execute(
        f"{_LATEST} SELECT count(*) FROM latest{filtered}", params).fetchone()[0]
    total, failed = conn.execute(
        f"{_LATEST} SELECT count(*), count(*) FILTER (WHERE status = 'failed') FROM latest",
        (node_id,)).fetchone()
    failures = conn.execute(
        f"{_LATEST} SELECT error, min(error_type), count(*), "
        "group_concat(CASE WHEN n <= 5 THEN key END, char(31)) FROM ("
        f"SELECT key, error_type, {_FIRST_LINE} AS error, row_number() OVER "
        f"(PARTITION BY {_FIRST_LINE} ORDER BY key) AS n FROM latest WHERE status = 'failed') "
        "GROUP BY error ORDER BY count(*) DESC, error LIMIT ?",
        (node_id, groups)).fetchall()
    keys = [{"key": key, "status": st, "run_hash": run_hash, "error_type": error_type,
             "error": error, "created_at": created}
            for key, st, run_hash, error_type, error, created, _ in rows]
    return {"node_id": node_id, "total": total, "failed": failed, "matched": matched,
            "offset": offset, "keys": keys,
            "next_offset": offset + len(keys) if offset + len(keys) < matched else None,
            "failures": [{"error": error, "error_type": error_type, "count": count,
                          "sample_keys": sorted((sample or "").split("\x1f"))}
                         for error, error_type, count, sample in failures]}
