"""What `barca serve` writes besides the runs themselves, each a call that opens the metadata
database, does one thing and closes it: its queue of accepted runs (`store.run_queue`), when
each schedule last fired (`store.schedule_state`), what an operator paused
(`store.server_state`), the runs it killed at shutdown, a reset of the database
(`store.state_reset`). Also how it
reads when read-only (private snapshots, the schema it will not upgrade) and whether the
process that left something behind still runs (`store.owners`).

The server holds no connection and names no table: the store's layout may change (another
store, another database) without a change to `server/`.

The same actions from the command line, for a project no server holds (`barca queue`,
`barca state`): a look at the durable queue, a pause kept for the next server, the backups a
reset or a restore left, a restore, a reset. Each that changes something a running server
would not see is refused while one holds the project (`store.serve_lock`, which every server
holds from its start: `hold_project`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import barca.store.run_queue as run_queue
import barca.store.schedule_state as schedule_state
import barca.store.server_state as server_state
import barca.store.snapshot as snapshot
import barca.store.state_backups as state_backups
from barca.errors import InfraError, UsageError
from barca.store.db import SCHEMA_VERSION, connect, connect_readonly
from barca.store.history import mark_cancelled
from barca.store.owners import owner_gone, process_start
from barca.store.run_queue import Closing, Queued, Running, Waiting
from barca.store.serve_lock import ServerHolds, exclusive, hold, held
from barca.store.state_backups import Backup, Contents
from barca.store.schedule_state import Fired
from barca.store.state_reset import reset as reset_database

__all__ = ["Closing", "Fired", "Queued", "owner_gone", "process_start", "enqueue_run",
           "queued_orphans", "close_queued", "load_fires", "record_fires", "close_killed",
           "read_through_snapshots", "check_readable", "Pauses", "load_pauses", "pause_queue",
           "pause_schedule", "count_failures", "reset_state", "hold_project", "QueueLook",
           "look_at_queue",
           "pause_unserved_queue", "Backup", "Contents", "backups", "backup_contents",
           "restore_unserved", "reset_unserved", "Running", "Waiting"]


@contextmanager
def _opened(db_path: Path, create: bool) -> Iterator:
    conn = connect(db_path, create=create)
    try:
        yield conn
    finally:
        if conn is not None:
            conn.close()


def enqueue_run(db_path: Path, run: Queued) -> None:
    """Keep an accepted run, held by this process, before it is answered (a 202 survives a
    kill)."""
    with _opened(db_path, create=True) as conn:
        run_queue.enqueue(conn, run)


def queued_orphans(db_path: Path, adopt: bool) -> list[Queued]:
    """The runs a server now gone had queued, oldest first; `adopt`: held by this process from
    now on. No database yet: nothing was queued."""
    with _opened(db_path, create=False) as conn:
        return run_queue.orphans(conn, adopt=adopt) if conn is not None else []


def close_queued(db_path: Path, closing: Iterable[Closing]) -> None:
    """Queued runs that end without having run become finished `runs` rows, in one
    transaction."""
    closing = list(closing)
    if not closing:
        return
    with _opened(db_path, create=True) as conn:
        run_queue.close(conn, closing)


def load_fires(db_path: Path) -> dict[str, Fired]:
    """When each scheduled job last fired (creates the database on a first start)."""
    with _opened(db_path, create=True) as conn:
        return schedule_state.load(conn)


def record_fires(db_path: Path, fired: Iterable[tuple[str, Fired]]) -> None:
    """These jobs' fires, in one transaction."""
    with _opened(db_path, create=True) as conn:
        schedule_state.record(conn, fired)


@dataclass(frozen=True)
class Pauses:
    """What an operator paused: the queue (since when, epoch) and each paused job (id ->
    until when, epoch, or None: until resumed); why a job paused itself (id -> reason), and
    each job's failed ticks in a row (id -> count, none when 0)."""

    queue: float | None
    schedules: dict[str, float | None]
    reasons: dict[str, str] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)


def load_pauses(db_path: Path) -> Pauses:
    """The pauses kept for this project (none before a first database)."""
    with _opened(db_path, create=False) as conn:
        found = server_state.load(conn) if conn is not None else {}
    queue = found.get(server_state.QUEUE)
    prefix, counts = server_state.SCHEDULE_PREFIX, server_state.FAILURES_PREFIX
    paused = {name[len(prefix):]: value for name, value in found.items()
              if name.startswith(prefix)}
    return Pauses(queue["paused_at"] if queue else None,
                  {job: value["until"] for job, value in paused.items()},
                  {job: value["reason"] for job, value in paused.items() if value.get("reason")},
                  {name[len(counts):]: value["count"] for name, value in found.items()
                   if name.startswith(counts)})


def pause_queue(db_path: Path, paused_at: float | None) -> None:
    """Keep the queue paused since `paused_at` (None: resumed)."""
    with _opened(db_path, create=True) as conn:
        server_state.put(conn, server_state.QUEUE,
                         None if paused_at is None else {"paused_at": paused_at})


def pause_schedule(db_path: Path, job_id: str, paused: bool, until: float | None,
                   reason: str | None = None) -> None:
    """Keep a job paused (until `until`, epoch, or until resumed; `reason`: why it paused
    itself), or resumed (its count of failed ticks back to 0)."""
    with _opened(db_path, create=True) as conn:
        value = {"until": until, **({"reason": reason} if reason else {})}
        server_state.put(conn, server_state.SCHEDULE_PREFIX + job_id,
                         value if paused else None)
        if not paused:
            server_state.put(conn, server_state.FAILURES_PREFIX + job_id, None)


def count_failures(db_path: Path, job_id: str, count: int) -> None:
    """Keep how many of a job's ticks in a row failed (0: its last tick did not)."""
    with _opened(db_path, create=True) as conn:
        server_state.put(conn, server_state.FAILURES_PREFIX + job_id,
                         {"count": count} if count else None)


def reset_state(db_path: Path) -> dict:
    """Empty the metadata database after copying it beside itself (`store.state_reset`);
    UsageError with http_status 409 while a run is queued or running."""
    return reset_database(db_path)


def hold_project(db_path: Path, read_only: bool) -> None:
    """This process is a server of the project until it exits (`store.serve_lock`); a
    read-only one creates nothing under the project."""
    hold(db_path, create=not read_only)


@dataclass(frozen=True)
class QueueLook:
    """The project's run queue as its database says: the runs in flight (a server's or a
    command's), the runs a server accepted and has not started, the pause kept, and whether a
    server holds the project now."""

    running: list[Running]
    waiting: list[Waiting]
    paused_at: float | None
    served: bool


def look_at_queue(db_path: Path) -> QueueLook:
    """One read (none before a first database: nothing waits)."""
    served = held(db_path)
    with _opened(db_path, create=False) as conn:
        if conn is None:
            return QueueLook([], [], None, served)
        running, waiting = run_queue.look(conn)
        paused = server_state.load(conn).get(server_state.QUEUE)
    return QueueLook(running, waiting, paused["paused_at"] if paused else None, served)


def pause_unserved_queue(db_path: Path, paused: bool) -> float | None:
    """Keep the queue paused (since now, or since the pause already kept) or resumed, for the
    next server to start; refused while a server holds the project, which would not see it.
    When the queue is paused since, None when it runs."""
    with _unserved(db_path, UsageError, "pause or resume the queue through that server: "
                   "`barca queue pause --server URL` (POST /queue/pause), or stop it first"):
        since = load_pauses(db_path).queue
        if paused and since is None:
            since = time.time()
            pause_queue(db_path, since)
        elif not paused and since is not None:
            since = None
            pause_queue(db_path, None)
        return since


def backups(db_path: Path) -> list[Backup]:
    """The copies a reset or a restore left beside the database, newest first."""
    return state_backups.listing(db_path)


def backup_contents(path: Path) -> Contents:
    """What a backup holds, read without checking every page; UsageError naming why it cannot
    be restored."""
    return state_backups.contents(path, verify=False)


def restore_unserved(db_path: Path, source: Path) -> dict:
    """Put a backup back (`store.state_backups.restore`), refused while a server holds the
    project or a run is queued or running on it (InfraError)."""
    with _unserved(db_path, InfraError, "stop it, then restore"), _idle("restore"):
        return state_backups.restore(db_path, source)


def reset_unserved(db_path: Path) -> dict:
    """`reset_state` from the command line: refused while a server holds the project (its
    reset is POST /state/reset) or a run is queued or running on it (InfraError)."""
    with _unserved(db_path, InfraError, "reset through it (POST /state/reset, or the web "
                   "UI), or stop it first"), _idle("reset"):
        return reset_database(db_path)


@contextmanager
def _unserved(db_path: Path, error: type, fix: str) -> Iterator[None]:
    try:
        with exclusive(db_path):
            yield
    except ServerHolds:
        raise error("a `barca serve` is running on this project", fix) from None


@contextmanager
def _idle(doing: str) -> Iterator[None]:
    """A run queued or running (the store's 409) is the command line's exit 3."""
    try:
        yield
    except UsageError as exc:
        if exc.context.get("http_status") != 409:
            raise
        raise InfraError(exc.message, f"wait for them to end (`barca history` shows them), "
                         f"or cancel them, then {doing} again") from None


def close_killed(db_path: Path, run_ids: Iterable[str]) -> None:
    """Runs killed before they could record their end (a stopping server kills what does not
    stop in time): recorded cancelled, if their rows still say running."""
    run_ids = list(run_ids)
    if not run_ids:
        return
    with _opened(db_path, create=False) as conn:
        if conn is not None:
            mark_cancelled(conn, run_ids)


def read_through_snapshots() -> None:
    """This process, and every command it runs, reads the database through private snapshots
    sharing one directory (`store.snapshot`)."""
    snapshot.directory()


def check_readable(db_path: Path) -> None:
    """A read-only server never upgrades the database, and neither may the commands it runs
    (`status`, a dry run): an older schema is refused at start."""
    conn = connect_readonly(db_path)
    if conn is None:
        return
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    if version not in (0, SCHEMA_VERSION):
        raise UsageError(f"{db_path} has schema version {version}; a read-only server does "
                         f"not upgrade it to {SCHEMA_VERSION}",
                         "run any barca command on the project once (it upgrades in place), "
                         "or serve without --read-only")
