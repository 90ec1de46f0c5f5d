"""The ledger's answers on a `barca serve` with a `[remote]`: the one writer of a team's record
of which results exist (run hashes, store keys, digests); the bytes stay in the store.

`lookup` says which (node, key, run hash) triples the server's history holds a success for.
`record` takes a client's finished run: each result it names must be an object in the store
with the digest the client gives (object names carry the SHA-256 of their bytes, and an
object store's listing their size, so the check downloads nothing: one listing per node),
else nothing is recorded (409). A run id already recorded from a client is answered with the
run as stored (a re-post after a lost answer records nothing twice). A result the ledger
already holds at that run hash with other bytes keeps the ledger's row (`bytes_changed`: the
step is not deterministic, or the store object was replaced).

The wire form is columnar per node (`keys`, `run_hashes`, ... lists), so that a partitioned
node of 10,000 keys is a few lists in one request, never a request or an object per key.
"""

from __future__ import annotations

from typing import Any

from barca.errors import UsageError
from barca.store import ledger_rows
from barca.store.artifact_store import project_store
from barca.store.db import connect
from barca.store.packs import split_range
from barca.store.paths import node_dir_name

API_VERSION = 1  # the HTTP API's version: changes when an answer loses or renames a field;
# a client runs against a ledger only of its own version (engine.ledger_client)
_DIGEST_HEX = 64  # an object's SHA-256, as its name carries it


class Refused(UsageError):
    """A post the ledger does not record (409): a result that is not in the store as named."""

    def __init__(self, message: str, remediation: str) -> None:
        super().__init__(message, remediation, http_status=409)


class Ledger:
    """One served project's ledger; its store is opened (and checked) on first use."""

    def __init__(self, project: Any) -> None:
        self.project = project
        self.artifacts_dir = project.artifacts_dir.relative_to(project.root).as_posix()
        self._store: Any = None

    def store_name(self) -> dict[str, str] | None:
        """{uri, env} of the store the ledger's results are in (None: no [remote])."""
        from barca.store.remote_config import remote_of

        remote = remote_of(self.project.settings)
        return None if remote is None else {"uri": remote.uri, "env": self.project.env}

    def store(self) -> Any:
        if self.store_name() is None:
            raise UsageError("this server has no [remote] store, so it keeps no ledger",
                             "start `barca serve` with [remote] uri set (or BARCA_REMOTE_URI): "
                             "the same store as its clients")
        if self._store is None:
            self._store = project_store(self.project)
        return self._store

    # -- lookups ------------------------------------------------------------------------------

    def lookup(self, body: Any) -> dict[str, Any]:
        """`{"hashes": [{node_id, run_hash, key?}]}` -> `{"results": [...]}` in request order;
        `{"nodes": [{node_id, keys, run_hashes}]}` -> `{"nodes": [{node_id, found: [[index,
        path, format, size_bytes, digest], ...]}]}` (only the hits)."""
        self.store()
        hashes = _list(body, "hashes", required=False)
        groups = _list(body, "nodes", required=False)
        conn = connect(self.project.db_path, create=False)
        try:
            results = []
            for item in hashes:
                node_id, run_hash = _text(item, "node_id"), _text(item, "run_hash")
                key = item.get("key") if isinstance(item.get("key"), str) else None
                hit = ledger_rows.lookup(conn, self.artifacts_dir, node_id,
                                         [(key, run_hash)]).get((key, run_hash))
                results.append({"node_id": node_id, "run_hash": run_hash,
                                "exists": hit is not None,
                                **dict(zip(("path", "format", "size_bytes", "digest"),
                                           hit or (None,) * 4))})
            nodes = []
            for group in groups:
                node_id = _text(group, "node_id")
                keys, run_hashes = _texts(group, "keys"), _texts(group, "run_hashes")
                if len(keys) != len(run_hashes):
                    raise UsageError(f"{node_id}: keys and run_hashes differ in length",
                                     "send one run hash per key")
                pairs = list(zip(keys, run_hashes))
                hits = ledger_rows.lookup(conn, self.artifacts_dir, node_id, pairs)
                nodes.append({"node_id": node_id, "found": [
                    [i, *hits[pair]] for i, pair in enumerate(pairs) if pair in hits]})
        finally:
            if conn is not None:
                conn.close()
        return {"results": results, "nodes": nodes}

    # -- posts --------------------------------------------------------------------------------

    def record(self, body: Any) -> dict[str, Any]:
        """Record a client's run (see the module docstring): {run_id, bytes_changed}."""
        store = self.store()
        run = body.get("run") if isinstance(body, dict) else None
        if not isinstance(run, dict) or run.get("status", "success") != "success":
            raise UsageError("a post needs its run: {\"run\": {\"run_id\": ..., \"status\": "
                             "\"success\"}, \"steps\": [...]}", "post only successful runs")
        run_id = _text(run, "run_id")
        objects = body.get("objects") or {}
        if not isinstance(objects, dict):
            raise UsageError("objects must map store keys to {digest, size}", "see /openapi.json")
        rows = [row for group in _list(body, "steps") for row in _rows(group)]
        conn = connect(self.project.db_path, create=True)
        try:
            known = ledger_rows.run_of(conn, run_id)
            if known is not None:
                if known["triggered_by"] != "client":
                    raise Refused(f"run id {run_id} is a run of this server's own",
                                  "post the run under the id the client gave it")
                return {"run_id": run_id, "bytes_changed": False, "recorded": False}
            _check_objects(store, rows, objects)
            held = {}
            for node_id in {row[0] for row in rows}:
                pairs = [(row[1], row[3]) for row in rows if row[0] == node_id]
                held.update({(node_id, *pair): hit for pair, hit in ledger_rows.lookup(
                    conn, self.artifacts_dir, node_id, pairs).items()})
            new, changed = [], False
            for row in rows:
                hit = held.get((row[0], row[1], row[3]))
                if hit is None:
                    new.append(row)
                elif hit[3] != row[9]:
                    changed = True  # the ledger keeps its own row
            contexts = body.get("contexts") or {}
            ledger_rows.record_client_run(conn, self.artifacts_dir, run,
                                          contexts if isinstance(contexts, dict) else {}, new)
        finally:
            if conn is not None:
                conn.close()
        return {"run_id": run_id, "bytes_changed": changed, "recorded": True}


def _rows(group: Any) -> list[tuple]:
    """A node's columns as rows (node id, key, label, run hash, context, signature, store key,
    format, size, digest, elapsed); a store key outside the node's directory is refused."""
    node_id = _text(group, "node_id")
    keys, run_hashes, paths = (_texts(group, name) for name in ("keys", "run_hashes", "paths"))
    count = len(keys)
    columns = {name: _column(group, name, count) for name in
               ("labels", "contexts", "signatures", "formats", "sizes", "digests", "elapsed")}
    if len(run_hashes) != count or len(paths) != count:
        raise UsageError(f"{node_id}: its columns differ in length", "send one value per key")
    file, _, name = node_id.rpartition(":")
    try:
        node_dir = node_dir_name(file, name)
    except ValueError:
        raise Refused(f"{node_id!r} is not a node id whose results can be in the store",
                      "post the node ids barca recorded") from None
    for leaf in paths:
        if "/" in leaf or "\\" in leaf or leaf in ("", ".", ".."):
            raise Refused(f"{node_id}: the result {leaf!r} is outside the store",
                          "post results by their name in the node's directory")
    return [(node_id, keys[i], columns["labels"][i], run_hashes[i], columns["contexts"][i],
             columns["signatures"][i], f"{node_dir}/{paths[i]}", columns["formats"][i],
             columns["sizes"][i], columns["digests"][i], columns["elapsed"][i])
            for i in range(count)]


def _check_objects(store: Any, rows: list[tuple], objects: dict[str, Any]) -> None:
    """Every result the rows name is an object in the store with the digest (and, for an
    object store, the size) the client gives: one listing per node directory."""
    listed: dict[str, dict[str, tuple[str, int | None]]] = {}
    for row in rows:
        file_key, offset, length = split_range(row[6])
        claim = objects.get(file_key)
        digest = claim.get("digest") if isinstance(claim, dict) else None
        if not isinstance(digest, str) or len(digest) != _DIGEST_HEX:
            raise Refused(f"the post names no digest for the result {file_key}",
                          "send objects: {store key: {digest, size}} for each result")
        node_dir, _, leaf = file_key.rpartition("/")
        if node_dir not in listed:
            listed[node_dir] = store.listed_objects(node_dir)
        found = listed[node_dir].get(leaf)
        where = store.location(file_key)
        if found is None:
            raise Refused(f"the result {where} is not in the store",
                          "upload it (the client's next command retries the post once it is there)")
        if found[0] != digest:
            raise Refused(f"the result {where} in the store has the digest {found[0][:12]}..., "
                          f"not {digest[:12]}...", "compute it again: the store's object "
                          "is not what the run wrote")
        size = claim.get("size")
        if found[1] is not None and isinstance(size, int) and found[1] != size:
            raise Refused(f"the result {where} in the store is {found[1]} bytes, not {size}",
                          "compute it again: the store's object is not what the run wrote")
        if offset is not None and found[1] is not None and offset + length > found[1]:
            raise Refused(f"the result {row[6]} lies beyond its pack in the store",
                          "compute it again")


def _list(body: Any, name: str, required: bool = True) -> list:
    value = body.get(name) if isinstance(body, dict) else None
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise UsageError(f"the request needs {name!r} as a list", "see /openapi.json")
    return value


def _text(item: Any, name: str) -> str:
    value = item.get(name) if isinstance(item, dict) else None
    if not isinstance(value, str) or not value:
        raise UsageError(f"the request needs {name!r} as a string in each entry",
                         "see /openapi.json")
    return value


def _texts(group: Any, name: str) -> list[str]:
    value = group.get(name) if isinstance(group, dict) else None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"each node needs {name!r} as a list of strings", "see /openapi.json")
    return value


def _column(group: dict, name: str, count: int) -> list:
    """A column of `count` values; a single value (not a list) stands for every key."""
    value = group.get(name)
    if isinstance(value, list):
        if len(value) != count:
            raise UsageError(f"{group.get('node_id')}: {name} has {len(value)} values for "
                             f"{count} keys", "send one value per key")
        return value
    return [value] * count
