"""Reading the metadata database without writing a byte under the project: what
`barca serve --read-only` and the commands it runs (BARCA_READ_ONLY=1) read through.

SQLite writes beside a WAL database even to read it: a reader, `mode=ro` included, creates
`metadata.db-shm` and `metadata.db-wal` in `.barca/` when they are not there (and cannot
remove them again, being read-only), and updates the shared-memory file while it reads.
Two ways out, and why this module takes the second:

- `immutable=1` on the project's file makes SQLite touch nothing, but it also believes the
  file never changes: it ignores the write-ahead log, which holds the newest runs (a run
  leaves its last writes there, `db.defer_checkpoint`, and a running or killed run all of
  them), and takes no lock, so a page a writer changes mid-query gives a wrong answer or
  "database disk image is malformed". A read-only server beside a writing CLI would show
  old runs, or fail.
- A private snapshot: the database file and its log are copied into a private temporary
  directory (mode 0700, outside the project), the log is replayed into the copy there, and
  the copy is read with `immutable=1` (nobody writes it). A new snapshot is taken when the
  database's or its log's size, modification time or log header changes, so new runs appear
  at the next read. A copy that a checkpoint or a restarted log changed under it is thrown
  away and taken again (`_unmoved`); frames a run appends while the log is copied are not a
  problem: the log's own checksums make a copy cut in the middle of a commit replay only the
  commits it holds whole.

Snapshots are named by the database's path and stamp, so processes that share a directory
(the server and the commands it runs, through BARCA_SNAPSHOT_DIR) share them; an old one is
unlinked when a newer one is made, while connections on it keep reading it.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

from barca.errors import InfraError

SNAPSHOT_DIR_ENV = "BARCA_SNAPSHOT_DIR"
COPY_ATTEMPTS = 20  # copies a busy writer may spoil before the read fails
_WAL_HEADER = 32  # bytes: magic, version, page size, checkpoint sequence, salts, checksum

_lock = threading.Lock()  # one snapshot taken at a time in this process


def connect_snapshot(db_path: Path) -> sqlite3.Connection | None:
    """A connection on a snapshot of the database as it is now; None when there is none."""
    for _ in range(3):  # another process may unlink the snapshot just found, for a newer one
        path = current(db_path)
        if path is None:
            return None
        try:
            return sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True,
                                   isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError:
            continue
    raise InfraError(f"cannot open a snapshot of {db_path}",
                     f"check that {directory()} is writable")


def current(db_path: Path) -> Path | None:
    """The snapshot of `db_path` as it is now, taken if needed; None when it does not exist."""
    with _lock:
        for attempt in range(COPY_ATTEMPTS):
            before = stamp(db_path)
            if before is None:
                return None
            folder = directory()
            prefix = _prefix(db_path)
            version = hashlib.blake2b(repr(before).encode(), digest_size=8).hexdigest()
            path = folder / f"{prefix}-{version}.db"
            if path.exists():
                return path
            tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}"
            try:
                _copy(db_path, tmp)
                if _unmoved(stamp(db_path)) == _unmoved(before) and _settle(tmp):
                    os.replace(tmp, path)
                    _drop_older(folder, prefix, path)
                    return path
            finally:
                for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                    leftover.unlink(missing_ok=True)
            time.sleep(0.005 * (attempt + 1))  # a writer is busy: let it finish a commit
    raise InfraError(f"{db_path} changed during each of {COPY_ATTEMPTS} attempts to copy it",
                     "retry once the runs writing it have ended")


def stamp(db_path: Path) -> tuple | None:
    """What changes when anything is written: the file's and its log's identity, size and
    modification time, and the log's header (a checkpoint that restarts the log rewrites it)."""
    try:
        db = os.stat(db_path)
    except FileNotFoundError:
        return None
    wal_path = Path(f"{db_path}-wal")
    try:
        with open(wal_path, "rb") as fh:
            wal = os.fstat(fh.fileno())
            header = fh.read(_WAL_HEADER)
        wal_part = (wal.st_ino, wal.st_size, wal.st_mtime_ns, header)
    except FileNotFoundError:
        wal_part = None
    return (db.st_ino, db.st_size, db.st_mtime_ns), wal_part


def _unmoved(found: tuple | None) -> tuple | None:
    """What must not change while the files are copied: the database file, and the log's
    identity and header. Frames appended to the log meanwhile are harmless: within one
    generation of the log (one header) frames are only appended, so the copy holds a prefix
    of it, whose whole commits replay and whose last, partly copied frame fails its checksum.
    A checkpoint writes the database file, and restarting the log rewrites its header."""
    if found is None:
        return None
    db, wal = found
    return db, None if wal is None else (wal[0], wal[3])


def directory() -> Path:
    """This process's snapshot directory: BARCA_SNAPSHOT_DIR when a server gave one to the
    commands it runs, else a private temporary directory, removed when the process exits
    (and handed to this process's children)."""
    given = os.environ.get(SNAPSHOT_DIR_ENV)
    if given and os.path.isdir(given):
        return Path(given)
    made = tempfile.mkdtemp(prefix="barca-snapshot-")
    os.environ[SNAPSHOT_DIR_ENV] = made
    atexit.register(shutil.rmtree, made, True)
    return Path(made)


def _prefix(db_path: Path) -> str:
    return hashlib.blake2b(os.path.realpath(db_path).encode(), digest_size=8).hexdigest()


def _copy(db_path: Path, tmp: Path) -> None:
    """The file and its log, as two copies: a writer between them changes the stamp."""
    try:
        shutil.copyfile(f"{db_path}-wal", f"{tmp}-wal")
    except FileNotFoundError:
        pass
    shutil.copyfile(db_path, tmp)


def _settle(tmp: Path) -> bool:
    """Replay the copied log into the copy and make it one self-contained file; False when
    the copy cannot be read (torn by a writer: taken again)."""
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return True


def _drop_older(folder: Path, prefix: str, keep: Path) -> None:
    for path in folder.glob(f"{prefix}-*.db"):
        if path != keep:
            path.unlink(missing_ok=True)
