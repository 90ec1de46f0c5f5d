"""What crosses the executor seam: a step to run and its outcome, plain immutable data.

Messages are typed NamedTuples: immutable, named fields, and as cheap to pickle as plain
tuples, which matters at thousands of steps a second. Failures cross as data (`StepOutcome`
with the error's type name, message and traceback text), never as live exception objects.
How they travel is the executor's business (`engine.local.frames` for worker pipes).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class InputRef(NamedTuple):
    """How a step receives one parameter.

    paths are relative to the project root (absolute only outside it: a dry run's scratch)
    kind: "artifact"  one file, read by the parameter's annotation
          "artifacts" several files (collect), read into a list in key order
          "inline"    a value carried in the message (a keyed source's value for this key)
          "none"      an ordering-only input: the parameter receives None
    """

    param: str
    kind: str
    paths: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    value: Any = None
    annotation: str | None = None


Known = tuple[tuple[bytes, ...], tuple[bytes, ...]]  # digests of stored keys / values chunks


class PackedColumns(NamedTuple):
    """A key source's keys and values packed in chunks (barca.packed_columns), each chunk the
    coordinator said it has left out (None), with every chunk's digest."""

    count: int
    keys: tuple[Any, ...]
    values: tuple[Any, ...] | None  # None for a list source
    key_digests: tuple[bytes, ...]
    value_digests: tuple[bytes, ...]


class StepSpec(NamedTuple):
    step_id: str  # "pipeline.py:scored[retailer=r7]"
    node_id: str
    key: str  # "" when unpartitioned
    index: int  # the key's position in the node's plan
    kind: str  # "asset" | "sensor" | "task"
    file: str  # root-relative path of the pipeline file
    function: str
    key_args: tuple[tuple[str, str], ...]  # (dimension parameter, value)
    inputs: tuple[InputRef, ...]
    artifact_dir: str  # root-relative directory the artifact goes into
    run_hash: str
    serializer: str | None
    retries: int
    retry_backoff: float
    timeout_seconds: float
    key_source: bool  # the value must be a list or a {key: value} dict of JSON values
    known_chunks: Known = ((), ())  # a key source's: what the coordinator has stored


class StepOutcome(NamedTuple):
    step_id: str
    node_id: str
    key: str
    index: int
    run_hash: str
    status: str  # "success" | "failed"
    attempts: int
    elapsed_seconds: float
    artifact_path: str | None = None
    format: str | None = None
    size_bytes: int | None = None
    output_hash: str | None = None
    max_rss_bytes: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    key_columns: PackedColumns | None = None
    worker_exit: str | None = None  # how the worker process ended, when it died in the step


class StepStarted(NamedTuple):
    """Worker -> coordinator: a retry attempt began (its timeout starts again)."""

    step_id: str
    attempt: int


class LogLine(NamedTuple):
    step_id: str
    stream: str  # "stdout" | "stderr"
    text: str
