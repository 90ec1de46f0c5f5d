"""The row types the history queries return (`barca.store.history`), and the columns they are
read from. Plain frozen data: what a run, a step, a log line or a node's record holds, with
no query and no sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

RUN_COLUMNS = ("run_id, command, files, target, status, steps_total, steps_executed, "
               "steps_cached, started_at, finished_at, elapsed_seconds, pid, host, proc_start, "
               "failed_node, error, triggered_by, job, schedule_id, scheduled_at")
STEP_COLUMNS = ("id, run_id, step_id, node_id, key, status, attempts, elapsed_seconds, "
                "max_rss_bytes, run_hash, artifact_path, format, size_bytes, error_type, "
                "error_message, error_traceback, batch, created_at, worker_exit, cpu_seconds")
STEP_WIDTH = 20  # StepRow's fields: the columns above


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
