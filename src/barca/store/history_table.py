"""How the run history is stored: one compact row per executed step, read through a view.

A first run at 200,000 keys records 400,000 rows, so a row's bytes are most of the metadata
database. Each row is written small (`executions`): its node as a number (`nodes`), its step
id as the key's label only, hex digests (run id, run hash, context, output hash) as their bytes,
and its result's path as the name inside the node's directory. Readers see the rows as they
always were (`materializations`, a view that gives the text back) and filter on the stored
columns (`node_no` through the view's join, `run_ref`) where an index must serve them.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Iterable

from barca.store.paths import node_dir_name

DDL = """
CREATE TABLE IF NOT EXISTS nodes (
    node_no INTEGER PRIMARY KEY, node_id TEXT NOT NULL UNIQUE, dir TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS executions (
    id INTEGER PRIMARY KEY, run_ref NOT NULL, node_no INTEGER NOT NULL, key TEXT NOT NULL,
    label TEXT, run_hash NOT NULL, context, signature, status TEXT NOT NULL, artifact TEXT,
    format TEXT, size_bytes INTEGER, output_hash, elapsed_seconds REAL, attempts INTEGER,
    error_type TEXT, error_message TEXT, error_traceback TEXT, max_rss_bytes INTEGER,
    created_at REAL NOT NULL, batch TEXT, worker_exit TEXT, cpu_seconds REAL
);
CREATE INDEX IF NOT EXISTS executions_by_key ON executions (node_no, key);
CREATE INDEX IF NOT EXISTS executions_by_node ON executions (node_no, id);
CREATE INDEX IF NOT EXISTS executions_by_run ON executions (run_ref);
CREATE INDEX IF NOT EXISTS executions_failed ON executions (node_no, key)
    WHERE status = 'failed';
CREATE VIEW IF NOT EXISTS materializations AS SELECT
    e.id AS id, {run_ref} AS run_id, n.node_id AS node_id, e.key AS key,
    CASE WHEN e.label IS NULL THEN n.node_id ELSE n.node_id || '[' || e.label || ']' END
        AS step_id,
    {run_hash} AS run_hash, {context} AS context, e.signature AS signature,
    e.status AS status,
    CASE WHEN e.artifact IS NULL OR instr(e.artifact, '/') THEN e.artifact
         ELSE n.dir || '/' || e.artifact END AS artifact_path,
    e.format AS format, e.size_bytes AS size_bytes, {output_hash} AS output_hash,
    e.elapsed_seconds AS elapsed_seconds, e.attempts AS attempts, e.error_type AS error_type,
    e.error_message AS error_message, e.error_traceback AS error_traceback,
    e.max_rss_bytes AS max_rss_bytes, e.created_at AS created_at, e.batch AS batch,
    e.worker_exit AS worker_exit, e.cpu_seconds AS cpu_seconds,
    e.node_no AS node_no, e.run_ref AS run_ref
FROM executions AS e JOIN nodes AS n ON n.node_no = e.node_no;
""".format(**{column: f"CASE WHEN typeof(e.{column}) = 'blob' THEN lower(hex(e.{column})) "
                      f"ELSE e.{column} END"
              for column in ("run_ref", "run_hash", "context", "output_hash")})

COLUMNS = ("run_id", "node_id", "key", "step_id", "run_hash", "context", "signature", "status",
           "artifact_path", "format", "size_bytes", "output_hash", "elapsed_seconds",
           "attempts", "error_type", "error_message", "error_traceback", "max_rss_bytes",
           "created_at", "batch", "worker_exit", "cpu_seconds")  # a row as `insert` takes it


def ref(text: Any) -> Any:
    """A lowercase hex digest as its bytes (half the size, given back by the view as the same
    text); anything else as it is."""
    if text.__class__ is not str:
        return text
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return text
    return raw if raw and raw.hex() == text else text


def node_numbers(conn: sqlite3.Connection, node_ids: Iterable[str],
                 artifacts_dir: str) -> dict[str, tuple[int, str]]:
    """Each node's number and directory, given on its first row: the view puts the file
    names its rows keep in that directory, so a row keeps only what lies in it."""
    wanted = list(dict.fromkeys(node_ids))
    conn.executemany("INSERT OR IGNORE INTO nodes (node_id, dir) VALUES (?, ?)",
                     [(n, f"{artifacts_dir}/{_node_dir(n)}") for n in wanted])
    return {node_id: conn.execute("SELECT node_no, dir FROM nodes WHERE node_id = ?",
                                  (node_id,)).fetchone() for node_id in wanted}


def _node_dir(node_id: str) -> str:
    file, _, name = node_id.rpartition(":")
    try:
        return node_dir_name(file, name)
    except ValueError:  # not a name a directory can have: its paths are kept whole
        return "\0"


STORED = ("id", "run_ref", "node_no", "key", "label", "run_hash", "context", "signature",
          "status", "artifact", "format", "size_bytes", "output_hash", "elapsed_seconds",
          "attempts", "error_type", "error_message", "error_traceback", "max_rss_bytes",
          "created_at", "batch", "worker_exit", "cpu_seconds")  # a row of `executions`


def insert(conn: sqlite3.Connection, rows: list[tuple], artifacts_dir: str) -> None:
    """Record rows given as `COLUMNS` (what the view shows), under new ids."""
    _insert(conn, [(None, *row) for row in _compact(conn, rows, artifacts_dir)])


def _insert(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """Insert `STORED` rows in their order, naming only the columns a row has a value for.

    The sqlite3 module binds an int, a float, a str or a bytearray at once, but looks up an
    adapter for anything else, None and bytes included (0.3-1 us each, more on a busy
    machine): a step's row has six Nones (its id to come, no error, no batch) and five
    digests. So the digests travel as bytearrays (stored as the same blobs), and rows of one
    shape share a statement that leaves their Nones out (a run's rows are mostly one shape)."""
    start = 0
    while start < len(rows):
        shape = [value is not None for value in rows[start]]
        end = start + 1
        while end < len(rows) and [value is not None for value in rows[end]] == shape:
            end += 1
        columns = [name for name, present in zip(STORED, shape) if present]
        conn.executemany(
            f"INSERT INTO executions ({', '.join(columns)}) VALUES "
            f"({', '.join('?' * len(columns))})",
            [tuple([value for value in row if value is not None]) for row in rows[start:end]])
        start = end


def _compact(conn: sqlite3.Connection, rows: list[tuple], artifacts_dir: str) -> list[tuple]:
    nodes = node_numbers(conn, (row[1] for row in rows), artifacts_dir)
    folders = {node_id: f"{folder}/" for node_id, (_, folder) in nodes.items()}
    refs: dict[Any, Any] = {}  # run ids and contexts: the same few on every row
    compact = []
    for (run_id, node_id, key, step_id, run_hash, context, signature, status, path,
         fmt, size, output_hash, *rest) in rows:
        label = None if step_id == node_id else step_id[len(node_id) + 1:-1]
        folder = folders[node_id]
        if path is not None and path.startswith(folder) and "/" not in path[len(folder):]:
            path = path[len(folder):]
        run_ref = refs.get(run_id)
        if run_ref is None:
            run_ref = refs[run_id] = _blob(ref(run_id))
        context_ref = refs.get(context)
        if context_ref is None:
            context_ref = refs[context] = _blob(ref(context))
        compact.append((run_ref, nodes[node_id][0], key, label, _blob(ref(run_hash)),
                        context_ref, _blob(signature), status, path, fmt, size,
                        _blob(ref(output_hash)), *rest))
    return compact


def _blob(value: Any) -> Any:
    """bytes as a bytearray, which sqlite3 binds without an adapter lookup (see `_insert`)."""
    return bytearray(value) if value.__class__ is bytes else value


def compact_old_table(conn: sqlite3.Connection, artifacts_dir: str = ".barca/artifacts") -> None:
    """Move the rows of a `materializations` table (schema 10 and before) into `executions`,
    once, inside the caller's upgrade transaction. Ids are kept: snapshots' watermarks still
    name the same rows."""
    if conn.execute("SELECT type FROM sqlite_master WHERE name = 'materializations'"
                    ).fetchone() != ("table",):
        return
    total = conn.execute("SELECT count(*) FROM materializations").fetchone()[0]
    if total > 100_000:
        logging.getLogger("barca").warning(
            "[barca] compacting the run history (%d rows, once, as this barca upgrades the "
            "project)", total)
    conn.execute("ALTER TABLE materializations RENAME TO old_materializations")
    for statement in DDL.split(";"):
        if statement.strip() and "VIEW" not in statement:
            conn.execute(statement)
    cursor = conn.execute(f"SELECT id, {', '.join(COLUMNS)} FROM old_materializations "
                          "ORDER BY id")
    while batch := cursor.fetchmany(20_000):
        compact = _compact(conn, [row[1:] for row in batch], artifacts_dir)
        _insert(conn, [(row[0], *c) for row, c in zip(batch, compact)])
    conn.execute("DROP TABLE old_materializations")
