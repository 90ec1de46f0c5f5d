"""Whole copies of a project's metadata database kept beside it, and putting one back.

A reset leaves `metadata.db.reset-<UTC>` (`store.state_reset`), a restore leaves
`metadata.db.pre-restore-<UTC>`: what the database held before each. Both are SQLite's own
backup of the live database, written to a temporary name and renamed, so a name in the
directory is always a whole copy. `barca state backups` lists them, `barca state restore`
puts one back.

A restore copies the backup into the live database in place, in one write transaction
(every table dropped and created anew from the backup, as a reset empties it): a run or a
reader that opens the database meanwhile sees the old contents or the new, never a mix, and
a file another process has open stays valid. The backup is read from a private copy (its own
file is never opened for writing, and is validated as it will be restored); an older format
is upgraded by the next connection, as any database this barca finds. The server's settings
(`server_state`: a paused queue or schedule) stay as they are: an operator's pause is not
history.
"""

from __future__ import annotations

import calendar
import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from barca.errors import UsageError
from barca.store.db import (
    SCHEMA_VERSION,
    UPGRADABLE,
    connect,
    published_layout,
    write_transaction,
)
from barca.store.owners import owner_gone

KINDS = ("reset", "pre-restore")
KEPT = ("server_state",)  # tables a reset or a restore leaves as they are
_NAME = re.compile(r"\.(reset|pre-restore)-(\d{8}T\d{6}Z)(?:-(\d+))?$")


@dataclass(frozen=True)
class Backup:
    path: Path
    kind: str  # reset | pre-restore
    taken_at: float  # epoch seconds, from its name
    size_bytes: int


def take(db_path: Path, kind: str) -> Path:
    """Copy the database beside itself as `<name>.<kind>-<UTC>` (a temporary name, then
    renamed): the committed state, what another connection's open transaction has not
    written excluded. Its path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = db_path.with_name(f"{db_path.name}.{kind}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = db_path.with_name(f"{db_path.name}.{kind}-{stamp}-{n}")
    _copy(db_path, target, readonly=False)
    return target


def listing(db_path: Path) -> list[Backup]:
    """The backups beside the database, newest first."""
    found = []
    try:
        entries = list(os.scandir(db_path.parent))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(db_path.name + "."):
            continue
        match = _NAME.search(entry.name[len(db_path.name):])
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        taken = calendar.timegm(time.strptime(match[2], "%Y%m%dT%H%M%SZ"))
        found.append((taken, int(match[3] or 1), entry.stat().st_mtime_ns,
                      Backup(Path(entry.path), match[1], taken, entry.stat().st_size)))
    return [b for *_, b in sorted(found, key=lambda f: f[:3], reverse=True)]


@dataclass(frozen=True)
class Contents:
    """What a backup holds, read without changing it."""

    db_format: int  # PRAGMA user_version
    runs: int
    last_run_id: str | None
    last_run_at: float | None


def contents(path: Path, verify: bool = True) -> Contents:
    """What a backup holds; UsageError naming why it cannot be restored (not a whole SQLite
    database, a failed integrity check, not barca's, a newer format). `verify` False skips
    the integrity check, which reads every page (a listing)."""
    conn = _open_readonly(path)
    try:
        return _check(conn, path, verify)
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, f"it is not a whole SQLite database ({exc})") from None
    finally:
        conn.close()


def restore(db_path: Path, source: Path) -> dict:
    """Put the backup at `source` back as the database, keeping the current one first as
    `metadata.db.pre-restore-<UTC>`. UsageError when the backup cannot be restored, and
    (HTTP 409) while a run is queued or running on the project. What was done."""
    private = db_path.with_name(f"{db_path.name}.restoring-{os.getpid()}.tmp")
    try:
        _copy(source, private, readonly=True)
        conn = sqlite3.connect(private)
        try:
            held = _check(conn, source)
        finally:
            conn.close()
        kept = _replace(db_path, private, held.db_format)
    finally:
        for leftover in (private, Path(f"{private}-wal"), Path(f"{private}-shm"),
                         Path(f"{private}-journal")):
            leftover.unlink(missing_ok=True)
    connect(db_path, create=False).close()  # an older format is upgraded now
    return {"database": str(db_path), "restored": str(source), "pre_restore": str(kept),
            "db_format": held.db_format, "runs": held.runs, "last_run_id": held.last_run_id,
            "undo": f"barca state restore {kept.name}"}


def check_idle(conn: sqlite3.Connection) -> None:
    """UsageError (HTTP 409) while a run is queued or running on the project: its rows
    would be lost mid-run (inside the caller's write transaction, which keeps new ones out)."""
    queued = [r[0] for r in conn.execute("SELECT run_id FROM run_queue ORDER BY seq")]
    running = [run_id for run_id, pid, host, start in conn.execute(
        "SELECT run_id, pid, host, proc_start FROM runs WHERE status = 'running'")
        if not owner_gone(pid, host, start)]
    if queued or running:
        busy = running + queued
        raise UsageError(f"{len(busy)} run{'s' * (len(busy) != 1)} "
                         f"{'is' if len(busy) == 1 else 'are'} queued or running on this "
                         f"project ({', '.join(busy[:5])}{', ...' if len(busy) > 5 else ''})",
                         "wait for them to end, or cancel them, then try again",
                         http_status=409)


def drop_all(conn: sqlite3.Connection, schema: str = "main") -> None:
    """Drop every table and view of `schema` but the kept ones (their indexes and triggers
    go with them), inside the caller's transaction."""
    objects = conn.execute(f"SELECT type, name FROM {schema}.sqlite_master WHERE name NOT "
                           "LIKE 'sqlite_%' AND type IN ('view', 'table')").fetchall()
    for kind, name in sorted(objects, key=lambda o: o[0] != "view"):  # views first
        if name not in KEPT:
            conn.execute(f'DROP {kind.upper()} IF EXISTS {schema}."{name}"')


def _replace(db_path: Path, private: Path, db_format: int) -> Path:
    """The live database's contents replaced by the private copy's, in one transaction, after
    copying them beside it; the path of that copy."""
    conn = connect(db_path, create=True)
    try:
        conn.execute("ATTACH DATABASE ? AS backup", (str(private),))
        with write_transaction(conn):
            check_idle(conn)
            kept = take(db_path, "pre-restore")
            drop_all(conn)
            present = {r[0] for r in conn.execute("SELECT name FROM main.sqlite_master")}
            objects = conn.execute(
                "SELECT type, name, sql FROM backup.sqlite_master WHERE sql IS NOT NULL AND "
                "name NOT LIKE 'sqlite_%'").fetchall()
            order = {"table": 0, "index": 1, "view": 2, "trigger": 3}
            for kind, name, sql in sorted(objects, key=lambda o: order.get(o[0], 4)):
                if name in present:  # a kept table, and what belongs to it
                    continue
                conn.execute(sql)
                if kind == "table":
                    conn.execute(f'INSERT INTO main."{name}" SELECT * FROM backup."{name}"')
            conn.execute(f"PRAGMA main.user_version = {int(db_format)}")
        conn.execute("DETACH DATABASE backup")
    finally:
        conn.close()
    return kept


def _check(conn: sqlite3.Connection, path: Path, verify: bool = True) -> Contents:
    try:
        check = conn.execute("PRAGMA integrity_check").fetchall() if verify else [("ok",)]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, f"it is not a whole SQLite database ({exc})") from None
    if check != [("ok",)]:
        raise _unusable(path, f"its integrity check fails ({check[0][0]})")
    if version > SCHEMA_VERSION:
        raise _unusable(path, f"a newer barca wrote it (format {version}; this barca reads "
                        f"up to {SCHEMA_VERSION})", "restore it with the barca that wrote it")
    if published_layout(conn, path) is not None or version not in (*UPGRADABLE,
                                                                    SCHEMA_VERSION) \
            or not {"runs", "materializations"} <= names:
        raise _unusable(path, "it is not a metadata database of this barca")
    runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    last = conn.execute("SELECT run_id, started_at FROM runs ORDER BY started_at DESC "
                        "LIMIT 1").fetchone()
    return Contents(version, runs, *(last or (None, None)))


def _unusable(path: Path, why: str, fix: str | None = None) -> UsageError:
    return UsageError(f"{path.name} cannot be restored: {why}",
                      fix or "pick another backup (`barca state backups` lists them)")


def _open_readonly(path: Path) -> sqlite3.Connection:
    """A file nobody writes, opened so that nothing is written beside it (no -wal, -shm)."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)


def _copy(source: Path, target: Path, readonly: bool) -> None:
    """SQLite's backup of `source` to `target` (a temporary name, then renamed). `readonly`:
    `source` is a backup, opened so that nothing is written beside it, and a file that is not
    a whole database is a UsageError."""
    partial = target.with_name(target.name + f".{os.getpid()}.tmp")
    try:
        src = _open_readonly(source) if readonly else sqlite3.connect(source)
        copy = sqlite3.connect(partial)
        try:
            src.backup(copy)
        finally:
            copy.close()
            src.close()
        os.replace(partial, target)
    except sqlite3.DatabaseError as exc:
        if not readonly:
            raise
        raise _unusable(source, f"it is not a whole SQLite database ({exc})") from None
    finally:
        partial.unlink(missing_ok=True)
