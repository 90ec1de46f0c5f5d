"""What an operator set on `barca serve` that must outlive the process: the run queue paused,
a schedule paused (until a moment, or until resumed; or by itself, after `max_failures` failed
ticks in a row, with the reason), and each schedule's count of failed ticks in a row (what
makes it pause itself, whether the server restarts between ticks or not). One row a setting
in `server_state`,
its value JSON; no row is the default (running). A restarted server reads them before it
starts a run or fires a job, so a pause holds across a restart, a crash or a machine reboot.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import orjson

from barca.store.db import write_transaction

QUEUE = "queue"
SCHEDULE_PREFIX = "schedule:"
FAILURES_PREFIX = "failures:"


def load(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Every setting by name (`queue`, `schedule:<job id>`, `failures:<job id>`)."""
    rows = conn.execute("SELECT name, value FROM server_state").fetchall()
    return {name: orjson.loads(value) for name, value in rows}


def put(conn: sqlite3.Connection, name: str, value: dict[str, Any] | None) -> None:
    """Set a setting (None: back to the default, the row goes)."""
    with write_transaction(conn):
        if value is None:
            conn.execute("DELETE FROM server_state WHERE name = ?", (name,))
        else:
            conn.execute("INSERT INTO server_state (name, value, updated_at) VALUES (?, ?, ?) "
                         "ON CONFLICT (name) DO UPDATE SET value = excluded.value, "
                         "updated_at = excluded.updated_at",
                         (name, orjson.dumps(value).decode(), time.time()))
