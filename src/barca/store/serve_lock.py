"""Whether a `barca serve` holds a project's metadata database: `serve.lock` beside it.

Every server holds a shared lock on that file for its life (`hold`); the kernel drops it when
the process ends, however it ends, so a server killed with -9 holds nothing. A change a
running server would not see (a restore, a reset from the command line, a queue pause kept
for the next start) takes the lock exclusively for its duration (`exclusive`): it is refused
while a server runs, and a server that starts meanwhile waits for it to end. The file
descriptor is not inherited by the server's child processes (Python opens it close-on-exec),
so a run or a warm pool that outlives its server holds nothing either.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = "serve.lock"
_HELD: list[int] = []  # this process's shared locks (a server's), held until it exits


class ServerHolds(Exception):
    """A `barca serve` holds the database (`exclusive` could not take the lock)."""


def lock_path(db_path: Path) -> Path:
    return db_path.with_name(LOCK_NAME)


def hold(db_path: Path, create: bool = True) -> None:
    """Hold the shared lock until this process exits (a server, at its start; waits while a
    restore or reset runs). `create`: make the file when it is not there (a read-only
    server writes nothing: it holds the file only if another server made it). Nothing when
    the file cannot be opened."""
    try:
        fd = os.open(lock_path(db_path), os.O_RDWR | os.O_CREAT, 0o644) if create else \
            os.open(lock_path(db_path), os.O_RDONLY)
    except OSError:
        return
    fcntl.flock(fd, fcntl.LOCK_SH)
    _HELD.append(fd)


@contextmanager
def exclusive(db_path: Path) -> Iterator[None]:
    """Hold the lock alone while the block runs; ServerHolds when a server holds it."""
    if not db_path.parent.is_dir():  # no state yet: no server ever held it
        yield
        return
    fd = os.open(lock_path(db_path), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ServerHolds(str(db_path)) from None
        yield
    finally:
        os.close(fd)


def held(db_path: Path) -> bool:
    """Whether a server holds the lock now (a look: creates nothing)."""
    try:
        fd = os.open(lock_path(db_path), os.O_RDONLY)
    except OSError:
        return False  # never served, or unreadable: no server of ours
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
