"""barca from Python: `get`, `run`, `plan`, `history`, `stats` and `signed_url`, in this
process.

`get` and `run` go through the CLI's engine (`engine.driver.run`) and return loaded values;
`plan`, `history` and `stats` return the dicts the CLI prints with `--json` (`history` the
list of runs in it, as the published barca's does), built by the CLI's own functions so that
the two cannot drift apart (shapes in `barca.python_types`).
Errors raise the classes the CLI maps to exit codes (`UsageError`, `StepFailed`, ...).
Paths are relative to the current directory, as on the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, overload

if TYPE_CHECKING:  # for editors and type checkers; `import barca` does not pay for them
    from barca.python_types import NodeStats, Plan, RunDetail, RunInfo

Files = str | Sequence[str]
Partition = str | Sequence[str] | dict[str, Any] | None


def get(target: str | None = None, files: Files = (), *,
        refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
        cascade: bool = True, partition: Partition = None, env: str | None = None,
        batch: str | int | dict[str, Any] | None = None,
        server: bool | str | None = None) -> Any:
    """Compute `target` (an asset or sensor) and return its value.

    A partitioned target returns {key: value}. A first argument that names a file or a
    directory (`get("pipeline.py")`, as `barca get pipeline.py`) is not a target: every asset
    and sensor of the files is brought up to date and the last asset's value is returned, as
    without a target. `partition` narrows the keys as `--partition` does: "region=emea,amer",
    a list of such, or {"region": ["emea"]}. `batch` regroups the stale keys of batched nodes
    for this run: "all", "none", 20, or {"scored": 20}.

    With a configured server (`[server] url` in barca.toml, or BARCA_SERVER) it runs here
    with the cache decided by the server's ledger, as `barca get` does (`barca docs
    remote`); `server=False` runs on local records only, as `--local`. `server` runs it on
    a `barca serve` instead, as `barca get --server`: True for the configured server, or
    its URL. The value is then the result's bytes for an unpartitioned target (JSON as
    Python values, parquet as a pyarrow Table, any other format as bytes), else the run's
    JSON ({key: value} for a partitioned target).
    """
    from barca.discover.files import is_path_arg  # the command line's rule

    paths = _paths(files)
    if target is not None and is_path_arg(target):
        target, paths = None, [target, *paths]
    if server:
        return _on_server(server, "get", target, paths, refresh, refresh_all, cascade,
                          partition, env, batch)
    return _call("get", target, paths, refresh, refresh_all, cascade, partition, env, batch,
                 ledger=server is None)


def run(target: str, files: Files = (), *,
        refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
        cascade: bool = True, partition: Partition = None, env: str | None = None,
        batch: str | int | dict[str, Any] | None = None,
        server: bool | str | None = None) -> Any:
    """Run the task `target` (its asset inputs come from cache) and return its value
    (`server`, and a configured server's ledger, as `get`'s)."""
    if server:
        return _on_server(server, "run", target, _paths(files), refresh, refresh_all, cascade,
                          partition, env, batch)
    return _call("run", target, files, refresh, refresh_all, cascade, partition, env, batch,
                 ledger=server is None)


def plan(files: Files = ()) -> Plan:
    """The execution phases of every node in `files`: what `barca plan FILES` prints."""
    from barca.views.plan import plan_json

    return plan_json(_paths(files))  # type: ignore[return-value]


@overload
def history(limit: int | None = None, *, run_id: None = None, all: bool = False,
            env: str | None = None) -> list[RunInfo]: ...


@overload
def history(limit: int | None = None, *, run_id: str, all: bool = False,
            env: str | None = None) -> RunDetail: ...


def history(limit: int | None = None, *, run_id: str | None = None, all: bool = False,
            env: str | None = None) -> list[RunInfo] | RunDetail:
    """The newest runs first, each as `barca history --json` lists it: the last `limit`
    (10 unless given), or every run with `all=True`. With `run_id` (or a unique prefix),
    that run and its executed steps instead (`barca history RUN_ID --json`: every step
    unless `limit`)."""
    from barca.errors import UsageError
    from barca.views import history as views

    if isinstance(limit, str):  # history(RUN_ID) read the run before runs were a list
        raise UsageError(f"history({limit!r}): the first argument is how many runs to list",
                         f"pass run_id={limit!r} for that run's steps")
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise UsageError(f"limit={limit} is not a positive number",
                         "pass limit=N with N >= 1, or all=True for every run")
    _, conn = views.open_history(env)
    if run_id is not None:
        return views.run_detail_json(conn, views.find_run(conn, run_id, env),  # type: ignore
                                     limit)
    runs, total = views.select_runs(conn, None if all else (limit or views.DEFAULT_RUNS))
    return views.runs_json(runs, total)["runs"]  # type: ignore[return-value]


def stats(target: str, files: Files = (), *, env: str | None = None) -> NodeStats:
    """Timings, failures and repeated work of one node: `barca stats TARGET FILES --json`."""
    from barca.views.stats import node_stats_json

    return node_stats_json(target, _paths(files), env)  # type: ignore[return-value]


def signed_url(uri: str, *, expires: int | str = 3600, env: str | None = None) -> str:
    """A link that downloads a result from the project's remote store for `expires` (seconds,
    or "30m", "12h", "7d"; at most seven days), as `barca get TARGET -o url` prints it.

    `uri` names the result: its place in the store, `<[remote] uri>/<env>/artifacts/<file>`,
    or the path of its local copy, `.barca/artifacts/<file>` (what `barca get -o path` and
    `barca status` show). Raises UsageError (exit 2) without a remote store or with one that
    cannot sign (file://), InfraError (exit 3) when the store has no object for it.
    """
    from pathlib import Path

    from barca.project import open_project
    from barca.store.artifact_store import project_store
    from barca.store.remote_config import remote_of
    from barca.store.remote_results import check_signable, expires_seconds, result_key
    from barca.store.remote_results import signed_url as sign

    seconds = expires_seconds(expires, "expires=")
    project = open_project(env)
    check_signable(remote_of(project.settings))
    store = project_store(project)
    return sign(store, result_key(store, uri, Path(project.artifacts_dir)), seconds)


def _paths(files: Files) -> list[str]:
    return [files] if isinstance(files, str) else list(files)


def _call(command: str, target: str | None, files: Files, refresh: Any, refresh_all: bool,
          cascade: bool, partition: Partition, env: str | None, batch: Any,
          ledger: bool = False) -> Any:
    """The call run here; `ledger`: against the configured server's ledger, if one is."""
    from barca.engine.driver import run as run_pipeline
    from barca.errors import StepFailed

    client = _ledger_client() if ledger else None
    try:
        result = run_pipeline(command, target, _paths(files), refresh=refresh,
                              refresh_all=refresh_all, partition=partition, cascade=cascade,
                              env=env, batch=batch, triggered_by="python", ledger=client)
    finally:
        if client is not None:
            client.close()
    if result.failed:
        failure = result.failed[0]
        raise StepFailed(f"step '{failure.step_id}' failed: {failure.error_type}: "
                         f"{failure.error_message}", node=failure.step_id,
                         traceback=failure.traceback)
    node_id = result.final_node()
    return None if node_id is None else result.values(node_id)


def _ledger_client() -> Any:
    """The configured server's ledger (`[server] url` or BARCA_SERVER), as `barca get` uses
    it; None without one. Its warnings (a post it missed) go to stderr as the CLI's do."""
    from barca.server_config import configured_server

    configured = configured_server()
    if configured is None:
        return None
    from barca.engine.ledger_client import LedgerClient
    from barca.printable import note

    return LedgerClient(configured.url, say=note)


def _on_server(server: bool | str, command: str, target: str | None, paths: list[str],
               refresh: Any, refresh_all: bool, cascade: bool, partition: Partition,
               env: str | None, batch: Any) -> Any:
    """The call as a RunRequest to a server (`barca.server_client.served_value`)."""
    from barca.errors import UsageError
    from barca.server_client import served_value

    if env is not None:
        raise UsageError("env= with server=: the server runs its own environment",
                         "drop env=, or start `barca serve --env NAME`")
    refresh = [refresh] if isinstance(refresh, str) else list(refresh or ())
    if isinstance(partition, str):
        partition = [partition]
    elif isinstance(partition, dict):
        partition = {dim: [keys] if isinstance(keys, str) else [str(k) for k in keys]
                     for dim, keys in partition.items()}
    if isinstance(batch, dict):
        batch = [f"{node}={value}" for node, value in batch.items()]
    request = {"command": command, "targets": target.split(",") if target else [],
               "files": paths, "refresh": [n for r in refresh for n in r.split(",")],
               "refresh_all": refresh_all, "cascade": cascade,
               "batch": [str(b) for b in batch] if isinstance(batch, list) else
               [] if batch is None else [str(batch)],
               "partition": partition if isinstance(partition, dict) else list(partition or ())}
    return served_value(server, request)
