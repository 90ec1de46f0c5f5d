"""`barca list`, `barca status` and `barca plan`: read-only views of a pipeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from barca.cli import render
from barca.cli.load import split_positionals
from barca.cli.output import choose_mode, emit, emit_json, note, table
from barca.cli.server_option import server_options
from barca.engine.driver import capacity_warnings, open_pipeline, run, unused_warnings
from barca.engine.local import capacity, pool_size
from barca.schedules import next_fire_text


@click.command("list")
@server_options
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output.")
@click.option("--pretty", is_flag=True, help="Human output.")
def list_command(files, json_flag, pretty) -> None:
    """Every node: kind, freshness, inputs and declared env; a scheduled node's cron and when
    it would next fire, in this machine's local time.

    \b
    Example:
      barca list pipeline.py
    """
    mode = choose_mode(json_flag, pretty)
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
    if mode == "json":
        emit_json({"nodes": nodes, "root": str(loaded.project.root), "total": len(nodes),
                   "truncated": False}, indent=True)
        return
    scheduled = any("schedule" in n for n in nodes)
    rows = [[n["id"], n["kind"],
             f"cron: {n['schedule']}" if "schedule" in n else n["freshness"],
             *([n.get("next_fire", "-")] if scheduled else []),
             ", ".join(n["inputs"]) or "-"] for n in nodes]
    emit(table(["NAME", "KIND", "FRESHNESS", *(["NEXT FIRE"] if scheduled else []), "DEPS"],
               rows))


@click.command("status")
@server_options
@click.argument("args", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output.")
@click.option("--pretty", is_flag=True, help="Human output.")
@click.option("--env", "env_name", metavar="NAME", help="Environment to read.")
def status_command(args, json_flag, pretty, env_name) -> None:
    """Cache state of every node (or of TARGET's cone), and why. Runs nothing, writes nothing.

    Sensors are assumed to return what they returned last time.

    \b
    Examples:
      barca status pipeline.py
      barca status summary pipeline.py --json
    """
    mode = choose_mode(json_flag, pretty)
    target, paths = split_positionals(args, takes_target=True)
    result = run("get", target, paths, dry_run=True, env=env_name, observe_sensors=False,
                 include_tasks=target is None)
    nodes = [_status_node(result.plans[n], result) for n in result.order]
    summary = {s: 0 for s in ("cached", "stale", "never_run", "partial", "blocked",
                              "unknown", "always_runs")}
    for node in nodes:
        summary[node["cache"]["state"]] += 1
    if mode == "json":
        emit_json({"target": target, "nodes": nodes, "summary": summary,
                   "total": len(nodes), "truncated": False}, indent=True)
        return
    rows = [[n["id"], n["kind"], n["cache"]["state"].replace("_", "-"), n["cache"]["detail"]]
            for n in nodes]
    emit(table(["NAME", "KIND", "STATE", "WHY"], rows))
    emit("\n" + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in summary.items()))


def _status_node(plan, result) -> dict[str, Any]:
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
    cache: dict[str, Any] = {"state": state, "reason": reason, "detail": render.why(plan)}
    if not plan.unknown and not plan.partitioned:
        cache["run_hash"] = plan.run_hashes[0]
        if plan.run and plan.reasons[plan.run[0]].changed:
            cache["changed"] = list(plan.reasons[plan.run[0]].changed)
    node: dict[str, Any] = {"id": plan.node_id, "name": graph.nodes[plan.node_id].name,
                            "kind": plan.kind, "inputs": list(graph.upstream[plan.node_id]),
                            "partitioned": bool(graph.nodes[plan.node_id].dimensions),
                            "cache": cache}
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
def plan_command(files) -> None:
    """The execution phases of every node, as JSON (reads no stored state), with the
    run's capacity and each node's weight.

    \b
    Example:
      barca plan pipeline.py
    """
    _, paths = split_positionals(files, takes_target=False)
    pipeline = open_pipeline(paths)
    graph = pipeline.graph
    units, source = capacity(pipeline.project.settings.capacity)
    depth: dict[str, int] = {}
    for node_id in graph.order:
        ups = graph.upstream[node_id]
        depth[node_id] = 1 + max((depth[u] for u in ups), default=-1)
    phases = []
    for level in sorted(set(depth.values())):
        ids = [n for n in graph.order if depth[n] == level]
        phases.append({"reason": {"type": "initial"} if level == 0 else
                       {"type": "fan_in", "node_id": ids[0]},
                       "streams": [{"stream_id": i, "steps": [n]} for i, n in enumerate(ids)]})
    weights = {n: graph.nodes[n].weight for n in graph.order if graph.nodes[n].weight > 1}
    warnings = sorted([*unused_warnings(graph, graph.order),
                       *capacity_warnings(graph, graph.order, units, source)],
                      key=lambda w: (w["node"], w["param"] or "", w["kind"]))
    for warning in warnings:
        note(f"[barca] warning: {warning['message']}")
    emit_json({"plan_version": 1, "total_steps": len(graph.order),
               "pool_size": min(pool_size(), units), "capacity": units,
               "capacity_source": source, "weights": weights, "phases": phases,
               "warnings": warnings}, indent=True)

