"""`barca list`, `barca status` and `barca plan`: read-only views of a pipeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from barca.cli.load import split_positionals
from barca.cli.output import (bounded, choose_listing_mode, choose_mode, emit, emit_json,
                              note_truncated, parse_fields, table)
from barca.cli.server_option import server_options
from barca.engine.driver import open_pipeline, run
from barca.errors import UsageError
from barca.printable import note
from barca.schedules import next_fire_text
from barca.store.shape import artifact_shape, shape_text
from barca.views import plan_text
from barca.views.listing import listing, pick_fields
from barca.views.plan import plan_json
from barca.views.times import utc_time

DEFAULT_NODES = 100


LIST_FIELDS = ["id", "kind", "freshness", "schedule", "inputs", "env", "partitions",
               "next_fire"]


@click.command("list")
@server_options
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output.")
@click.option("--pretty", is_flag=True, help="Human output.")
@click.option("-l", "--limit", type=click.IntRange(min=1), metavar="N",
              help="Show N nodes (default 100), in topological order.")
@click.option("--all", "show_all", is_flag=True, help="Show every node (not with --limit).")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each node (implies "
              "JSON): " + ", ".join(LIST_FIELDS) + ".")
def list_command(files, json_flag, pretty, limit, show_all, fields) -> None:
    """Every node: kind, freshness, inputs and declared env; a scheduled node's cron and when
    it would next fire, in this machine's local time.

    \b
    Example:
      barca list pipeline.py
    """
    mode = choose_listing_mode(json_flag, pretty, fields)
    chosen = parse_fields(fields, LIST_FIELDS)
    shown = bounded(limit, show_all, DEFAULT_NODES)
    _, paths = split_positionals(files, takes_target=False)
    loaded = open_pipeline(paths)
    graph = loaded.graph
    now = datetime.now().astimezone()
    nodes = []
    for node_id in graph.order:
        d = graph.nodes[node_id]
        item: dict[str, Any] = {"id": node_id, "kind": d.kind, "freshness": d.freshness,
                                "inputs": list(graph.upstream[node_id]), "env": list(d.env),
                                "partitions": [dim.name for dim in d.dimensions]}
        if d.schedule:
            item["schedule"] = d.schedule
            item["next_fire"] = next_fire_text(d.schedule, now)
        nodes.append(item)
    total = len(nodes)
    nodes = nodes[:shown]
    if mode == "json":
        emit_json(listing({"root": str(loaded.project.root)}, "nodes",
                          pick_fields(nodes, chosen), total, "nodes"), indent=True)
        return
    scheduled = any("schedule" in n for n in nodes)
    rows = [[n["id"], n["kind"], freshness_cell(n),
             *([n.get("next_fire", "-")] if scheduled else []),
             ", ".join(n["inputs"]) or "-"] for n in nodes]
    emit(table(["NAME", "KIND", "FRESHNESS", *(["NEXT FIRE"] if scheduled else []), "DEPS"],
               rows))
    note_truncated(len(nodes), total, "nodes")


def freshness_cell(node: dict[str, Any]) -> str:
    """FRESHNESS in words that agree with `barca status`: tasks and sensors are
    `always-runs` there and here; an `Always` asset reruns only when stale."""
    if "schedule" in node:
        return f"cron: {node['schedule']}"
    if node["kind"] in ("task", "sensor"):
        return "always-runs"
    return "when-stale" if node["freshness"] == "always" else node["freshness"]


STATES = ("cached", "stale", "never_run", "partial", "blocked", "unknown", "always_runs")
STATUS_FIELDS = ["id", "name", "kind", "inputs", "partitioned", "cache", "partitions",
                 "last_materialization", "shape", "env"]


@click.command("status")
@server_options
@click.argument("args", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output.")
@click.option("--pretty", is_flag=True, help="Human output.")
@click.option("--env", "env_name", metavar="NAME", help="Environment to read.")
@click.option("-l", "--limit", type=click.IntRange(min=1), metavar="N",
              help=f"Show N nodes (default {DEFAULT_NODES}).")
@click.option("--all", "show_all", is_flag=True, help="Show every node (not with --limit).")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each node (implies "
              "JSON): " + ", ".join(STATUS_FIELDS) + ".")
@click.option("--sample", type=click.IntRange(min=1), metavar="N", help="Add the first N rows "
              "(or entries) of each stored result to its shape, read from the file (never from "
              "a pickle).")
@click.option("--state", "states", metavar="S[,S]", help="Only nodes in these states: "
              + ", ".join(STATES) + " (hyphens accepted).")
@click.option("--problems", is_flag=True, help="Only nodes that need a look: last attempt "
              "failed, failed or blocked keys, or a result file missing.")
@click.option("--leave-out", "leave_out", metavar="ID[,ID]", hidden=True,
              help="Leave these nodes, and what reads them, out (a server's /state, for the "
              "nodes its load left out).")
def status_command(args, json_flag, pretty, env_name, limit, show_all, fields, sample,
                   states, problems, leave_out) -> None:
    """Cache state of every node (or of TARGET's cone), and why. Runs nothing, writes nothing.

    Sensors are assumed to return what they returned last time. Each node also shows its
    last execution (LAST RUN) and the shape of its stored result (SHAPE).

    \b
    Examples:
      barca status pipeline.py
      barca status summary pipeline.py --json
      barca status --problems
      barca status --state stale,never-run --fields id,cache
      barca status summary pipeline.py --sample 5
    """
    mode = choose_listing_mode(json_flag, pretty, fields)
    chosen = parse_fields(fields, STATUS_FIELDS)
    count = bounded(limit, show_all, DEFAULT_NODES)
    wanted = _parse_states(states)
    target, paths = split_positionals(args, takes_target=True)
    left_out = [n for n in (leave_out or "").split(",") if n]
    pipeline = open_pipeline(paths, env_name, leave_out=left_out) if left_out else None
    result = run("get", target, paths, dry_run=True, env=env_name, observe_sensors=False,
                 include_tasks=True, pipeline=pipeline)
    last = _last_runs(result, env_name)
    nodes = [_status_node(result.plans[n], result, last.get(n)) for n in result.order]
    summary = {s: 0 for s in STATES}
    for node in nodes:
        summary[node["cache"]["state"]] += 1
    if wanted is not None:
        nodes = [n for n in nodes if n["cache"]["state"] in wanted]
    if problems:
        nodes = [n for n in nodes if _is_problem(n)]
    total = len(nodes)
    shown = nodes[:count]
    for node in shown:  # read from the files only for what is printed
        node["shape"] = _shape(node, result.root, sample)
    if mode == "json":
        body = {"target": target, "targets": target.split(",") if target else [],
                "summary": summary, "root": str(result.root)}
        emit_json(listing(body, "nodes", pick_fields(shown, chosen), total, "nodes"),
                  indent=True)
        return
    short = {n: plan_text.why(result.plans[n], width=plan_text.WHY_WIDTH) for n in result.order}
    rows = [[n["id"], n["kind"], n["cache"]["state"].replace("_", "-"),
             n["cache"]["detail"] if n["cache"]["state"] == "blocked" else short[n["id"]],
             _last_run_cell(n["last_materialization"]), shape_text(n["shape"])]
            for n in shown]
    emit(table(["NAME", "KIND", "STATE", "WHY", "LAST RUN", "SHAPE"], rows))
    for node in shown:
        if node["shape"] and "sample" in node["shape"]:
            emit(f"\n{node['id']} (first rows):\n" + _sample_text(node["shape"]["sample"]))
    emit("\n" + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in summary.items()))
    note_truncated(len(shown), total, "nodes")


def _sample_text(sample: Any) -> str:
    """A sample as indented JSON lines, each line escaped (barca.printable)."""
    import orjson

    from barca.printable import printable_lines

    text = orjson.dumps(sample, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                        default=str).decode()
    return printable_lines(["  " + line for line in text.splitlines()])


def _parse_states(text: str | None) -> set[str] | None:
    if text is None:
        return None
    names = {t.strip().replace("-", "_") for t in text.split(",") if t.strip()}
    unknown = sorted(names - set(STATES))
    if unknown or not names:
        raise UsageError(f"unknown state {', '.join(unknown) or repr(text)} for --state",
                         f"valid states: {', '.join(STATES)}")
    return names


def _is_problem(node: dict[str, Any]) -> bool:
    cache = node["cache"]
    parts = node.get("partitions") or {}
    last = node.get("last_materialization") or {}
    return (cache["state"] == "blocked" or cache["reason"] in ("failed", "artifact_missing")
            or bool(parts.get("failed")) or last.get("status") == "failed")


def _last_runs(result, env_name: str | None) -> dict[str, Any]:
    """Each node's newest execution, from the metadata database (never created here)."""
    from barca.project import open_project
    from barca.store import history
    from barca.store.db import connect

    conn = connect(open_project(env_name).db_path, create=False)
    if conn is None:
        return {}
    try:
        return history.last_materializations(conn, list(result.order))
    finally:
        conn.close()


def _materialization(row) -> dict[str, Any] | None:
    if row is None:
        return None
    out: dict[str, Any] = {"status": row.status, "created_at": utc_time(row.created_at),
                           "elapsed_seconds": None if row.elapsed_seconds is None else
                           round(row.elapsed_seconds, 4), "run_id": row.run_id,
                           "run_hash": row.run_hash, "artifact": row.artifact_path,
                           "format": row.format, "size_bytes": row.size_bytes}
    if row.step_id != row.node_id:
        out["partition"] = row.step_id[len(row.node_id) + 1:-1]
    if row.status == "failed":
        out["error"] = row.error_message
    return out


def _shape(node: dict[str, Any], root, sample: int | None = None) -> dict[str, Any] | None:
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


def _last_run_cell(last: dict[str, Any] | None) -> str:
    if not last:
        return "-"
    secs = "" if last["elapsed_seconds"] is None else f" {last['elapsed_seconds']:.2f}s"
    return f"{last['status']} {last['created_at']}{secs}"


def _status_node(plan, result, last=None) -> dict[str, Any]:
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
    node: dict[str, Any] = {"id": plan.node_id, "name": graph.nodes[plan.node_id].name,
                            "kind": plan.kind, "inputs": list(graph.upstream[plan.node_id]),
                            "partitioned": bool(graph.nodes[plan.node_id].dimensions),
                            "cache": cache, "last_materialization": _materialization(last),
                            "shape": None, "env": list(graph.nodes[plan.node_id].env)}
    if node["partitioned"] and not plan.unknown:
        state = result.states.get(plan.node_id)
        failed = sorted(plan.label(k) for k in state.failed) if state else []
        missing = sorted(plan.label(plan.keys[i]) for i in plan.run)
        blocked = sorted(plan.label(k) for k in _blocked_keys(plan, result))
        node["partitions"] = {"total": len(plan.keys), "cached": plan.cached_count,
                              "missing": len(missing), "missing_keys": missing[:20],
                              "failed": len(failed), "failed_keys": failed[:20],
                              "blocked": len(blocked), "blocked_keys": blocked[:20]}
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


@click.command("plan")
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output (plan always prints "
              "JSON; accepted as every command accepts it).")
@click.option("--pretty", is_flag=True, help="Indented JSON (plan's only output; accepted as "
              "every command accepts it).")
def plan_command(files, json_flag, pretty) -> None:
    """The execution phases of every node, as JSON (reads no stored state), with the
    run's capacity and each node's weight.

    \b
    Example:
      barca plan pipeline.py
    """
    if json_flag and pretty:
        choose_mode(json_flag, pretty)  # the usage error every command gives
    _, paths = split_positionals(files, takes_target=False)
    body = plan_json(paths)
    for warning in body["warnings"]:
        note(f"[barca] warning: {warning['message']}")
    emit_json(body, indent=True)