"""What this machine last uploaded for each sensor observation's key, so that a tick whose
sensor saw nothing new uploads nothing (store.remote_store `observed`).

A sensor runs on every tick and writes its observation under the same key each time (its run
hash does not change with what it observes): a keyed source over 10,000 retailers is a few
hundred kilobytes, mostly what it was last time. Its output digest (barca's, over the keys and
values, not their order: engine.worker.key_source) and size say whether it is: when this
machine's last upload of the key had both, the store holds that observation already, as the
key's newest object unless another machine observed something else under it since (sensors
stay local: no other machine looks their objects up). The object may list the keys in another
order (a query's rows come in any order), which is no part of the value barca records, and has
the same size (`barca status` compares sizes). The store never loses these objects to barca
(`barca gc --remote` keeps node directories with no index: sensors'), so trusting this memory
is the trust planning gives every result this machine recorded. A result of an asset is never
skipped so: its object may be collected, and must then be uploaded again.

Kept in the project's `.barca/remote-index.db` (store.remote_index), in a table of its own,
rows per store; a connection per call, as uploads may be made from any thread of a worker.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Callable

_SCHEMA = """CREATE TABLE IF NOT EXISTS observations (
    store TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, size INTEGER NOT NULL,
    PRIMARY KEY (store, key)) WITHOUT ROWID"""


class Observations:
    """The memory, and the observations written but not uploaded yet: each waits for its
    digest (`due`)."""

    def __init__(self, path: str, store: str) -> None:
        self.path, self.store = path, store
        self.pending: dict[str, Callable[[], None] | None] = {}  # key -> its upload

    def expect(self, key: str) -> None:
        """`key` is about to be written with an observation: its upload waits."""
        self.pending[key] = None

    def waits(self, key: str) -> bool:
        return key in self.pending

    def defer(self, key: str, upload: Callable[[], None]) -> None:
        self.pending[key] = upload

    def due(self, key: str, digest: str, size: int) -> Callable[[], None] | None:
        """What uploads the observation written as `key` (and remembers it), or None when
        this machine last uploaded one of the same digest and size."""
        upload = self.pending.pop(key, None)
        if upload is None or self.last(key) == (digest, size):
            return None

        def send() -> None:
            upload()
            self.uploaded(key, digest, size)

        return send

    def last(self, key: str) -> tuple[str, int] | None:
        """(output digest, size) of the observation this machine last uploaded as `key`."""
        if not os.path.exists(self.path):
            return None
        with _connected(self.path) as conn:
            row = conn.execute("SELECT digest, size FROM observations WHERE store = ? AND "
                               "key = ?", (self.store, key)).fetchone()
        return None if row is None else (row[0], row[1])

    def uploaded(self, key: str, digest: str, size: int) -> None:
        """An observation is in the store now, as `key`'s newest object: after its upload."""
        with _connected(self.path) as conn:
            conn.execute("INSERT OR REPLACE INTO observations VALUES (?, ?, ?, ?)",
                         (self.store, key, digest, size))


class _connected:
    """A connection for one call, with the table made; committed and closed after."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=60)
        self.conn.execute(_SCHEMA)
        return self.conn

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None:
                self.conn.commit()
        finally:
            self.conn.close()
