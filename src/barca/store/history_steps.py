"""History queries about one run's steps and captured output: its executed steps (all, a
sample, per node, per batch call), the step ids it recorded, and its log lines.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

from barca.store.history_rows import (STEP_COLUMNS, STEP_WIDTH, CallSummary, LogRow, NodeSummary,
                                      StepRow)
from barca.store.history_table import ref


def count_steps(conn: sqlite3.Connection, run_id: str) -> int:
    return conn.execute("SELECT count(*) FROM executions WHERE run_ref = ?",
                        (ref(run_id),)).fetchone()[0]


def run_steps(conn: sqlite3.Connection, run_id: str, *, per_node: int | None = None,
              limit: int | None = None) -> list[StepRow]:
    """A run's executed steps, grouped by node in recording order, failures first in a node.

    per_node: at most this many keys of each node (of each batch call of a batched node);
    limit: at most this many steps overall (failures are kept before successes). Both None =
    every step.
    """
    ranked = (f"SELECT {STEP_COLUMNS}, ROW_NUMBER() OVER (PARTITION BY node_id, batch "
              "ORDER BY status = 'failed' DESC, id) AS rank_in_node, "
              "MIN(id) OVER (PARTITION BY node_id) AS node_first, "
              "MIN(id) OVER (PARTITION BY node_id, batch) AS call_first "
              "FROM materializations WHERE run_ref = ?")
    sql = f"SELECT * FROM ({ranked})"
    params: list = [ref(run_id)]
    if per_node is not None:
        sql += " WHERE rank_in_node <= ?"
        params.append(per_node)
    if limit is not None:
        sql = f"SELECT * FROM ({sql}) ORDER BY status = 'failed' DESC, id LIMIT ?"
        params.append(limit)
    rows = conn.execute(f"SELECT * FROM ({sql}) ORDER BY node_first, call_first, rank_in_node",
                        params).fetchall()
    return [StepRow(*row[:STEP_WIDTH]) for row in rows]


def step_sample(conn: sqlite3.Connection, run_id: str, node_ids: Sequence[str],
                n: int) -> list[StepRow]:
    """At most `n` executed steps of each node of a run, failures first: `run_steps` without
    ranking every row (a 200,000-key run: seconds)."""
    out: list[StepRow] = []
    for node_id in node_ids:
        taken: list[StepRow] = []
        for test in ("= 'failed'", "!= 'failed'"):
            if len(taken) >= n:
                break
            rows = conn.execute(f"SELECT {STEP_COLUMNS} FROM materializations WHERE "
                                f"run_ref = ? AND node_id = ? AND status {test} ORDER BY id "
                                "LIMIT ?", (ref(run_id), node_id, n - len(taken))).fetchall()
            taken.extend(StepRow(*r) for r in rows)
        out.extend(taken)
    return out


def node_summaries(conn: sqlite3.Connection, run_id: str) -> list[NodeSummary]:
    rows = conn.execute(
        "SELECT node_id, count(*), sum(status = 'failed'), coalesce(sum(elapsed_seconds), 0), "
        "CASE WHEN count(batch) THEN count(DISTINCT batch) ELSE count(*) END "
        "FROM materializations WHERE run_ref = ? GROUP BY node_id ORDER BY min(id)",
        (ref(run_id),)).fetchall()
    return [NodeSummary(n, k, f, round(e, 4), c) for n, k, f, e, c in rows]


def call_summaries(conn: sqlite3.Connection, run_id: str) -> dict[tuple[str, str], CallSummary]:
    """(node id, call id) -> the batch call's summary, for each call of the run."""
    rows = conn.execute(
        "SELECT node_id, batch, count(*), coalesce(sum(elapsed_seconds), 0), "
        "max(max_rss_bytes) FROM materializations WHERE run_ref = ? AND batch IS NOT NULL "
        "GROUP BY node_id, batch", (ref(run_id),)).fetchall()
    return {(n, b): CallSummary(n, b, k, round(e, 4), r) for n, b, k, e, r in rows}


def call_step_ids(conn: sqlite3.Connection, run_id: str, step_ids: Sequence[str]) -> list[str]:
    """The step ids with each key that ran in a batch call replaced by its call's, under which
    the call's output is logged once."""
    wanted = set(step_ids)
    rows = conn.execute("SELECT step_id, node_id, batch FROM materializations WHERE "
                        "run_ref = ? AND batch IS NOT NULL", (ref(run_id),)).fetchall()
    calls = {s: f"{n}[batch={b}]" for s, n, b in rows if s in wanted}
    return list(dict.fromkeys(calls.get(s, s) for s in step_ids))


def step_ids(conn: sqlite3.Connection, run_id: str) -> list[str]:
    """Every step id a run recorded a result or a log line for, in first-seen order."""
    rows = conn.execute(
        "SELECT step_id FROM (SELECT step_id, min(id) AS o, 0 AS src FROM materializations "
        "WHERE run_ref = ? GROUP BY step_id UNION ALL SELECT step_id, min(seq), 1 FROM logs "
        "WHERE run_id = ? GROUP BY step_id) ORDER BY src, o", (ref(run_id), run_id)).fetchall()
    return list(dict.fromkeys(r[0] for r in rows))


# -- logs -----------------------------------------------------------------------------------

def run_logs(conn: sqlite3.Connection, run_id: str, steps: Sequence[str] | None = None,
             stream: str | None = None, after: int = 0) -> list[LogRow]:
    """Captured lines in arrival order, optionally of some steps and one stream, and only
    those after line `after` (what a follower has not printed yet)."""
    sql = "SELECT seq, step_id, stream, ts, line FROM logs WHERE run_id = ? AND seq > ?"
    params: list = [run_id, after]
    if stream:
        sql += " AND stream = ?"
        params.append(stream)
    rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
    wanted = None if steps is None else set(steps)
    return [LogRow(*r) for r in rows if wanted is None or r[1] in wanted]


def last_logs(conn: sqlite3.Connection, run_id: str, n: int) -> list[LogRow]:
    """A run's last `n` captured lines, in arrival order."""
    rows = conn.execute("SELECT seq, step_id, stream, ts, line FROM logs WHERE run_id = ? "
                        "ORDER BY seq DESC LIMIT ?", (run_id, n)).fetchall()
    return [LogRow(*r) for r in reversed(rows)]


def output_tail(conn: sqlite3.Connection, run_id: str, step_id: str, n: int = 20) -> list[str]:
    rows = conn.execute("SELECT line FROM logs WHERE run_id = ? AND step_id = ? "
                        "ORDER BY seq DESC LIMIT ?", (run_id, step_id, n)).fetchall()
    return [r[0] for r in reversed(rows)]
