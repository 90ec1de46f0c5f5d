"""The artifact-store seam: where results live, addressed by store-relative keys.

A key is `<node dir>/<key stem>.<run hash>.<ext>` (store.paths.artifact_key), the same in every
store, so step specs, outcomes and the metadata carry keys and never a local path. The
coordinator plans with one store object; a worker opens the same store from its `address`
(`open_store`), so that a step runs the same on this machine or another. Implementations:
`LocalStore` (the project's `.barca/artifacts/`, today's layout and speed), `MemoryStore`
(fsspec's `memory://`, one process only: it proves the seam in tests) and `RemoteStore` (a
bucket several machines share, `[remote] uri`, with the local store as its copy: `project_store`
picks it). `tests/engine/test_executor_contract.py` runs over executor x store.

A small result a worker packed with others (store.packs) is addressed by its pack's key and
its byte range, `<node dir>/<name>.pack@<offset>:<length>`: `get` and `open` read the range,
`local_path` gives a copy of it.

A lazy table input (a DuckDB relation, a polars LazyFrame; a batch call's over many keys, a
pyarrow dataset too) of a parquet result in a remote store is read in place by byte ranges
(`remote_file`, store.ranged_tables) rather than copied whole.

A result becomes visible only whole: small results are `put` as bytes; a library that writes a
file itself (parquet, a keyed-json written in threads, a batch split) writes a `staging` path on
this machine, which `commit` makes the key's result (or `discard` drops).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Protocol, Sequence


class ArtifactStore(Protocol):
    address: str  # what open_store takes to open this store again, in any process that can
    reads_in_place: bool  # its parquet results are written to be read by range (`remote_file`)

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, visible only once whole (replacing what was there)."""

    def staging(self, key: str) -> str:
        """A local file path to write `key`'s result to; invisible until `commit`."""

    def commit(self, staged: str, key: str) -> None:
        """Make the staged file `key`'s result, whole; the staged path is gone after."""

    def discard(self, staged: str) -> None:
        """Drop a staged file that will not be committed (no error if it is gone)."""

    def free_replaced(self) -> None:
        """Free the results that commits replaced, which a local store keeps named until
        then so that a commit does not wait for the kernel to free a large file (a worker
        calls this once its outcomes are sent)."""

    def work_dir(self, keys: Iterable[str]) -> str:
        """A new local directory for intermediate files that will be committed as `keys`
        (where a commit from it is cheapest); the caller removes it."""

    def get(self, key: str) -> bytes:
        """The key's bytes (FileNotFoundError when it has none)."""

    def open(self, key: str) -> BinaryIO:
        """The key's bytes as a binary file object, to stream (pickle.load)."""

    def local_path(self, key: str) -> str:
        """A file on this machine holding the key's bytes, for readers that take a path (DuckDB,
        polars, pyarrow): the file itself for a local store, a copy kept for the store's life
        otherwise (FileNotFoundError when it has none)."""

    def remote_file(self, key: str) -> tuple[Any, str, int | None] | None:
        """(fsspec file system, object path, size if known) to read the key's bytes in place,
        by byte ranges, or None when they are read from a local file: a store of this machine,
        a result already copied here, a packed one (store.ranged_tables reads lazy tables so)."""

    def location(self, key: str) -> str:
        """Where the key is, as messages name it (a path, or a URL)."""

    def names(self, node_dir: str) -> frozenset[str]:
        """The file names of every result under a node's directory, in one call: what
        planning checks a node's cached keys against (never one request per key)."""

    def delete(self, keys: Iterable[str]) -> None:
        """Remove these keys' results (those already gone are skipped)."""

    def scratch(self) -> "ArtifactStore":
        """An empty store of the same kind elsewhere, for a dry run's sensors: it records
        nothing in this one. `destroy` removes it."""

    def destroy(self) -> None:
        """Remove this (scratch) store and everything in it."""

    def share(self, entries: Sequence[tuple[str, str, str, str, str]]) -> None:
        """Results a run recorded, (key, run hash, format, output digest, store key) each,
        made findable by other machines (`shared_results`); nothing for a store of one
        machine."""

    def shared_results(self, wanted: Mapping[str, tuple[str, Sequence[tuple[str, str]]]]
                       ) -> dict[str, dict[tuple[str, str], tuple[str, str | None, str]]]:
        """`wanted`: node id -> (its node dir, the (key, run hash) pairs a run would compute),
        every node a planning phase decided, asked at once. Node id -> (key, run hash) ->
        (format, output digest, store key) of those results some machine recorded for this
        store ({} for a store of one machine)."""


def project_store(project: Any, checked: bool = True) -> ArtifactStore:
    """The store a project's runs keep results in: its local `.barca/artifacts/` (or its
    environment's), or with a `[remote]` the shared store over that local copy, checked to
    answer (exit 3 before any step when it does not). `checked=False` leaves the check to
    the caller (`check_store`), which can start a worker first: the check imports the
    store's client, a few tenths of a second the worker's own start-up then overlaps."""
    from barca.store.local_store import LocalStore
    from barca.store.remote_config import remote_of

    local = LocalStore.of_project(project.root, project.artifacts_dir)
    remote = remote_of(project.settings)
    if remote is None:
        return local
    from barca.store.remote_store import RemoteStore

    store = RemoteStore(os.fspath(project.root), local.address, remote, project.env)
    if checked:
        store.check()
    return store


def check_store(store: ArtifactStore) -> None:
    """Exit 3 unless a shared store answers, once (`project_store(checked=False)`; a store
    of this machine always answers)."""
    if not getattr(store, "checked", True):
        store.check()  # type: ignore[attr-defined]


def open_store(address: str, root: Path | str) -> ArtifactStore:
    """The store an address names, as a worker opens it: `memory://...` a MemoryStore of this
    process, a relative path a local store under the project `root` (the project's own,
    `.barca/artifacts`, resolved wherever the project is), an absolute one a local directory
    (a dry run's scratch), `remote:<env>:<local address>` the project's shared store (its
`[remote]` read again where the worker runs)."""
    if address.startswith("memory://"):
        from barca.store.memory_store import MemoryStore

        return MemoryStore.reopen(address)
    if address.startswith("remote:"):
        from barca.store.remote_store import RemoteStore

        return RemoteStore.reopen(address, os.fspath(root))
    from barca.store.local_store import LocalStore

    return LocalStore(os.path.join(root, address), address)


@contextlib.contextmanager
def staged(store: ArtifactStore, key: str) -> Iterator[str]:
    """A staging path for `key`, committed when the block ends without error, else dropped."""
    path = store.staging(key)
    try:
        yield path
    except BaseException:
        store.discard(path)
        raise
    store.commit(path, key)
