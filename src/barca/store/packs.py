"""Small results packed: many keys' bytes in one file of their node, each addressed by a range.

One file per key per asset costs a block, a create and a directory entry each (1.6 GB for
400,000 results of a few dozen bytes), and would cost one request per key in an object store.
So a worker gathers the small results it writes (JSON or pickle under PACKED_MAX bytes, of a
partitioned node's keys) into a pack, `<node dir>/<random name>.pack`, and writes the pack
whole (`ArtifactStore.put`) before it reports any of their outcomes: a kill leaves a pack
complete or absent, never half of one, and nothing refers to a pack before it is there. A
pack is kept until it is written: when its write fails (the store is gone, the disk full), the
flush raises and the results in it stay unreported, never reported by a later flush that
wrote only the packs after it. A worker whose store is remote writes its packs' local
copies at the flush and has them uploaded on a thread of its own (RemoteStore.hold_uploads,
engine.local.uploads) while it runs its next steps; their outcomes are reported once they
are uploaded.

A packed result's store key is its pack's key and the range of its bytes,
`<node dir>/<name>.pack@<offset>:<length>`; stores read such a key's range (`get`, `open`),
and everything else handles it as an ordinary key. Planning finds a packed key present when
its pack is in the node's listing; `gc` keeps a pack while any current key is in it.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

from barca.errors import InfraError

PACKED_MAX = 64 * 1024  # a result this small goes into a pack
PACK_MAX = 8 * 1024 * 1024  # a pack this big is written at once, whatever else is pending
_RANGE = "@"


def range_key(pack_key: str, offset: int, length: int) -> str:
    return f"{pack_key}{_RANGE}{offset}:{length}"


def split_range(key: str) -> tuple[str, int | None, int | None]:
    """(the key of the file, offset, length): the range of a packed result's key, else
    (key, None, None)."""
    file_key, sep, where = key.rpartition(_RANGE)
    if not sep or "/" in where:
        return key, None, None
    offset, _, length = where.partition(":")
    return file_key, int(offset), int(length)


def file_of(key: str) -> str:
    """The store key of the file holding a result: a packed result's pack, else the key."""
    return split_range(key)[0]


def is_packed(key: str) -> bool:
    return split_range(key)[1] is not None


def where_in_pack(path: str | None) -> str | None:
    """Where a recorded result (its `artifact_path`) is in a pack of its node,
    `<name>.pack@<offset>:<length>` (NodeState.where); None for a file of its own."""
    return path.rpartition("/")[2] if path and is_packed(path) else None


class PackWriter:
    """The packs a worker is filling, one per (store, node directory). `add` gives a result its
    final key at once; its bytes reach the store at the next `flush`, which the worker calls
    before it reports the outcomes of what it added (and which `add` calls itself once a pack
    is PACK_MAX bytes). Thread-safe: a worker flushes from a timer thread too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[tuple[int, str], _Pack] = {}
        self.full: list[_Pack] = []  # full packs whose write failed: the next flush's first

    def add(self, store: Any, node_dir: str, data: bytes) -> str:
        """The result's key. A full pack is written here; if that fails, the pack is kept
        for the next flush, which tries it again and raises: the error is the run's, never
        the failure of the step whose result filled the pack."""
        with self.lock:
            pack = self.open.get((id(store), node_dir))
            if pack is None:
                pack = self.open[(id(store), node_dir)] = _Pack(store, node_dir)
            key = pack.add(data)
            if pack.size >= PACK_MAX:
                del self.open[(id(store), node_dir)]
                try:
                    pack.write()
                except InfraError:
                    self.full.append(pack)
            return key

    def flush(self) -> None:
        """Write every pack not written yet, whole. InfraError when a pack cannot be written:
        it and the packs after it are kept (a later flush tries them again), and the outcomes
        of the results added since the last flush that returned must not be reported."""
        with self.lock:
            for pack in [*self.full, *self.open.values()]:
                pack.write()
                self._forget(pack)

    def _forget(self, pack: _Pack) -> None:
        if pack in self.full:
            self.full.remove(pack)
        else:
            del self.open[(id(pack.store), pack.node_dir)]


class _Pack:
    def __init__(self, store: Any, node_dir: str) -> None:
        self.store, self.node_dir = store, node_dir
        self.key = f"{node_dir}/{secrets.token_hex(8)}.pack"
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> str:
        key = range_key(self.key, self.size, len(data))
        self.parts.append(data)
        self.size += len(data)
        return key

    def write(self) -> None:
        """The pack, whole; InfraError naming the store when it cannot be written (a remote
        store says so itself; a local disk's OSError is said here)."""
        try:
            self.store.put(self.key, b"".join(self.parts))
        except OSError as exc:
            raise InfraError(f"the artifact store failed to write the results pack "
                             f"{self.store.location(self.key)}: {type(exc).__name__}: {exc}",
                             "make the artifact directory writable (and its disk not full), "
                             "then run again") from None
