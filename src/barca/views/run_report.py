"""A run's report, built once from the driver's `RunResult`: the JSON `barca get|run` prints,
what a server's run sends its client, and the notes said beside it (`notes()`).

`RunReport` is a run that executed, `DryRunReport` one that only planned. Values of a
partitioned target are read here, key by key, only when the report asks for them (`values`):
by default past SUMMARY_PAST keys the report gives a summary that opens no result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from barca.engine.result import RunResult
from barca.views import plan_text
from barca.views.run_values import (final_output, has_value, key_paths, key_summary,
                                    keys_with_value, relative_path, summarised)
from barca.views.warning_text import warning_json

SHOWN_KEYS = 20  # keys of a partitioned value a terminal shows before a count
# what a report's `final_output` holds: every value (`-o value`); values, or past
# SUMMARY_PAST keys a summary (the default JSON); the first SHOWN_KEYS values (a terminal);
# result paths (`--json -o path`); nothing (`-o path`, a scheduled tick nobody reads)
VALUES = ("all", "summary", "first", "paths", "none")
STEP_FIELDS = ["id", "kind", "action", "status", "reason", "detail", "changed", "run_hash",
               "artifact", "warning", "partitions", "computed_by", "batch", "batch_execution",
               "elapsed_seconds", "attempts", "env", "undeclared_env"]


@dataclass(frozen=True)
class RunReport:
    """An executed run. `values`: what `final_output` holds (one of VALUES: 200,000 keys'
    values take seconds to read, so only `-o value` reads them all)."""

    result: RunResult
    command: str
    target: str | None
    values: str = "summary"

    def steps(self) -> list[dict[str, Any]]:
        return [_step_json(self.result, n) for n in self.result.order]

    def to_json(self) -> dict[str, Any]:
        result = self.result
        body: dict[str, Any] = {"status": result.status, "run_id": result.run_id,
                                "elapsed_seconds": round(result.elapsed, 4),
                                "steps_executed": result.executed, "phases": result.phases}
        failure = result.failed[0] if result.failed else None
        if len(result.targets) > 1:
            body["targets"] = _targets_json(result, self.target, self.values)
        elif self.values != "none" and (failure is None
                                        or has_value(result, result.final_node())):
            body["final_output"] = target_output(result, result.final_node(), self.values)
        if failure is not None:
            body["failed_node"] = failure.step_id
            body["error"] = failure.error_message
        if result.status == "success":
            body["metadata_seconds"] = round(result.metadata_seconds, 4)
        body["steps"] = self.steps()
        body["warnings"] = [*map(warning_json, result.warnings), *selection_warnings(result)]
        if result.cache is not None:
            body["cache"] = result.cache
        if result.options.partition:
            body["partition_selection"] = partition_selection(result)
        return body

    def notes(self, paths: Sequence[str], env_name: str | None) -> list[str]:
        """What is said beside the report (stderr, a server's run events), in order.
        `paths` and `env_name` as the user gave them, for the commands the notes suggest."""
        out = _plan_notes(self.result, self.command, self.target, paths, env_name)
        out += [f"[barca] warning: {w['message']}" for w in selection_warnings(self.result)]
        return out + trimmed_notes(self.result)

    def keys_with_value(self) -> int:
        """How many keys of a partitioned target have a current result."""
        return keys_with_value(self.result, self.result.final_node())


@dataclass(frozen=True)
class DryRunReport:
    """What a run would do, and why (nothing executed, nothing written)."""

    result: RunResult
    command: str
    target: str | None

    def steps(self) -> list[dict[str, Any]]:
        result = self.result
        steps = [plan_text.dry_run_step(
            p, relative_path(result.artifact_of(p.node_id, ""), result)
            if not p.partitioned or p.unknown else None, result.batch_plans.get(p.node_id))
            for p in (result.plans[n] for n in result.order)]
        for step in steps:
            _add_env(step, result)
            warning = _ignored_refresh(result, step["id"]) if step["action"] == "cached" \
                else None
            if warning:
                step["warning"] = warning
        return steps

    def to_json(self) -> dict[str, Any]:
        result = self.result
        plans = [result.plans[n] for n in result.order]
        body = {"dry_run": True, "command": self.command, "target": self.target,
                "steps": self.steps(), "summary": plan_text.summary_counts(plans),
                "warnings": [warning_json(w) for w in result.warnings]}
        if len(result.targets) > 1:  # each target's own cone; the top summary counts each once
            body["targets"] = {name: {"summary": plan_text.summary_counts(
                [p for p in plans if p.node_id in result.graph.cone([node_id])])}
                for name, node_id in zip((self.target or "").split(","), result.targets)}
        if result.options.partition:
            body["partition_selection"] = partition_selection(result)
        return body

    def notes(self, paths: Sequence[str], env_name: str | None) -> list[str]:
        return _plan_notes(self.result, self.command, self.target, paths, env_name)


def _plan_notes(result: RunResult, command: str, target: str | None, paths: Sequence[str],
                env_name: str | None) -> list[str]:
    """Fan-ins `--partition` skipped, tasks `get` left out, cached readers of a refresh."""
    out = []
    skipped = [n for n in result.order if result.plans[n].unknown == "partition_selection"]
    if skipped:
        names = ", ".join(result.graph.nodes[n].name for n in skipped)
        out.append(f"[barca] note: --partition skips a fan-in that reads every key: {names}. "
                   "Run without --partition to update it.")
    if command == "get" and target is None:
        out += _skipped_tasks(result, paths, env_name)
    out += _stale_manual(result, env_name)
    return out + [f"[barca] warning: {line}" for line in _ignored_refresh_lines(result)]


def _stale_manual(result: RunResult, env_name: str | None) -> list[str]:
    """A Manual asset kept though stale (its code or inputs changed): say so, and how to
    recompute it, as the published barca does."""
    out = []
    graph = result.graph
    for node_id in result.order:
        if not result.plans[node_id].pinned:
            continue
        d = graph.nodes[node_id]
        name = d.name if sum(o.name == d.name for o in graph.nodes.values()) == 1 else node_id
        env = f" --env {env_name}" if env_name else ""
        out.append(f"[barca] note: {name} is Manual and stale; barca get {name} {d.file}"
                   f" --refresh {name}{env} to recompute")
    return out


def trimmed_notes(result: RunResult) -> list[str]:
    """`[cache] max_size` was exceeded: what the run's trim removed."""
    cache = result.cache
    if cache is None:
        return []
    size, plural = plan_text.human_size, plan_text.plural
    source = _LIMIT_SOURCES.get(cache["limit_source"], cache["limit_source"])
    if cache["limit_setting"].endswith("%") and cache["limit_source"] != "default":
        source += f" {cache['limit_setting']} of the filesystem"
    what = ", ".join(plural(n, _EVICTED[reason]) for reason, n in
                     sorted(cache["evicted_by_reason"].items()))
    out = [f"[barca] cache {size(cache['size_bytes'])} over its {size(cache['limit_bytes'])} "
           f"limit ({source}); removed {plural(cache['evicted_files'], 'file')} "
           f"({size(cache['evicted_bytes'])}), oldest first" + (f": {what}" if what else ""),
           *result.cache_warnings]
    if cache["after_bytes"] > cache["limit_bytes"] and cache["spared_files"]:
        out.append(f"[barca] kept {plural(cache['spared_files'], 'superseded result')} over the "
                   "limit while another run is live or has just ended (it may read them); the "
                   "next run or barca gc removes them")
    elif cache["after_bytes"] > cache["limit_bytes"]:
        out.append(f"[barca] warning: current results take {size(cache['after_bytes'])}, "
                   f"more than {source} {size(cache['limit_bytes'])}; gc never removes them")
    return out


_LIMIT_SOURCES = {"default": "the default max_size, 10% of the filesystem"}
_EVICTED = {"superseded": "superseded result", "unreferenced": "unreferenced file",
            "leftover": "leftover temporary file"}


def _skipped_tasks(result: RunResult, paths: Sequence[str], env_name: str | None
                   ) -> list[str]:
    """`barca get` without a target brings assets and sensors up to date, never tasks: name
    the tasks it left out and the command that runs one (all of it when there was nothing
    else to get)."""
    graph = result.graph
    tasks = sorted((n for n in graph.nodes if graph.nodes[n].kind == "task"),
                   key=lambda n: (graph.nodes[n].file, graph.nodes[n].line))  # as written
    if not tasks:
        return []
    names = [graph.nodes[n].name for n in tasks]
    shown = ", ".join(names[:10]) + (f", +{len(names) - 10} more" if len(names) > 10 else "")
    same_name = sum(d.name == names[0] for d in graph.nodes.values())
    first = names[0] if same_name == 1 else tasks[0]  # a name in two files: its full id
    words = ["barca", "run", first, *paths, *(["--env", env_name] if env_name else [])]
    command = " ".join(words)
    count = plan_text.plural(len(tasks), "task")
    if len(tasks) == len(graph.nodes):
        return [f"[barca] nothing to get: {' '.join(paths) or 'the project'} has only tasks "
                f"({shown}), which barca get never runs. Run a task with: {command}"]
    return [f"[barca] skipped {count} ({shown}): barca get computes assets and sensors. "
            f"Run a task with: {command}"]


def _add_env(step: dict[str, Any], result: RunResult) -> dict[str, Any]:
    """`env {NAME: value|null}`: a node's declared env= values, as its run hash saw them;
    `undeclared_env [NAME]`: what its code reads that env= does not declare."""
    d = result.graph.nodes[step["id"]]
    if d.env:
        step["env"] = plan_text.env_json(d.env, result.options.env)
    if d.undeclared_env:  # read by its code, not declared: not in its run hash
        step["undeclared_env"] = list(d.undeclared_env)
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
        step.update(status="skipped", reason="partition_selection", detail=plan_text.why(plan))
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
        step["reason"] = plan_text.reason_field(first)
        if first.changed:
            step["changed"] = list(first.changed)
    elif step["status"] == "cached":
        plan_text.pinned_fields(plan, step)
    step["detail"] = plan_text.why(plan)
    served = result.served.get(node_id)
    if served:
        step["computed_by"] = dict(sorted(served.items()))
        if step["status"] == "cached":
            step["reason"] = "computed_by_other_run"
        text = plan_text.served_text(served, plan.partitioned)
        step["detail"] = f"{step['detail']}; {text}" if plan.partitioned else text
    if plan.partitioned:
        step["partitions"] = plan_text.partitions_json(plan)
        if node_id in result.batch_execution:
            step["batch_execution"] = result.batch_execution[node_id].as_json()
    else:
        step["run_hash"] = plan.run_hashes[0]
        found = result.artifact_of(node_id, "")
        if found and step["status"] == "cached":
            step["artifact"] = relative_path(found, result)
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
    return out


def target_output(result: RunResult, node_id: str | None, values: str) -> Any:
    """A target's `final_output` as `values` (one of VALUES but "none") asks."""
    if values == "paths":
        return key_paths(result, node_id)
    if values == "summary" and node_id is not None and summarised(result, node_id):
        return key_summary(result, node_id)
    return final_output(result, node_id, SHOWN_KEYS if values == "first" else None)


def _targets_json(result: RunResult, text: str | None, values: str) -> dict[str, Any]:
    """Each target as typed: its value, or the failure in its cone."""
    out = {}
    for name, node_id in zip((text or "").split(","), result.targets):
        cone = result.graph.cone([node_id])
        failed = [o for o in result.failed if o.node_id in cone]
        out[name] = {"status": "failed", "failed_node": failed[0].step_id,
                     "error": failed[0].error_message} if failed else {"status": "success"}
        if values != "none" and (not failed or has_value(result, node_id)):
            out[name]["final_output"] = target_output(result, node_id, values)
    return out
