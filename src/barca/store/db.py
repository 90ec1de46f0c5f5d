"""The SQLite metadata database: connection, schema and its version.

WAL mode lets readers (`status`, `history`) run beside a writing `get`; a 60 s busy timeout
lets two runs on one project queue on each other instead of failing. Only the coordinator
process writes here; workers never open it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from barca.errors import InfraError, UsageError
from barca.store import history_table
from barca.store.relayout import move_key_directories, project_root

SCHEMA_VERSION = 13
# versions this barca upgrades in place: 1 kept each node's snapshot in one row; its snapshots
# are dropped and rebuilt from the materializations by the next run that reads the node.
# 2 had no key_source_chunk table; it is added (empty: the next tick sends whole columns).
# 3 had no step_leases table (concurrent runs each computed every step) and no
# materializations.worker_exit column; both are added (empty, null for earlier steps).
# 4 and earlier kept a directory per partition key: their files move to one directory per node
# (barca.store.relayout).
# 5 had no runs.triggered_by (who started a run: cli, python, api, schedule, catch_up) and no
# schedule_state table (`barca serve`'s last fire of each job); both are added.
# 6 indexed materializations by (node, run hash, key): a first run's rows landed at random
# places in it, and each commit rewrote most of its pages (40 us a row at 400,000 rows); the
# index is rebuilt by (node, key, run hash), where keys in order append (20 us a row).
# 7 had no run_queue table (`barca serve` kept the runs waiting for a slot in memory only); it
# is added, empty.
# 8 had no runs.job (the resolved targets), runs.schedule_id and runs.scheduled_at (the
# schedule and tick that started a scheduled run), nor materializations.cpu_seconds (a step's
# CPU time); they are added, null for the rows before.
# 9 had no index of failed attempts (mat_failed): the first page of a partitioned node's keys
# (store.partition_pages) read every key's newest row to count the failed ones; it is built.
# 10 kept the history in a `materializations` table of text (about 490 bytes a row with its
# indexes); its rows move to `executions` (barca.store.history_table), read through a view of
# the same name and columns.
# 11 had no server_state table (`barca serve`'s paused queue and schedules); it is added, empty.
# 12 had no ledger_posts table (runs a client has still to post to the server's ledger,
# store.ledger_rows); it is added, empty.
UPGRADABLE = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
_ADDED_COLUMNS = {"materializations": (("worker_exit", "TEXT"), ("cpu_seconds", "REAL")),
                  "runs": (("triggered_by", "TEXT"), ("job", "TEXT"), ("schedule_id", "TEXT"),
                           ("scheduled_at", "REAL"))}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, command TEXT NOT NULL, files TEXT NOT NULL, target TEXT,
    status TEXT NOT NULL, steps_total INTEGER, steps_executed INTEGER, steps_cached INTEGER,
    started_at REAL NOT NULL, finished_at REAL, elapsed_seconds REAL,
    pid INTEGER, host TEXT, proc_start TEXT, failed_node TEXT, error TEXT, triggered_by TEXT,
    job TEXT, schedule_id TEXT, scheduled_at REAL
);
CREATE TABLE IF NOT EXISTS contexts (digest TEXT PRIMARY KEY, parts TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS node_state (
    node_id TEXT PRIMARY KEY, watermark INTEGER NOT NULL, generation INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS node_state_chunk (
    node_id TEXT NOT NULL, part TEXT NOT NULL, chunk INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (node_id, part, chunk)
);
CREATE TABLE IF NOT EXISTS key_source_chunk (
    node_id TEXT NOT NULL, part TEXT NOT NULL, chunk INTEGER NOT NULL, digest BLOB NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (node_id, part, chunk)
);
CREATE TABLE IF NOT EXISTS logs (
    run_id TEXT NOT NULL, step_id TEXT NOT NULL, seq INTEGER NOT NULL, stream TEXT NOT NULL,
    ts REAL NOT NULL, line TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_run ON logs (run_id, seq);
CREATE TABLE IF NOT EXISTS step_leases (
    node_id TEXT NOT NULL, key TEXT NOT NULL, run_hash TEXT NOT NULL, run_id TEXT NOT NULL,
    pid INTEGER NOT NULL, host TEXT NOT NULL, proc_start TEXT, taken_at REAL NOT NULL,
    PRIMARY KEY (node_id, key, run_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS schedule_state (
    job_id TEXT PRIMARY KEY, cron TEXT NOT NULL, timezone TEXT NOT NULL,
    last_fired REAL NOT NULL, last_run_id TEXT, updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_queue (
    seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, request TEXT NOT NULL,
    triggered_by TEXT NOT NULL, accepted_at REAL NOT NULL, pid INTEGER NOT NULL,
    host TEXT NOT NULL, proc_start TEXT
);
CREATE TABLE IF NOT EXISTS server_state (
    name TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger_posts (
    run_id TEXT PRIMARY KEY, server TEXT NOT NULL, nodes TEXT NOT NULL,
    created_at REAL NOT NULL, attempts INTEGER NOT NULL, error TEXT
);
"""


def published_layout(conn: sqlite3.Connection, path: Path) -> UsageError | None:
    """The error for a database the published barca (0.33 and the releases around it) wrote:
    its own schema, numbered from 1 like ours, with a history this barca cannot read (no
    partition keys, its own run hashes). None for any other database."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(materializations)")}
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE "
                                             "type = 'table'")}
    if not (columns and "key" not in columns) and not tables & _PUBLISHED_ONLY:
        return None
    state = path.parent
    return UsageError(
        f"{state} was written by the published barca (0.33 or a release near it), whose "
        "records this barca cannot read",
        f"move it aside (`mv {state} {state}-0.33`) or run with another --env; the next "
        "`barca get` then computes every result again")


_PUBLISHED_ONLY = {"freshness_proofs", "cost_estimates", "pending_uploads"}  # tables only it makes


def _create_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create (or upgrade) the tables under the write lock, so two first runs never race."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise InfraError(f"{path} is not a barca metadata database (it has tables "
                             "barca did not create)",
                             "move it away, or run with another --env")
        if version > SCHEMA_VERSION:  # a newer barca created it meanwhile
            raise InfraError(f"{path} has schema version {version}; this barca reads version "
                             f"{SCHEMA_VERSION}", "use the barca version that wrote it")
        if version == 1:
            conn.execute("DROP TABLE node_state")
        for table, added in _ADDED_COLUMNS.items():
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for name, kind in added:
                if columns and name not in columns:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        if version and version < 5:
            move_key_directories(conn, path)
        if version and version < 11:
            history_table.compact_old_table(conn, _artifacts_dir(path))
        if version != SCHEMA_VERSION:
            create_tables(conn)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def create_tables(conn: sqlite3.Connection) -> None:
    """Every table, index and view of the current schema that is not there yet (inside the
    caller's transaction)."""
    for statement in (_SCHEMA + history_table.DDL).split(";"):
        if statement.strip():
            conn.execute(statement)


def _artifacts_dir(db_path: Path) -> str:
    """Where this database's results are, as its rows name them (root-relative)."""
    return (db_path.parent / "artifacts").relative_to(project_root(db_path)).as_posix()


Connection = sqlite3.Connection  # what `connect` returns: the name outside store/ uses


def connect(path: Path, *, create: bool) -> sqlite3.Connection | None:
    """Open the database; None when it does not exist and `create` is False (read-only use).
    With BARCA_READ_ONLY=1 (what `barca serve --read-only` gives the commands it runs) it is
    opened read-only, whatever the caller meant to do: SQLite then refuses every write."""
    if os.environ.get("BARCA_READ_ONLY") == "1":
        return connect_readonly(path)
    if not create and not path.exists():
        return None
    try:
        conn = sqlite3.connect(path, timeout=60.0, isolation_level=None,
                               check_same_thread=False)
        if (foreign := published_layout(conn, path)) is not None:
            conn.close()  # before WAL mode, which would change the file
            raise foreign
        _enable_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0 or version in UPGRADABLE:
            _create_schema(conn, path)
        elif version != SCHEMA_VERSION:
            raise InfraError(
                f"{path} has schema version {version}; this barca reads version "
                f"{SCHEMA_VERSION}",
                "use the barca version that wrote it, or run with another --env",
            )
        return conn
    except sqlite3.Error as exc:
        raise InfraError(f"cannot open metadata database {path}: {exc}",
                         "check that .barca/ is writable and not on a full disk") from exc


def connect_readonly(path: Path) -> sqlite3.Connection | None:
    """Open the database for reading only, never creating, upgrading or writing beside it (a
    read-only server and the commands it runs): a private snapshot of it as it is now
    (`barca.store.snapshot` says why not the file itself); None when it does not exist."""
    from barca.store.snapshot import connect_snapshot

    try:
        return connect_snapshot(path)
    except (sqlite3.Error, OSError) as exc:
        raise InfraError(f"cannot read metadata database {path}: {exc}",
                         "check that .barca/ is readable") from exc


def _enable_wal(conn: sqlite3.Connection, wait: float = 60.0) -> None:
    """Switch to WAL, waiting like every other statement does: SQLite answers this pragma
    "database is locked" at once, without its busy timeout, while another process is creating
    the same new database (two first runs started together)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One transaction that holds the write lock from its first statement: what it reads
    cannot change before it writes (a deferred one could fail with SQLITE_BUSY at its first
    write, past the busy timeout, when another process wrote meanwhile)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


_LEFT_OPEN_AT_EXIT = [False]


def leave_open_at_exit() -> None:
    """Say that this process ends with os._exit once its command has answered (a command the
    warm pool forked): `release` then leaves its connections open. Closing the last one
    would copy the run's writes from the log into the database file, with their fsyncs,
    before the answer; the next run does that while its sensors run (`checkpoint`)."""
    _LEFT_OPEN_AT_EXIT[0] = True


def release(conn: sqlite3.Connection) -> None:
    """Let go of a connection: closed, unless the process is about to end anyway and the
    connection wrote something. One that wrote nothing (a dry run, `status`) is closed even
    then: it has nothing to copy, and closing the last connection removes the log and
    shared-memory files, so a command that changed nothing leaves `.barca/` as it was."""
    if not _LEFT_OPEN_AT_EXIT[0] or not conn.total_changes:
        conn.close()


def defer_checkpoint(conn: sqlite3.Connection) -> None:
    """Leave what this connection writes from now on in the write-ahead log.

    Copying a run's last writes (the state snapshots, megabytes at 200,000 keys) into the
    database file would double their cost at the end of the run, where the user waits; the
    next run does it while its sensors run (`checkpoint`), or any later large write does."""
    conn.execute("PRAGMA wal_autocheckpoint=0")


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the write-ahead log into the database file, without waiting for other processes."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def describe(path: Path) -> tuple[int, int]:
    """(schema version, runs recorded) of a database, read-only and without upgrading it;
    InfraError naming the cause when it cannot be read (`barca doctor`)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if (foreign := published_layout(conn, path)) is not None:
                raise foreign
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0] if version else 0
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise InfraError(f"{path} cannot be read: {exc}") from exc
    return version, runs
