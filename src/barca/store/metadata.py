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
from dataclasses import replace
from typing import Any, Iterable, NamedTuple, Sequence

import orjson

from barca.errors import UsageError
from barca.state import NodeState
from barca.store import history_table, run_queue, step_leases
from barca.store.db import write_transaction
from barca.store.owners import process_start
from barca.store.packs import where_in_pack
from barca.store.state_codec import decode_state, encode_header, state_columns


class Stored(NamedTuple):
    """What a node's snapshot row said when its state was loaded."""

    watermark: int  # the last materialization id the snapshot covers
    generation: int  # bumped by every write of the snapshot
    replayed: bool  # rows after the watermark were applied: the state is not what is stored


NOT_STORED = Stored(0, 0, True)


def load_states(conn: sqlite3.Connection | None, node_ids: Iterable[str]
                ) -> tuple[dict[str, NodeState], dict[str, Stored]]:
    """Each node's snapshot plus the rows recorded after it, and what its snapshot row said.

    Two queries for the snapshots of the whole cone and one index seek per node for its newest
    row; a node gets one more query only when rows were recorded after its snapshot (a killed
    run, another process). A snapshot that cannot be read is rebuilt from the rows.
    """
    if conn is None:
        return {}, {}
    node_ids = list(node_ids)
    headers: dict[str, tuple[int, int, bytes]] = {}
    columns: dict[str, dict[str, list[bytes]]] = {}
    for chunk in _chunks(node_ids):
        marks = ",".join("?" * len(chunk))
        for node_id, watermark, generation, data in conn.execute(
                f"SELECT node_id, watermark, generation, data FROM node_state "
                f"WHERE node_id IN ({marks})", chunk):
            headers[node_id] = (watermark, generation, data)
        for node_id, part, data in conn.execute(
                f"SELECT node_id, part, data FROM node_state_chunk WHERE node_id IN ({marks}) "
                f"ORDER BY node_id, part, chunk", chunk):
            columns.setdefault(node_id, {}).setdefault(part, []).append(data)
    states, stored = {}, {}
    for node_id in node_ids:
        # one index seek each; a GROUP BY would read every row's entry
        latest = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ?",
                              (node_id,)).fetchone()[0] or 0
        watermark, generation, header = headers.get(node_id, (0, 0, None))
        state = NodeState()
        if header is not None:
            try:
                state = decode_state(header, columns.get(node_id, {}))
            except (ValueError, KeyError, TypeError):  # unreadable: replay every row instead
                watermark = 0
        replayed = latest > watermark
        if replayed:
            state, watermark = _replay(conn, node_id, state, watermark)
        stored[node_id] = Stored(watermark, generation, replayed)
        if len(state) or state.failed:
            states[node_id] = state
    return states, stored


def _chunks(items: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _replay(conn: sqlite3.Connection, node_id: str, state: NodeState, watermark: int,
            skip_run: str | None = None) -> tuple[NodeState, int]:
    """Apply the rows recorded after `watermark` (a killed run, or another process's run),
    but those of `skip_run` (whose rows the state has already: a run's own 200,000 are not
    read back as it saves its state)."""
    delta = conn.execute(
        "SELECT id, key, run_hash, context, signature, format, output_hash, status, "
        "error_message, artifact_path FROM materializations "
        "WHERE node_id = ? AND id > ? AND run_ref IS NOT ? ORDER BY id",
        (node_id, watermark, None if skip_run is None else history_table.ref(skip_run))
    ).fetchall()
    if not delta:
        return state, watermark
    successes = []
    failed = dict(state.failed)
    for _, key, run_hash, context, signature, fmt, output_hash, status, error, path in delta:
        if status == "success":
            successes.append((key, run_hash, context, _signature(signature), fmt, output_hash,
                              where_in_pack(path)))
            failed.pop(key, None)
        else:
            failed[key] = [run_hash, error]
    if not successes and failed == state.failed:
        return state, delta[-1][0]
    state = state.with_records(successes)
    return replace(state, failed=failed, parts=_with_parts(conn, state)), delta[-1][0]


def _signature(text: str | bytes | None) -> Any:
    return orjson.loads(text) if text else None


def _with_parts(conn: sqlite3.Connection, state: NodeState) -> dict[str, dict[str, str]]:
    """The state's parts, with those of contexts it lacks read from the database."""
    parts = dict(state.parts)
    for digest in state.contexts:
        if digest and digest not in parts:
            row = conn.execute("SELECT parts FROM contexts WHERE digest = ?",
                               (digest,)).fetchone()
            if row:
                parts[digest] = orjson.loads(row[0])
    return parts


def find_successes(conn: sqlite3.Connection | None, node_id: str,
                   wanted: Sequence[tuple[str, str]]) -> list[tuple]:
    """Older successful results for (key, run_hash) pairs, as NodeState.put arguments."""
    if conn is None or not wanted:
        return []
    found: dict[str, tuple] = {}
    for start in range(0, len(wanted), 400):
        chunk = wanted[start:start + 400]
        pairs = ",".join("(?,?)" for _ in chunk)
        # one index seek per (key, run hash); sorted here, not by ORDER BY id, which makes
        # SQLite sort what it found in a temporary tree
        rows = sorted(conn.execute(
            f"SELECT m.id, m.key, m.run_hash, m.context, m.signature, m.format, "
            f"m.output_hash, m.artifact_path FROM (VALUES {pairs}) AS w "
            f"JOIN materializations AS m "
            f"ON m.node_id = ? AND m.key = w.column1 AND m.run_hash = w.column2 "
            f"WHERE m.status = 'success'", (*(v for pair in chunk for v in pair), node_id)
        ).fetchall())
        for _, key, run_hash, context, signature, fmt, output_hash, path in rows:
            found[key] = (key, run_hash, context, _signature(signature), fmt, output_hash,
                          where_in_pack(path))
    return list(found.values())



def record(conn: sqlite3.Connection, run_id: str, outcomes: Sequence[Any],
           plans: dict[str, Any], leased: Sequence[tuple[str, str, str]],
           artifacts_dir: str) -> None:
    """Insert finished steps (`StepOutcome`s) in one transaction, with the hash parts their
    node's plan (a NodePlan) gives them, so that a later run can say what changed; the
    `leased` steps among them (node id, key, run hash) are given back in the same
    transaction, so that a run waiting for one finds its outcome when the lease is gone.
    A result's store key is recorded as its path under `artifacts_dir` (root-relative,
    `.barca/artifacts`): the project's local layout, which `artifact_path` shows."""
    now = time.time()
    rows = []
    new_contexts = {}
    for o in outcomes:
        plan = plans[o.node_id]
        new_contexts[plan.context] = plan.context_parts
        sig = [column[o.index] for column in plan.signatures]
        rows.append((run_id, o.node_id, o.key, o.step_id, o.run_hash, plan.context,
                     orjson.dumps(sig), o.status,
                     None if o.artifact_key is None else f"{artifacts_dir}/{o.artifact_key}",
                     o.format, o.size_bytes, o.output_hash, o.elapsed_seconds, o.attempts,
                     o.error_type, o.error_message, o.traceback, o.max_rss_bytes, now, o.batch,
                     o.worker_exit, o.cpu_seconds))
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT OR IGNORE INTO contexts (digest, parts) VALUES (?, ?)",
            [(d, orjson.dumps(p)) for d, p in new_contexts.items()])
        history_table.insert(conn, rows, artifacts_dir)
        step_leases.release(conn, run_id, leased)
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
                before: dict[str, NodeState], stored: dict[str, Stored], run_id: str) -> None:
    """Write new snapshots. Rows another process recorded meanwhile are folded in first.

    `before` holds the states as loaded (not as the run changed them, e.g. with older results
    found again): when a node's snapshot is still the one loaded, only
    the chunks that differ from it are written, so a tick that changed one key of 200,000
    writes a few chunks, not the node's every column."""
    for node_id, state in states.items():
        conn.execute("BEGIN IMMEDIATE")
        try:
            mark = stored.get(node_id, NOT_STORED)
            state, top = _replay(conn, node_id, state, mark.watermark, skip_run=run_id)
            latest = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ?",
                                  (node_id,)).fetchone()[0] or 0
            row = conn.execute("SELECT generation FROM node_state WHERE node_id = ?",
                               (node_id,)).fetchone()
            generation = row[0] if row else 0
            unchanged = row is not None and generation == mark.generation and \
                not mark.replayed
            old = state_columns(before.get(node_id, NodeState())) if unchanged else None
            _write_columns(conn, node_id, state_columns(state), old)
            conn.execute("INSERT OR REPLACE INTO node_state (node_id, watermark, generation, "
                         "data) VALUES (?, ?, ?, ?)",
                         (node_id, max(top, latest), generation + 1, encode_header(state)))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _write_columns(conn: sqlite3.Connection, node_id: str,
                   columns: dict[str, Sequence[bytes]],
                   old: dict[str, Sequence[bytes]] | None) -> None:
    """Store each column's chunks; with `old` (what is stored now), only those that differ."""
    if old is None:
        conn.execute("DELETE FROM node_state_chunk WHERE node_id = ?", (node_id,))
        old = {}
    for part in old.keys() - columns.keys():
        conn.execute("DELETE FROM node_state_chunk WHERE node_id = ? AND part = ?",
                     (node_id, part))
    for part, chunks in columns.items():
        was = old.get(part, ())
        conn.executemany(
            "INSERT OR REPLACE INTO node_state_chunk (node_id, part, chunk, data) "
            "VALUES (?, ?, ?, ?)",
            [(node_id, part, c, chunks[c]) for c in range(len(chunks))
             if c >= len(was) or chunks[c] != was[c]])
        if len(was) > len(chunks):
            conn.execute("DELETE FROM node_state_chunk WHERE node_id = ? AND part = ? AND "
                         "chunk >= ?", (node_id, part, len(chunks)))


def start_run(conn: sqlite3.Connection, run_id: str, command: str, files: Sequence[str],
              target: str | None, triggered_by: str = "cli", job: str | None = None,
              schedule: tuple[str, float] | None = None) -> None:
    """Record a run's start, claiming its place in a server's queue when it had one
    (store.run_queue). An id already recorded is refused with nothing written: the run that
    has it keeps its row (a second run under one id would finish it as its own). `job`: the
    resolved targets (sorted node ids, `all` without one); `schedule`: (schedule id, tick
    time) of a run a schedule started."""
    with write_transaction(conn):
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
            raise UsageError(f"run id {run_id!r} is already a recorded run",
                             "leave run_id out: barca gives each run a new id")
        run_queue.claim(conn, run_id)
        schedule_id, scheduled_at = schedule or (None, None)
        conn.execute(
            "INSERT INTO runs (run_id, command, files, target, status, started_at, pid, host, "
            "proc_start, triggered_by, job, schedule_id, scheduled_at) "
            "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, command, orjson.dumps(list(files)).decode(), target, time.time(),
             os.getpid(), socket.gethostname(), process_start(os.getpid()), triggered_by, job,
             schedule_id, scheduled_at))


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
