"""One node's executions as users see them: `barca stats`, `barca.stats()` and the server's
stats route."""

from __future__ import annotations

from typing import Any, Sequence

from barca.engine.driver import open_pipeline
from barca.store import history as store
from barca.store.db import Connection, connect
from barca.views.history import partition_key
from barca.views.times import iso_time

RECENT_FIELDS = ["run_id", "partition_key", "elapsed_seconds", "status", "created_at",
                 "error_message", "attempts", "cpu_seconds", "max_rss_bytes"]


def node_stats_json(target: str, files: Sequence[str], env_name: str | None
                    ) -> dict[str, Any]:
    """`barca stats TARGET FILES --json`: the target's executions in environment `env_name`."""
    loaded = open_pipeline(list(files), env_name)
    node_id = loaded.graph.resolve_target(target)
    conn = connect(loaded.project.db_path, create=False)
    return recorded_stats_json(conn, node_id, loaded.graph.nodes[node_id].kind)


def recorded_stats_json(conn: Connection | None, node_id: str, kind: str) -> dict[str, Any]:
    """The executions of `node_id` (of this `kind`) the database `conn` recorded (None: none
    ever was): what `node_stats_json` answers once the target is resolved, and what a server
    answers from its own graph."""
    stats = store.node_stats(conn, node_id) if conn is not None else store.NodeStats(
        node_id, 0, 0, 0, (), (), ())
    return stats_json(stats, kind)


def stats_json(stats: store.NodeStats, kind: str) -> dict[str, Any]:
    elapsed = stats.elapsed
    return {"id": stats.node_id, "kind": kind, "total_runs": stats.total_runs,
            "failures": stats.failures, "rerun_rate": stats.rerun_rate,
            "cache_hit_rate": None,
            "avg_elapsed_seconds": _r(sum(elapsed) / len(elapsed) if elapsed else None),
            "median_elapsed_seconds": _r(store.median(elapsed)),
            "p95_elapsed_seconds": _r(store.percentile(elapsed, 0.95)),
            "max_elapsed_seconds": _r(max(elapsed) if elapsed else None),
            "max_rss_bytes": max(stats.rss) if stats.rss else None,
            "median_max_rss_bytes": _int(store.median(stats.rss)),
            "recent_runs": [_recent(s) for s in stats.recent]}


def _recent(step: store.StepRow) -> dict[str, Any]:
    """An execution; `cpu_seconds` is the worker's CPU time over its attempts, null for
    executions recorded before barca kept it, a key of a batch call (the call's CPU is not
    split among its keys) and a step whose worker died."""
    return {"run_id": step.run_id, "partition_key": partition_key(step),
            "elapsed_seconds": _r(step.elapsed_seconds), "status": step.status,
            "created_at": iso_time(step.created_at),
            "error_message": step.error_message if step.status == "failed" else None,
            "attempts": step.attempts, "cpu_seconds": _r(step.cpu_seconds),
            "max_rss_bytes": step.max_rss_bytes}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
