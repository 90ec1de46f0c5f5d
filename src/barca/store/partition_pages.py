"""Pages of a partitioned node's keys for a browser: each key's last attempt, filtered by
status or a substring, with the failures grouped by their error's first line. Only keys that
have an attempt are here; a key never run is in `barca status`, not in the database.

Finding each key's last attempt reads every row of the node (200,000 keys: most of a second),
so it is done once into a temporary table of this reader's own connection, indexed by status
and key, and done again only when the node has new rows; each page is then an index range.
The first page a browser asks for (no filter) is answered before that, from indexes alone:
its keys in order (the key index, stopped after the page), their count, and the failed keys,
found through the index of failed attempts (`mat_failed`) and kept when no later attempt
followed: a few milliseconds at 200,000 keys, where the table takes most of a second.
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
            if not (status or q or error is not None) and node_id not in self.built:
                return _first_pages(self.conn, node_id, offset, limit)
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
        return _page(node_id, summary, matched, offset, rows)

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
            "SELECT error_line, error_type, key FROM latest WHERE node_id = ? AND "
            "status = 'failed'", (node_id,)).fetchall()
        summary = {"total": total, "failed": failed, "failures": _groups(failures, groups)}
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


def _first_pages(conn: sqlite3.Connection, node_id: str, offset: int, limit: int,
                 groups: int = 20) -> dict:
    """An unfiltered page and the node's summary from indexes alone (see the module's
    docstring): the same answer `page` gives from the table of last attempts."""
    total = conn.execute("SELECT count(DISTINCT key) FROM materializations WHERE node_id = ?",
                         (node_id,)).fetchone()[0]
    ids = [i for (_, i) in conn.execute(
        "SELECT key, max(id) FROM materializations WHERE node_id = ? GROUP BY key "
        "ORDER BY key LIMIT ? OFFSET ?", (node_id, limit, offset))]
    rows = conn.execute(
        "SELECT key, status, run_hash, error_type, error_message, created_at FROM "
        f"materializations WHERE id IN ({','.join('?' * len(ids))}) ORDER BY key",
        ids).fetchall() if ids else []
    failed = conn.execute(  # a key's failed attempts, kept when none came after
        f"SELECT {_FIRST_LINE}, error_type, key FROM materializations AS m WHERE id IN ("
        "SELECT max(id) FROM materializations WHERE node_id = ? AND status = 'failed' "
        "GROUP BY key) AND id = (SELECT max(id) FROM materializations "
        "WHERE node_id = m.node_id AND key = m.key)", (node_id,)).fetchall()
    summary = {"total": total, "failed": len(failed), "failures": _groups(failed, groups)}
    return _page(node_id, summary, total, offset, rows)


def _page(node_id: str, summary: dict, matched: int, offset: int, rows: list[tuple]) -> dict:
    """A page's answer: the node's summary, how many keys the filter matched, and these rows
    (key, status, run hash, error type, error message, time), in key order."""
    keys = [{"key": key, "status": st, "run_hash": run_hash, "error_type": error_type,
             "error": error, "created_at": created}
            for key, st, run_hash, error_type, error, created in rows]
    return {"node_id": node_id, "total": summary["total"], "failed": summary["failed"],
            "matched": matched, "offset": offset, "keys": keys,
            "next_offset": offset + len(keys) if offset + len(keys) < matched else None,
            "failures": summary["failures"]}


def _groups(failed: list[tuple], groups: int) -> list[dict]:
    """Failed keys (first line of the error, error type, key) grouped by their first line,
    the largest group first: its count, smallest error type and first five keys."""
    by_line: dict[str, list[tuple]] = {}
    for line, error_type, key in failed:
        by_line.setdefault(line, []).append((key, error_type))
    ordered = sorted(by_line.items(), key=lambda item: (-len(item[1]), item[0]))[:groups]
    return [{"error": line, "error_type": min((t for _, t in keys if t is not None),
                                                default=None),
             "count": len(keys), "sample_keys": [k for k, _ in sorted(keys)[:5]]}
            for line, keys in ordered]
