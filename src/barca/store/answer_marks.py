"""What a kept `get` answer (engine.cached_get) rests on in the metadata database, and the
run row of an answer given again.

Each node's marks are its `node_state` row (watermark, generation, data), its
`node_state_chunk` rows and the newest materialization id recorded for it: a run that records
anything for the node, or rewrites its state, changes them, and so does a database put back or
reset (the data is the state itself). Kept to os and the C halves of sqlite3 and blake2b (the
sqlite3 package adds datetime's adapters, a few milliseconds nobody here uses).
"""

from __future__ import annotations

import os
import time

import _blake2  # hashlib's blake2b without hashlib, which loads OpenSSL
import _sqlite3 as sqlite3  # what `sqlite3` re-exports: connect, Connection, Error

from barca.store.owners import process_start

TYPE_CHECKING = False  # typing is not imported for it
if TYPE_CHECKING:
    from typing import Any, Sequence


def open_db(path: str) -> sqlite3.Connection | None:
    """The metadata database as `store.db.connect` leaves an existing one (WAL, synchronous
    NORMAL, the same busy timeout); None when there is none."""
    if not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(path, timeout=60.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:
        return None
    return conn


def node_marks(conn: sqlite3.Connection, node_ids: Sequence[str]) -> tuple:
    """Each node's marks, in the order of `node_ids` (see the module's docstring):
    ((watermark, generation, data) or None, its chunk rows, newest materialization id)."""
    heads: dict[str, tuple] = {}
    chunks: dict[str, list] = {}
    for start in range(0, len(node_ids), 500):
        part = list(node_ids[start:start + 500])
        holes = ",".join("?" * len(part))
        for node_id, *head in conn.execute(
                f"SELECT node_id, watermark, generation, data FROM node_state "
                f"WHERE node_id IN ({holes})", part):
            heads[node_id] = tuple(head)
        for node_id, *chunk in conn.execute(
                f"SELECT node_id, part, chunk, data FROM node_state_chunk "
                f"WHERE node_id IN ({holes}) ORDER BY node_id, part, chunk", part):
            chunks.setdefault(node_id, []).append(tuple(chunk))
    latest = "SELECT max(id) FROM materializations WHERE node_id = ?"
    return tuple((heads.get(n), tuple(chunks.get(n, ())),
                  conn.execute(latest, (n,)).fetchone()[0]) for n in node_ids)


def marks_digest(marks: tuple) -> str:
    """What an answer keeps of `node_marks`: their digest."""
    return _blake2.blake2b(repr(marks).encode(), digest_size=16).hexdigest()


def schema_version(conn: sqlite3.Connection) -> int | None:
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return None


def as_recorded(path: str, node_ids: Sequence[str], run_id: str) -> tuple | None:
    """(schema version, each node's marks, what `record_again` writes again of the run's row:
    all but its times and process) as the database at `path` holds them now; None when it
    cannot say (keeping an answer is never worth failing a command for)."""
    conn = open_db(path)
    if conn is None:
        return None
    try:
        row = conn.execute("SELECT command, files, target, steps_total, steps_executed, "
                           "steps_cached, job FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else (schema_version(conn), node_marks(conn, node_ids), row)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def record_again(path: str, schema: int, node_ids: Sequence[str], marks: str,
                 row: Sequence[Any], run_id: str, started: float, elapsed: float) -> bool:
    """Record a run that gave a kept answer again, finished as the run that made it did
    (`row`: command, files as JSON, target, steps total, executed, cached, job), under the
    write lock and only if the database at `path` is still at `schema` and every node's marks
    are still those `marks` is the digest of. False, with nothing written, when they are not,
    the id is taken or the database refuses (the command then runs as usual, and reports that
    as it does)."""
    conn = open_db(path)
    if conn is None:
        return False
    try:
        return schema_version(conn) == schema and _record(conn, node_ids, marks, row, run_id,
                                                          started, elapsed)
    finally:
        conn.close()


def _record(conn: sqlite3.Connection, node_ids: Sequence[str], marks: str,
            row: Sequence[Any], run_id: str, started: float, elapsed: float) -> bool:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return False
    try:
        if marks_digest(node_marks(conn, node_ids)) != marks or conn.execute(
                "SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
            conn.execute("ROLLBACK")
            return False
        command, files, target, total, executed, cached, job = row
        pid = os.getpid()
        conn.execute(
            "INSERT INTO runs (run_id, command, files, target, status, steps_total, "
            "steps_executed, steps_cached, started_at, finished_at, elapsed_seconds, pid, host, "
            "proc_start, triggered_by, job) VALUES (?, ?, ?, ?, 'success', ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, 'cli', ?)",
            (run_id, command, files, target, total, executed, cached, started, time.time(),
             elapsed, pid, os.uname().nodename,  # socket.gethostname(), without socket
             process_start(pid), job))
        conn.execute("COMMIT")
    except sqlite3.Error:
        _roll_back(conn)
        return False
    except BaseException:
        _roll_back(conn)
        raise
    return True


def _roll_back(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:  # none is open (COMMIT failed and ended it)
        pass
