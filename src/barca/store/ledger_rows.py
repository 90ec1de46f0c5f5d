"""The rows of the team's ledger, on both of its sides.

On a `barca serve` with a `[remote]` (the ledger): which results it has recorded for
(node, key, run hash) triples (`lookup`), and a client's run recorded as its own history
(`record_client_run`), under the client's run id and `triggered_by = 'client'`, so that
`history`, `status` and every later lookup see it like a run of the server's.

On a client (a machine whose runs the ledger decides): its successful runs that the ledger has
not recorded yet (`ledger_posts`: written before each post and removed once the server
answered, so a post lost to a crash or a refusal is sent again by the next command), and the
rows such a post carries, read back from the run's own history (`run_rows`), column by column
per node so that 1,000 keys are a few lists, not 1,000 objects.

Results are named by their store key (`<node dir>/<leaf>`); the history keeps them as paths
under the project's artifacts directory, which each side strips or adds with its own.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Iterable, Sequence

import orjson

from barca.store import history_table
from barca.store.db import write_transaction

CHUNK = 400  # (key, run hash) pairs per query: SQLite's limit on bound values is 32,766


def lookup(conn: sqlite3.Connection | None, artifacts_dir: str, node_id: str,
           wanted: Sequence[tuple[str | None, str]]) -> dict[tuple[str | None, str], tuple]:
    """(key, run hash) -> (store key, format, size in bytes, output digest) of the newest
    recorded success of each wanted pair of a node. A pair without a key (the published
    request form) is found by its run hash alone, which reads the node's rows."""
    if conn is None or not wanted:
        return {}
    found: dict[tuple[str | None, str], tuple] = {}
    keyed = [pair for pair in wanted if pair[0] is not None]
    for start in range(0, len(keyed), CHUNK):
        chunk = keyed[start:start + CHUNK]
        pairs = ",".join("(?,?)" for _ in chunk)
        rows = conn.execute(
            f"SELECT m.id, m.key, m.run_hash, m.artifact_path, m.format, m.size_bytes, "
            f"m.output_hash FROM (VALUES {pairs}) AS w JOIN materializations AS m "
            f"ON m.node_id = ? AND m.key = w.column1 AND m.run_hash = w.column2 "
            f"WHERE m.status = 'success' AND m.artifact_path IS NOT NULL",
            (*(v for pair in chunk for v in pair), node_id)).fetchall()
        for _, key, run_hash, path, fmt, size, digest in sorted(rows):  # newest last
            found[(key, run_hash)] = (_store_key(path, artifacts_dir), fmt, size, digest)
    hashes = sorted({run_hash for key, run_hash in wanted if key is None})
    for start in range(0, len(hashes), CHUNK):
        chunk = hashes[start:start + CHUNK]
        rows = conn.execute(
            f"SELECT id, run_hash, artifact_path, format, size_bytes, output_hash "
            f"FROM materializations WHERE node_id = ? AND status = 'success' AND "
            f"artifact_path IS NOT NULL AND run_hash IN ({','.join('?' * len(chunk))})",
            (node_id, *chunk)).fetchall()
        for _, run_hash, path, fmt, size, digest in sorted(rows):
            found[(None, run_hash)] = (_store_key(path, artifacts_dir), fmt, size, digest)
    return found


def _store_key(path: str, artifacts_dir: str) -> str:
    prefix = artifacts_dir.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def run_of(conn: sqlite3.Connection | None, run_id: str) -> dict[str, Any] | None:
    """A recorded run's id, status and who started it; None when there is none."""
    if conn is None:
        return None
    row = conn.execute("SELECT run_id, status, triggered_by FROM runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    return None if row is None else {"run_id": row[0], "status": row[1],
                                     "triggered_by": row[2]}


def record_client_run(conn: sqlite3.Connection, artifacts_dir: str, run: dict[str, Any],
                      contexts: dict[str, Any], rows: Iterable[tuple]) -> None:
    """A client's successful run and its steps, in one transaction: rows are (node id, key,
    label, run hash, context, signature, store key, format, size, digest, elapsed) each."""
    now = time.time()
    history = [(run["run_id"], node_id, key, node_id if label is None else f"{node_id}[{label}]",
                run_hash, context, orjson.dumps(signature), "success",
                f"{artifacts_dir}/{store_key}", fmt, size, digest, elapsed, 1, None, None, None,
                None, now, None, None, None)
               for (node_id, key, label, run_hash, context, signature, store_key, fmt, size,
                    digest, elapsed) in rows]
    with write_transaction(conn):
        conn.execute(
            "INSERT INTO runs (run_id, command, files, target, status, steps_total, "
            "steps_executed, steps_cached, started_at, finished_at, elapsed_seconds, host, "
            "triggered_by, job) VALUES (?, ?, ?, ?, 'success', ?, ?, ?, ?, ?, ?, ?, 'client', ?)",
            (run["run_id"], run.get("command") or "get",
             orjson.dumps(list(run.get("files") or [])).decode(), run.get("target"),
             run.get("steps_total"), run.get("steps_executed"), run.get("steps_cached"),
             run.get("started_at") or now, run.get("finished_at") or now,
             run.get("elapsed_seconds"), run.get("host"), run.get("job")))
        conn.executemany("INSERT OR IGNORE INTO contexts (digest, parts) VALUES (?, ?)",
                         [(d, orjson.dumps(p)) for d, p in contexts.items()])
        history_table.insert(conn, history, artifacts_dir)


# -- the client's side --------------------------------------------------------------------------

def keep_post(conn: sqlite3.Connection, run_id: str, server: str, nodes: Sequence[str]) -> None:
    """A run to post to the ledger at `server`, kept until the server has recorded it."""
    with write_transaction(conn):
        conn.execute("INSERT OR IGNORE INTO ledger_posts (run_id, server, nodes, created_at, "
                     "attempts) VALUES (?, ?, ?, ?, 0)",
                     (run_id, server, orjson.dumps(list(nodes)).decode(), time.time()))


def post_failed(conn: sqlite3.Connection, run_id: str, error: str) -> None:
    conn.execute("UPDATE ledger_posts SET attempts = attempts + 1, error = ? WHERE run_id = ?",
                 (error, run_id))


def post_done(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("DELETE FROM ledger_posts WHERE run_id = ?", (run_id,))


def pending_posts(conn: sqlite3.Connection | None) -> list[tuple[str, str, list[str]]]:
    """(run id, server, asset node ids) of the runs waiting to be posted, oldest first."""
    if conn is None:
        return []
    return [(run_id, server, orjson.loads(nodes)) for run_id, server, nodes in conn.execute(
        "SELECT run_id, server, nodes FROM ledger_posts ORDER BY created_at, run_id")]


def unposted_runs(conn: sqlite3.Connection | None) -> set[str]:
    """The ids of the runs the ledger has not recorded yet (`barca status`: not_in_ledger)."""
    if conn is None:
        return set()
    return {row[0] for row in conn.execute("SELECT run_id FROM ledger_posts")}


def run_rows(conn: sqlite3.Connection, run_id: str, node_ids: Sequence[str]
             ) -> tuple[dict[str, Any] | None, list[tuple]]:
    """A recorded run's row, and its successful steps of `node_ids` as (node id, key, step id,
    run hash, context, signature, artifact path, format, size, output digest, elapsed),
    read through the run's index."""
    row = conn.execute(
        "SELECT run_id, command, files, target, job, status, started_at, finished_at, "
        "elapsed_seconds, host, steps_total, steps_executed, steps_cached FROM runs "
        "WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None, []
    names = ("run_id", "command", "files", "target", "job", "status", "started_at",
             "finished_at", "elapsed_seconds", "host", "steps_total", "steps_executed",
             "steps_cached")
    run = dict(zip(names, row))
    run["files"] = orjson.loads(run["files"] or "[]")
    wanted = set(node_ids)
    steps = [r for r in conn.execute(
        "SELECT node_id, key, step_id, run_hash, context, signature, artifact_path, format, "
        "size_bytes, output_hash, elapsed_seconds FROM materializations "
        "WHERE run_ref = ? AND status = 'success' AND artifact_path IS NOT NULL ORDER BY id",
        (history_table.ref(run_id),)) if r[0] in wanted]
    return run, steps


def contexts_of(conn: sqlite3.Connection, digests: Iterable[str]) -> dict[str, Any]:
    out = {}
    for digest in set(digests):
        row = conn.execute("SELECT parts FROM contexts WHERE digest = ?", (digest,)).fetchone()
        if row is not None:
            out[digest] = orjson.loads(row[0])
    return out
