"""`barca get` and `barca run`: compute targets (or run tasks) and print the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from barca.cli import render
from barca.cli.load import split_positionals
from barca.cli.output import choose_mode, emit, emit_json, note
from barca.cli.progress import CliReporter, EventReporter
from barca.cli.server_option import server_options
from barca.errors import StepFailed
from barca.engine.result import RunResult
from barca.engine.driver import run

PARTITION_LIMIT = 1000


def _run_options(fn):
    options = [
        click.option("--refresh", metavar="A,B", help="Recompute these assets (one comma list) "
                     "and what reads them inside the target's cone."),
        click.option("--no-cascade", is_flag=True, help="With --refresh: recompute only the "
                     "named assets, not what reads them."),
        click.option("--refresh-all", is_flag=True, help="Recompute every asset in the cone."),
        click.option("--dry-run", is_flag=True, help="Say what would run and why; execute and "
                     "write nothing (sensors are observed)."),
        click.option("--json", "json_flag", is_flag=True, help="JSON output (default when "
                     "stdout is not a terminal)."),
        click.option("--pretty", is_flag=True, help="Human output (default in a terminal)."),
        click.option("--partition", multiple=True, metavar="DIM=V[,V]",
                     help="Run only these keys of every node with dimension DIM "
                     "(repeatable; or a JSON object). Fan-ins over all keys are skipped."),
        click.option("--batch", multiple=True, metavar="none|all|N|NODE=V",
                     help="Group the stale keys of batched nodes (batch=) differently for this "
                     "run: none, all or N for every one, NODE=V for one (repeatable). "
                     "Recomputes nothing by itself."),
        click.option("--agent", is_flag=True, help="Plain `[barca] step:` progress lines on "
                     "stderr instead of a progress bar."),
        click.option("--env", "env_name", metavar="NAME", help="Use a separate cache and "
                     "history under .barca/envs/NAME (or set BARCA_ENV)."),
        # how `barca serve` runs a command: progress as JSON events, the run id it chose
        click.option("--events", is_flag=True, hidden=True),
        click.option("--run-id", hidden=True),
        click.option("--triggered-by", hidden=True, default="cli",
                     type=click.Choice(["cli", "api", "schedule", "catch_up"])),
        click.option("--shared", is_flag=True, hidden=True),  # targets of any kind: "serve"
    ]
    for option in reversed(options):
        fn = option(fn)
    return click.argument("args", nargs=-1)(server_options(fn))


GET_HELP = """Compute TARGET (an asset or sensor, or a,b) and what it needs; print its value.

\b
Without a target, every asset and sensor in FILES is brought up to date.
\b
Examples:
  barca get summary pipeline.py
  barca get summary pipeline.py --dry-run
  barca get scored pipeline.py --refresh cleaned
  barca get scored pipeline.py --refresh scored --batch scored=all
  barca get pipeline.py --json
"""

RUN_HELP = """Run TASK (or a,b): tasks always run; their asset inputs come from cache.

\b
Examples:
  barca run publish pipeline.py
  barca run publish pipeline.py --refresh summary
"""


@click.command("get", help=GET_HELP)
@_run_options
def get_command(**options) -> None:
    _execute("get", **options)


@click.command("run", help=RUN_HELP)
@_run_options
def run_command(**options) -> None:
    _execute("run", **options)


def _execute(command, args, refresh, no_cascade, refresh_all, dry_run, json_flag, pretty,
             partition, batch, agent, env_name, events, run_id, triggered_by,
             shared) -> None:
    mode = choose_mode(json_flag, pretty)
    command = "serve" if shared else command  # recorded so: a server's shared run
    target, paths = split_positionals(args, takes_target=True)
    result = run(command, target, paths, refresh=refresh, refresh_all=refresh_all,
                 partition=partition, cascade=not no_cascade, dry_run=dry_run, env=env_name,
                 reporter=EventReporter() if events else CliReporter(agent), batch=batch,
                 run_id=run_id, triggered_by=triggered_by)
    skipped = [n for n in result.order if result.plans[n].unknown == "partition_selection"]
    if skipped:
        names = ", ".join(result.graph.nodes[n].name for n in skipped)
        note(f"[barca] note: --partition skips a fan-in that reads every key: {names}. "
             "Run without --partition to update it.")
    if dry_run:
        _print_dry_run(command, target, result, mode)
        return
    _print_run(command, target, result, mode)


def _print_dry_run(command: str, target: str | None, result: RunResult, mode: str) -> None:
    plans = [result.plans[n] for n in result.order]
    if mode == "pretty":
        emit(render.dry_run_table(command, target, plans, result.batch_plans))
        return
    steps = [render.dry_run_step(p, _rel(result.artifact_of(p.node_id, ""), result)
                                 if not p.partitioned or p.unknown else None,
                                 result.batch_plans.get(p.node_id)) for p in plans]
    for step in steps:
        _add_env(step, result)
    body = {"dry_run": True, "command": command, "target": target, "steps": steps,
            "summary": render.summary_counts(plans), "warnings": list(result.warnings)}
    if result.options.partition:
        body["partition_selection"] = partition_selection(result)
    emit_json(body)


def _rel(found: tuple[Path, str] | None, result: RunResult) -> str | None:
    """A result's path as displayed: relative to the project root."""
    if found is None:
        return None
    path = found[0]
    try:
        return str(path.relative_to(result.root))
    except ValueError:
        return str(path)


def _print_run(command: str, target: str | None, result: RunResult, mode: str) -> None:
    steps = [_step_json(result, n) for n in result.order]
    body: dict[str, Any] = {"status": result.status, "run_id": result.run_id,
                            "elapsed_seconds": round(result.elapsed, 4),
                            "steps_executed": result.executed, "phases": result.phases}
    failure = result.failed[0] if result.failed else None
    if len(result.targets) > 1:
        body["targets"] = _targets_json(result, target)
    elif failure is None or _keeps_good_keys(result):
        body["final_output"] = final_output(result, result.final_node())
    if failure is not None:
        body["failed_node"] = failure.step_id
        body["error"] = failure.error_message
    if result.status == "success":
        body["metadata_seconds"] = round(result.metadata_seconds, 4)
    body["steps"] = steps
    body["warnings"] = [*result.warnings, *selection_warnings(result)]
    if result.cache is not None:
        body["cache"] = result.cache
        _say_trimmed(result)
    if result.options.partition:
        body["partition_selection"] = partition_selection(result)
    if mode == "json":
        emit_json(body)
    else:
        _print_human(command, target, result, body)
    if failure is not None:
        _raise_failure(result, failure)


def _say_trimmed(result: RunResult) -> None:
    """`[cache] max_size` was exceeded: what the run's trim removed, on stderr."""
    cache, size = result.cache, render.human_size
    note(f"[barca] cache {size(cache['size_bytes'])} over its {size(cache['limit_bytes'])} "
         f"limit ([cache] max_size); removed {render.plural(cache['evicted_files'], 'file')} "
         f"({size(cache['evicted_bytes'])}), oldest first")
    for warning in result.cache_warnings:
        note(warning)
    if cache["after_bytes"] > cache["limit_bytes"]:
        note(f"[barca] warning: current results take {size(cache['after_bytes'])}, more than "
             f"[cache] max_size {size(cache['limit_bytes'])}; gc never removes them")


def _print_human(command: str, target: str | None, result: RunResult, body: dict) -> None:
    verb = "ran" if command == "run" else "got"
    what = f"'{target}'" if target else "all assets"
    plural = lambda n, w: f"{n} {w}" + ("" if n == 1 else "s")  # noqa: E731
    emit(f"Run {result.run_id} | {verb} {what} in {result.elapsed:.3f}s "
         f"({plural(result.executed, 'step')}, {plural(result.phases, 'phase')})")
    if "final_output" in body:
        import orjson

        emit("\nValue:")
        emit(orjson.dumps(body["final_output"], option=orjson.OPT_INDENT_2 |
                          orjson.OPT_NON_STR_KEYS, default=str).decode())


def _raise_failure(result: RunResult, failure) -> None:
    skipped = sum(max(1, len(k)) for k in result.skipped.values())
    note(f"[barca] run failed: step '{failure.step_id}' failed: "
         f"{render.first_line(failure.error_message)}; {skipped} downstream steps skipped "
         f"(exit 1)")
    if failure.traceback:
        note(failure.traceback.rstrip())
    d = result.graph.nodes[failure.node_id]
    from barca.store.paths import node_dir_name

    raise StepFailed(f"step '{failure.step_id}' failed: {failure.error_type}: "
                     f"{render.first_line(failure.error_message)}",
                     "fix the step and rerun the same command; finished steps are kept",
                     node=failure.step_id, traceback=failure.traceback,
                     artifact_dir=f".barca/artifacts/{node_dir_name(d.file, d.name)}")


def _add_env(step: dict[str, Any], result: RunResult) -> dict[str, Any]:
    """`env {NAME: value|null}`: a node's declared env= values, as its run hash saw them."""
    names = result.graph.nodes[step["id"]].env
    if names:
        step["env"] = render.env_json(names, result.options.env)
    return step


def _step_json(result: RunResult, node_id: str) -> dict[str, Any]:
    step = _step_fields(result, node_id)
    return _add_env(step, result)


def _step_fields(result: RunResult, node_id: str) -> dict[str, Any]:
    plan = result.plans[node_id]
    step: dict[str, Any] = {"id": node_id, "kind": plan.kind}
    ran = result.results.get(node_id, {})
    failed = [o for o in result.failed if o.node_id == node_id]
    if plan.unknown == "partition_selection":
        step.update(status="skipped", reason="partition_selection", detail=render.why(plan))
        return step
    if plan.unknown or node_id in result.skipped and not ran and not failed:
        step.update(status="skipped", reason="upstream_failed")
        return step
    if failed:
        step["status"] = "failed" if not plan.partitioned or not ran else "partial"
    elif not plan.run:
        step["status"] = "cached"
    elif plan.partitioned and (len(plan.run) < len(plan.keys) or node_id in result.skipped):
        step["status"] = "partial"
    else:
        step["status"] = "ran"
    if plan.run:
        first = plan.reasons[plan.run[0]]
        step["reason"] = render.reason_field(first)
        if first.changed:
            step["changed"] = list(first.changed)
    step["detail"] = render.why(plan)
    served = result.served.get(node_id)
    if served:
        step["computed_by"] = dict(sorted(served.items()))
        if step["status"] == "cached":
            step["reason"] = "computed_by_other_run"
        text = render.served_text(served, plan.partitioned)
        step["detail"] = f"{step['detail']}; {text}" if plan.partitioned else text
    if plan.partitioned:
        step["partitions"] = render.partitions_json(plan)
        if node_id in result.batch_execution:
            step["batch_execution"] = result.batch_execution[node_id].as_json()
    else:
        step["run_hash"] = plan.run_hashes[0]
        found = result.artifact_of(node_id, "")
        if found and step["status"] == "cached":
            step["artifact"] = _rel(found, result)
    if node_id in result.bytes_changed:
        step["bytes_changed"] = True
    if step["status"] == "cached":
        warning = _ignored_refresh(result, node_id)
        if warning:
            step["warning"] = warning
    return step


def _ignored_refresh(result: RunResult, node_id: str) -> str | None:
    """With --no-cascade, a cached reader of a refreshed asset keeps its old result."""
    options = result.options
    if options.cascade or not options.refresh:
        return None
    sources = sorted(options.refresh & (result.graph.cone([node_id]) - {node_id}))
    if not sources:
        return None
    graph = result.graph
    return (f"'{graph.nodes[node_id].name}' was served from cache but depends on refreshed "
            f"'{graph.nodes[sources[0]].name}'; drop --no-cascade to recompute it")


def _keeps_good_keys(result: RunResult) -> bool:
    """A partitioned target whose failed keys are its own still returns its good keys."""
    node_id = result.final_node()
    return node_id is not None and result.plans[node_id].partitioned and all(
        o.node_id == node_id for o in result.failed)


def partition_selection(result: RunResult) -> dict[str, Any]:
    """What `--partition` selected: per node carrying a selected dimension, how many keys it
    kept and left out (null while its keys are unknown), and the fan-ins it skipped."""
    selection = result.options.partition
    nodes = []
    for node_id in result.order:
        plan = result.plans[node_id]
        d = result.graph.nodes[node_id]
        if plan.unknown == "partition_selection" or \
                not any(dim.name in selection for dim in d.dimensions):
            continue
        known = plan.selected_from is not None  # unset while the node's keys are unknown
        nodes.append({"id": node_id, "selected": len(plan.keys) if known else None,
                      "skipped": plan.selected_from - len(plan.keys) if known else None})
    return {"selection": {dim: sorted(values) for dim, values in sorted(selection.items())},
            "nodes": nodes,
            "skipped_nodes": [n for n in result.order
                              if result.plans[n].unknown == "partition_selection"]}


def selection_warnings(result: RunResult) -> list[dict[str, Any]]:
    """`--partition` values that none of a node's keys has (keys known only after a run)."""
    selection = result.options.partition
    out = []
    for node_id in result.order:
        plan = result.plans[node_id]
        for dim in plan.dims:
            if dim in selection and not plan.unknown and not plan.keys:
                message = (f"--partition {dim}={','.join(sorted(selection[dim]))} matches no "
                           f"key of {node_id}; it computes nothing")
                out.append({"kind": "partition_selection", "node": node_id, "param": dim,
                            "message": message})
                note(f"[barca] warning: {message}")
    return out


def _targets_json(result: RunResult, text: str | None) -> dict[str, Any]:
    """Each target as typed: its value, or the failure in its cone."""
    out = {}
    for name, node_id in zip((text or "").split(","), result.targets):
        cone = result.graph.cone([node_id])
        failed = [o for o in result.failed if o.node_id in cone]
        if failed:
            out[name] = {"status": "failed", "failed_node": failed[0].step_id,
                         "error": failed[0].error_message}
        else:
            out[name] = {"status": "success", "final_output": final_output(result, node_id)}
    return out


def final_output(result: RunResult, node_id: str | None) -> Any:
    if node_id is None:
        return None
    plan = result.plans[node_id]
    if not plan.partitioned:
        return _output_value(result, node_id, "")
    if len(plan.keys) > PARTITION_LIMIT:
        computed = sorted(result.results.get(node_id, {}))
        return {"_barca_partitions": {
            "keys": len(plan.keys), "computed": len(computed),
            "cached": len(plan.keys) - len(computed),
            "outputs": {plan.label(k): _output_value(result, node_id, k)
                        for k in computed[:PARTITION_LIMIT]},
            "truncated": len(computed) > PARTITION_LIMIT,
            "hint": "pass --partition DIM=VALUE to get chosen keys, or read them with barca sql"}}
    return {plan.label(k): _output_value(result, node_id, k)
            for k in sorted(plan.keys, key=plan.label)
            if result.artifact_of(node_id, k) is not None}


def _output_value(result: RunResult, node_id: str, key: str) -> Any:
    found = result.artifact_of(node_id, key)
    if found is None:
        return None
    path, fmt = found
    if fmt in ("json", "keyed-json") and path.exists():
        return result.value(node_id, key)
    size = path.stat().st_size if path.exists() else None
    return {"_barca_artifact": {"path": _rel(found, result), "format": fmt, "size_bytes": size}}
