"""A reader of the metadata database for one request of the server's: opened read-only (a
private snapshot) by a read-only server, never created; None when nothing was ever recorded.
The server holds it only to hand it to the view functions, which query through `store/`.
SQLite's WAL lets it read beside a writing run."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from barca.store.db import Connection, connect, connect_readonly


def open_reader(db_path: Path, read_only: bool) -> Connection | None:
    return connect_readonly(db_path) if read_only else connect(db_path, create=False)


@contextmanager
def reading(db_path: Path, read_only: bool) -> Iterator[Connection | None]:
    conn = open_reader(db_path, read_only)
    try:
        yield conn
    finally:
        if conn is not None:
            conn.close()
