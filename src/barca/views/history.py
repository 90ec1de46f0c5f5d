"""Runs as users see them: the run rows of `barca history`, one run with its steps, the
search among runs; the same JSON for the CLI, `barca.history()` and the server's history
routes."""

from __future__ import annotations

import sqlite3
from typing import Any

from barca.errors import UsageError
from barca.project import Project, open_project
from barca.store import history as store
from barca.store.db import connect
from barca.views.listing import listing, pick_fields
from barca.views.times import iso_time

RUN_FIELDS = ["run_id", "command", "files", "target", "job", "status", "steps_total",
              "steps_executed", "steps_cached", "attempts", "started_at", "finished_at",
              "elapsed_seconds", "triggered_by", "scheduled_at", "schedule_id", "failed_node",
              "error", "failure"]
DEFAULT_RUNS = 10
RUN_STATUSES = ("running", "success", "failed", "cancelled", "interrupted")
# who started a run, as recorded; `manual` (0.33's word) is a person's: cli or python
TRIGGERS = ("cli", "python", "api", "schedule", "catch_up", "manual")


def open_history(env_name: str | None) -> tuple[Project, sqlite3.Connection | None]:
    """The project and its metadata database, None when nothing was ever recorded."""
    project = open_project(env_name)
    conn = connect(project.db_path, create=False)
    if conn is not None:
        store.reconcile_interrupted(conn)
    return project, conn


def find_run(conn: sqlite3.Connection | None, text: str, env_name: str | None
             ) -> store.RunRow:
    """The run an id (or a unique prefix of one) names; exit 2 otherwise."""
    where = f" in environment '{env_name}'" if env_name else ""
    matches = store.match_runs(conn, text) if conn is not None else []
    if len(matches) > 1:
        raise UsageError(f"run id '{text}' is ambiguous: {', '.join(matches)}",
                         "pass more characters of the run id")
    if not matches:
        raise UsageError(f"unknown run id '{text}'{where}",
                         "run `barca history` to list recorded runs and their ids")
    run = store.get_run(conn, matches[0])
    assert run is not None
    return run


def run_json(run: store.RunRow) -> dict[str, Any]:
    """A run as `history --json` lists it. `job`: its resolved targets (sorted node ids, `all`
    without a target; null for runs recorded before barca kept it). `attempts`: how many times
    the run was started: 1, since barca never starts a run twice under one id (one cut short
    stays `interrupted`; running it again is a new run), 0 for a run a server had queued and
    closed before it started. `triggered_by`: cli, python, api, schedule or catch_up (null for
    runs recorded before barca kept it). A run a schedule started has `schedule_id` (the
    schedules' job ids, comma-separated when several were due together) and `scheduled_at`
    (the tick); both are null for every other run. Moments as all JSON writes them
    (`views.times.iso_time`)."""
    failure = {"node": run.failed_node, "error": run.error} if run.failed_node else None
    return {"run_id": run.run_id, "command": run.command, "files": list(run.files),
            "target": run.target, "job": run.job, "status": run.status,
            "steps_total": run.steps_total, "steps_executed": run.steps_executed,
            "steps_cached": run.steps_cached, "attempts": int(run.started),
            "started_at": iso_time(run.started_at),
            "finished_at": iso_time(run.finished_at),
            "elapsed_seconds": _round(run.elapsed_seconds), "triggered_by": run.triggered_by,
            "scheduled_at": iso_time(run.scheduled_at),
            "schedule_id": run.schedule_id, "failed_node": run.failed_node,
            "error": run.error, "failure": failure}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def select_runs(conn: sqlite3.Connection | None, limit: int | None,
                statuses: list[str] | None = None, since: float | None = None,
                target: str | None = None, triggered_by: list[str] | None = None
                ) -> tuple[list[store.RunRow], int]:
    """The newest `limit` runs (None: all) of these statuses, started since `since`, naming
    `target`, started by one of `triggered_by` (TRIGGERS); and how many match in all."""
    if conn is None:
        return [], 0
    if target or triggered_by:  # matched on each run's row: filtered here
        who = set(triggered_by or ())
        if "manual" in who:
            who |= {"cli", "python"}
        runs = [r for r in store.list_runs(conn, None, statuses, since)
                if (not target or _names_target(r.target, target))
                and (not who or r.triggered_by in who)]
        return (runs[:limit] if limit else runs), len(runs)
    return (store.list_runs(conn, limit, statuses, since),
            store.count_matching_runs(conn, statuses, since))


def runs_json(runs: list[store.RunRow], total: int,
              fields: list[str] | None = None) -> dict[str, Any]:
    """`history --json` without a run id (and `barca.history()`)."""
    return listing({}, "runs", pick_fields([run_json(r) for r in runs], fields), total, "runs")


def _names_target(target: str | None, name: str) -> bool:
    """Whether a run's target text (`a,b`, names or ids as typed) names `name`."""
    for item in (target or "").split(","):
        if name in (item, item.rpartition(":")[2]) or item == name.rpartition(":")[2] \
                and ":" not in item:
            return True
    return False


def partition_key(step: store.StepRow) -> str | None:
    """The key label of a step (`retailer=r7`), None for an unpartitioned node."""
    if step.step_id == step.node_id:
        return None
    return step.step_id[len(step.node_id) + 1:-1]


def step_json(conn: sqlite3.Connection, step: store.StepRow) -> dict[str, Any]:
    failed = step.status == "failed"
    error = f"{step.error_type}: {step.error_message}" if failed and step.error_type else (
        step.error_message if failed else None)
    out = {"step_id": step.step_id, "node_id": step.node_id,
           "partition_key": partition_key(step), "status": step.status,
           "attempts": step.attempts, "elapsed_seconds": _round(step.elapsed_seconds),
           "cpu_seconds": _round(step.cpu_seconds), "max_rss_bytes": step.max_rss_bytes, "run_hash": step.run_hash,
           "artifact_path": step.artifact_path, "artifact_format": step.format,
           "artifact_size_bytes": step.size_bytes, "error": error,
           "error_type": step.error_type, "error_message": step.error_message,
           "error_traceback": step.error_traceback, "worker_exit": step.worker_exit,
           "batch": step.batch,
           "created_at": iso_time(step.created_at)}
    if failed:
        out["output_tail"] = store.output_tail(conn, step.run_id, step.call_step_id)
    return out


def recorded_run_json(conn: sqlite3.Connection | None, run_id: str, limit: int | None
                      ) -> dict[str, Any] | None:
    """`run_detail_json` of the run recorded as `run_id` (a server's `/history/{run_id}`, which
    has matched the id already); None when no row has it."""
    run = store.get_run(conn, run_id) if conn is not None else None
    return None if run is None else run_detail_json(conn, run, limit)


def run_detail_json(conn: sqlite3.Connection, run: store.RunRow, limit: int | None
                    ) -> dict[str, Any]:
    """`history RUN_ID --json`: the run, its first `limit` steps (None: all), per-node totals."""
    total = store.count_steps(conn, run.run_id)
    summaries = store.node_summaries(conn, run.run_id)
    steps = store.run_steps(conn, run.run_id, limit=limit)
    page = {"total": total, "truncated": len(steps) < total,
            "nodes": [{"node_id": s.node_id, "keys": s.keys, "failed": s.failed,
                       "elapsed_seconds": s.elapsed_seconds, "calls": s.calls}
                      for s in summaries]}
    body: dict[str, Any] = {"run": run_json(run), "steps": [step_json(conn, s) for s in steps],
                            "steps_page": page}
    if page["truncated"]:
        body["hint"] = f"pass --limit N for more, or omit --limit for all {total} steps"
    return body
