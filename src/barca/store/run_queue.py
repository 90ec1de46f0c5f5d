"""The runs `barca serve` accepted and has not started yet: its queue, kept in the metadata
database, so that a 202 stays true when the server is killed while runs still wait.

A row leaves the queue in one transaction either way: the run's own process claims it as it
records its start (`metadata.start_run`: the queue row goes, the `runs` row comes), or the
server closes it without a run (`close`: cancelled before it started, or it could not start),
leaving a `runs` row that says so and why. So `GET /runs/{id}` always finds an accepted id in
one table or the other. A row names the server holding it (pid, host, kernel start time, as
`store.owners` checks them); the next server on the project adopts the rows whose server is
gone and runs them in the order they were accepted.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Iterable, NamedTuple

import orjson

from barca.store.db import write_transaction
from barca.store.owners import owner_gone, process_start


class Queued(NamedTuple):
    run_id: str
    request: dict  # the server's RunRequest, as plain JSON
    triggered_by: str
    accepted_at: float


class Closing(NamedTuple):
    """How a queued run ends without having run: what its `runs` row says."""

    run_id: str
    status: str  # cancelled | failed
    error: str
    command: str
    files: tuple[str, ...]
    target: str | None


def _this_server() -> tuple[int, str, str | None]:
    pid = os.getpid()
    return pid, socket.gethostname(), process_start(pid)


def enqueue(conn: sqlite3.Connection, run: Queued) -> None:
    """Keep an accepted run, held by this process (a server), before it is answered."""
    with write_transaction(conn):
        conn.execute("INSERT INTO run_queue (run_id, request, triggered_by, accepted_at, pid, "
                     "host, proc_start) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (run.run_id, orjson.dumps(run.request).decode(), run.triggered_by,
                      run.accepted_at, *_this_server()))


def orphans(conn: sqlite3.Connection, adopt: bool) -> list[Queued]:
    """The queued runs whose server is gone, oldest first; `adopt`: held by this process from
    now on, in the transaction that found them (two servers starting together do not both
    take a run). A read-only server only looks."""
    if not adopt:
        return _orphans(conn)
    with write_transaction(conn):
        found = _orphans(conn)
        conn.executemany("UPDATE run_queue SET pid = ?, host = ?, proc_start = ? "
                         "WHERE run_id = ?", [(*_this_server(), q.run_id) for q in found])
    return found


def _orphans(conn: sqlite3.Connection) -> list[Queued]:
    rows = conn.execute("SELECT run_id, request, triggered_by, accepted_at, pid, host, "
                        "proc_start FROM run_queue ORDER BY seq").fetchall()
    return [Queued(r[0], orjson.loads(r[1]), r[2], r[3]) for r in rows
            if owner_gone(r[4], r[5], r[6])]


def close(conn: sqlite3.Connection, closing: Iterable[Closing]) -> None:
    """End queued runs that will not run: each queue row still there becomes a finished
    `runs` row with its status and reason (a row its run claimed meanwhile is left alone)."""
    now = time.time()
    with write_transaction(conn):
        for c in closing:
            row = conn.execute("SELECT triggered_by, accepted_at FROM run_queue WHERE "
                               "run_id = ?", (c.run_id,)).fetchone()
            if row is None:
                continue
            conn.execute("DELETE FROM run_queue WHERE run_id = ?", (c.run_id,))
            conn.execute(
                "INSERT OR IGNORE INTO runs (run_id, command, files, target, status, "
                "steps_total, steps_executed, steps_cached, started_at, finished_at, "
                "elapsed_seconds, error, triggered_by) VALUES (?, ?, ?, ?, ?, 0, 0, 0, ?, ?, "
                "0, ?, ?)", (c.run_id, c.command, orjson.dumps(list(c.files)).decode(),
                             c.target, c.status, row[1], now, c.error, row[0]))


def claim(conn: sqlite3.Connection, run_id: str) -> None:
    """The run starts: its place in a queue (if it had one) is taken (inside the caller's
    transaction, the one that inserts its `runs` row)."""
    conn.execute("DELETE FROM run_queue WHERE run_id = ?", (run_id,))


class Waiting(NamedTuple):
    """A queued run as `barca queue` shows it: `held` is False when the server that accepted
    it is gone (the next server on the project runs it)."""

    run_id: str
    command: str
    targets: tuple[str, ...]
    triggered_by: str
    accepted_at: float
    held: bool


class Running(NamedTuple):
    run_id: str
    command: str
    targets: tuple[str, ...]
    triggered_by: str | None
    started_at: float
    pid: int | None


def look(conn: sqlite3.Connection) -> tuple[list[Running], list[Waiting]]:
    """(the runs whose process still runs, oldest first; the queue, in order), as the
    database says: every server's and command's runs on the project, one read."""
    running = [Running(r[0], r[1], tuple(t for t in (r[2] or "").split(",") if t), r[3],
                       r[4], r[5]) for r in
               conn.execute("SELECT run_id, command, target, triggered_by, started_at, pid, "
                            "host, proc_start FROM runs WHERE status = 'running' "
                            "ORDER BY started_at").fetchall()
               if not owner_gone(r[5], r[6], r[7])]
    waiting = []
    for run_id, request, triggered_by, accepted_at, pid, host, start in conn.execute(
            "SELECT run_id, request, triggered_by, accepted_at, pid, host, proc_start "
            "FROM run_queue ORDER BY seq"):
        asked = orjson.loads(request)
        waiting.append(Waiting(run_id, asked.get("command", "get"),
                               tuple(asked.get("targets") or ()), triggered_by, accepted_at,
                               not owner_gone(pid, host, start)))
    return running, waiting

