"""The artifact store on this machine's disk: the project's `.barca/artifacts/`, as it always was.

A key is a path under the store's directory, so a key's file is one string join away: a batch
call writes and reads thousands of small results, and nothing here may cost more per file than
the write itself (store.local_files: an unnamed file linked into place, else a rename).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import BinaryIO, Iterable, Mapping, Sequence

from barca.store.local_files import (read_stored, replace, set_aside, temporary_name,
                                     write_bytes)
from barca.store.packs import file_of, is_packed


class LocalStore:
    """Results as files under `directory`. The project's store has the directory's path
    relative to the project root as its address, which a worker resolves against its own copy
    of the project (so a project can move); a scratch store's address is its directory."""

    reads_in_place = False  # its files are here

    def __init__(self, directory: Path | str, address: str) -> None:
        self.dir = os.fspath(directory).rstrip("/")
        self.address = address
        self._copies: str | None = None  # packed results copied for readers that take a path
        self.replaced: list[str] = []  # second names of replaced results, for free_replaced

    @classmethod
    def of_project(cls, root: Path, artifacts_dir: Path) -> "LocalStore":
        """The project's store (`.barca/artifacts/`, or an environment's)."""
        return cls(artifacts_dir, artifacts_dir.relative_to(root).as_posix())

    def put(self, key: str, data: bytes) -> None:
        write_bytes(data, f"{self.dir}/{key}")

    def staging(self, key: str) -> str:
        path = f"{self.dir}/{key}"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return temporary_name(path)

    def commit(self, staged: str, key: str) -> None:
        path = f"{self.dir}/{key}"
        aside = set_aside(path)  # a sensor's large result, replaced every tick
        if aside is not None:
            self.replaced.append(aside)
        try:
            replace(staged, path)
        except FileNotFoundError:
            if not os.path.exists(staged):
                raise
            os.makedirs(os.path.dirname(path), exist_ok=True)
            replace(staged, path)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            tmp = temporary_name(path)  # staged on another file system: copy, then rename
            try:
                shutil.copyfile(staged, tmp)
                replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            os.unlink(staged)

    def discard(self, staged: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)

    def free_replaced(self) -> None:
        for aside in self.replaced:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(aside)
        self.replaced.clear()

    def work_dir(self, keys: Iterable[str]) -> str:
        """Under the deepest directory holding every key: on their file system, so that
        committing from it is a rename."""
        parent = os.path.commonpath([os.path.dirname(f"{self.dir}/{k}") for k in keys])
        os.makedirs(parent, exist_ok=True)
        return tempfile.mkdtemp(prefix=".batch-split-", dir=parent)

    def get(self, key: str) -> bytes:
        return read_stored(f"{self.dir}/{key}")

    def open(self, key: str) -> BinaryIO:
        if is_packed(key):
            return io.BytesIO(self.get(key))
        return open(f"{self.dir}/{key}", "rb")

    def local_path(self, key: str) -> str:
        """The key's file; a packed result's bytes copied to a file of their own (a reader
        such as DuckDB's read_json takes a path), kept in a private temporary directory until
        this process ends."""
        if not is_packed(key):
            return f"{self.dir}/{key}"
        if self._copies is None:
            self._copies = tempfile.mkdtemp(prefix="barca-unpacked-")
            weakref.finalize(self, shutil.rmtree, self._copies, True)
        copy = f"{self._copies}/{secrets.token_hex(8)}{os.path.splitext(file_of(key))[1]}"
        write_bytes(self.get(key), copy)
        return copy

    def remote_file(self, key: str) -> None:
        return None  # read from its file, whole

    def location(self, key: str) -> str:
        return f"{self.dir}/{key}"

    def names(self, node_dir: str) -> frozenset[str]:
        try:
            return frozenset(os.listdir(f"{self.dir}/{node_dir}"))
        except (FileNotFoundError, NotADirectoryError):
            return frozenset()

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.dir}/{key}")

    def scratch(self) -> "LocalStore":
        folder = tempfile.mkdtemp(prefix="barca-dry-run-")
        return LocalStore(folder, folder)

    def destroy(self) -> None:
        if not os.path.isabs(self.address):
            raise ValueError("the project's own store is never destroyed")
        shutil.rmtree(self.dir, ignore_errors=True)

    def share(self, entries: Sequence[tuple]) -> None:
        """One machine's store: nothing to share."""

    def shared_results(self, wanted: Mapping[str, tuple[str, Sequence[tuple[str, str]]]]
                       ) -> dict:
        return {}
