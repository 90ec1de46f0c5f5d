"""A node as the server's pages show it: its counts and recent timings (`GET /assets/{id}`),
its durations and next fire beside its `barca status` entry (`GET /state`), the pages of a
partitioned node's keys with its failures grouped (`GET /assets/{id}/partitions`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import barca.store.history as history
from barca.store.db import Connection
from barca.store.partition_pages import PartitionPages
from barca.store.snapshot import current as current_snapshot
from barca.discover.model import Definition
from barca.planner.keys import dimension_names, label_of
from barca.views.failure_groups import merged_key_failures
from barca.views.history import partition_key
from barca.views.reader import open_reader
from barca.views.times import iso_time


def node_stats(conn: Connection | None, node_id: str) -> dict:
    """Counts, recent timings and the last executions of a node (`barca stats` has the rest:
    its re-execution rate reads every row, too slow for a page that opens at each click).
    An execution's `key` is its label (`retailer=r7`), null for an unpartitioned node."""
    total, failed, recent = history.node_summary(conn, node_id) if conn else (0, 0, [])
    durations = history.recent_durations(conn, node_id) if conn else []
    return {"node_id": node_id, "total_runs": total, "failures": failed,
            "cache_hit_rate": None, "median_elapsed_seconds": history.median(durations),
            "p95_elapsed_seconds": history.percentile(durations, 0.95),
            "recent_runs": [{"key": partition_key(s), "status": s.status,
                             "elapsed_seconds": s.elapsed_seconds,
                             "created_at": iso_time(s.created_at),
                             "error_message": s.error_message,
                             "attempts": s.attempts} for s in recent]}


def with_timings(conn: Connection | None, nodes: list[dict],
                 next_runs: dict[str, str]) -> list[dict]:
    """Each `barca status` entry plus `durations` (median and p95 of the last 20 successful
    executions) and `next_run` (its next scheduled fire, as `/schedule` writes it)."""
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

    def page(self, node: Definition, status: str | None = None, q: str | None = None,
             offset: int = 0, limit: int = 100, error: str | None = None) -> dict:
        """A page of keys by key order (`store.partition_pages`: `failures` by the first line
        of their error, `?error=` names one), plus `failure_groups` as the UI shows them
        (`views.failure_groups`) and `failed_ungrouped`, the failed keys in none of them.
        Every key is written as its label (`retailer=r7`, `day=d1,region=eu`), every moment
        by `iso_time`; `q` finds keys by their value or, holding `=`, by their label."""
        dims = dimension_names(node)
        page = self.pages.page(node.node_id, status, q, offset, limit, error, dims)
        groups, grouped = merged_key_failures(page["failures"])  # on raw keys: values quoted
        keys = [{**k, "key": _label(dims, k["key"]), "created_at": iso_time(k["created_at"])}
                for k in page["keys"]]
        return {**page, "keys": keys, "failures": _labelled(page["failures"], dims),
                "failure_groups": _labelled(groups, dims),
                "failed_ungrouped": page["failed"] - grouped}

    def close(self) -> None:
        self.pages.close()


def _labelled(groups: list[dict], dims: Sequence[str]) -> list[dict]:
    """Failure groups with their `sample_keys` written as labels."""
    return [{**g, "sample_keys": [_label(dims, k) for k in g["sample_keys"]]} for g in groups]


def _label(dims: Sequence[str], key: str) -> str:
    """A key's label; a key recorded while the node had one dimension, now it has several,
    as it was recorded."""
    try:
        return label_of(dims, key)
    except (ValueError, TypeError):  # not a JSON list
        return key
