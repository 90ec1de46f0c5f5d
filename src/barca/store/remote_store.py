"""A remote artifact store (fsspec: s3://, gs://, abfs://, file:// on a shared mount) that
several machines share as one cache, with the project's `.barca/artifacts/` as its local copy.

Results are written once: a result is written locally as always, then uploaded whole, in
the process that wrote it, before its step reports it, so that what a run records is always
in the store (a pool worker's on a thread of its own while it runs its next steps: it has
its stores hold their uploads, `hold_uploads`, engine.local.uploads). An object's name is its store key and the SHA-256 of its bytes,
`<uri>/<env>/artifacts/<key>,<sha256>` (run hash and digest in the name): objects are never
overwritten, and a fetched one is checked against its name (a mismatch is fetched again, then
a named error, exit 3); a lazy table input reads a parquet result in place by byte ranges
instead, each page checked against its checksum (store.ranged_tables). A pack of small results (store.packs) is one object, so a run of
10,000 small keys is a few PUTs, not 10,000. Results are fetched lazily, when something
first reads them, into the local copy, and read there after.

The store is a cache by itself, with no server: each batch of results a run records is also
written to an index in the store, `<uri>/<env>/index/<node dir>/<batch>.json` (action to
outputs, as a Bazel remote cache has: key, run hash -> format, output digest, store key), and
planning asks it for the keys it would run that no local record has (`shared_results`;
store.remote_index reads only the index objects this machine has not read, and compacts).
So a machine with the same code and inputs finds every result by its run hash and runs
nothing; its own records (the SQLite history) stay its own.

Transient errors are retried with backoff for BARCA_REMOTE_RETRY_SECONDS (10 by default), and
only by barca: S3's client is made to try a request once (unless the storage options set its
`retries`), as its own retries of a refused connection under barca's took a run 90 s to give
up on a store that is gone. A store that stays down is exit 3 (InfraError naming it), and once
a request has failed so, each next one of the process is tried once until one succeeds: a
run that fails does not wait out the budget again while it ends. A store that cannot be
reached at start is exit 3, checked before any step (`check`). barca deletes nothing remote,
except through `barca gc --remote` (store.remote_gc), after a dry run.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Mapping, Sequence, TypeVar

from barca import env_settings
from barca.errors import InfraError
from barca.store.local_store import LocalStore
from barca.store.packs import file_of
from barca.store.remote_config import Remote, client_options, not_installed
from barca.store.remote_index import CACHE_FILE, IndexCache, SharedIndex
from barca.store.remote_listing import ListedNames
from barca.store.remote_observations import Observations

T = TypeVar("T")
RETRY_SECONDS = 10.0  # how long a request is tried again before its error is the run's
BACKOFF = 0.25  # seconds before the second try, doubled for each next one
_DIGEST = ","  # between a key and its digest in an object's name (never in a key's leaf)
_PERMANENT = (PermissionError, IsADirectoryError, NotADirectoryError, ValueError, TypeError)


class RemoteStore:
    reads_in_place = True  # parquet written with page checksums, read by range (ranged_tables)

    def __init__(self, root: str, local_address: str, remote: Remote, env: str) -> None:
        self.local = LocalStore(os.path.join(root, local_address), local_address)
        self.remote, self.env = remote, env
        self.address = f"remote:{env}:{local_address}"
        self.retry_seconds = env_settings.seconds(
            "BARCA_REMOTE_RETRY_SECONDS", RETRY_SECONDS,
            "set it to how many seconds a failing request to the store is tried again, "
            "such as 10, or unset it")
        self.down = False  # a request failed after its retries: the next are tried once
        self.held: list[Callable[[], None]] | None = None  # uploads for the caller to make
        self.holding = threading.Lock()
        self.checked = False  # `check` found it answering
        self._opened: tuple[Any, str] | None = None  # (file system, path of the uri)
        self._listed: dict[str, dict[str, str]] = {}  # node dir -> leaf -> object path
        self._sizes: dict[str, dict[str, int]] = {}  # node dir -> object path -> size
        cache_file = os.path.join(os.path.dirname(self.local.dir), CACHE_FILE)
        self.index = SharedIndex(self, IndexCache(cache_file, f"{remote.uri}/{env}"))
        # a sensor's observation written, not uploaded yet: key -> its upload (`observed`)
        self.observations = Observations(cache_file, f"{remote.uri}/{env}")

    @classmethod
    def reopen(cls, address: str, root: str) -> "RemoteStore":
        """The store a worker opens from `address`, with the project's settings and the
        environment it inherited."""
        from barca.config import read_settings
        from barca.store.remote_config import remote_of

        _, env, local_address = address.split(":", 2)
        remote = remote_of(read_settings(Path(root)))
        if remote is None:
            raise InfraError(f"the artifact store {address} is no longer configured",
                             "set [remote] uri or BARCA_REMOTE_URI as the run had it")
        return cls(root, local_address, remote, env)

    # -- reaching the store -----------------------------------------------------------------

    @property
    def fs(self) -> Any:
        """The store's file system, opened on first use: importing s3fs (aiobotocore,
        aiohttp) and making its client is paid only by a process that makes a request (a
        worker whose steps upload nothing, a tick's sensor that observed nothing new, makes
        none). One object per process: fsspec keeps the instance of the same options."""
        if self._opened is None:
            from fsspec.core import url_to_fs

            try:
                fs, path = url_to_fs(self.remote.uri, **client_options(self.remote))
            except ImportError as exc:
                raise not_installed(self.remote.protocol, self.remote.source, exc) from None
            except (ValueError, TypeError) as exc:
                raise InfraError(f"cannot open the artifact store {self.remote.uri}: {exc}",
                                 f"check {self.remote.source} and the storage options") from None
            self._opened = (fs, path.rstrip("/"))
        return self._opened[0]

    @property
    def top(self) -> str:
        """The store's root as its file system names it (the uri without its scheme)."""
        if self._opened is None:
            self.fs  # noqa: B018 (opens it)
        return self._opened[1]  # type: ignore[index]

    @property
    def base(self) -> str:
        return f"{self.top}/{self.env}/artifacts"

    @property
    def index_base(self) -> str:
        return f"{self.top}/{self.env}/index"

    def check(self) -> None:
        """Exit 3 unless the store answers: before a run starts any step."""
        where = self.top
        if self.remote.protocol == "file":
            self._call("create", lambda: self.fs.makedirs(self.base, exist_ok=True))
        else:
            where = self.top.split("/", 1)[0]  # the bucket (or container)
        try:
            self._call("list", lambda: self.fs.ls(where, detail=False))
        except FileNotFoundError:
            raise InfraError(f"the artifact store {self.remote.uri} does not exist",
                             "create the bucket (or directory), or fix "
                             f"{self.remote.source}") from None
        self.checked = True

    def retried(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()` on the store's file system (`self.fs`), retried as the store's own requests."""
        return self._call(what, fn)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()`, tried again after a transient error, with backoff, while the next try
        starts within `retry_seconds` of the first (once only while the store is `down`);
        the last error is an InfraError naming the store."""
        began, wait = time.monotonic(), BACKOFF
        while True:
            try:
                result = fn()
            except FileNotFoundError:
                raise
            except Exception as exc:  # noqa: BLE001 (each file system has its own errors)
                permanent = isinstance(exc, _PERMANENT)  # this request's, not the store's
                if permanent or self.down or time.monotonic() + wait > began + self.retry_seconds:
                    self.down = self.down or not permanent
                    raise InfraError(f"the artifact store {self.remote.uri} failed to {what}: "
                                     f"{type(exc).__name__}: {exc}",
                                     f"check that it is reachable ({self.remote.source}, the "
                                     "endpoint, credentials and storage options) and run "
                                     "again") from None
                time.sleep(wait)
                wait *= 2
            else:
                self.down = False
                return result

    # -- writes: local, then uploaded whole ---------------------------------------------------

    def hold_uploads(self) -> None:
        """From now on `put` and `commit` write the local copy only and hold its upload for
        `held_uploads`: a pool worker uploads on a thread of its own, while its next steps
        run, before it reports the results (engine.local.uploads)."""
        self.held = []

    def held_uploads(self) -> list[Callable[[], None]]:
        """The uploads held since the last call, in the order the results were written: each
        uploads one local copy (its digest taken from it then), retried as every request."""
        with self.holding:
            out = self.held or []
            if self.held is not None:
                self.held = []
        return out

    def put(self, key: str, data: bytes) -> None:
        self.local.put(key, data)
        if self.held is not None and not self.observations.waits(key):
            self._hold(key)
            return
        self._upload(key, lambda path: self.fs.pipe_file(path, data),
                     hashlib.sha256(data).hexdigest())

    def staging(self, key: str) -> str:
        return self.local.staging(key)

    def commit(self, staged: str, key: str) -> None:
        self.local.commit(staged, key)
        if self.held is not None and not self.observations.waits(key):
            self._hold(key)
            return
        self._upload_copy(key)

    def _hold(self, key: str) -> None:
        with self.holding:
            self.held.append(lambda: self._upload_copy(key))  # type: ignore[union-attr]

    def _upload_copy(self, key: str) -> None:
        local = f"{self.local.dir}/{key}"
        self._upload(key, lambda path: self.fs.put_file(local, path), _file_digest(local))

    def observation(self, key: str) -> None:
        """`key` is about to hold a sensor's observation: its upload waits for `observed`."""
        self.observations.expect(key)

    def observed(self, key: str, digest: str, size: int) -> None:
        """The observation just written as `key` has barca's output `digest` and `size`: it
        is uploaded (now, or with a worker's held uploads) unless this machine last uploaded
        both (store.remote_observations): a tick whose sensor saw nothing new sends nothing,
        and, making no request, opens no file system."""
        send = self.observations.due(key, digest, size)
        if send is None:
            return
        if self.held is None:
            send()
        else:
            with self.holding:
                self.held.append(send)

    def _upload(self, key: str, send: Callable[[str], Any], digest: str) -> None:
        if self.observations.waits(key):  # a sensor's observation: sent by `observed`, or not
            self.observations.defer(key, lambda: self._upload_now(key, send, digest))
        else:
            self._upload_now(key, send, digest)

    def _upload_now(self, key: str, send: Callable[[str], Any], digest: str) -> None:
        final = f"{self.base}/{key}{_DIGEST}{digest}"
        if self.remote.protocol != "file":
            self._call(f"upload {key}", lambda: send(final))
        else:  # a shared directory: written aside, then renamed, so never seen half written
            aside = f"{final}.{secrets.token_hex(4)}.tmp"
            self.fs.makedirs(final.rpartition("/")[0], exist_ok=True)
            self._call(f"upload {key}", lambda: send(aside))
            self.fs.mv(aside, final)
        node_dir, _, leaf = key.rpartition("/")
        if node_dir in self._listed:
            self._listed[node_dir][leaf] = final

    def discard(self, staged: str) -> None:
        self.local.discard(staged)

    def free_replaced(self) -> None:
        self.local.free_replaced()

    def work_dir(self, keys: Iterable[str]) -> str:
        return self.local.work_dir(keys)

    # -- reads: the local copy, fetched first when it is not there ----------------------------

    def get(self, key: str) -> bytes:
        self._fetch(file_of(key))
        return self.local.get(key)

    def open(self, key: str) -> BinaryIO:
        self._fetch(file_of(key))
        return self.local.open(key)

    def local_path(self, key: str) -> str:
        self._fetch(file_of(key))
        return self.local.local_path(key)

    def remote_file(self, key: str) -> tuple[Any, str, int | None] | None:
        """The key's object and its size as listed, to read in place, unless it is packed or
        copied here already (None: `local_path` then, which fetches it whole and checks its
        digest)."""
        if file_of(key) != key or os.path.exists(f"{self.local.dir}/{key}"):
            return None
        found = self.stored(key)
        return None if found is None else (self.fs, *found)

    def location(self, key: str) -> str:
        return f"{self.remote.uri}/{self.env}/artifacts/{key}"

    def _fetch(self, file_key: str) -> None:
        """The object of `file_key` copied here, checked against its digest, unless a local
        copy is there already (FileNotFoundError when the store has none either)."""
        local = f"{self.local.dir}/{file_key}"
        if os.path.exists(local):
            return
        node_dir, _, leaf = file_key.rpartition("/")
        found = self._objects(node_dir).get(leaf)
        if found is None:
            found = self._objects(node_dir, again=True).get(leaf)
        if found is None:
            raise FileNotFoundError(local)
        digest = found.rpartition(_DIGEST)[2]
        os.makedirs(os.path.dirname(local), exist_ok=True)
        for attempt in range(2):
            aside = f"{local}.{secrets.token_hex(4)}.fetch"
            try:
                self._call(f"download {file_key}",
                           lambda aside=aside: self.fs.get_file(found, aside))
                if _file_digest(aside) == digest:
                    os.replace(aside, local)
                    return
            finally:
                if os.path.exists(aside):
                    os.unlink(aside)
        raise InfraError(f"the stored result {self.remote.uri}/{self.env}/artifacts/"
                         f"{file_key} does not match its digest {digest[:12]}... (fetched "
                         "twice): the object was changed or damaged in the store",
                         f"delete the object {found} from the store; the next run computes "
                         "it again")

    def _objects(self, node_dir: str, again: bool = False) -> dict[str, str]:
        """leaf name -> object path of a node's results in the store: one listing per node
        (newest object of a leaf when a result was written twice with different bytes)."""
        if again or node_dir not in self._listed:
            try:
                found = self._call(f"list {node_dir}", lambda: self.fs.ls(
                    f"{self.base}/{node_dir}", detail=True, refresh=True))
            except FileNotFoundError:
                found = []
            newest: dict[str, tuple[float, str]] = {}
            for info in found:
                name = info["name"].rpartition("/")[2]
                leaf, sep, _ = name.rpartition(_DIGEST)
                if not sep or name.endswith(".tmp") or info.get("type") == "directory":
                    continue
                when = info.get("LastModified") or info.get("mtime") or 0
                when = when.timestamp() if hasattr(when, "timestamp") else float(when)
                if leaf not in newest or when >= newest[leaf][0]:
                    newest[leaf] = (when, info["name"])
            self._listed[node_dir] = {leaf: path for leaf, (_, path) in newest.items()}
            self._sizes[node_dir] = {info["name"]: info.get("size") for info in found}
        return self._listed[node_dir]

    def stored(self, file_key: str) -> tuple[str, int | None] | None:
        """(object path, size) of a file's object in the store, or None: from its node's
        listing (one request per node and process, whatever the number of keys)."""
        node_dir, _, leaf = file_key.rpartition("/")
        path = self._objects(node_dir).get(leaf)
        return None if path is None else (path, self._sizes.get(node_dir, {}).get(path))

    def listed_objects(self, node_dir: str) -> dict[str, tuple[str, int | None]]:
        """leaf -> (SHA-256 of its object's bytes, size) of a node's results, as the store
        lists them now: what a post to the ledger is checked against (an object's name
        carries its digest, so nothing is downloaded)."""
        objects = self._objects(node_dir, again=True)
        sizes = self._sizes.get(node_dir, {})
        return {leaf: (path.rpartition(_DIGEST)[2], sizes.get(path))
                for leaf, path in objects.items()}

    def names(self, node_dir: str) -> ListedNames:
        return ListedNames(self.local.names(node_dir), lambda: self._objects(node_dir, again=True))

    def delete(self, keys: Iterable[str]) -> None:
        """Local copies only: a shared store loses objects only to `barca gc --remote`."""
        self.local.delete(keys)

    def scratch(self) -> LocalStore:
        return self.local.scratch()

    def destroy(self) -> None:
        raise ValueError("a shared store is never destroyed")

    # -- the index: results found by run hash (store.remote_index) -------------------------

    def share(self, entries: Sequence[tuple[str, str, str, str, str | None]]) -> None:
        """Index recorded results, (key, run hash, format, output digest, store key) each: one
        object per node directory and call, written after the results themselves."""
        by_dir: dict[str, list] = {}
        for entry in entries:
            by_dir.setdefault(entry[4].rpartition("/")[0], []).append(entry)
        for node_dir, rows in by_dir.items():
            self.index.write(node_dir, rows)

    def shared_results(self, wanted: Mapping[str, tuple[str, Sequence[tuple[str, str]]]]
                       ) -> dict[str, dict[tuple[str, str], tuple[str, str | None, str]]]:
        """node id -> (key, run hash) -> (format, output digest, store key) of the wanted
        results some machine recorded in this store: each node's index listed once per
        process, and only the objects this machine has not read yet read."""
        return {node_id: self.index.lookup(node_dir, pairs)
                for node_id, (node_dir, pairs) in wanted.items()}


def _file_digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
