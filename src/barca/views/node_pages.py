"""A node as the server's pages show it: its counts and recent timings (`GET /assets/{id}`),
its durations and next fire beside its `barca status` entry (`GET /state`), the pages of a
partitioned node's keys with its failures grouped (`GET /assets/{id}/partitions`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import barca.store.history as history
from barca.store.db import Connection
from barca.store.partition_pages import PartitionPages
from barca.store.snapshot import current as current_snapshot
from barca.views.failure_groups import merged_key_failures
from barca.views.reader import open_reader


def node_stats(conn: Connection | None, node_id: str) -> dict:
    """Counts, recent timings and the last executions of a node (`barca stats` has the rest:
    its re-execution rate reads every row, too slow for a page that opens at each click)."""
    total, failed, recent = history.node_summary(conn, node_id) if conn else (0, 0, [])
    durations = history.recent_durations(conn, node_id) if conn else []
    return {"node_id": node_id, "total_runs": total, "failures": failed,
            "cache_hit_rate": None, "median_elapsed_seconds": history.median(durations),
            "p95_elapsed_seconds": history.percentile(durations, 0.95),
            "recent_runs": [{"key": s.key, "status": s.status,
                             "elapsed_seconds": s.elapsed_seconds,
                             "created_at": s.created_at, "error_message": s.error_message,
                             "attempts": s.attempts} for s in recent]}


def with_timings(conn: Connection | None, nodes: list[dict],
                 next_runs: dict[str, int]) -> list[dict]:
    """Each `barca status` entry plus `durations` (median and p95 of the last 20 successful
    executions) and `next_run` (epoch of its next scheduled fire)."""
    out = []
    for node in nodes:
        recent = history.recent_durations(conn, node["id"]) if conn is not None else []
        durations = {"median_seconds": history.median(recent),
                     "p95_seconds": history.percentile(recent, 0.95),
                     "samples": len(recent)} if recent else None
        out.append({**node, "durations": durations, "next_run": next_runs.get(node["id"])})
    return out


def recorded_stamp(conn: Connection | None) -> Any:
    """What changes whenever anything is recorded: the status entries are stale when it
    does."""
    return history.changed_stamp(conn) if conn is not None else None


class KeyPages:
    """The pages of partitioned nodes' keys, over a connection of their own (a read-only
    server's follows the newest snapshot)."""

    def __init__(self, db_path: Path, read_only: bool) -> None:
        self.pages = PartitionPages(lambda: open_reader(db_path, read_only),
                                    (lambda: current_snapshot(db_path)) if read_only else None)

    def page(self, node_id: str, status: str | None = None, q: str | None = None,
             offset: int = 0, limit: int = 100, error: str | None = None) -> dict:
        """A page of keys by key order (`store.partition_pages`: `failures` by the first line
        of their error, `?error=` names one), plus `failure_groups` as the UI shows them
        (`views.failure_groups`) and `failed_ungrouped`, the failed keys in none of them."""
        page = self.pages.page(node_id, status, q, offset, limit, error)
        groups, grouped = merged_key_failures(page["failures"])
        return {**page, "failure_groups": groups, "failed_ungrouped": page["failed"] - grouped}

    def close(self) -> None:
        self.pages.close()
