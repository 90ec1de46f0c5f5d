"""History queries about one node across runs: its executions, their times and memory, its
newest result, and the percentiles `barca stats` reports over them.
"""

from __future__ import annotations

import sqlite3
import statistics
from typing import Sequence

from barca.store.history_rows import STEP_COLUMNS, NodeStats, StepRow
from barca.store.history_table import ref


def node_stats(conn: sqlite3.Connection, node_id: str, recent: int = 10) -> NodeStats:
    """Every execution of a node (each key counts once per run it ran in), oldest first."""
    rows = conn.execute(f"SELECT {STEP_COLUMNS} FROM materializations WHERE node_id = ? "
                        "ORDER BY id", (node_id,)).fetchall()
    steps = [StepRow(*r) for r in rows]
    seen: set[tuple[str, str]] = set()
    repeated = 0
    for step in steps:
        pair = (step.key, step.run_hash)
        repeated += pair in seen
        seen.add(pair)
    ok = [s for s in steps if s.status == "success"]
    return NodeStats(node_id, len(steps), len(steps) - len(ok), repeated,
                     tuple(s.elapsed_seconds for s in ok if s.elapsed_seconds is not None),
                     tuple(s.max_rss_bytes for s in steps if s.max_rss_bytes is not None),
                     tuple(reversed(steps[-recent:])))


def node_summary(conn: sqlite3.Connection, node_id: str, recent: int = 10
                 ) -> tuple[int, int, list[StepRow]]:
    """(executions, failed executions, the newest `recent`) of a node, by index: what a
    server shows of a node each time it is opened, without `node_stats`' read of every row."""
    total = conn.execute("SELECT count(*) FROM materializations WHERE node_id = ?",
                         (node_id,)).fetchone()[0]
    failed = conn.execute("SELECT count(*) FROM materializations WHERE node_id = ? AND "
                          "status = 'failed'", (node_id,)).fetchone()[0]
    rows = conn.execute(f"SELECT {STEP_COLUMNS} FROM materializations WHERE node_id = ? "
                        "ORDER BY id DESC LIMIT ?", (node_id, recent)).fetchall()
    return total, failed, [StepRow(*r) for r in rows]


def last_materializations(conn: sqlite3.Connection, node_ids: Sequence[str]
                           ) -> dict[str, StepRow]:
    """Each node's newest execution. For a partitioned node, of the keys its newest run
    executed: a failed one first, then the first by key, so that the answer does not depend on
    which key a worker happened to finish last."""
    out = {}
    for node_id in node_ids:
        row = conn.execute(f"SELECT {STEP_COLUMNS} FROM materializations WHERE node_id = ? "
                           "ORDER BY id DESC LIMIT 1", (node_id,)).fetchone()
        if row is None:
            continue
        step = StepRow(*row)
        if step.step_id != step.node_id:
            step = StepRow(*conn.execute(
                f"SELECT {STEP_COLUMNS} FROM materializations WHERE run_ref = ? AND "
                "node_id = ? ORDER BY status = 'failed' DESC, step_id LIMIT 1",
                (ref(step.run_id), node_id)).fetchone())
        out[node_id] = step
    return out


def recent_durations(conn: sqlite3.Connection, node_id: str, n: int = 20) -> list[float]:
    """The times of a node's last `n` successful executions (keys count one each), newest
    first: an index scan from the end, however long the history."""
    rows = conn.execute("SELECT elapsed_seconds FROM materializations WHERE node_id = ? AND "
                        "status = 'success' AND elapsed_seconds IS NOT NULL ORDER BY id DESC "
                        "LIMIT ?", (node_id, n)).fetchall()
    return [r[0] for r in rows]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks; None for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5)
    2.5
    """
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None
