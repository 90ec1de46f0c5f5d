"""Reading and writing the metadata database: node state, materializations, runs and logs.

Per-key state is kept where a whole node loads in one read: `node_state` holds a snapshot
(packed columns, see barca.state) written at the end of each run that changed the node, and
the materializations recorded after it (its watermark: a killed run, another process) are
replayed on top.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Any, Iterable, Sequence

import orjson

from barca.state import NodeState, decode_state, encode_state

def load_states(conn: sqlite3.Connection | None, node_ids: Iterable[str]
                ) -> tuple[dict[str, NodeState], dict[str, int]]:
    """Each node's snapshot plus the rows recorded after it; also the row id each covers.

    One query for the snapshots of the whole cone and one index seek per node for its newest
    row; a node gets one more query only when rows were recorded after its snapshot (a killed
    run, another process).
    """
    if conn is None:
        return {}, {}
    node_ids = list(node_ids)
    snapshots, latest = {}, {}
    for chunk in _chunks(node_ids):
        marks = ",".join("?" * len(chunk))
        for node_id, watermark, data in conn.execute(
                f"SELECT node_id, watermark, data FROM node_state WHERE node_id IN ({marks})",
                chunk):
            snapshots[node_id] = (watermark, data)
    for node_id in node_ids:  # one index seek each; a GROUP BY would read every row's entry
        latest[node_id] = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ?",
                                       (node_id,)).fetchone()[0] or 0
    states, watermarks = {}, {}
    for node_id in node_ids:
        watermark, data = snapshots.get(node_id, (0, None))
        state = decode_state(data) if data is not None else NodeState()
        if latest.get(node_id, 0) > watermark:
            state, watermark = _replay(conn, node_id, state, watermark)
        watermarks[node_id] = watermark
        if len(state) or state.failed:
            states[node_id] = state
    return states, watermarks


def _chunks(items: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _replay(conn: sqlite3.Connection, node_id: str, state: NodeState, watermark: int,
            skip_run: str | None = None) -> tuple[NodeState, int]:
    """Apply the rows recorded after `watermark` (a killed run, or another process's run)."""
    delta = conn.execute(
        "SELECT id, key, run_hash, context, signature, format, output_hash, status, "
        "error_message, run_id FROM materializations WHERE node_id = ? AND id > ? ORDER BY id",
        (node_id, watermark)).fetchall()
    if not delta:
        return state, watermark
    successes = []
    failed = dict(state.failed)
    for _, key, run_hash, context, signature, fmt, output_hash, status, error, run_id in delta:
        if run_id == skip_run:
            continue
        if status == "success":
            successes.append((key, run_hash, context, _signature(signature), fmt, output_hash))
            failed.pop(key, None)
        else:
            failed[key] = [run_hash, error]
    if not successes and failed == state.failed:
        return state, delta[-1][0]
    state = state.with_records(successes)
    state.failed.clear()
    state.failed.update(failed)
    _load_parts(conn, state)
    return state, delta[-1][0]


def _signature(text: str | bytes | None) -> Any:
    return orjson.loads(text) if text else None


def _load_parts(conn: sqlite3.Connection, state: NodeState) -> None:
    for digest in state.contexts:
        if digest and digest not in state.parts:
            row = conn.execute("SELECT parts FROM contexts WHERE digest = ?",
                               (digest,)).fetchone()
            if row:
                state.parts[digest] = orjson.loads(row[0])


def find_successes(conn: sqlite3.Connection | None, node_id: str,
                   wanted: Sequence[tuple[str, str]]) -> list[tuple]:
    """Older successful results for (key, run_hash) pairs, as NodeState.put arguments."""
    if conn is None or not wanted:
        return []
    found: dict[str, tuple] = {}
    for start in range(0, len(wanted), 400):
        chunk = wanted[start:start + 400]
        hashes = sorted({h for _, h in chunk})
        marks = ",".join("?" * len(hashes))
        # sorted here, not by ORDER BY id: that makes SQLite walk every row of the node
        rows = sorted(conn.execute(
            f"SELECT id, key, run_hash, context, signature, format, output_hash FROM "
            f"materializations WHERE node_id = ? AND status = 'success' AND run_hash IN "
            f"({marks})", (node_id, *hashes)).fetchall())
        pairs = set(chunk)
        for _, key, run_hash, context, signature, fmt, output_hash in rows:
            if (key, run_hash) in pairs:
                found[key] = (key, run_hash, context, _signature(signature), fmt, output_hash)
    return list(found.values())


def record(conn: sqlite3.Connection, run_id: str, outcomes: Sequence[Any],
           plans: dict[str, Any]) -> None:
    """Insert finished steps (`StepOutcome`s) in one transaction, with the hash parts their
    node's plan (a NodePlan) gives them, so that a later run can say what changed."""
    now = time.time()
    rows = []
    new_contexts = {}
    for o in outcomes:
        plan = plans[o.node_id]
        new_contexts[plan.context] = plan.context_parts
        sig = [column[o.index] for column in plan.signatures]
        rows.append((run_id, o.node_id, o.key, o.step_id, o.run_hash, plan.context,
                     orjson.dumps(sig), o.status, o.artifact_path, o.format,
                     o.size_bytes, o.output_hash, o.elapsed_seconds, o.attempts, o.error_type,
                     o.error_message, o.traceback, o.max_rss_bytes, now))
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT OR IGNORE INTO contexts (digest, parts) VALUES (?, ?)",
            [(d, orjson.dumps(p)) for d, p in new_contexts.items()])
        conn.executemany(
            "INSERT INTO materializations (run_id, node_id, key, step_id, run_hash, context, "
            "signature, status, artifact_path, format, size_bytes, output_hash, "
            "elapsed_seconds, attempts, error_type, error_message, error_traceback, "
            "max_rss_bytes, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def has_success(conn: sqlite3.Connection | None, node_id: str) -> bool:
    return conn is not None and conn.execute(
        "SELECT 1 FROM materializations WHERE node_id = ? AND status = 'success' LIMIT 1",
        (node_id,)).fetchone() is not None


def output_hashes(conn: sqlite3.Connection | None, node_id: str,
                  wanted: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Recorded output digests for (key, run_hash) pairs: key -> digest."""
    return {rec[0]: rec[5] for rec in find_successes(conn, node_id, wanted) if rec[5]}


def save_states(conn: sqlite3.Connection, states: dict[str, NodeState],
                watermarks: dict[str, int], run_id: str) -> None:
    """Write new snapshots. Rows another process recorded meanwhile are folded in first."""
    for node_id, state in states.items():
        conn.execute("BEGIN IMMEDIATE")
        try:
            state, top = _replay(conn, node_id, state, watermarks.get(node_id, 0),
                                 skip_run=run_id)
            latest = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ?",
                                  (node_id,)).fetchone()[0] or 0
            conn.execute("INSERT OR REPLACE INTO node_state (node_id, watermark, data) "
                         "VALUES (?, ?, ?)", (node_id, max(top, latest), encode_state(state)))
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
