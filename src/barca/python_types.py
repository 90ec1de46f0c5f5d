"""The shapes `barca.plan`, `barca.history` and `barca.stats` return.

They are the JSON objects the CLI prints with `--json` (built by the same functions), typed
for editors and type checkers. TypedDicts, not classes: a value is a plain dict, equal to what
`json.loads` gives for the command's output. A key marked NotRequired appears only sometimes,
as in the CLI; keys may be added in later versions, never removed. (No postponed
annotations here: TypedDict reads NotRequired only from evaluated annotations.)
"""

from typing import Any, Literal, NotRequired, TypedDict


class PlanStream(TypedDict):
    stream_id: str  # "<phase>.<stream>"
    steps: list[str]


class PlanPhase(TypedDict):
    reason: dict[str, str]  # {"type": "initial"} or {"type": "fan_in", "node_id": ...}
    streams: list[PlanStream]


class Plan(TypedDict):
    """`barca plan FILES` (always JSON)."""

    plan_version: int
    total_steps: int
    pool_size: int
    pool_source: str  # BARCA_POOL_SIZE, cores, or the capacity setting that caps it
    capacity: int
    capacity_source: str
    weights: dict[str, int]
    phases: list[PlanPhase]
    warnings: list[dict[str, Any]]


RunStatus = Literal["running", "success", "failed", "cancelled", "interrupted"]


class RunInfo(TypedDict):
    """One run as `barca history --json` lists it."""

    run_id: str
    command: str
    files: list[str]
    target: str | None
    job: str | None  # the resolved targets: sorted node ids, or "all"
    status: RunStatus
    steps_total: int | None
    steps_executed: int | None
    steps_cached: int | None
    attempts: int  # 1; 0 for a run a server queued and closed before it started
    started_at: str | None  # RFC 3339 UTC, milliseconds: `2026-12-05T16:30:18.123Z`
    finished_at: str | None
    elapsed_seconds: float | None
    triggered_by: str | None  # cli, python, api, schedule, catch_up
    scheduled_at: str | None  # the tick of a scheduled run
    schedule_id: str | None  # the job ids of a scheduled run
    failed_node: str | None
    error: str | None
    failure: dict[str, str | None] | None  # {node, error}


class RunList(TypedDict):
    """`barca history --json`: the newest runs first (`barca.history()` returns its `runs`)."""

    runs: list[RunInfo]
    total: int
    truncated: bool
    hint: NotRequired[str]


class StepInfo(TypedDict):
    """One executed step (a node, or one key of a partitioned node) of `history RUN_ID`."""

    step_id: str
    node_id: str
    partition_key: str | None  # its label, `retailer=r7` (`day=d1,region=eu`)
    status: Literal["success", "failed"]
    attempts: int | None
    elapsed_seconds: float | None
    cpu_seconds: float | None
    max_rss_bytes: int | None
    run_hash: str
    artifact_path: str | None
    artifact_format: str | None
    artifact_size_bytes: int | None
    error: str | None
    error_type: str | None
    error_message: str | None
    error_traceback: str | None
    worker_exit: str | None
    batch: str | None
    created_at: str | None  # RFC 3339 UTC, milliseconds
    output_tail: NotRequired[list[str]]  # failed steps: their last output lines


class NodeTotals(TypedDict):
    node_id: str
    keys: int
    failed: int
    elapsed_seconds: float
    calls: int


class StepsPage(TypedDict):
    total: int
    truncated: bool
    nodes: list[NodeTotals]


class RunDetail(TypedDict):
    """`barca history RUN_ID --json`: the run and its executed steps."""

    run: RunInfo
    steps: list[StepInfo]
    steps_page: StepsPage
    hint: NotRequired[str]


class RecentRun(TypedDict):
    run_id: str
    partition_key: str | None
    elapsed_seconds: float | None
    status: Literal["success", "failed"]
    created_at: str | None  # RFC 3339 UTC, milliseconds
    error_message: str | None
    attempts: int | None
    cpu_seconds: float | None
    max_rss_bytes: int | None


class NodeStats(TypedDict):
    """`barca stats TARGET --json`: one node's executions."""

    id: str
    kind: Literal["asset", "sensor", "task"]
    total_runs: int
    failures: int
    rerun_rate: float | None  # executions whose run hash had been executed before
    cache_hit_rate: None  # kept for the published field; hits are not recorded per node
    avg_elapsed_seconds: float | None
    median_elapsed_seconds: float | None
    p95_elapsed_seconds: float | None
    max_elapsed_seconds: float | None
    max_rss_bytes: int | None
    median_max_rss_bytes: int | None
    recent_runs: list[RecentRun]
