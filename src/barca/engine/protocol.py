"""What crosses the executor seam: a step to run and its outcome, plain immutable data.

Messages are typed NamedTuples: immutable, named fields, and as cheap to pickle as plain
tuples, which matters at thousands of steps a second. Failures cross as data (`StepOutcome`
with the error's type name, message and traceback text), never as live exception objects.
How they travel is the executor's business (`engine.local.frames` for worker pipes).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple


class InputRef(NamedTuple):
    """How a step receives one parameter.

    paths are keys in the step's artifact store (store.artifact_store), never local paths
    kind: "artifact"  one result, read by the parameter's annotation
          "artifacts" several results (collect), read into a list in the order given
          "inline"    a value carried in the message (a keyed source's value for this key)
          "none"      an ordering-only input: the parameter receives None
          "keyed"     a batch call's input read key for key: one result per key of the call,
                      given as {key: value} or as one lazy table, by the annotation
          "keyed_inline"  a batch call's keyed-source values, one per key of the call
    """

    param: str
    kind: str
    paths: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    value: Any = None
    annotation: str | None = None


# digests of the stored keys / values / order chunks of a key source
Known = tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]]


class PackedColumns(NamedTuple):
    """A key source's keys and values packed in chunks (barca.packed_columns), each chunk the
    coordinator said it has left out (None), with every chunk's digest. A dict's keys are
    sorted; `order` is each key's position in the dict's own order, None when that is sorted."""

    count: int
    keys: tuple[Any, ...]
    values: tuple[Any, ...] | None  # None for a list source
    key_digests: tuple[bytes, ...]
    value_digests: tuple[bytes, ...]
    order: tuple[Any, ...] | None = None
    order_digests: tuple[bytes, ...] = ()


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
    artifact_stem: str  # the result's store key, but for its extension
    run_hash: str
    serializer: str | None
    retries: int
    retry_backoff: float
    timeout_seconds: float
    key_source: bool  # the value must be a list or a {key: value} dict of JSON values
    known_chunks: Known = ((), (), ())  # a key source's: what the coordinator has stored
    # a sensor key's last observation: (store key, format, output digest or None)
    previous: tuple[str, str, str | None] | None = None
    sinks: tuple[tuple[str, str | None], ...] = ()  # (destination, serializer) per @sink
    weight: int = 1  # units of the run's capacity it holds while it runs (weight=)
    store: str = ""  # the run's artifact store, by address (store.artifact_store.open_store)
    scratch: str = ""  # a dry run's: the store the result is written to instead
    # the digest of the pipeline file's bytes the run was planned with ("": not checked); a
    # worker whose copy differs fails the step (engine.source_check)
    source_digest: str = ""
    # the run's trace context, (integration, headers) per integration (barca.telemetry): the
    # worker's `barca.execute` span joins it; () when the run is not traced
    trace: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


class CallSpec(NamedTuple):
    """A batch call (`batch=`): several keys of one node in one function call. Each key
    keeps what a `StepSpec` would give it (index, run hash, artifact stem); the
    function receives the keys as a list in every dimension parameter."""

    step_id: str  # "pipeline.py:scored[batch=b1]": its output is logged under this id
    node_id: str
    batch: str  # "b1": the call's id within its run
    kind: str
    file: str
    function: str
    dims: tuple[str, ...]  # sorted dimension names, each a parameter taking the key list
    keys: tuple[str, ...]  # raw keys, in key order
    key_step_ids: tuple[str, ...]  # "pipeline.py:scored[retailer=r1]" per key
    indices: tuple[int, ...]
    run_hashes: tuple[str, ...]
    artifact_stems: tuple[str, ...]
    inputs: tuple[InputRef, ...]
    serializer: str | None
    retries: int
    retry_backoff: float
    timeout_seconds: float
    sinks: tuple[tuple[tuple[str, str | None], ...], ...] = ()  # per key, as StepSpec.sinks
    weight: int = 1  # units of the run's capacity the whole call holds (the node's weight=)
    store: str = ""  # as StepSpec's
    source_digest: str = ""  # as StepSpec's
    trace: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # as StepSpec's


class StepOutcome(NamedTuple):
    step_id: str
    node_id: str
    key: str
    index: int
    run_hash: str
    status: str  # "success" | "failed"
    attempts: int
    elapsed_seconds: float
    artifact_key: str | None = None  # where the result is, in the step's store
    format: str | None = None
    size_bytes: int | None = None
    output_hash: str | None = None
    max_rss_bytes: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    key_columns: PackedColumns | None = None
    worker_exit: str | None = None  # how the worker process ended, when it died in the step
    batch: str | None = None  # the call's id, for a key run in a batch call
    sink_errors: tuple[str, ...] = ()  # each @sink that could not be written (store.sinks)
    # the worker's CPU time (user + system) over the step's attempts; None for a key of a
    # batch call (the call's CPU is not split among its keys) and a step whose worker died
    cpu_seconds: float | None = None


class CallFinished(NamedTuple):
    """A batch call ended (after its keys' outcomes): where its time went, summed over its
    attempts; `written` keys succeeded. Seconds as the seed's `batch_execution` names them."""

    step_id: str
    node_id: str
    batch: str
    keys: int
    written: int
    attempts: int
    elapsed_seconds: float
    max_rss_bytes: int
    import_seconds: float
    load_seconds: float
    compute_seconds: float
    split_seconds: float
    write_seconds: float


def failed_outcomes(spec: StepSpec | CallSpec, attempts: int, error_type: str, message: str,
                    worker_exit: str | None = None, traceback: str | None = None
                    ) -> list[StepOutcome]:
    """The outcome of each key of a step that never reported one (its worker was lost or it
    timed out): one for a step, one per key for a call."""
    if isinstance(spec, StepSpec):
        return [StepOutcome(spec.step_id, spec.node_id, spec.key, spec.index, spec.run_hash,
                            "failed", attempts, 0.0, error_type=error_type,
                            error_message=message, traceback=traceback,
                            worker_exit=worker_exit)]
    return [StepOutcome(step_id, spec.node_id, key, index, run_hash, "failed", attempts, 0.0,
                        error_type=error_type, error_message=message, traceback=traceback,
                        worker_exit=worker_exit, batch=spec.batch)
            for step_id, key, index, run_hash in zip(spec.key_step_ids, spec.keys,
                                                     spec.indices, spec.run_hashes)]


def call_lost(call: CallSpec, written: int, attempts: int) -> CallFinished:
    """The end of a call whose worker was lost: `written` of its keys had been reported; where
    its time went is not known."""
    return CallFinished(call.step_id, call.node_id, call.batch, len(call.keys), written,
                        attempts, 0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)


def unreported_part(call: CallSpec, reported: set[str]) -> CallSpec:
    """The call over its keys whose outcome was not reported yet (key step ids in
    `reported`): what a retry runs, or what fails, when its worker is lost midway."""
    keep = [p for p, step_id in enumerate(call.key_step_ids) if step_id not in reported]

    def part(values: tuple) -> tuple:
        return tuple(values[p] for p in keep)

    inputs = tuple(
        ref._replace(paths=part(ref.paths), formats=part(ref.formats)) if ref.kind == "keyed"
        else ref._replace(value=part(ref.value)) if ref.kind == "keyed_inline" else ref
        for ref in call.inputs)
    return call._replace(keys=part(call.keys), key_step_ids=part(call.key_step_ids),
                         indices=part(call.indices), run_hashes=part(call.run_hashes),
                         artifact_stems=part(call.artifact_stems),
                         sinks=part(call.sinks) if call.sinks else (), inputs=inputs)


def unreported_steps(done: Iterable[StepSpec | CallSpec], reported: Mapping[str, set[str]]
                     ) -> tuple[list[StepSpec | CallSpec], list[CallFinished]]:
    """Steps a lost worker had done whose outcomes never arrived (their results may not be in
    the store), `reported`: a call's batch id -> its key step ids reported. The steps to run
    again (of a call, the keys not reported), and the end of each call whose every key was."""
    again: list[StepSpec | CallSpec] = []
    ended: list[CallFinished] = []
    for step in done:
        written = reported.get(step.batch) if isinstance(step, CallSpec) else None
        if not written:
            again.append(step)
            continue
        part = unreported_part(step, written)
        if part.keys:
            again.append(part)
        else:
            ended.append(call_lost(step, len(written), 1))
    return again, ended


class StepStarted(NamedTuple):
    """Worker -> coordinator: a retry attempt began, or the first step of a worker process
    (its timeout starts again: not from the lease, sent while the process was starting)."""

    step_id: str
    attempt: int


class LogLine(NamedTuple):
    step_id: str
    stream: str  # "stdout" | "stderr"
    text: str


class RunInterrupted(KeyboardInterrupt):
    """The run itself was interrupted (Ctrl-C or SIGTERM reached the coordinator, whose signal
    handler raises this): a step running in the coordinator's own process (the in-process
    executor) lets it through to cancel the run. A plain KeyboardInterrupt raised by a step's
    own code is that step's error, reported like any other."""

    @staticmethod
    def on_signal(signum: int, frame: object) -> None:
        raise RunInterrupted

    @staticmethod
    def within(exc: BaseException) -> bool:
        """Whether `exc` is this interrupt or was raised on its way: Python 3.11 wraps an
        exception raised in a class body's `__set_name__` (a dataclass being defined by an
        import) in a RuntimeError, which must not turn a cancelled run into a failed one."""
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            if isinstance(exc, RunInterrupted):
                return True
            seen.add(id(exc))
            exc = exc.__cause__ or exc.__context__
        return False


# error types of a step that chose to stop (sys.exit(), KeyboardInterrupt): never retried
NOT_RETRIED = ("SystemExit", "KeyboardInterrupt")


def stop_message(exc: BaseException, who: str) -> str | None:
    """The error message for a step's (or a `parallel()` branch's) own `sys.exit(...)` or
    KeyboardInterrupt, whose text alone would be empty or a bare exit code; None for any
    other error."""
    if isinstance(exc, SystemExit):
        return f"{who} called sys.exit({'' if exc.code is None else repr(exc.code)})"
    if isinstance(exc, KeyboardInterrupt):
        return f"{who} raised {exc!r} itself, not a Ctrl-C of the run"
    return None
