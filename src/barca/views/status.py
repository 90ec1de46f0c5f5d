"""Every node's cache state and why, as `barca status` shows it and a server's `/state`
serves it: computed by a dry run that runs nothing (sensors are taken as they last were) and
the newest execution of each node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from barca.engine.driver import open_pipeline, run
from barca.engine.result import RunResult
from barca.store.remote_results import unsynced
from barca.store.shape import artifact_shape
from barca.views import plan_text
from barca.views.listing import listing, pick_fields
from barca.views.partition_shares import partition_shares
from barca.views.times import iso_time

STATES = ("cached", "unsynced", "stale", "never_run", "partial", "blocked", "unknown",
          "always_runs")
STATUS_FIELDS = ["id", "name", "kind", "inputs", "partitioned", "cache", "partitions",
                 "last_materialization", "shape", "env", "undeclared_env"]

UNSYNCED = {"local_only": "here, not in the remote store: recorded before [remote] was set",
            "store_only": "in the remote store, not here yet: fetched when first read",
            "mismatch": "this copy differs from the remote store's object in size",
            "not_in_ledger": "computed here by a run the server's ledger has not recorded "
                             "yet: the next command with the server posts it"}


@dataclass(frozen=True)
class StatusReport:
    """`nodes`: the status entries kept (after `states` and `problems`), in graph order;
    `summary`: how many nodes of the whole cone are in each state."""

    result: RunResult
    nodes: list[dict[str, Any]]
    summary: dict[str, int]


def status_report(target: str | None, paths: Sequence[str], env_name: str | None,
                  states: set[str] | None = None, problems: bool = False,
                  leave_out: Sequence[str] = ()) -> StatusReport:
    """The status of `target`'s cone (every node without one). `leave_out`: node ids left
    out with what reads them (a server's, for the nodes its own load left out)."""
    pipeline = open_pipeline(paths, env_name, leave_out=leave_out) if leave_out else None
    result = run("get", target, paths, dry_run=True, env=env_name, observe_sensors=False,
                 include_tasks=True, pipeline=pipeline)
    last, unposted = _last_runs(result, env_name)
    nodes = [_status_node(result.plans[n], result, last.get(n), unposted)
             for n in result.order]
    summary = {s: 0 for s in STATES}
    for node in nodes:
        summary[node["cache"]["state"]] += 1
    if states is not None:
        nodes = [n for n in nodes if n["cache"]["state"] in states]
    if problems:
        nodes = [n for n in nodes if is_problem(n)]
    return StatusReport(result, nodes, summary)


def status_page(report: StatusReport, target: str | None, count: int | None,
                fields: list[str] | None = None, sample: int | None = None
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The first `count` entries (None: all), each with its result's shape (read from the
    files only for what is shown, `sample` rows of it when asked), and `barca status --json`
    of them (what a server's `/nodes` answers), `fields` of each entry."""
    shown = report.nodes[:count]
    for node in shown:
        node["shape"] = shape(node, report.result.root, sample)
    body = {"target": target, "targets": target.split(",") if target else [],
            "summary": report.summary, "root": str(report.result.root)}
    return shown, listing(body, "nodes", pick_fields(shown, fields), len(report.nodes), "nodes")


def is_problem(node: dict[str, Any]) -> bool:
    cache = node["cache"]
    parts = node.get("partitions") or {}
    last = node.get("last_materialization") or {}
    return (cache["state"] in ("blocked", "unsynced") or cache["reason"] in ("failed", "artifact_missing")
            or bool(parts.get("failed")) or last.get("status") == "failed")


def _last_runs(result, env_name: str | None) -> tuple[dict[str, Any], set[str]]:
    """Each node's newest execution, from the metadata database (never created here), and
    the runs a server's ledger has not recorded yet (kept to be posted again)."""
    from barca.project import open_project
    from barca.store import history, ledger_rows
    from barca.store.db import connect

    conn = connect(open_project(env_name).db_path, create=False)
    if conn is None:
        return {}, set()
    try:
        return (history.last_materializations(conn, list(result.order)),
                ledger_rows.unposted_runs(conn))
    finally:
        conn.close()


def _materialization(row) -> dict[str, Any] | None:
    if row is None:
        return None
    out: dict[str, Any] = {"status": row.status, "created_at": iso_time(row.created_at),
                           "elapsed_seconds": None if row.elapsed_seconds is None else
                           round(row.elapsed_seconds, 4), "run_id": row.run_id,
                           "run_hash": row.run_hash, "artifact": row.artifact_path,
                           "format": row.format, "size_bytes": row.size_bytes}
    if row.step_id != row.node_id:
        out["partition"] = row.step_id[len(row.node_id) + 1:-1]
    if row.status == "failed":
        out["error"] = row.error_message
    return out


def shape(node: dict[str, Any], root, sample: int | None = None) -> dict[str, Any] | None:
    """The shape of the node's current result when it is one file (cached, unpartitioned),
    with its first `sample` rows when asked."""
    cache = node["cache"]
    artifact = cache.get("artifact")
    if node["partitioned"] or not artifact:
        return None
    path = root / artifact
    if not path.exists():
        return {"note": "result file missing"}
    return artifact_shape(path, cache.get("format"), sample)


def _status_node(plan, result, last=None, unposted: set[str] = frozenset()) -> dict[str, Any]:
    graph = result.graph
    state = "cached"
    reason = "materialized"
    if plan.unknown:
        state, reason = "unknown", plan.unknown
    elif plan.kind in ("sensor", "task"):
        state, reason = "always_runs", plan.kind
    elif plan.run and plan.partitioned and len(plan.run) < len(plan.keys):
        state, reason = "partial", "partitions_missing"
    elif plan.run:
        first = plan.reasons[plan.run[0]]
        state = "never_run" if first.code in ("never_run",) else "stale"
        reason = {"never_run": "no_record", "changed": "changed",
                  "failed": "failed"}.get(first.code, first.code)
    elif plan.pinned:  # a Manual asset kept as it is: stale until it is refreshed
        state = "stale"
    cache: dict[str, Any] = {"state": state, "reason": reason, "detail": plan_text.why(plan)}
    if plan.pinned and not plan.run:
        plan_text.pinned_fields(plan, cache)
    if not plan.unknown and not plan.partitioned:
        cache["run_hash"] = plan.run_hashes[0]
        if plan.run and plan.reasons[plan.run[0]].changed:
            cache["changed"] = list(plan.reasons[plan.run[0]].changed)
        found = result.artifact_of(plan.node_id, "") if not plan.run else None
        if found is not None:
            cache["artifact"] = _rel(found[0], result.root)
            cache["format"] = found[1]
        if found is not None and state == "cached":  # this copy against a remote store's
            apart = unsynced(result.store, result.key_of(plan.node_id, "")[0])
            if apart is not None:
                cache.update(state="unsynced", reason=apart, detail=UNSYNCED[apart])
    if state == "cached" and last is not None and last.run_id in unposted:
        cache.update(state="unsynced", reason="not_in_ledger", detail=UNSYNCED["not_in_ledger"])
    node: dict[str, Any] = {"id": plan.node_id, "name": graph.nodes[plan.node_id].name,
                            "kind": plan.kind, "inputs": list(graph.upstream[plan.node_id]),
                            "partitioned": bool(graph.nodes[plan.node_id].dimensions),
                            "cache": cache, "last_materialization": _materialization(last),
                            "shape": None, "env": list(graph.nodes[plan.node_id].env)}
    if graph.nodes[plan.node_id].undeclared_env:  # read by its code, not in its run hash
        node["undeclared_env"] = list(graph.nodes[plan.node_id].undeclared_env)
    if node["partitioned"] and not plan.unknown:
        state = result.states.get(plan.node_id)
        failed_keys = list(state.failed) if state else []
        missing_keys = {plan.keys[i] for i in plan.run}
        blocked_keys = _blocked_keys(plan, result)
        failed = sorted(map(plan.label, failed_keys))
        missing = sorted(map(plan.label, missing_keys))
        blocked = sorted(map(plan.label, blocked_keys))
        node["partitions"] = {"total": len(plan.keys), "cached": plan.cached_count,
                              "missing": len(missing), "missing_keys": missing[:20],
                              "failed": len(failed), "failed_keys": failed[:20],
                              "blocked": len(blocked), "blocked_keys": blocked[:20],
                              **partition_shares(plan.cached_count, missing_keys, failed_keys,
                                                 blocked_keys).to_json()}
        if blocked and len(blocked) == len(missing):
            cache.update(state="blocked", reason="blocked",
                         detail=f"{len(blocked)} keys blocked by failed keys upstream: "
                                f"{', '.join(blocked[:5])}")
    return node


def _rel(path, root) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _blocked_keys(plan, result) -> list[str]:
    """Keys this node would run but cannot: the same key failed in an upstream it mirrors."""
    graph = result.graph
    failing: set[str] = set()
    for up_id in graph.upstream[plan.node_id]:
        up = result.plans.get(up_id)
        if up is None or up.unknown or not up.partitioned:
            continue
        failing.update(up.keys[i] for i in up.run if up.reasons[i].code == "failed")
        failing.update(k for k in _blocked_keys(up, result))
    return [plan.keys[i] for i in plan.run if plan.keys[i] in failing]
