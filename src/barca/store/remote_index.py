"""The shared store's index (results found by run hash), read so that a tick costs what its
changed keys cost, not what the index holds.

The index of a node is a directory of objects, each written once and never changed:
`<stem>.json`, a batch of entries one run recorded (stem: the time it was written and a
random tag, so that names sort by age), and `<stem>~<tag>.c<n>.json`, a compacted object: a
first line of n bytes, `{"covers": [names]}`, naming every object of the directory its writer
had read, then the entries of all of them (later ones won). An entry is one JSON list per
line: key, run hash, format, output digest, store key.

- What this machine has read is kept in `.barca/remote-index.db` (its own small SQLite file,
  not the metadata): the entries, and the names of the objects they came from. Objects are
  immutable, so a tick lists the node's index once and GETs only the objects it has not read;
  those it wrote itself it knows without reading. The file holds one store's index (another
  store's is dropped), and no more than the store lists: when an object it read is gone
  (`barca gc --remote`) and no compacted object it knows covers it, the node is read afresh.
  Each batch of objects read is one transaction: a kill leaves the file as before it.
- A writer that knows a node's index has more than COMPACT_AFTER objects no compacted object
  covers writes one compacted object covering all it has read (once per process and node):
  a fresh machine then reads that one object (the newest compacted one, whole) and the few
  written since, not thousands. A machine that has read most of what a compacted object
  covers reads only its first line (a range request) and the few covered objects it has not
  read. Nothing is deleted here: covered
  objects go only through `barca gc --remote`, once their compacted object is old enough.
- Later entries win: objects apply in name order, a compacted object as of the newest object
  it covers (its name starts with that object's stem).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any

COMPACT_AFTER = 64  # uncovered index objects of a node before a writer compacts them
CACHE_FILE = "remote-index.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (store TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    node TEXT NOT NULL, name TEXT NOT NULL, covers TEXT,
    PRIMARY KEY (node, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entries (
    node TEXT NOT NULL, key TEXT NOT NULL, run_hash TEXT NOT NULL, format TEXT NOT NULL,
    digest TEXT, store_key TEXT NOT NULL, rank TEXT NOT NULL,
    PRIMARY KEY (node, key, run_hash)) WITHOUT ROWID;
"""
Entry = tuple  # (key, run hash, format, output digest, store key)


def plain_name() -> str:
    return f"{time.time_ns():020d}-{secrets.token_hex(4)}.json"


def compacted_name(covers: Iterable[str], header_bytes: int) -> str:
    newest = max(stem(name) for name in covers)
    return f"{newest}~{secrets.token_hex(4)}.c{header_bytes}.json"


def stem(name: str) -> str:
    """The plain object a name sorts as (a compacted object: the newest one it covers)."""
    return name.split("~", 1)[0].removesuffix(".json")


def header_bytes(name: str) -> int | None:
    """The length of a compacted object's first line, from its name; None for a plain one."""
    if "~" not in name:
        return None
    size = name.rpartition(".c")[2].removesuffix(".json")
    return int(size) if size.isdigit() else None


def is_index_object(name: str) -> bool:
    return name.endswith(".json") and ("~" not in name or header_bytes(name) is not None)


def parse(body: bytes, name: str) -> tuple[list[str] | None, list[Entry]]:
    """(covered names or None, entries) of an index object's bytes."""
    text = body.decode()
    covers = None
    if header_bytes(name) is not None:
        first, _, text = text.partition("\n")
        covers = list(json.loads(first)["covers"])
    return covers, [tuple(json.loads(line)) for line in text.splitlines() if line.strip()]


def compacted_body(covers: Sequence[str], entries: Iterable[Entry]) -> tuple[bytes, int]:
    """(bytes, length of the first line) of a compacted object."""
    head = (json.dumps({"covers": sorted(covers)}, separators=(",", ":")) + "\n").encode()
    lines = "\n".join(json.dumps(list(e), separators=(",", ":")) for e in entries)
    return head + lines.encode(), len(head)


class IndexCache:
    """The entries of the index objects this machine has read, per node directory (see the
    module's docstring); opened on first use."""

    def __init__(self, path: str, store: str) -> None:
        self.path, self.store = path, store
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.executescript(_SCHEMA)
            with _write(conn):
                found = conn.execute("SELECT store FROM meta").fetchall()
                if found != [(self.store,)]:  # another store's index: not this one's
                    conn.execute("DELETE FROM meta")
                    conn.execute("DELETE FROM objects")
                    conn.execute("DELETE FROM entries")
                    conn.execute("INSERT INTO meta VALUES (?)", (self.store,))
            self._conn = conn
        return self._conn

    def objects(self, node: str) -> dict[str, list[str] | None]:
        """Names of the objects read (or written) here -> covered names of a compacted one."""
        return {name: None if covers is None else json.loads(covers)
                for name, covers in self.conn.execute(
                    "SELECT name, covers FROM objects WHERE node = ?", (node,))}

    def absorb(self, node: str, read: Sequence[tuple[str, list[str] | None, list[Entry]]],
               also: Iterable[str] = ()) -> None:
        """Objects read, (name, covered names, entries) each, applied in name order (a later
        entry of a pair wins), and `also`: names known through a compacted object read; one
        transaction."""
        conn = self.conn
        with _write(conn):
            conn.executemany("INSERT OR IGNORE INTO objects VALUES (?, ?, NULL)",
                             [(node, name) for name in also])
            for name, covers, entries in sorted(read, key=lambda r: r[0]):
                conn.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?)",
                             (node, name, None if covers is None else json.dumps(covers)))
                conn.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (node, key, run_hash) DO UPDATE SET format = excluded.format, "
                    "digest = excluded.digest, store_key = excluded.store_key, "
                    "rank = excluded.rank WHERE excluded.rank >= entries.rank",
                    [(node, *entry, name) for entry in entries])

    def forget(self, node: str, names: Iterable[str] | None = None) -> None:
        """Drop these object names (their entries stay: a compacted object holds them), or,
        with no names, everything of the node."""
        conn = self.conn
        with _write(conn):
            if names is None:
                conn.execute("DELETE FROM objects WHERE node = ?", (node,))
                conn.execute("DELETE FROM entries WHERE node = ?", (node,))
            else:
                conn.executemany("DELETE FROM objects WHERE node = ? AND name = ?",
                                 [(node, name) for name in names])

    def lookup(self, node: str, wanted: Sequence[tuple[str, str]]
               ) -> dict[tuple[str, str], tuple[str, str | None, str]]:
        wanted_set, out = set(wanted), {}
        keys = sorted({key for key, _ in wanted})
        for at in range(0, len(keys), 500):
            chunk = keys[at:at + 500]
            for key, run_hash, fmt, digest, store_key in self.conn.execute(
                    "SELECT key, run_hash, format, digest, store_key FROM entries WHERE "
                    f"node = ? AND key IN ({','.join('?' * len(chunk))})", (node, *chunk)):
                if (key, run_hash) in wanted_set:
                    out[(key, run_hash)] = (fmt, digest, store_key)
        return out

    def entries(self, node: str) -> list[Entry]:
        return [tuple(row) for row in self.conn.execute(
            "SELECT key, run_hash, format, digest, store_key FROM entries WHERE node = ? "
            "ORDER BY key, run_hash", (node,))]


class _write:
    """One write transaction (BEGIN IMMEDIATE ... COMMIT, rolled back on an error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")


class SharedIndex:
    """A store's index as this process reads and writes it: `lookup` lists a node's index
    once per process and reads only the objects the cache does not have; `write` adds an
    object, and compacts the node when it knows it has too many uncovered objects."""

    def __init__(self, store: Any, cache: IndexCache) -> None:
        self.store, self.cache = store, cache
        self.listed: dict[str, set[str]] = {}  # node -> object names, as listed here + written
        self.compacted: set[str] = set()  # nodes this process compacted

    def lookup(self, node: str, wanted: Sequence[tuple[str, str]]
               ) -> dict[tuple[str, str], tuple[str, str | None, str]]:
        if node not in self.listed:
            self._sync(node)
        return self.cache.lookup(node, wanted)

    def write(self, node: str, entries: Sequence[Entry]) -> None:
        """One new object of these entries (known here at once), then maybe a compaction."""
        name = plain_name()
        body = "\n".join(json.dumps(list(e), separators=(",", ":")) for e in entries)
        self._put(node, name, body.encode())
        self.cache.absorb(node, [(name, None, list(entries))])
        if node in self.listed:
            self.listed[node].add(name)
            self._compact_if_due(node)

    # -- reading --------------------------------------------------------------------------

    def _sync(self, node: str, again: bool = True) -> None:
        names = self._list(node)
        have = self.cache.objects(node)
        gone = set(have) - names
        if gone:
            covered = {n for name, covers in have.items() if covers and name in names
                       for n in covers}
            if gone - covered:  # deleted, not through compaction: read the node afresh
                self.cache.forget(node)
                have = {}
            else:
                self.cache.forget(node, gone)
                have = {name: covers for name, covers in have.items() if name not in gone}
        known = set(have)
        try:
            self._read_new(node, names, known, fresh=not have)
        except FileNotFoundError:  # deleted between the listing and the read
            if not again:
                raise
            return self._sync(node, again=False)
        self.listed[node] = names

    def _read_new(self, node: str, names: set[str], known: set[str], fresh: bool) -> None:
        """Read what is listed and not known, the newest compacted object first."""
        read: list[tuple[str, list[str] | None, list[Entry]]] = []
        also: set[str] = set()
        for name in sorted((n for n in names - known if header_bytes(n) is not None),
                           reverse=True):
            if name in known or name in also:
                continue
            if not fresh:  # what this machine read may be most of what it covers
                head = self._cat_range(node, name, header_bytes(name))
                covers = json.loads(head)["covers"]
                missing = set(covers) - known
                if len(missing) <= COMPACT_AFTER and missing <= names:
                    read.append((name, covers, []))  # the missing ones are read below
                    known.add(name)
                    continue
            body = self._cat(node, [name])[name]
            covers, entries = parse(body, name)
            read.append((name, covers, entries))
            also |= names.intersection(covers) - known
            known.add(name)
            fresh = False
        plain = sorted(names - known - also)
        if plain:
            bodies = self._cat(node, plain)
            read += [(name, *parse(bodies[name], name)) for name in plain]
        if read or also:
            self.cache.absorb(node, read, also - known)

    def _list(self, node: str) -> set[str]:
        store = self.store
        try:
            paths = store.retried(f"list the index of {node}", lambda: store.fs.ls(
                f"{store.index_base}/{node}", detail=False, refresh=True))
        except FileNotFoundError:
            return set()
        return {name for name in (p.rpartition("/")[2] for p in paths)
                if is_index_object(name)}

    def _cat(self, node: str, names: Sequence[str]) -> dict[str, bytes]:
        store = self.store
        paths = [f"{store.index_base}/{node}/{name}" for name in names]
        found = store.retried(f"read the index of {node}",
                              lambda: store.fs.cat(paths, on_error="return"))
        out = {}
        for path, name in zip(paths, names):
            body = found.get(path)
            if isinstance(body, FileNotFoundError) or body is None:
                raise FileNotFoundError(path)
            if isinstance(body, BaseException):
                raise body
            out[name] = body
        return out

    def _cat_range(self, node: str, name: str, size: int) -> bytes:
        store = self.store
        path = f"{store.index_base}/{node}/{name}"
        return store.retried(f"read the index of {node}",
                             lambda: store.fs.cat_file(path, start=0, end=size))

    # -- writing ------------------------------------------------------------------------

    def _put(self, node: str, name: str, body: bytes) -> None:
        store = self.store
        path = f"{store.index_base}/{node}/{name}"
        if store.remote.protocol != "file":
            store.retried(f"index results of {node}", lambda: store.fs.pipe_file(path, body))
            return
        # a shared directory: written aside, then renamed, so never read half written
        aside = f"{path}.{secrets.token_hex(4)}.tmp"
        def put_aside() -> None:
            store.fs.makedirs(path.rpartition("/")[0], exist_ok=True)
            store.fs.pipe_file(aside, body)
            store.fs.mv(aside, path)

        store.retried(f"index results of {node}", put_aside)

    def _compact_if_due(self, node: str) -> None:
        names = self.listed[node]
        have = self.cache.objects(node)
        covered = {n for name, covers in have.items() if covers and name in names
                   for n in covers}
        uncovered = [n for n in names if n not in covered and header_bytes(n) is None]
        if node in self.compacted or len(uncovered) <= COMPACT_AFTER or \
                not names.issubset(have):
            return
        self.compacted.add(node)
        covers = sorted(names)
        body, head = compacted_body(covers, self.cache.entries(node))
        name = compacted_name(covers, head)
        self._put(node, name, body)
        self.cache.absorb(node, [(name, covers, [])])
        names.add(name)
