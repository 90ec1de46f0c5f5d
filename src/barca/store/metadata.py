"""Reading and writing the metadata database: node state, materializations, runs and logs.

Per-key state is kept where a whole node loads in one read: `node_state` holds a compacted
snapshot (the latest success and the latest failure per key), and the materializations
recorded after it (its watermark) are replayed on top. A tick that ran three steps therefore
writes three rows, not a snapshot of 200,000 keys; the snapshot is rewritten only once enough
rows have piled up behind it.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Any, Iterable, Sequence

import orjson

from barca.state import NodeState

COMPACT_AFTER_ROWS = 256


def load_states(conn: sqlite3.Connection | None, node_ids: Iterable[str]) -> dict[str, NodeState]:
    if conn is None:
        return {}
    states = {}
    for node_id in node_ids:
        row = conn.execute("SELECT watermark, data FROM node_state WHERE node_id = ?",
                           (node_id,)).fetchone()
        watermark, snapshot = (row[0], orjson.loads(row[1])) if row else (0, None)
        done = snapshot["done"] if snapshot else {}
        failed = snapshot["failed"] if snapshot else {}
        contexts = snapshot["contexts"] if snapshot else {}
        delta = conn.execute(
            "SELECT key, run_hash, context, signature, format, output_hash, status, "
            "error_message FROM materializations WHERE node_id = ? AND id > ? ORDER BY id",
            (node_id, watermark)).fetchall()
        _replay(delta, done, failed)
        if delta:
            _load_contexts(conn, contexts, {r[2] for r in delta if r[6] == "success"})
        if done or failed:
            states[node_id] = NodeState(done, failed, contexts)
    return states


def _replay(rows: Sequence[tuple], done: dict, failed: dict) -> None:
    for key, run_hash, context, signature, fmt, output_hash, status, error in rows:
        if status == "success":
            done[key] = [run_hash, context, orjson.loads(signature) if signature else [], fmt,
                         output_hash]
            failed.pop(key, None)
        else:
            failed[key] = [run_hash, error]


def _load_contexts(conn: sqlite3.Connection, contexts: dict, wanted: set[str]) -> None:
    missing = [d for d in wanted if d and d not in contexts]
    for digest in missing:
        row = conn.execute("SELECT parts FROM contexts WHERE digest = ?", (digest,)).fetchone()
        if row:
            contexts[digest] = orjson.loads(row[0])


def find_successes(conn: sqlite3.Connection | None, node_id: str,
                   wanted: Sequence[tuple[str, str]]) -> dict[str, list[Any]]:
    """Older successful results for (key, run_hash) pairs: key -> done record."""
    if conn is None or not wanted:
        return {}
    found: dict[str, list[Any]] = {}
    for start in range(0, len(wanted), 400):
        chunk = wanted[start:start + 400]
        hashes = sorted({h for _, h in chunk})
        marks = ",".join("?" * len(hashes))
        rows = conn.execute(
            f"SELECT key, run_hash, context, signature, format, output_hash FROM "
            f"materializations WHERE node_id = ? AND status = 'success' AND run_hash IN "
            f"({marks}) ORDER BY id", (node_id, *hashes)).fetchall()
        pairs = set(chunk)
        for key, run_hash, context, signature, fmt, output_hash in rows:
            if (key, run_hash) in pairs:
                found[key] = [run_hash, context, orjson.loads(signature) if signature else [],
                              fmt, output_hash]
    return found


def record(conn: sqlite3.Connection, run_id: str, outcomes: Sequence[Any],
           contexts: dict[str, tuple[str, dict[str, str]]],
           signatures: dict[str, Any]) -> None:
    """Insert finished steps (`StepOutcome`s) in one transaction.

    contexts: step_id -> (context digest, parts); signatures: step_id -> signature list.
    """
    now = time.time()
    rows = []
    new_contexts = {}
    for o in outcomes:
        digest, parts = contexts.get(o.step_id, ("", {}))
        if digest:
            new_contexts[digest] = parts
        sig = signatures.get(o.step_id)
        path = o.artifact_path
        rows.append((run_id, o.node_id, o.key, o.run_hash, digest,
                     orjson.dumps(sig) if sig else None, o.status, path, o.format,
                     o.size_bytes, o.output_hash, o.elapsed_seconds, o.attempts, o.error_type,
                     o.error_message, o.traceback, o.max_rss_bytes, now))
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT OR IGNORE INTO contexts (digest, parts) VALUES (?, ?)",
            [(d, orjson.dumps(p)) for d, p in new_contexts.items()])
        conn.executemany(
            "INSERT INTO materializations (run_id, node_id, key, run_hash, context, signature, "
            "status, artifact_path, format, size_bytes, output_hash, elapsed_seconds, attempts, "
            "error_type, error_message, error_traceback, max_rss_bytes, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def compact(conn: sqlite3.Connection, node_ids: Iterable[str]) -> None:
    """Fold the rows recorded behind a node's snapshot into it once there are enough of them."""
    for node_id in node_ids:
        row = conn.execute("SELECT watermark FROM node_state WHERE node_id = ?",
                           (node_id,)).fetchone()
        watermark = row[0] if row else 0
        pending = conn.execute(
            "SELECT count(*), max(id) FROM materializations WHERE node_id = ? AND id > ?",
            (node_id, watermark)).fetchone()
        if not pending[0] or pending[0] < COMPACT_AFTER_ROWS:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            state = load_states(conn, [node_id]).get(node_id, NodeState())
            top = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ?",
                               (node_id,)).fetchone()[0]
            data = orjson.dumps({"done": state.done, "failed": state.failed,
                                 "contexts": state.contexts})
            conn.execute("INSERT OR REPLACE INTO node_state (node_id, watermark, data) "
                         "VALUES (?, ?, ?)", (node_id, top, data))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def start_run(conn: sqlite3.Connection, run_id: str, command: str, files: Sequence[str],
              target: str | None) -> None:
    conn.execute(
        "INSERT INTO runs (run_id, command, files, target, status, started_at, pid, host, "
        "proc_start) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)",
        (run_id, command, orjson.dumps(list(files)).decode(), target, time.time(),
         os.getpid(), socket.gethostname(), process_start(os.getpid())))


def finish_run(conn: sqlite3.Connection, run_id: str, status: str, steps_total: int,
               steps_executed: int, steps_cached: int, elapsed: float,
               failed_node: str | None = None, error: str | None = None) -> None:
    conn.execute(
        "UPDATE runs SET status = ?, steps_total = ?, steps_executed = ?, steps_cached = ?, "
        "finished_at = ?, elapsed_seconds = ?, failed_node = ?, error = ? WHERE run_id = ?",
        (status, steps_total, steps_executed, steps_cached, time.time(), elapsed, failed_node,
         error, run_id))


def insert_logs(conn: sqlite3.Connection, run_id: str, lines: Sequence[tuple]) -> None:
    """lines: (seq, step_id, stream, ts, text)."""
    conn.executemany("INSERT INTO logs (run_id, seq, step_id, stream, ts, line) "
                     "VALUES (?, ?, ?, ?, ?, ?)", [(run_id, *line) for line in lines])


def process_start(pid: int) -> str | None:
    """The kernel's start time of a process, so a reused pid is not mistaken for ours."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None
