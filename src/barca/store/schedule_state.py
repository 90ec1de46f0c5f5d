"""When `barca serve` last fired each scheduled job: what lets a restart catch up on a missed
tick once, and never fire a job it has not seen before."""

from __future__ import annotations

import sqlite3
import time
from typing import Iterable, NamedTuple

from barca.store.db import write_transaction


class Fired(NamedTuple):
    cron: str
    timezone: str
    last_fired: float  # epoch of the instant last fired, or of when the job was first seen
    last_run_id: str | None


def load(conn: sqlite3.Connection) -> dict[str, Fired]:
    rows = conn.execute("SELECT job_id, cron, timezone, last_fired, last_run_id "
                        "FROM schedule_state").fetchall()
    return {job: Fired(cron, zone, fired, run) for job, cron, zone, fired, run in rows}


def record(conn: sqlite3.Connection, fired: Iterable[tuple[str, Fired]]) -> None:
    """Write these jobs' fires in one transaction."""
    now = time.time()
    with write_transaction(conn):
        conn.executemany(
            "INSERT INTO schedule_state (job_id, cron, timezone, last_fired, last_run_id, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET "
            "cron = excluded.cron, timezone = excluded.timezone, "
            "last_fired = excluded.last_fired, last_run_id = excluded.last_run_id, "
            "updated_at = excluded.updated_at",
            [(job, f.cron, f.timezone, f.last_fired, f.last_run_id, now) for job, f in fired])
