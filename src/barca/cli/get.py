"""`barca get` and `barca run`: compute targets (or run tasks) and print the result."""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Any

import click

from barca.cli import render
from barca.cli.load import split_positionals
from barca.cli.output import (choose_listing_mode, emit, emit_json, note, parse_fields,
                              pick_fields)
from barca.cli.progress import CliReporter, EventReporter
from barca.cli.server_option import server_options
from barca.errors import StepFailed, UsageError
from barca.printable import printable, printable_lines
from barca.engine.result import RunResult, locate
from barca.engine.driver import run
from barca.state import EMPTY_STATE
from barca.store.artifacts import read_value

SHOWN_KEYS = 20  # keys of a partitioned value a terminal shows before a count
OUTPUTS = ("json", "pretty", "value", "path")
STEP_FIELDS = ["id", "kind", "action", "status", "reason", "detail", "changed", "run_hash",
               "artifact", "warning", "partitions", "computed_by", "batch", "batch_execution",
               "elapsed_seconds", "attempts", "env"]


def _run_options(fn):
    options = [
        click.option("--refresh", metavar="A,B", help="Recompute these assets (one comma list) "
                     "and what reads them inside the target's cone (past a cutoff=True or "
                     "Manual asset only if its bytes change). The one way a Manual asset "
                     "is computed."),
        click.option("--no-cascade", is_flag=True, help="With --refresh: recompute only the "
                     "named assets, not what reads them."),
        click.option("--refresh-all", is_flag=True, help="Recompute every asset in the cone."),
        click.option("--dry-run", is_flag=True, help="Say what would run and why; execute and "
                     "write nothing (sensors are observed)."),
        click.option("--json", "json_flag", is_flag=True, help="JSON output (default when "
                     "stdout is not a terminal)."),
        click.option("--pretty", is_flag=True, help="Human output (default in a terminal)."),
        click.option("-o", "--output", type=click.Choice(OUTPUTS), help="What to print: "
                     "json or pretty (as --json, --pretty), value (only the target's value), "
                     "path (its result files, one line per key)."),
        click.option("--fields", metavar="A,B", help="Keep only these keys of each step "
                     "(implies JSON): " + ", ".join(STEP_FIELDS) + "."),
        click.option("--partition", multiple=True, metavar="DIM=V[,V]",
                     help="Run only these keys of every node with dimension DIM "
                     "(repeatable; or a JSON object). Fan-ins over all keys are skipped; naming one "
                     "as a target or in --refresh is exit 2."),
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
        click.option("--schedule-id", hidden=True),  # a scheduled tick: which schedules,
        click.option("--scheduled-at", type=float, hidden=True),  # and when (epoch seconds)
        click.option("--shared", is_flag=True, hidden=True),  # targets of any kind: "serve"
        # a scheduled tick: nobody reads its value, and 200,000 keys' values take seconds
        click.option("--no-value", is_flag=True, hidden=True),
    ]
    for option in reversed(options):
        fn = option(fn)
    return click.argument("args", nargs=-1)(server_options(fn))


GET_HELP = """Compute TARGET (an asset or sensor, or a,b) and what it needs; print its value.

\b
Without a target, every asset and sensor in FILES is brought up to date. An asset that
runs also writes its @sink copies (barca docs assets).
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
             output, fields, partition, batch, agent, env_name, events, run_id, triggered_by,
             schedule_id, scheduled_at, shared, no_value) -> None:
    mode = _output_mode(json_flag, pretty, output, fields, dry_run)
    chosen = parse_fields(fields, STEP_FIELDS)
    command = "serve" if shared else command  # recorded so: a server's shared run
    target, paths = split_positionals(args, takes_target=True)
    result = run(command, target, paths, refresh=refresh, refresh_all=refresh_all,
                 partition=partition, cascade=not no_cascade, dry_run=dry_run, env=env_name,
                 reporter=EventReporter() if events else CliReporter(agent), batch=batch,
                 run_id=run_id, triggered_by=triggered_by,
                 schedule=(schedule_id, scheduled_at) if schedule_id else None)
    skipped = [n for n in result.order if result.plans[n].unknown == "partition_selection"]
    if skipped:
        names = ", ".join(result.graph.nodes[n].name for n in skipped)
        note(f"[barca] note: --partition skips a fan-in that reads every key: {names}. "
             "Run without --partition to update it.")
    if command == "get" and target is None:
        _say_skipped_tasks(result, paths, env_name)
    for line in _ignored_refresh_lines(result):
        note(f"[barca] warning: {line}")
    if dry_run:
        _print_dry_run(command, target, result, mode, chosen)
        return
    _print_run(command, target, result, mode, chosen, no_value)


def _output_mode(json_flag: bool, pretty: bool, output: str | None, fields: str | None,
                 dry_run: bool) -> str:
    """--json / --pretty / -o / --fields: which one prints, refused when they disagree."""
    if output is not None and (json_flag or pretty):
        raise UsageError("-o cannot be combined with --json or --pretty",
                         f"pass only -o {output}")
    if fields is not None and output in ("pretty", "value", "path"):
        raise UsageError(f"--fields selects JSON keys and cannot be used with -o {output}",
                         "drop --fields, or use -o json")
    if output == "path" and dry_run:
        raise UsageError("-o path prints result files, which a dry run does not write",
                         "drop --dry-run, or use -o value to print the planned steps")
    return output or choose_listing_mode(json_flag, pretty, fields)


def _print_dry_run(command: str, target: str | None, result: RunResult, mode: str,
                   fields: list[str] | None = None) -> None:
    plans = [result.plans[n] for n in result.order]
    if mode == "pretty":
        emit(render.dry_run_table(command, target, plans, result.batch_plans))
        return
    steps = [render.dry_run_step(p, _rel(result.artifact_of(p.node_id, ""), result)
                                 if not p.partitioned or p.unknown else None,
                                 result.batch_plans.get(p.node_id)) for p in plans]
    for step in steps:
        _add_env(step, result)
        warning = _ignored_refresh(result, step["id"]) if step["action"] == "cached" else None
        if warning:
            step["warning"] = warning
    steps = pick_fields(steps, fields)
    if mode == "value":
        emit_json(steps, indent=True)
        return
    body = {"dry_run": True, "command": command, "target": target, "steps": steps,
            "summary": render.summary_counts(plans), "warnings": list(result.warnings)}
    if len(result.targets) > 1:  # each target's own cone; the top summary counts each once
        body["targets"] = {name: {"summary": render.summary_counts(
            [p for p in plans if p.node_id in result.graph.cone([node_id])])}
            for name, node_id in zip((target or "").split(","), result.targets)}
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


def _print_run(command: str, target: str | None, result: RunResult, mode: str,
               fields: list[str] | None = None, no_value: bool = False) -> None:
    steps = pick_fields([_step_json(result, n) for n in result.order], fields)
    body: dict[str, Any] = {"status": result.status, "run_id": result.run_id,
                            "elapsed_seconds": round(result.elapsed, 4),
                            "steps_executed": result.executed, "phases": result.phases}
    failure = result.failed[0] if result.failed else None
    # values are read only to be printed: a terminal shows the first keys' alone
    limit = SHOWN_KEYS if mode == "pretty" else None
    if len(result.targets) > 1:
        body["targets"] = _targets_json(result, target, limit, values=not no_value)
    elif mode != "path" and not no_value and (
            failure is None or _has_value(result, result.final_node())):
        body["final_output"] = final_output(result, result.final_node(), limit)
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
    elif mode == "value":
        _print_value(body)
    elif mode == "path":
        _print_paths(result)
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
    what = f"'{printable(target)}'" if target else "all assets"
    if result.failed:
        count = {s: sum(1 for step in body["steps"] if step["status"] == s)
                 for s in ("ran", "partial", "failed", "cached", "skipped")}
        emit(f"Run {result.run_id} | {command} {what} failed after {result.elapsed:.3f}s "
             f"({count['ran']} ran, {count['failed'] + count['partial']} failed, "
             f"{count['cached']} cached, {count['skipped']} skipped)")
    else:
        verb = "ran" if command == "run" else "got"
        emit(f"Run {result.run_id} | {verb} {what} in {result.elapsed:.3f}s "
             f"({render.plural(result.executed, 'step')}, "
             f"{render.plural(result.phases, 'phase')})")
    if "final_output" in body:
        import orjson

        value = body["final_output"]
        more = _keys_with_value(result, result.final_node()) - len(value) if \
            isinstance(value, dict) and len(value) == SHOWN_KEYS else 0
        emit("\nValue:")
        shown = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                             default=str).decode()
        emit(printable_lines(shown.split("\n")))  # JSON leaves DEL, C1 and U+2028 as they are
        if more:
            emit(f"... and {more} more keys (--json gives every key)")


def _print_value(body: dict) -> None:
    """`-o value`: the target's value alone (several targets: {target: value or null})."""
    if "targets" in body:
        value = {name: t.get("final_output") for name, t in body["targets"].items()}
    elif "final_output" in body:
        value = body["final_output"]
    else:
        return  # the target failed: the error follows on stderr
    emit_json(value, indent=True)


def _print_paths(result: RunResult) -> None:
    """`-o path`: each target's result files, one line per key (absolute when the current
    directory is not the project root, else as the JSON gives them)."""
    root = result.root
    here = Path.cwd().resolve() == Path(root).resolve()
    lines = []
    for node_id in result.targets or [result.final_node()]:
        plan = result.plans.get(node_id) if node_id else None
        if plan is None or plan.unknown:
            continue
        keys = _label_order(plan, None) if plan.partitioned else [""]
        for key in keys:
            found = result.artifact_of(node_id, key)
            if found is not None:
                lines.append(_rel(found, result) if here else str(found[0]))
    if lines:
        emit("\n".join(lines))


def _raise_failure(result: RunResult, failure) -> None:
    """The contract line, then the error (with its traceback) once, as the error report."""
    note(f"[barca] run failed: step '{failure.step_id}' failed (exit 1)")
    d = result.graph.nodes[failure.node_id]
    from barca.store.paths import node_dir_name

    headline = f"step '{failure.step_id}' failed"
    fix = "fix the step and rerun the same command; finished steps are kept"
    if (failure.error_message or "").startswith("importing "):  # the file, not the step
        headline += f": {failure.error_message.partition(': ')[0]}"
        fix = (f"fix the top-level code of {d.file} (it runs when the file is imported) and "
               "rerun; `barca doctor` finds names used there that are never defined")
    raise StepFailed(f"step '{failure.step_id}' failed: {failure.error_type}: "
                     f"{render.first_line(failure.error_message)}", fix, headline=headline,
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
    elif step["status"] == "cached":
        render.pinned_fields(plan, step)
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
    if node_id in result.step_times:  # what it executed: summed over keys, most attempts
        seconds, attempts = result.step_times[node_id]
        step["elapsed_seconds"] = round(seconds, 4)
        step["attempts"] = attempts
    if node_id in result.bytes_changed:
        step["bytes_changed"] = True
    if step["status"] == "cached":
        warning = _ignored_refresh(result, node_id)
        if warning:
            step["warning"] = warning
    return step


def _ignored_refresh(result: RunResult, node_id: str) -> str | None:
    """With --no-cascade, a cached reader of a refreshed asset keeps its old result: what to
    pass to recompute it with them (the `--refresh` list with the reader added)."""
    options = result.options
    if options.cascade or not options.refresh:
        return None
    sources = sorted(options.refresh & (result.graph.cone([node_id]) - {node_id}))
    if not sources:
        return None
    graph = result.graph
    names = ",".join(graph.nodes[n].name for n in
                     [n for n in result.order if n in options.refresh] + [node_id])
    return (f"'{graph.nodes[node_id].name}' was served from cache but depends on refreshed "
            f"'{graph.nodes[sources[0]].name}'; pass --refresh {names} to recompute it too, "
            "or drop --no-cascade")


def _ignored_refresh_lines(result: RunResult) -> list[str]:
    """The stderr warning of each cached reader a --no-cascade refresh leaves as it was, in
    a real run and a dry run alike (the dry run predicts what the run would say)."""
    out = []
    for node_id in result.order:
        plan = result.plans[node_id]
        if plan.unknown or plan.run or node_id in result.skipped:
            continue
        warning = _ignored_refresh(result, node_id)
        if warning:
            out.append(warning)
    return out


def _say_skipped_tasks(result: RunResult, paths: list[str], env_name: str | None) -> None:
    """`barca get` without a target brings assets and sensors up to date, never tasks: name
    the tasks it left out and the command that runs one (all of it when there was nothing
    else to get)."""
    graph = result.graph
    tasks = sorted((n for n in graph.nodes if graph.nodes[n].kind == "task"),
                   key=lambda n: (graph.nodes[n].file, graph.nodes[n].line))  # as written
    if not tasks:
        return
    names = [graph.nodes[n].name for n in tasks]
    shown = ", ".join(names[:10]) + (f", +{len(names) - 10} more" if len(names) > 10 else "")
    same_name = sum(d.name == names[0] for d in graph.nodes.values())
    first = names[0] if same_name == 1 else tasks[0]  # a name in two files: its full id
    words = ["barca", "run", first, *paths, *(["--env", env_name] if env_name else [])]
    command = " ".join(words)
    count = render.plural(len(tasks), "task")
    if len(tasks) == len(graph.nodes):
        note(f"[barca] nothing to get: {' '.join(paths) or 'the project'} has only tasks "
             f"({shown}), which barca get never runs. Run a task with: {command}")
    else:
        note(f"[barca] skipped {count} ({shown}): barca get computes assets and sensors. "
             f"Run a task with: {command}")


def _has_value(result: RunResult, node_id: str | None) -> bool:
    """After failures: a partitioned target still gives its good keys; an unpartitioned one
    its value, if it neither failed nor was skipped."""
    if node_id is None:
        return False
    if result.plans[node_id].partitioned:
        return True
    return node_id not in result.skipped and all(o.node_id != node_id for o in result.failed)


def _not_current(result: RunResult, node_id: str) -> set[str]:
    """Keys of the node that failed in this run or were skipped for a failed input: any file
    they have is an older result, not what a successful run would give."""
    out = set(result.skipped.get(node_id, ()))
    out.update(o.key for o in result.failed if o.node_id == node_id)
    return out


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


def _targets_json(result: RunResult, text: str | None, limit: int | None = None,
                  values: bool = True) -> dict[str, Any]:
    """Each target as typed: its value, or the failure in its cone."""
    out = {}
    for name, node_id in zip((text or "").split(","), result.targets):
        cone = result.graph.cone([node_id])
        failed = [o for o in result.failed if o.node_id in cone]
        if failed:
            out[name] = {"status": "failed", "failed_node": failed[0].step_id,
                         "error": failed[0].error_message}
            if values and _has_value(result, node_id):
                out[name]["final_output"] = final_output(result, node_id, limit)
        else:
            out[name] = {"status": "success"}
            if values:
                out[name]["final_output"] = final_output(result, node_id, limit)
    return out


def _keys_with_value(result: RunResult, node_id: str) -> int:
    """How many keys of a partitioned target have a current result, without looking for
    their files: its cached keys and the keys this run computed."""
    plan = result.plans[node_id]
    return len(plan.keys) - len(plan.run) + len(result.results.get(node_id, {}))


def final_output(result: RunResult, node_id: str | None, limit: int | None = None) -> Any:
    """The target's value; for a partitioned one every current key's (the first `limit`
    keys' when given)."""
    if node_id is None:
        return None
    plan = result.plans[node_id]
    if not plan.partitioned:
        found = result.artifact_of(node_id, "")
        return None if found is None else _value_at(str(found[0]), found[1], result)
    if plan.unknown:
        return {}
    bad = _not_current(result, node_id) if result.failed else ()
    d = result.graph.nodes[node_id]
    ran = result.results.get(node_id, {})
    state = result.states.get(node_id, EMPTY_STATE)
    if len(plan.keys) > 16:
        state.keys.indexed()  # one dict, not a scan per key
    where = result.artifacts_dir
    out = {}
    for key in _label_order(plan, limit):  # every current key, however many
        found = None if key in bad else locate(d, key, plan, ran, state, where, where)
        if found is not None:  # plain strings: a Path per key costs more than its read
            out[plan.label(key)] = _value_at(found[0], found[1], result)
            if len(out) == limit:
                break
    return out


def _label_order(plan, limit: int | None) -> list[str]:
    """The keys in the order of their labels (`dim=value`); with one dimension that is the
    keys' own order, sorted without making 200,000 labels. With `limit`, enough keys for that
    many values (keys without a result are skipped: a few more are taken)."""
    if len(plan.dims) != 1:
        return sorted(plan.keys, key=plan.label)
    if limit is None:
        return sorted(plan.keys)
    return heapq.nsmallest(limit + len(plan.run), plan.keys)


def _value_at(path: str, fmt: str, result: RunResult) -> Any:
    """A JSON result as its value; any other as a pointer to its file."""
    if fmt in ("json", "keyed-json"):
        try:
            return read_value(path, fmt)
        except FileNotFoundError:
            pass
    size = os.stat(path).st_size if os.path.exists(path) else None
    return {"_barca_artifact": {"path": _rel((Path(path), fmt), result), "format": fmt,
                                "size_bytes": size}}
