"""An artifact store in fsspec's `memory://` file system: the seam's second implementation.

It lives in one process (fsspec's memory file system is a dict of that process), so only an
executor that runs steps in the coordinator's own process can use it; a worker process that
opens its address is refused with an error rather than writing where nobody reads. Results
are whole when `pipe_file` returns. Readers that need a local file get a copy, kept in a
private temporary directory until the store is destroyed or the process ends.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import tempfile
import weakref
from typing import BinaryIO, Iterable, Mapping, Sequence

from barca.errors import InfraError
from barca.store.packs import is_packed, split_range


class MemoryStore:
    _opened: dict[str, "MemoryStore"] = {}  # address -> store, in the process that made it
    reads_in_place = False

    def __init__(self) -> None:
        import fsspec

        self.fs = fsspec.filesystem("memory")
        self._pid = os.getpid()
        self.prefix = f"/barca-{self._pid}-{secrets.token_hex(6)}"
        self.address = f"memory:/{self.prefix}"
        self._local = tempfile.mkdtemp(prefix="barca-memory-store-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._local, True)
        MemoryStore._opened[self.address] = self

    @classmethod
    def reopen(cls, address: str) -> "MemoryStore":
        store = cls._opened.get(address)
        if store is None or store._pid != os.getpid():
            raise InfraError(f"the artifact store {address} lives in the memory of another "
                             "process; a step running in a worker process cannot reach it. "
                             "Run memory-store pipelines with the in-process executor")
        return store

    def _path(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def put(self, key: str, data: bytes) -> None:
        self.fs.pipe_file(self._path(key), data)

    def staging(self, key: str) -> str:
        return os.path.join(self._local, f"staged-{secrets.token_hex(8)}")

    def commit(self, staged: str, key: str) -> None:
        with open(staged, "rb") as fh:
            self.put(key, fh.read())
        os.unlink(staged)

    def discard(self, staged: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)

    def free_replaced(self) -> None:
        """Nothing is kept: a commit here replaces bytes in memory."""

    def work_dir(self, keys: Iterable[str]) -> str:
        return tempfile.mkdtemp(prefix="work-", dir=self._local)

    def get(self, key: str) -> bytes:
        file_key, offset, length = split_range(key)
        if offset is None:
            return self.fs.cat_file(self._path(key))
        data = self.fs.cat_file(self._path(file_key), start=offset, end=offset + length)
        if len(data) != length:
            raise OSError(f"{file_key} ends before byte {offset + length}")
        return data

    def open(self, key: str) -> BinaryIO:
        if is_packed(key):
            return io.BytesIO(self.get(key))
        return self.fs.open(self._path(key), "rb")

    def local_path(self, key: str) -> str:
        """A fresh copy each time (a key rewritten at the same run hash may hold new bytes),
        renamed into place so that a reader of the previous copy keeps its file."""
        data = self.get(key)
        path = os.path.join(self._local, "copies", key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{secrets.token_hex(4)}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return path

    def remote_file(self, key: str) -> None:
        return None  # read from its file, whole

    def location(self, key: str) -> str:
        return f"{self.address}/{key}"

    def names(self, node_dir: str) -> frozenset[str]:
        try:
            found = self.fs.ls(self._path(node_dir), detail=False)
        except FileNotFoundError:
            return frozenset()
        return frozenset(p.rsplit("/", 1)[-1] for p in found)

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(self._path(key))

    def scratch(self) -> "MemoryStore":
        return MemoryStore()

    def destroy(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self.prefix, recursive=True)
        MemoryStore._opened.pop(self.address, None)
        self._cleanup()

    def share(self, entries: Sequence[tuple]) -> None:
        """One machine's store: nothing to share."""

    def shared_results(self, wanted: Mapping[str, tuple[str, Sequence[tuple[str, str]]]]
                       ) -> dict:
        return {}
