"""A local run against a server's ledger (a `[server] url` or BARCA_SERVER, cli.server_option):
work is shared through the server's record of which results exist, the bytes through the
shared store.

1. `open`: `GET /health` must name this barca's API version (else exit 3) and the same store
   as this project's `[remote]` (else exit 2, naming both), and a `--capacity` when the
   project asks to share it (`[server] shared_capacity`: the run's steps and batch calls are
   then admitted against it too, engine.local.leased_capacity; else exit 2); then the posts
   that failed earlier are sent again, oldest first.
2. Planning asks `POST /ledger/lookup` once per phase for every (node, key, run hash) it
   would compute (store.ledger_store); a hit is a cache hit, read from the store when a
   reader needs it. An unreachable ledger mid-run is exit 3: never a silent local fallback.
3. `post`: after a successful run that was not a dry run, its asset steps (tasks and sensors
   stay local) go to `POST /ledger/runs` with the digest and size of each object they are
   in, as the store lists them (an object's name carries its SHA-256), so the server can
   check them without downloading anything. The run is kept in `ledger_posts` first and
   removed once the server recorded it: a refusal or a lost connection leaves the run's
   output and exit code as they were, says so on stderr, and the next command with this
   server sends it again.

The post is built from the run's own history rows, column by column per node (1,000 keys of
a node are a few lists, one request), never from what the run held in memory.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import orjson

from barca.engine.ledger_server import API_VERSION
from barca.errors import BarcaError, InfraError, UsageError
from barca.store import ledger_rows
from barca.store.artifact_store import project_store
from barca.store.db import connect
from barca.store.ledger_store import LedgerStore, Wanted
from barca.store.packs import file_of
from barca.store.remote_config import remote_of

TIMEOUT_SECONDS = 30.0


class LedgerClient:
    def __init__(self, url: str, say: Callable[[str], None] = lambda line: None) -> None:
        self.url, self.say = url.rstrip("/"), say
        self._http: Any = None
        self.shares = False  # the run's steps are admitted against the server's --capacity

    # -- before the run -----------------------------------------------------------------------

    def open(self, project: Any) -> LedgerStore:
        """The project's store, its hits decided by the ledger; the server checked first and
        the posts it missed sent again."""
        remote = remote_of(project.settings)
        if remote is None:
            raise UsageError(f"the server {self.url} keeps a ledger of results in a store, "
                             "and this project has no [remote]",
                             'set [remote] uri = "s3://bucket/prefix" (or BARCA_REMOTE_URI) '
                             "to the server's store, or pass --local")
        self.shares = bool(project.settings.shared_capacity)
        self._check(remote.uri, project.env)
        store = project_store(project)
        self.resend(project, store)
        return LedgerStore(store, self.lookup)

    def _check(self, uri: str, env: str) -> None:
        health = self._call("GET", "/health")
        if not isinstance(health, dict) or "api_version" not in health:
            raise InfraError(f"{self.url} does not answer as a barca server with a ledger",
                             "check [server] url / BARCA_SERVER, or pass --local")
        if health["api_version"] != API_VERSION:
            raise InfraError(f"the server {self.url} speaks API version "
                             f"{health['api_version']}, this barca {API_VERSION}",
                             "use the same barca version on both sides, or pass --local")
        theirs = health.get("store") or {}
        if (str(theirs.get("uri", "")).rstrip("/"), theirs.get("env")) != (uri, env):
            shown = f"{theirs['uri']} (env {theirs['env']})" if theirs else "no store"
            raise UsageError(f"the server {self.url} keeps its ledger for {shown}, and this "
                             f"project shares {uri} (env {env})",
                             "set [remote] uri (or BARCA_REMOTE_URI) and the environment to "
                             "the server's, or pass --local to run on local records only")
        if self.shares and not health.get("capacity"):
            raise UsageError(f"[server] shared_capacity asks to share the --capacity of the "
                             f"server {self.url}, which has none",
                             "start it with `barca serve --capacity N`, or remove "
                             "shared_capacity from [server] in barca.toml")

    def shared_capacity(self) -> tuple | None:
        """(URL, headers, say) of the server whose --capacity this run's steps share (asked
        when its executor starts: engine.local.leased_capacity), or None."""
        return (self.url, _auth(), self.say) if self.shares else None

    # -- during the run -----------------------------------------------------------------------

    def lookup(self, wanted: Wanted) -> dict:
        """node id -> (key, run hash) -> (format, digest, store key) of the ledger's hits."""
        order = list(wanted)
        body = {"nodes": [{"node_id": node_id, "keys": [p[0] for p in wanted[node_id][1]],
                           "run_hashes": [p[1] for p in wanted[node_id][1]]}
                          for node_id in order]}
        answer = self._call("POST", "/ledger/lookup", body)
        out: dict[str, dict] = {}
        for node_id, group in zip(order, answer.get("nodes", [])):
            pairs = wanted[node_id][1]
            out[node_id] = {pairs[i]: (fmt, digest, path)
                            for i, path, fmt, _size, digest in group["found"]}
        return out

    # -- after it -----------------------------------------------------------------------------

    def post(self, project: Any, store: Any, run_id: str, node_ids: Sequence[str]) -> None:
        """Post a successful run's asset steps (kept in ledger_posts until recorded)."""
        conn = connect(project.db_path, create=True)
        try:
            ledger_rows.keep_post(conn, run_id, self.url, node_ids)
            self._send(conn, project, store, run_id, node_ids, again=False)
        finally:
            conn.close()

    def resend(self, project: Any, store: Any) -> None:
        """The posts to this server that failed before, oldest first."""
        conn = connect(project.db_path, create=False)
        if conn is None:
            return
        try:
            for run_id, server, node_ids in ledger_rows.pending_posts(conn):
                if server.rstrip("/") == self.url:
                    self._send(conn, project, store, run_id, node_ids, again=True)
        finally:
            conn.close()

    def _send(self, conn: Any, project: Any, store: Any, run_id: str, node_ids: Sequence[str],
              again: bool) -> None:
        try:
            body = self._body(conn, project, store, run_id, node_ids)
            if body is None:  # the run is gone from the history: nothing left to post
                ledger_rows.post_done(conn, run_id)
                return
            answer = self._call("POST", "/ledger/runs", body)
        except BarcaError as exc:
            ledger_rows.post_failed(conn, run_id, exc.message)
            self.say(f"[barca] warning: run {run_id} was {'still ' if again else ''}not "
                     f"recorded on the server {self.url}: {exc.message}; it is kept and sent "
                     "again by the next command with this server (barca status --local shows "
                     "its results as not_in_ledger)")
            return
        ledger_rows.post_done(conn, run_id)
        if again:
            self.say(f"[barca] recorded run {run_id} on the server (run {answer['run_id']})")
        if answer.get("bytes_changed"):
            self.say(f"[barca] warning: run {run_id}: the server's ledger holds other bytes "
                     "for some of its results at the same run hash (a step that is not "
                     "deterministic); the ledger keeps its own")

    def _body(self, conn: Any, project: Any, store: Any, run_id: str,
              node_ids: Sequence[str]) -> dict | None:
        run, rows = ledger_rows.run_rows(conn, run_id, node_ids)
        if run is None:
            return None
        recorded = project.artifacts_dir.relative_to(project.root).as_posix() + "/"
        groups: dict[str, dict[str, list]] = {}
        objects: dict[str, dict] = {}
        listed: dict[str, dict] = {}
        for node_id, key, step_id, run_hash, context, signature, path, fmt, size, digest, \
                elapsed in rows:
            store_key = path[len(recorded):] if path.startswith(recorded) else path
            node_dir, _, leaf = store_key.rpartition("/")
            group = groups.setdefault(node_id, {name: [] for name in _COLUMNS})
            for name, value in zip(_COLUMNS, (
                    key, None if step_id == node_id else step_id[len(node_id) + 1:-1],
                    run_hash, context, orjson.loads(signature) if signature else None, leaf,
                    fmt, size, digest, elapsed)):
                group[name].append(value)
            file_key = file_of(store_key)
            if file_key not in objects:
                if node_dir not in listed:
                    listed[node_dir] = store.listed_objects(node_dir)
                found = listed[node_dir].get(file_key.rpartition("/")[2])
                if found is None:
                    raise InfraError(f"the result {store.location(file_key)} is not in the "
                                     "store yet")
                objects[file_key] = {"digest": found[0], "size": found[1]}
        steps = [{"node_id": node_id, **{name: _single(values) if name in _UNIFORM else values
                                        for name, values in columns.items()}}
                 for node_id, columns in groups.items()]
        contexts = ledger_rows.contexts_of(conn, (c for g in groups.values()
                                                  for c in set(g["contexts"]) if c))
        return {"run": {**run, "status": "success"}, "steps": steps, "objects": objects,
                "contexts": contexts}

    # -- HTTP ---------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        if self._http is None:
            self._http = httpx.Client(base_url=self.url, timeout=TIMEOUT_SECONDS,
                                      headers=_auth())
        try:
            if body is None:
                response = self._http.request(method, path)
            else:
                response = self._http.request(method, path, content=orjson.dumps(body),
                                              headers={"Content-Type": "application/json"})
        except httpx.TransportError as exc:
            raise InfraError(f"cannot reach the barca server at {self.url}: {exc}",
                             "start it with `barca serve`, check [server] url / BARCA_SERVER, "
                             "or pass --local to run on local records only") from None
        try:
            answer = response.json()
        except ValueError:
            raise InfraError(f"the server at {self.url} answered {response.status_code} "
                             "without JSON", "is [server] url / BARCA_SERVER the address of "
                             "`barca serve`? or pass --local") from None
        if response.status_code >= 400:
            error = (UsageError if response.status_code < 500 else InfraError)(
                f"{answer.get('error', 'error') if isinstance(answer, dict) else answer} "
                f"(HTTP {response.status_code})",
                answer.get("remediation") if isinstance(answer, dict) else None)
            raise error
        return answer

    def close(self) -> None:
        if self._http is not None:
            self._http.close()


def _auth() -> dict[str, str]:
    """The server's token, from BARCA_SERVER_TOKEN."""
    token = os.environ.get("BARCA_SERVER_TOKEN", "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def resend_kept(url: str, env: str | None, say: Callable[[str], None]) -> None:
    """The posts kept for the server at `url`, sent before a command that gives the server's
    answer (status, history, ...: cli.server_option), so that the answer shows them: the
    server checked and the posts sent as a get would. Nothing more is opened, and the server
    not asked, when none is kept."""
    from barca.project import open_project

    project = open_project(env)
    conn = connect(project.db_path, create=False)
    try:
        kept = [post for post in ledger_rows.pending_posts(conn)
                if post[1].rstrip("/") == url.rstrip("/")]
    finally:
        if conn is not None:
            conn.close()
    if not kept:
        return
    client = LedgerClient(url, say)
    try:
        client.open(project)
    finally:
        client.close()


_COLUMNS = ("keys", "labels", "run_hashes", "contexts", "signatures", "paths", "formats",
            "sizes", "digests", "elapsed")
_UNIFORM = ("labels", "contexts", "formats")  # sent once when every key has the same


def _single(values: list) -> Any:
    return values[0] if values and all(v == values[0] for v in values) else values
