"""Step leases: which run is computing a step right now, so that concurrent runs compute it once.

A lease names a step as it is cached, (node id, key, run hash), and the run computing it with
its process (pid, host and kernel start time, see store.owners). A run takes leases in bulk
(`take`, inside the caller's write transaction), gives each one back in the transaction that
records the step's outcome (`release`, called by `metadata.record`) and whatever it still
holds when it ends (`release_run`). A lease is stale when its run no longer runs: the process
is gone (or its pid now belongs to another process), or the run's row says it ended.
Which steps are leased and what a run does about a held one is engine.concurrent_runs' business.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Iterable, NamedTuple

import orjson

from barca.store.packs import where_in_pack
from barca.store.owners import owner_gone, process_start


class Owner(NamedTuple):
    run_id: str
    pid: int
    host: str
    proc_start: str | None


class Recorded(NamedTuple):
    """An outcome another run recorded for a node: a success carries what a waiting run
    serves it from (`record`, as NodeState.put takes it)."""

    id: int
    key: str
    run_hash: str
    run_id: str
    success: bool
    record: tuple | None


def this_process(run_id: str) -> Owner:
    pid = os.getpid()
    return Owner(run_id, pid, socket.gethostname(), process_start(pid))


def take(conn: sqlite3.Connection, owner: Owner, node_id: str,
         steps: Iterable[tuple[str, str]]) -> int:
    """Lease each (key, run hash) of the node that no run holds, in one statement; how many
    were taken."""
    before = conn.total_changes
    now = time.time()
    conn.executemany(
        "INSERT OR IGNORE INTO step_leases (node_id, key, run_hash, run_id, pid, host, "
        "proc_start, taken_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ((node_id, key, run_hash, *owner, now) for key, run_hash in steps))
    return conn.total_changes - before


def holders(conn: sqlite3.Connection, node_id: str, run_id: str
            ) -> list[tuple[str, str, Owner]]:
    """(key, run hash, owner) of the node's leases held by other runs."""
    return [(key, run_hash, Owner(*owner)) for key, run_hash, *owner in conn.execute(
        "SELECT key, run_hash, run_id, pid, host, proc_start FROM step_leases "
        "WHERE node_id = ? AND run_id != ?", (node_id, run_id))]


def alive(conn: sqlite3.Connection, owner: Owner) -> bool:
    """Whether the owner's run still runs: its process is there and its row says running (a
    run that ended but could not give its leases back leaves them stale too)."""
    if owner_gone(owner.pid, owner.host, owner.proc_start):
        return False
    row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (owner.run_id,)).fetchone()
    return row is not None and row[0] == "running"


def live_steps(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    """(node id, run hash) of every step a run that still runs holds: its result may be
    written at any moment and is not recorded yet (`barca gc` leaves such files alone)."""
    live: dict[Owner, bool] = {}
    out = set()
    for node_id, run_hash, *owner in conn.execute(
            "SELECT node_id, run_hash, run_id, pid, host, proc_start FROM step_leases"):
        holder = Owner(*owner)
        if holder not in live:
            live[holder] = alive(conn, holder)
        if live[holder]:
            out.add((node_id, run_hash))
    return out


def drop(conn: sqlite3.Connection, node_id: str, run_id: str) -> None:
    """Remove a stale owner's leases on a node, so that they can be taken over."""
    conn.execute("DELETE FROM step_leases WHERE node_id = ? AND run_id = ?", (node_id, run_id))


def release(conn: sqlite3.Connection, run_id: str,
            steps: Iterable[tuple[str, str, str]]) -> None:
    """Give back the leases of these (node id, key, run hash) steps, if this run holds them."""
    conn.executemany("DELETE FROM step_leases WHERE node_id = ? AND key = ? AND run_hash = ? "
                     "AND run_id = ?", ((*step, run_id) for step in steps))


def release_run(conn: sqlite3.Connection, run_id: str, node_ids: Iterable[str]) -> None:
    """Give back every lease the run still holds on these nodes."""
    conn.executemany("DELETE FROM step_leases WHERE node_id = ? AND run_id = ?",
                     [(node_id, run_id) for node_id in node_ids])


def recorded_since(conn: sqlite3.Connection, node_id: str, after: int,
                   run_id: str) -> tuple[list[Recorded], int]:
    """What other runs recorded for the node after materialization id `after`, oldest first
    (one range of the node's index: rows recorded since, not the node's history), and the
    last id of that range, this run's own rows included: the next look starts past them, so
    a run that records while it claims (a streaming reader) reads each of its rows once."""
    last = conn.execute("SELECT max(id) FROM materializations WHERE node_id = ? AND id > ?",
                        (node_id, after)).fetchone()[0]
    if last is None:
        return [], after
    return [Recorded(id_, key, run_hash, other, status == "success",
                     (key, run_hash, context, orjson.loads(signature) if signature else None,
                      fmt, output_hash, where_in_pack(path)) if status == "success" else None)
            for id_, key, run_hash, other, status, context, signature, fmt, output_hash, path
            in conn.execute(
                "SELECT id, key, run_hash, run_id, status, context, signature, format, "
                "output_hash, artifact_path FROM materializations WHERE node_id = ? AND id > ? "
                "AND id <= ? AND run_id != ? ORDER BY id", (node_id, after, last, run_id))], last
