"""The shared store as a run against a server's ledger sees it: the same objects, with the
question "which of these results exist?" answered by the ledger (`lookup`, one request for
every node a planning phase decided) instead of the store's own index. The run still writes
that index as it records (the ledger records its results once the run is over:
engine.ledger_client): a machine without the server finds them too, and `barca gc --remote`,
which keeps only what some index names, never takes a result only the ledger knows.
Everything else is the store underneath, which workers open by its address as always.

A hit whose result has a local copy already (fetched by an earlier run, or written by a run
here that was never recorded) is checked against the ledger's digest of its bytes: a copy
that is not the ledger's result is removed, so that the first reader fetches the store's
object again (0.33's "a local copy whose digest differs from the ledger's is replaced").
Only hits with a local copy are read, each file once per planning phase.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Mapping, Sequence

from barca.store.packs import split_range

Wanted = Mapping[str, tuple[str, Sequence[tuple[str, str]]]]


class LedgerStore:
    def __init__(self, store: Any, lookup: Callable[[Wanted], dict]) -> None:
        self.inner, self.lookup = store, lookup

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def shared_results(self, wanted: Wanted) -> dict:
        hits = self.lookup(wanted)
        local = getattr(self.inner, "local", None)  # the local copy of a shared store
        if local is not None:
            _drop_stale_copies(local.dir, (hit for found in hits.values()
                                           for hit in found.values()))
        return hits


def _drop_stale_copies(directory: str, hits) -> None:
    """Remove each local copy holding a hit's result with other bytes than the ledger's
    digest (a pack holding one such result goes whole: it is fetched again whole)."""
    read: dict[str, bytes | None] = {}
    stale: set[str] = set()
    for _fmt, digest, store_key in hits:
        file_key, offset, length = split_range(store_key)
        path = f"{directory}/{file_key}"
        if path in stale:
            continue
        if path not in read:
            try:
                with open(path, "rb") as fh:
                    read[path] = fh.read()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                read[path] = None  # not here (fetched when read), or a directory result
        data = read[path]
        if data is None:
            continue
        if offset is not None:
            data = data[offset:offset + length]
        if hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
            stale.add(path)
    for path in stale:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
