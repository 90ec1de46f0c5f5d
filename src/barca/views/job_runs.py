"""A schedule's job as the web UI's schedule page shows it: its last outcomes (the runs it
started, newest first, as the server lists runs, with the tick each answered)."""

from __future__ import annotations

from typing import Any

from barca.store.db import Connection
from barca.store.history_jobs import job_runs
from barca.views.server_runs import served_run_json
from barca.views.times import iso_time


def job_outcomes_json(conn: Connection | None, job_id: str, limit: int) -> list[dict[str, Any]]:
    if conn is None:
        return []
    return [{**served_run_json(row), "scheduled_at": iso_time(row.scheduled_at)}
            for row in job_runs(conn, job_id, limit)]
