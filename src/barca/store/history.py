"""Read queries behind the inspect commands: runs, one run's steps, captured logs, node stats.

Also decides whether a `running` row is really running: a row whose process is gone (killed,
out of memory, machine rebooted) is shown as `interrupted`, and written so when the database
is writable. Only rows from this host are judged; a pid is matched with its kernel start time
so that a reused pid is not mistaken for the run's owner.

Everything here returns plain data; sentences and tables belong to `barca.cli`. Nothing here
creates the database: callers pass the connection `db.connect(create=False)` gave them.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from dataclasses import dataclass
from typing import Sequence

import orjson

from barca.store.owners import owner_gone

_RUN_COLUMNS = ("run_id, command, files, target, status, steps_total, steps_executed, "
                "steps_cached, started_at, finished_at, elapsed_seconds, pid, host, proc_start, "
                "failed_node, error, triggered_by, job, schedule_id, scheduled_at")
_STEP_COLUMNS = ("id, run_id, step_id, node_id, key, status, attempts, elapsed_seconds, "
                 "max_rss_bytes, run_hash, artifact_path, format, size_bytes, error_type, "
                 "error_message, error_traceback, batch, created_at, worker_exit, cpu_seconds")
_STEP_WIDTH = 20  # StepRow's fields: the columns above


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    command: str
    files: tuple[str, ...]
    target: str | None
    status: str  # running | success | failed | cancelled | interrupted
    steps_total: int | None
    steps_executed: int | None
    steps_cached: int | None
    started_at: float
    finished_at: float | None
    elapsed_seconds: float | None
    failed_node: str | None
    error: str | None
    triggered_by: str | None  # cli, python, api, schedule, catch_up; None before schema 6
    job: str | None  # the resolved targets, sorted ids or `all`; None before schema 9
    schedule_id: str | None  # the schedules (job ids) that started it; None unless scheduled
    scheduled_at: float | None  # the tick that started it
    started: bool  # its process started it (a queued run closed unstarted did not)


@dataclass(frozen=True, slots=True)
class StepRow:
    """One executed step (a materialization row): a node, or one key of a partitioned node."""

    id: int
    run_id: str
    step_id: str
    node_id: str
    key: str
    status: str  # success | failed
    attempts: int | None
    elapsed_seconds: float | None
    max_rss_bytes: int | None
    run_hash: str
    artifact_path: str | None
    format: str | None
    size_bytes: int | None
    error_type: str | None
    error_message: str | None
    error_traceback: str | None
    batch: str | None
    created_at: float
    worker_exit: str | None  # how the worker died during the step ("SIGSEGV", "code 3")
    cpu_seconds: float | None  # the worker's CPU time; None before schema 9 and for batch keys

    @property
    def call_step_id(self) -> str:
        """Where the step's output is logged: its batch call's id for a key run in a call."""
        return self.step_id if self.batch is None else f"{self.node_id}[batch={self.batch}]"


@dataclass(frozen=True, slots=True)
class LogRow:
    seq: int
    step_id: str
    stream: str
    ts: float
    line: str


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """A node's steps within one run: keys executed, keys failed, summed time, and the calls
    they ran in (one per key for a node that is not batched)."""

    node_id: str
    keys: int
    failed: int
    elapsed_seconds: float
    calls: int


@dataclass(frozen=True, slots=True)
class CallSummary:
    """A batch call within one run: its keys, their summed time, the call's peak memory."""

    node_id: str
    batch: str
    keys: int
    elapsed_seconds: float
    max_rss_bytes: int | None


@dataclass(frozen=True, slots=True)
class NodeStats:
    node_id: str
    total_runs: int
    failures: int
    repeated: int  # executions whose run hash had already been executed before
    elapsed: tuple[float, ...]  # of successful executions, oldest first
    rss: tuple[int, ...]
    recent: tuple[StepRow, ...]  # newest first

    @property
    def rerun_rate(self) -> float | None:
        """Share of executions that repeated an earlier run hash: work a cache could have
        served. Not a cache hit rate: cache hits execute nothing, so they are not rows here."""
        return None if not self.total_runs else round(self.repeated / self.total_runs, 4)


# -- runs -----------------------------------------------------------------------------------

def reconcile_interrupted(conn: sqlite3.Connection) -> list[str]:
    """Mark `running` rows whose process is gone as `interrupted`; returns their ids.

    A database that cannot be written right now (read-only, or locked for long) is left as
    it is: readers still show those rows as interrupted.
    """
    rows = conn.execute("SELECT run_id, pid, host, proc_start FROM runs "
                        "WHERE status = 'running'").fetchall()
    gone = [run_id for run_id, pid, host, start in rows if owner_gone(pid, host, start)]
    if not gone:
        return []
    try:
        conn.execute("PRAGMA busy_timeout = 2000")
        conn.executemany("UPDATE runs SET status = 'interrupted' "
                         "WHERE run_id = ? AND status = 'running'", [(r,) for r in gone])
    except sqlite3.Error:
        pass
    finally:
        conn.execute("PRAGMA busy_timeout = 60000")
    return gone


def mark_cancelled(conn: sqlite3.Connection, run_ids: Sequence[str]) -> None:
    """Close runs whose process was killed before it could record its end (a server that
    stops kills what does not stop in time)."""
    conn.executemany("UPDATE runs SET status = 'cancelled', finished_at = ?, "
                     "error = 'run cancelled' WHERE run_id = ? AND status = 'running'",
                     [(time.time(), r) for r in run_ids])


def count_runs(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def list_runs(conn: sqlite3.Connection, limit: int | None,
              statuses: Sequence[str] | None = None, since: float | None = None,
              offset: int = 0) -> list[RunRow]:
    """Newest first, past the first `offset`; `limit` None = every run; only these statuses,
    started at or after `since` (epoch seconds) when given. `interrupted` rows are stored as
    such once seen."""
    where, args = _run_filter(statuses, since)
    sql = f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY started_at DESC, rowid DESC"
    args = [*args, limit or -1, offset]
    return [_run_row(conn, row) for row in conn.execute(sql + " LIMIT ? OFFSET ?",
                                                         args).fetchall()]


def count_matching_runs(conn: sqlite3.Connection, statuses: Sequence[str] | None,
                        since: float | None) -> int:
    where, args = _run_filter(statuses, since)
    return conn.execute(f"SELECT count(*) FROM runs{where}", args).fetchone()[0]


def _run_filter(statuses: Sequence[str] | None, since: float | None) -> tuple[str, list]:
    clauses, args = [], []
    if statuses:
        clauses.append(f"status IN ({','.join('?' * len(statuses))})")
        args += list(statuses)
    if since is not None:
        clauses.append("started_at >= ?")
        args.append(since)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def recorded_runs(conn: sqlite3.Connection, run_ids: list[str]) -> set[str]:
    """Which of `run_ids` have a row."""
    marks = ",".join("?" * len(run_ids))
    return {r[0] for r in conn.execute(
        f"SELECT run_id FROM runs WHERE run_id IN ({marks})", run_ids)} if run_ids else set()


def match_runs(conn: sqlite3.Connection, text: str) -> list[str]:
    """Run ids equal to `text`, else those starting with it (a unique prefix is enough)."""
    exact = conn.execute("SELECT run_id FROM runs WHERE run_id = ?", (text,)).fetchall()
    if exact or len(text) < 4:
        return [r[0] for r in exact]
    like = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = conn.execute("SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' "
                        "ORDER BY started_at DESC LIMIT 10", (like,)).fetchall()
    return [r[0] for r in rows]


def get_run(conn: sqlite3.Connection, run_id: str) -> RunRow | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    return _run_row(conn, row) if row else None


def newest_run(conn: sqlite3.Connection) -> RunRow | None:
    runs = list_runs(conn, 1)
    return runs[0] if runs else None


def _run_row(conn: sqlite3.Connection, row: tuple) -> RunRow:
    (run_id, command, files, target, status, total, executed, cached, started, finished,
     elapsed, pid, host, start, failed_node, error, triggered_by, job, schedule_id,
     scheduled_at) = row
    if status == "running" and owner_gone(pid, host, start):
        status = "interrupted"
    if executed is None:  # still running, or never finished: count what it recorded
        executed = conn.execute("SELECT count(*) FROM materializations WHERE run_id = ?",
                                (run_id,)).fetchone()[0]
    return RunRow(run_id, command, tuple(orjson.loads(files or "[]")), target, status, total,
                  executed, cached, started, finished, elapsed, failed_node, error,
                  triggered_by, job, schedule_id, scheduled_at, pid is not None)


# -- steps ----------------------------------------------------------------------------------

def count_steps(conn: sqlite3.Connection, run_id: str) -> int:
    return conn.execute("SELECT count(*) FROM materializations WHERE run_id = ?",
                        (run_id,)).fetchone()[0]


def run_steps(conn: sqlite3.Connection, run_id: str, *, per_node: int | None = None,
              limit: int | None = None) -> list[StepRow]:
    """A run's executed steps, grouped by node in recording order, failures first in a node.

    per_node: at most this many keys of each node (of each batch call of a batched node);
    limit: at most this many steps overall (failures are kept before successes). Both None =
    every step.
    """
    where = "run_id = ?"
    ranked = (f"SELECT {_STEP_COLUMNS}, ROW_NUMBER() OVER (PARTITION BY node_id, batch "
              "ORDER BY status = 'failed' DESC, id) AS rank_in_node, "
              "MIN(id) OVER (PARTITION BY node_id) AS node_first, "
              "MIN(id) OVER (PARTITION BY node_id, batch) AS call_first "
              f"FROM materializations WHERE {where}")
    sql = f"SELECT * FROM ({ranked})"
    params: list = [run_id]
    if per_node is not None:
        sql += " WHERE rank_in_node <= ?"
        params.append(per_node)
    if limit is not None:
        sql = f"SELECT * FROM ({sql}) ORDER BY status = 'failed' DESC, id LIMIT ?"
        params.append(limit)
    rows = conn.execute(f"SELECT * FROM ({sql}) ORDER BY node_first, call_first, rank_in_node",
                        params).fetchall()
    return [StepRow(*row[:_STEP_WIDTH]) for row in rows]


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
            rows = conn.execute(f"SELECT {_STEP_COLUMNS} FROM materializations WHERE "
                                f"run_id = ? AND node_id = ? AND status {test} ORDER BY id "
                                "LIMIT ?", (run_id, node_id, n - len(taken))).fetchall()
            taken.extend(StepRow(*r) for r in rows)
        out.extend(taken)
    return out


def node_summaries(conn: sqlite3.Connection, run_id: str) -> list[NodeSummary]:
    rows = conn.execute(
        "SELECT node_id, count(*), sum(status = 'failed'), coalesce(sum(elapsed_seconds), 0), "
        "CASE WHEN count(batch) THEN count(DISTINCT batch) ELSE count(*) END "
        "FROM materializations WHERE run_id = ? GROUP BY node_id ORDER BY min(id)",
        (run_id,)).fetchall()
    return [NodeSummary(n, k, f, round(e, 4), c) for n, k, f, e, c in rows]


def call_summaries(conn: sqlite3.Connection, run_id: str) -> dict[tuple[str, str], CallSummary]:
    """(node id, call id) -> the batch call's summary, for each call of the run."""
    rows = conn.execute(
        "SELECT node_id, batch, count(*), coalesce(sum(elapsed_seconds), 0), "
        "max(max_rss_bytes) FROM materializations WHERE run_id = ? AND batch IS NOT NULL "
        "GROUP BY node_id, batch", (run_id,)).fetchall()
    return {(n, b): CallSummary(n, b, k, round(e, 4), r) for n, b, k, e, r in rows}


def call_step_ids(conn: sqlite3.Connection, run_id: str, step_ids: Sequence[str]) -> list[str]:
    """The step ids with each key that ran in a batch call replaced by its call's, under which
    the call's output is logged once."""
    wanted = set(step_ids)
    rows = conn.execute("SELECT step_id, node_id, batch FROM materializations WHERE run_id = ? "
                        "AND batch IS NOT NULL", (run_id,)).fetchall()
    calls = {s: f"{n}[batch={b}]" for s, n, b in rows if s in wanted}
    return list(dict.fromkeys(calls.get(s, s) for s in step_ids))


def step_ids(conn: sqlite3.Connection, run_id: str) -> list[str]:
    """Every step id a run recorded a result or a log line for, in first-seen order."""
    rows = conn.execute(
        "SELECT step_id FROM (SELECT step_id, min(id) AS o, 0 AS src FROM materializations "
        "WHERE run_id = ? GROUP BY step_id UNION ALL SELECT step_id, min(seq), 1 FROM logs "
        "WHERE run_id = ? GROUP BY step_id) ORDER BY src, o", (run_id, run_id)).fetchall()
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


# -- stats ----------------------------------------------------------------------------------

def node_stats(conn: sqlite3.Connection, node_id: str, recent: int = 10) -> NodeStats:
    """Every execution of a node (each key counts once per run it ran in), oldest first."""
    rows = conn.execute(f"SELECT {_STEP_COLUMNS} FROM materializations WHERE node_id = ? "
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
    rows = conn.execute(f"SELECT {_STEP_COLUMNS} FROM materializations WHERE node_id = ? "
                        "ORDER BY id DESC LIMIT ?", (node_id, recent)).fetchall()
    return total, failed, [StepRow(*r) for r in rows]


def last_materializations(conn: sqlite3.Connection, node_ids: Sequence[str]
                           ) -> dict[str, StepRow]:
    """Each node's newest execution. For a partitioned node, of the keys its newest run
    executed: a failed one first, then the first by key, so that the answer does not depend on
    which key a worker happened to finish last."""
    out = {}
    for node_id in node_ids:
        row = conn.execute(f"SELECT {_STEP_COLUMNS} FROM materializations WHERE node_id = ? "
                           "ORDER BY id DESC LIMIT 1", (node_id,)).fetchone()
        if row is None:
            continue
        step = StepRow(*row)
        if step.step_id != step.node_id:
            step = StepRow(*conn.execute(
                f"SELECT {_STEP_COLUMNS} FROM materializations WHERE run_id = ? AND "
                "node_id = ? ORDER BY status = 'failed' DESC, step_id LIMIT 1",
                (step.run_id, node_id)).fetchone())
        out[node_id] = step
    return out


def recent_durations(conn: sqlite3.Connection, node_id: str, n: int = 20) -> list[float]:
    """The times of a node's last `n` successful executions (keys count one each), newest
    first: an index scan from the end, however long the history."""
    rows = conn.execute("SELECT elapsed_seconds FROM materializations WHERE node_id = ? AND "
                        "status = 'success' AND elapsed_seconds IS NOT NULL ORDER BY id DESC "
                        "LIMIT ?", (node_id, n)).fetchall()
    return [r[0] for r in rows]


def result_of_run(conn: sqlite3.Connection, run_id: str, node_id: str, key: str = ""
                  ) -> tuple[str, str] | None:
    """(artifact path as recorded, format) of the result a run left for a node's key: the
    one it wrote, or the newest earlier one it served from cache."""
    run = conn.execute("SELECT coalesce(finished_at, started_at) FROM runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    if run is None:
        return None
    row = conn.execute("SELECT artifact_path, format FROM materializations WHERE node_id = ? "
                       "AND key = ? AND status = 'success' AND artifact_path IS NOT NULL AND "
                       "(run_id = ? OR created_at <= ?) ORDER BY run_id = ? DESC, id DESC "
                       "LIMIT 1", (node_id, key, run_id, run[0], run_id)).fetchone()
    return (row[0], row[1]) if row else None


def changed_stamp(conn: sqlite3.Connection) -> tuple:
    """Changes whenever a run starts, records a step or ends: when what `status` says may
    have changed."""
    return conn.execute("SELECT (SELECT count(*) FROM runs), (SELECT max(id) FROM "
                        "materializations), (SELECT max(finished_at) FROM runs)").fetchone()


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


# -- artifacts ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Latest:
    """A node's latest successful result per key, in the stored key order, with the
    artifact path each was recorded with (root-relative)."""

    keys: tuple[str, ...]
    run_hashes: tuple[str, ...]
    formats: tuple[str, ...]
    paths: tuple[str | None, ...]

    def find(self, key: str) -> int | None:
        try:
            return self.keys.index(key)
        except ValueError:
            return None


def latest_results(conn: sqlite3.Connection | None, node_ids: Sequence[str]
                   ) -> dict[str, Latest]:
    """Per node, the results its stored state points to (nodes without one are left out)."""
    from barca.store.metadata import load_states

    states, _ = load_states(conn, node_ids)
    out = {}
    for node_id, state in states.items():
        n = len(state)
        if not n:
            continue
        keys = tuple(state.keys)
        hashes = tuple(state.run_hash)
        recorded = _recorded_paths(conn, node_id)
        out[node_id] = Latest(keys, hashes, tuple(state.fmt_at(i) for i in range(n)),
                              tuple(recorded.get(pair) for pair in zip(keys, hashes)))
    return out


def _recorded_paths(conn: sqlite3.Connection, node_id: str) -> dict[tuple[str, str], str]:
    rows = conn.execute("SELECT key, run_hash, artifact_path FROM materializations "
                        "WHERE node_id = ? AND status = 'success' AND artifact_path IS NOT NULL",
                        (node_id,))
    return {(key, run_hash): path for key, run_hash, path in rows}


def current_artifacts(conn: sqlite3.Connection) -> set[str]:
    """Artifact paths (as recorded) that the latest success of some node and key points to."""
    node_ids = [r[0] for r in conn.execute(
        "SELECT node_id FROM node_state UNION SELECT DISTINCT node_id FROM materializations")]
    return {path for latest in latest_results(conn, node_ids).values()
            for path in latest.paths if path}


def live_runs_started(conn: sqlite3.Connection) -> float | None:
    """Start time of the oldest run whose process still runs, None when none does."""
    rows = conn.execute("SELECT started_at, pid, host, proc_start FROM runs "
                        "WHERE status = 'running'").fetchall()
    alive = [started for started, pid, host, start in rows
             if not owner_gone(pid, host, start)]
    return min(alive) if alive else None


def output_hashes(conn: sqlite3.Connection, node_id: str, run_hash: str, key: str,
                  n: int = 2) -> list[str | None]:
    """The bytes' digests of the newest `n` successes of a key at one run hash, newest first
    (a byte check compares a recompute with the result it replaced)."""
    return [row[0] for row in conn.execute(
        "SELECT output_hash FROM materializations WHERE node_id = ? AND run_hash = ? AND "
        "key = ? AND status = 'success' ORDER BY id DESC LIMIT ?", (node_id, run_hash, key, n))]
