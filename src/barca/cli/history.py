"""`barca history [RUN_ID]`: recent runs, or one run's steps with its failures explained.

Reads the metadata database of the chosen environment and never creates it. A `running` row
whose process is gone is shown (and, when the database is writable, stored) as `interrupted`.
Also home of the small helpers the other read-only commands share: opening the history and
finding a run by id.
"""

from __future__ import annotations

from pathlib import Path

import click

from barca.cli import render
from barca.cli.output import (bounded, choose_listing_mode, emit, emit_json, note_truncated,
                              parse_fields, parse_names, table)
from barca.cli.server_option import server_options
from barca.errors import UsageError
from barca.printable import note, printable_lines
from barca.store import history as store
from barca.store.db import Connection
from barca.store.packs import file_of
from barca.views.history import (DEFAULT_RUNS, RUN_FIELDS, RUN_STATUSES, TRIGGERS, find_run,
                                 open_history, run_detail_json, runs_json, select_runs)
from barca.views.plan_text import first_line, human_size, plural
from barca.views.times import utc_time

KEYS_PER_NODE = 10
TRACEBACK_LINES = 15
NO_HISTORY = "No run history found."

HELP = """List recent runs, newest first; with RUN_ID, that run's steps.

\b
A run's table shows each executed step (the first 10 keys of each partitioned node; --all
or --json for every key) with its time, peak memory, run hash and artifact, then the error,
traceback tail and last output lines of each failed step. Cached steps are only counted.
\b
Examples:
  barca history
  barca history --limit 50 --fields run_id,status,elapsed_seconds
  barca history 3bc29e9a2595
"""


@click.command("history", help=HELP)
@server_options
@click.argument("run_id", required=False)
@click.option("-l", "--limit", type=click.IntRange(min=1), metavar="N",
              help="Show N runs (default 10); with RUN_ID, at most N steps.")
@click.option("--all", "show_all", is_flag=True, help="Every run (not with --limit); with "
              "RUN_ID, every key of every node in the table.")
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each run (implies "
              "JSON).")
@click.option("--env", "env_name", metavar="NAME", help="Read the history of environment NAME "
              "(or set BARCA_ENV).")
@click.option("--status", "statuses", metavar="S[,S]", help="Only runs with these statuses: "
              + ", ".join(RUN_STATUSES) + ".")
@click.option("--since", metavar="WHEN", help="Only runs started since WHEN: a duration ago "
              "(30m, 2h, 7d) or a UTC time (2026-10-02, '2026-10-02 11:00', or as JSON "
              "writes it, 2026-10-02T11:00:00.000Z).")
@click.option("--target", "target_name", metavar="NAME", help="Only runs whose target list "
              "names NAME (a function name or a node id).")
@click.option("--triggered-by", "triggers", metavar="T[,T]", help="Only runs started this "
              "way: cli, python (barca.get/run), api (a server's client), schedule, catch_up "
              "(a missed tick); manual = cli or python.")
def history_command(run_id, limit, show_all, json_flag, pretty, fields, env_name, statuses,
                    since, target_name, triggers) -> None:
    mode = choose_listing_mode(json_flag, pretty, fields)
    wanted = parse_names(statuses, RUN_STATUSES, "--status", "run status", "statuses")
    who = parse_names(triggers, TRIGGERS, "--triggered-by", "trigger", "triggers")
    since_ts = parse_since(since)
    if run_id is not None and (wanted or since_ts is not None or target_name or who):
        raise UsageError("--status, --since, --target and --triggered-by choose among runs, "
                         "not one run's steps",
                         f"drop them, or run `barca history` without {run_id}")
    if run_id is not None and fields is not None:
        raise UsageError("--fields applies to the list of runs, not to one run",
                         f"drop --fields, or run `barca history --fields {fields}`")
    chosen = parse_fields(fields, RUN_FIELDS)
    project, conn = open_history(env_name)
    if run_id is not None:
        _show_run(conn, find_run(conn, run_id, env_name), limit, show_all, mode, project.root)
        return
    runs, total = select_runs(conn, bounded(limit, show_all, DEFAULT_RUNS), wanted,
                              since_ts, target_name, who)
    _show_runs(runs, total, chosen, mode)


def parse_since(text: str | None) -> float | None:
    """`30m`, `2h`, `7d`, `45s` ago, or a UTC date / date and time (also as JSON writes a
    moment, `2026-10-02T11:00:00.000Z`), as epoch seconds."""
    if text is None:
        return None
    import datetime
    import re
    import time

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match:
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
        return time.time() - float(match.group(1)) * unit
    for form in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d",
                 "%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            moment = datetime.datetime.strptime(text.strip().removesuffix(" UTC"), form)
        except ValueError:
            continue
        return moment.replace(tzinfo=datetime.timezone.utc).timestamp()
    raise UsageError(f"--since {text!r} is neither a duration nor a time",
                     "pass a duration ago (30m, 2h, 7d) or a UTC time (2026-10-02 11:00)")


def _show_runs(runs: list[store.RunRow], total: int, fields: list[str] | None,
               mode: str) -> None:
    if mode == "json":
        emit_json(runs_json(runs, total, fields), indent=True)
        return
    if not runs:
        emit(NO_HISTORY)
        return
    emit(table(*_runs_table(runs)))
    note_truncated(len(runs), total, "runs")


def _runs_table(runs: list[store.RunRow]) -> tuple[list[str], list[list[str]]]:
    headers = ["RUN_ID", "CMD", "TARGET", "STATUS", "STEPS", "CACHED", "TIME", "STARTED"]
    failed = any(r.failed_node for r in runs)
    rows = []
    for r in runs:
        row = [r.run_id, r.command, render.clip(r.target or "all", 24), r.status,
               _count(r.steps_executed), _count(r.steps_cached),
               render.human_seconds(r.elapsed_seconds), f"{utc_time(r.started_at)} UTC"]
        if failed:
            name = (r.failed_node or "").split(":", 1)[-1]
            row.append(render.clip(f"{name}: {r.error}", 72) if r.failed_node else "")
        rows.append(row)
    return headers + (["ERROR"] if failed else []), rows


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


# -- one run --------------------------------------------------------------------------------


def _show_run(conn: Connection, run: store.RunRow, limit: int | None,
              show_all: bool, mode: str, root: Path) -> None:
    if mode == "json":
        emit_json(run_detail_json(conn, run, limit), indent=True)
        return
    total = store.count_steps(conn, run.run_id)
    summaries = store.node_summaries(conn, run.run_id)
    per_node = None if show_all else KEYS_PER_NODE
    steps = store.run_steps(conn, run.run_id, per_node=per_node, limit=limit)
    emit(_run_header(run))
    if steps:
        emit("\n" + table(*_steps_table(steps, summaries,
                                         store.call_summaries(conn, run.run_id), root)))
    else:
        emit("\nNo step was executed in this run"
             + (" (every step came from cache)." if run.steps_cached else "."))
    failures = [s for s in steps if s.status == "failed"]
    for step in failures:
        emit("\n" + _failure_text(conn, step))
    if failures:
        note(f"full output: barca logs {run.run_id} --step '{failures[0].step_id}'")
    if len(steps) < total and limit is not None:
        note_truncated(len(steps), total, "steps")


def _run_header(run: store.RunRow) -> str:
    command = " ".join(["barca", run.command, *([run.target] if run.target else []),
                        *run.files])
    lines = [f"Run {run.run_id}: {command}", f"Status   {run.status}",
             f"Started  {utc_time(run.started_at)} UTC",
             f"Time     {render.human_seconds(run.elapsed_seconds)}",
             f"Steps    {_count(run.steps_executed)} executed, {_count(run.steps_cached)} "
             f"cached, {_count(run.steps_total)} total"]
    if run.job:
        lines.insert(2, f"Job      {run.job}")
    if run.triggered_by:
        tick = f" ({run.schedule_id} at {utc_time(run.scheduled_at)} UTC)" \
            if run.schedule_id else ""
        lines.insert(3 if run.job else 2, f"Trigger  {run.triggered_by}{tick}")
    if run.failed_node:
        lines.append(f"Failed   {run.failed_node}: {first_line(run.error)}")
    return printable_lines(lines)


def _steps_table(steps: list[store.StepRow], summaries: list[store.NodeSummary],
                 calls: dict[tuple[str, str], store.CallSummary], root: Path
                 ) -> tuple[list[str], list[list[str]]]:
    """One row a step; a batch call is a row `node[N keys]` (its time and peak memory) with
    its keys under it. A node (a call) with more keys than shown ends in a `+N more` row."""
    headers = ["STEP", "STATUS", "ATTEMPTS", "TIME", "PEAK_RSS", "RUN_HASH", "ARTIFACT"]
    shown: dict[tuple[str, str | None], int] = {}
    for step in steps:
        group = (step.node_id, step.batch)
        shown[group] = shown.get(group, 0) + 1
    keys = {(s.node_id, None): s.keys for s in summaries}
    keys.update({group: call.keys for group, call in calls.items()})
    rows: list[list[str]] = []
    for i, step in enumerate(steps):
        group = (step.node_id, step.batch)
        if step.batch is not None and (i == 0 or (steps[i - 1].node_id, steps[i - 1].batch)
                                       != group):
            call = calls[group]
            failed = any(s.status == "failed" for s in steps if (s.node_id, s.batch) == group)
            rows.append([f"{step.node_id}[{plural(call.keys, 'key')}]",
                         "failed" if failed else "success", _count(step.attempts),
                         render.human_seconds(call.elapsed_seconds),
                         human_size(call.max_rss_bytes), "-", f"batch {step.batch}"])
        rows.append([step.step_id, step.status, _count(step.attempts),
                     render.human_seconds(step.elapsed_seconds),
                     human_size(None if step.batch else step.max_rss_bytes),
                     step.run_hash[:12], _artifact_cell(step, root)])
        last = i + 1 == len(steps) or (steps[i + 1].node_id, steps[i + 1].batch) != group
        more = keys.get(group, 0) - shown[group]
        if last and more > 0:
            rows.append([f"{step.node_id}[+{more} more keys]", "", "", "", "", "",
                         "--all or --json lists them"])
    return headers, rows


def _artifact_cell(step: store.StepRow, root: Path) -> str:
    if not step.artifact_path:
        return "-"
    gone = "" if (root / file_of(step.artifact_path)).exists() else ", removed"
    return (f"{step.artifact_path} ({step.format}, {human_size(step.size_bytes)}"
            f"{gone})")


def _failure_text(conn: Connection, step: store.StepRow) -> str:
    attempts = step.attempts or 1
    head = (f"{step.step_id} failed after {attempts} attempt{'s' if attempts != 1 else ''}: "
            f"{step.error_type or 'Error'}: {first_line(step.error_message)}")
    lines = [head + (f" (worker ended: {step.worker_exit})" if step.worker_exit else "")]
    trace = (step.error_traceback or "").rstrip().splitlines()
    if trace:
        cut = trace[-TRACEBACK_LINES:]
        label = "Traceback" if len(cut) == len(trace) else f"Traceback (last {len(cut)} lines)"
        lines.append(f"  {label}:")
        lines += [f"    {line}" for line in cut]
    tail = store.output_tail(conn, step.run_id, step.call_step_id)
    if tail:
        lines.append(f"  Output (last {len(tail)} line{'s' if len(tail) != 1 else ''}):")
        lines += [f"    {line}" for line in tail]
    return printable_lines(lines)
