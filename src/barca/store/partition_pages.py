"""Pages of a partitioned node's keys for a browser: each key's last attempt, filtered by
status or a substring, with the failures grouped by their error's first line. Only keys that
have an attempt are here; a key never run is in `barca status`, not in the database.

Finding each key's last attempt reads every row of the node (200,000 keys: most of a second),
so it is done once into a temporary table of this reader's own connection, indexed by status
and key, and done again only when the node has new rows; each page is then an index range.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Callable, Sequence

KEPT_NODES = 4  # nodes whose last attempts stay in the temporary table

_FIRST_LINE = ("CASE WHEN instr(error_message, char(10)) > 0 THEN "
               "substr(error_message, 1, instr(error_message, char(10)) - 1) "
               "ELSE coalesce(error_message, '') END")
_TABLE = """
CREATE TEMP TABLE IF NOT EXISTS latest (
    node_id TEXT NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL, run_hash TEXT,
    error_type TEXT, error_message TEXT, error_line TEXT, created_at REAL);
CREATE INDEX IF NOT EXISTS temp.latest_by_status ON latest (node_id, status, key);
CREATE INDEX IF NOT EXISTS temp.latest_by_key ON latest (node_id, key);
"""


class PartitionPages:
    """One reader's pages; `connect()` opens its connection (None: no database yet).
    `version()`, when given, names what that connection reads (a read-only server's snapshot,
    which never changes): when it changes, the connection is opened again."""

    def __init__(self, connect: Callable[[], sqlite3.Connection | None],
                 version: Callable[[], object] | None = None) -> None:
        self.connect, self.version = connect, version
        self.read_version: object = None
        self.conn: sqlite3.Connection | None = None
        self.lock = threading.Lock()
        self.built: dict[str, tuple[int, dict]] = {}  # node -> (its newest row id, summary)

    def page(self, node_id: str, status: str | None = None, q: str | None = None,
             offset: int = 0, limit: int = 100, error: str | None = None,
             dims: Sequence[str] = ()) -> dict:
        """A page of keys by key order (raw keys, as stored); `error` keeps the failed keys of
        one failure group (its `error`, the first line of their error). `q` keeps the keys
        that contain it; a `q` holding `=` is looked for in the keys' labels
        (`retailer=r7`, `day=d1,region=eu`: `dims` are the node's dimension names, sorted),
        so that a label the page showed finds its key."""
        with self.lock:
            if self.version is not None:
                now = self.version()
                if now != self.read_version:
                    self._close()
                    self.read_version = now
            if self.conn is None:
                self.conn = self.connect()
                if self.conn is None:
                    return _empty(node_id, offset)
                self.conn.executescript(_TABLE)
            summary = self._current(node_id)
            where, params = ["node_id = ?"], [node_id]
            if status:
                where.append("status = ?")
                params.append(status)
            if q and "=" in q and dims:
                label, parts = _label_sql(dims)
                where.append(f"instr({label}, ?) > 0")
                params += [*parts, q]
            elif q:
                where.append("instr(key, ?) > 0")
                params.append(q)
            if error is not None:
                where.append("status = 'failed' AND error_line = ?")
                params.append(error)
            filtered = " AND ".join(where)
            rows = self.conn.execute(
                "SELECT key, status, run_hash, error_type, error_message, created_at FROM "
                f"latest WHERE {filtered} ORDER BY key LIMIT ? OFFSET ?",
                (*params, limit, offset)).fetchall()
            matched = summary["total"] if not status and not q and error is None else \
                summary["failed"] if status == "failed" and not q and error is None else \
                self.conn.execute(f"SELECT count(*) FROM latest WHERE {filtered}",
                                  params).fetchone()[0]
        keys = [{"key": key, "status": st, "run_hash": run_hash, "error_type": error_type,
                 "error": error, "created_at": created}
                for key, st, run_hash, error_type, error, created in rows]
        return {"node_id": node_id, "total": summary["total"], "failed": summary["failed"],
                "matched": matched, "offset": offset, "keys": keys,
                "next_offset": offset + len(keys) if offset + len(keys) < matched else None,
                "failures": summary["failures"]}

    def _current(self, node_id: str, groups: int = 20) -> dict:
        """The node's summary, after refreshing its last attempts if it has new rows."""
        conn = self.conn
        newest = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ?",
                              (node_id,)).fetchone()[0] or 0
        known = self.built.get(node_id)
        if known is not None and known[0] == newest:
            return known[1]
        conn.execute("DELETE FROM latest WHERE node_id = ?", (node_id,))
        conn.execute(
            "INSERT INTO latest SELECT node_id, key, status, run_hash, error_type, "
            f"error_message, {_FIRST_LINE}, created_at FROM materializations WHERE id IN "
            "(SELECT max(id) FROM materializations WHERE node_id = ? GROUP BY key)",
            (node_id,))
        total, failed = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'failed') FROM latest "
            "WHERE node_id = ?", (node_id,)).fetchone()
        failures = conn.execute(
            "SELECT error_line, min(error_type), count(*), "
            "group_concat(CASE WHEN n <= 5 THEN key END, char(31)) FROM ("
            "SELECT key, error_type, error_line, row_number() OVER "
            "(PARTITION BY error_line ORDER BY key) AS n FROM latest "
            "WHERE node_id = ? AND status = 'failed') "
            "GROUP BY error_line ORDER BY count(*) DESC, error_line LIMIT ?",
            (node_id, groups)).fetchall()
        summary = {"total": total, "failed": failed,
                   "failures": [{"error": error, "error_type": error_type, "count": count,
                                 "sample_keys": sorted((sample or "").split("\x1f"))}
                                for error, error_type, count, sample in failures]}
        self.built.pop(node_id, None)
        self.built[node_id] = (newest, summary)
        while len(self.built) > KEPT_NODES:
            oldest = next(iter(self.built))
            conn.execute("DELETE FROM latest WHERE node_id = ?", (oldest,))
            del self.built[oldest]
        return summary

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.built = None, {}


def _label_sql(dims: Sequence[str]) -> tuple[str, list[str]]:
    """SQL that writes a stored key as its label, and its parameters: `dim=` and the key for
    one dimension, each value of the JSON list after its `dim=` for several (null for a key
    recorded before the node had several)."""
    if len(dims) == 1:
        return "(? || key)", [f"{dims[0]}="]
    parts = [f"{',' if i else ''}{name}=" for i, name in enumerate(dims)]
    values = " || ".join(f"? || json_extract(key, '$[{i}]')" for i in range(len(dims)))
    return f"(CASE WHEN json_valid(key) THEN {values} END)", parts


def _empty(node_id: str, offset: int) -> dict:
    return {"node_id": node_id, "total": 0, "failed": 0, "matched": 0, "offset": offset,
            "keys": [], "next_offset": None, "failures": []}
