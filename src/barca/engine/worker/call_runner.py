"""Running one batch call (`batch=`): many keys of a node in one function call, each key's
result written and reported as if it had run alone.

The function gets the call's keys as a list in its dimension parameter (with several
dimensions, each parameter the list of its own values, in call order); an input read key
for key arrives as {key: value} (a key of several dimensions as the tuple of its values) or,
by its annotation, as one lazy table over the keys' results (store.batch_inputs). It returns
{key: value} or a table with the dimension column(s), split into one artifact per key.
`Failed(...)` or a missing key fails that key alone; a key the call was not given, one given
twice (1 and "1"), or a call that raises, fails every key. A retry runs the keys that
failed, together. Each key written is reported at once (its recording overlaps the writing of
the next); the failed keys follow at the end, then a `CallFinished` with where the time went,
in five parts (import, load, compute, split, write).
"""

from __future__ import annotations

import numbers
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import orjson

from barca.engine.protocol import (NOT_RETRIED, CallFinished, CallSpec, InputRef, RunInterrupted,
                                   StepOutcome, StepStarted)
from barca.engine.worker.retries import attempt_failed
from barca.engine.worker.step_inputs import fetch_whole, load_input, read_in_place
from barca.planner.keys import label_of
from barca.store.artifact_store import ArtifactStore
from barca.store.artifacts import (SerializeError, choose_format, read_result, reads_lazily,
                                   table_kind, write_packable)
from barca.store.packs import PackWriter
from barca.store.paths import EXTENSIONS
from barca.store.ranged_tables import damaged_page
from barca.store.sinks import write_sinks

_LAZY = ("DuckDBPyRelation", "LazyFrame", "Dataset")  # annotations that ask for one table


@dataclass
class _Times:
    import_: float = 0.0
    load: float = 0.0
    compute: float = 0.0
    split: float = 0.0
    write: float = 0.0


class Runner(Protocol):
    """What a call needs of the runner that delivers it (engine.step_runner.StepRunner)."""

    root: Path
    left: list[Any]
    packs: PackWriter  # small results of the call's keys go into packs (store.packs)

    def module(self, file: str, planned: str = "") -> Any: ...

    def store(self, address: str) -> ArtifactStore: ...

    def error_parts(self, exc: BaseException) -> tuple[str, str, str | None]: ...

    def peak_rss(self) -> int: ...  # the peak memory since the call began (engine.peak_memory)


class _CallFailed(Exception):
    """The call's result as a whole is wrong (an extra key, not a dict or a table)."""


def run_call(runner: Runner, call: CallSpec, emit: Callable[[Any], None]
             ) -> list[StepOutcome | CallFinished]:
    """Run the call, retrying its failed keys together. Each key written is reported through
    `emit` at once, so that its recording overlaps the writing of the next; the keys that
    failed are returned at the end, then the call's `CallFinished`."""
    started = time.perf_counter()
    times = _Times()
    outcomes: dict[int, StepOutcome] = {}
    pending = list(range(len(call.keys)))
    attempt = 0
    while pending:
        attempt += 1
        if attempt > 1:
            emit(StepStarted(call.step_id, attempt))
        results = _attempt(runner, call, pending, attempt, times, emit)
        outcomes.update(results)
        failed = [p for p in pending if results[p].status == "failed"]
        then, at = attempt_failed(attempt, call.retries, call.retry_backoff,
                                  bool(failed) and results[failed[0]].error_type not in
                                  NOT_RETRIED, time.monotonic())
        if then == "failed":
            break
        time.sleep(max(0.0, at - time.monotonic()))
        pending = failed
    rss = runner.peak_rss()
    failures = [outcomes[p]._replace(max_rss_bytes=rss) for p in range(len(call.keys))
                if outcomes[p].status == "failed"]
    written = len(call.keys) - len(failures)
    return [*failures, CallFinished(call.step_id, call.node_id, call.batch, len(call.keys),
                                    written, attempt, time.perf_counter() - started, rss,
                                    times.import_, times.load, times.compute, times.split,
                                    times.write)]


def _attempt(runner: Runner, call: CallSpec, positions: list[int], attempt: int,
             times: _Times, emit: Callable[[Any], None]) -> dict[int, StepOutcome]:
    """One attempt over the keys at `positions`: each key's outcome (those written, also
    emitted as they are)."""
    began = time.perf_counter()
    written: dict[int, StepOutcome] = {}

    def report(p: int, outcome: StepOutcome) -> None:
        written[p] = outcome
        emit(outcome)

    try:
        fn = getattr(runner.module(call.file, call.source_digest), call.function)
        store = runner.store(call.store)
        mark = _lap(times, "import_", began)
        keys = [call.keys[p] for p in positions]
        call_keys = [_key_value(call.dims, k) for k in keys]
        in_place = _read_in_place(store, call, positions)
        try:
            failed = _run(runner, fn, store, call, positions, call_keys, times, mark, attempt,
                          report)
        except Exception as exc:
            if written or not (in_place and damaged_page(exc)):
                raise
            # a page read by range failed its checksum (in the call, or as the relation it
            # returned was split): once more on the whole objects, which their digests check
            # (a damaged object is named; one damaged on its way here is read intact)
            mark = time.perf_counter()
            fetch_whole(store, in_place)
            failed = _run(runner, fn, store, call, positions, call_keys, times, mark, attempt,
                          report)
    except BaseException as exc:  # the call failed (its own KeyboardInterrupt or sys.exit()
        if RunInterrupted.within(exc):  # too): every key given and not written fails
            raise
        rest = [p for p in positions if p not in written]
        failed = _all_failed(call, rest, attempt, began, exc, runner.error_parts)
    return {**written, **failed}


def _run(runner: Runner, fn: Callable[..., Any], store: ArtifactStore, call: CallSpec,
         positions: list[int], call_keys: list[Any], times: _Times, mark: float, attempt: int,
         report: Callable[[int, StepOutcome], None]) -> dict[int, StepOutcome]:
    """Load the inputs, call the function, write each key's result: the keys that failed."""
    kwargs: dict[str, Any] = _dimension_args(call.dims, call_keys)
    for ref in call.inputs:
        kwargs[ref.param] = _call_input(store, ref, call.dims, positions, call_keys)
    mark = _lap(times, "load", mark)
    value = fn(**kwargs)
    if isinstance(value, types.CoroutineType):
        value.close()
    runner.left = [value]
    mark = _lap(times, "compute", mark)
    return _split_and_write(runner, store, call, positions, call_keys, value, times, mark,
                            attempt, report)


def _lap(times: _Times, part: str, since: float) -> float:
    now = time.perf_counter()
    setattr(times, part, getattr(times, part) + now - since)
    return now


def _key_value(dims: Sequence[str], key: str) -> Any:
    """A key as the function sees it: the value, or a tuple of values for several
    dimensions (in dimension-name order)."""
    return key if len(dims) == 1 else tuple(orjson.loads(key))


def _dimension_args(dims: Sequence[str], call_keys: list[Any]) -> dict[str, list[Any]]:
    """Each dimension parameter's list: the call's keys for one dimension; with several,
    each dimension's own values, in call order (`region=["amer", "amer"]`, `day=["d2", "d1"]`
    for the keys ("d2", "amer") and ("d1", "amer"))."""
    if len(dims) == 1:
        return {dims[0]: call_keys}
    return {name: [key[i] for key in call_keys] for i, name in enumerate(dims)}


def _match_text(dims: Sequence[str], key: Any) -> str | None:
    """A returned key in barca's raw form, matched by its string form (1 is key "1"). Any
    integer counts, numpy's too: a key taken from a pandas column is an np.int64."""
    if len(dims) == 1:
        if isinstance(key, str):
            return str.__str__(key)  # numpy's str_ as a plain str
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            return str(int(key))
        return None
    if not isinstance(key, (tuple, list)) or len(key) != len(dims):
        return None
    return orjson.dumps([str(v) for v in key]).decode()


def _twice(dims: Sequence[str], text: str, value: dict, key: Any) -> str:
    """The message for a key returned twice under two forms (as key sources word it)."""
    first = next(k for k in value if k is not key and _match_text(dims, k) == text)
    shown = repr(text) if len(dims) == 1 else label_of(list(dims), text)
    return (f"key {shown} appears twice in the batch result (as {first!r} and {key!r}); "
            "return each key once")


def _call_input(store: ArtifactStore, ref: InputRef, dims: Sequence[str],
                positions: list[int], call_keys: list[Any]) -> Any:
    if ref.kind == "keyed_inline":
        return {k: ref.value[p] for k, p in zip(call_keys, positions)}
    if ref.kind != "keyed":
        return load_input(store, ref)
    formats = [ref.formats[p] for p in positions]
    text = (ref.annotation or "").replace(" ", "")
    if text.rsplit(".", 1)[-1] in _LAZY:
        from barca.store.batch_inputs import lazy_input

        key_values = [k if isinstance(k, tuple) else (k,) for k in call_keys]
        return lazy_input(store, text, dims, key_values, [ref.paths[p] for p in positions],
                          formats)

    # one thread: the results were mostly just written, so reading them is Python's work
    # (50,000 local files took 0.64 s so; 1.9 s on two threads)
    element = _dict_value_annotation(text)
    return {k: read_result(store, ref.paths[p], fmt, element)
            for k, p, fmt in zip(call_keys, positions, formats)}


def _read_in_place(store: ArtifactStore, call: CallSpec, positions: list[int]) -> list[str]:
    """The keys of the call's parquet inputs that are read in place, by range (a remote
    store's, not copied here: store.ranged_tables), which `fetch_whole` can fetch instead: a
    lazy table over the keys, a dict of lazy tables, or an input of the whole call."""
    keys = read_in_place(store, [ref for ref in call.inputs if ref.kind != "keyed"])
    for ref in call.inputs:
        text = (ref.annotation or "").replace(" ", "")
        if ref.kind == "keyed" and (text.rsplit(".", 1)[-1] in _LAZY
                                    or reads_lazily(_dict_value_annotation(text))):
            keys += [ref.paths[p] for p in positions if ref.formats[p] == "parquet"
                     and store.remote_file(ref.paths[p]) is not None]
    return keys


def _dict_value_annotation(text: str) -> str | None:
    """`dict[str, pd.DataFrame]` -> `pd.DataFrame`: how each key's value is read."""
    for prefix in ("dict[", "Dict[", "typing.Dict[", "Mapping[", "typing.Mapping["):
        if text.startswith(prefix) and text.endswith("]"):
            inner, depth = text[len(prefix):-1], 0
            for i, ch in enumerate(inner):
                depth += ch == "["
                depth -= ch == "]"
                if ch == "," and depth == 0:
                    return inner[i + 1:] or None
    return None


def _split_and_write(runner: Runner, store: ArtifactStore, call: CallSpec, positions: list[int],
                     call_keys: list[Any], value: Any, times: _Times, mark: float, attempt: int,
                     report: Callable[[int, StepOutcome], None]) -> dict[int, StepOutcome]:
    """Each key's share of the result, written and reported; the outcomes of the keys that
    failed, by position."""
    from barca.api import Failed

    root = runner.root
    shared_began = mark
    out: dict[int, StepOutcome] = {}
    if table_kind(value) is not None:
        from barca.store.batch_split import BatchResultError, split_table

        key_values = [k if isinstance(k, tuple) else (k,) for k in call_keys]
        keys = [_target(call, p, "parquet") for p in positions]
        try:
            written = split_table(value, call.dims, key_values, store, keys)
        except BatchResultError as exc:
            raise _CallFailed(str(exc)) from None
        mark = _lap(times, "split", mark)
        share = (mark - shared_began) / len(positions)
        rss = runner.peak_rss()
        for p, (size, digest) in zip(positions, written):
            path = _target(call, p, "parquet")
            errors = _sinks(root, store, call, p, path, "parquet",
                            lambda path=path: read_result(store, path, "parquet"))
            report(p, _success(call, p, attempt, share, path, "parquet", size, digest, rss,
                               errors))
        times.write += time.perf_counter() - mark
        return out
    if not isinstance(value, dict):
        raise _CallFailed(
            f"a batch function returns a dict of key -> value or a table with the "
            f"{', '.join(call.dims)} column, not {type(value).__name__}")
    by_text: dict[str, Any] = {}
    wanted = {call.keys[p] for p in positions}
    for key, item in value.items():
        text = _match_text(call.dims, key)
        if text not in wanted:
            shown = label_of(list(call.dims), text) if text is not None else repr(key)
            raise _CallFailed(f"batch returned a result for {shown}, which is not one of "
                              f"this call's keys")
        if text in by_text:  # 1 and "1": one key, and which value to keep is not ours to say
            raise _CallFailed(_twice(call.dims, text, value, key))
        by_text[text] = item
    mark = _lap(times, "split", mark)
    share = (mark - shared_began) / len(positions)
    to_write = []
    for p in positions:
        key = call.keys[p]
        if key not in by_text:
            out[p] = _key_failed(call, p, attempt, share, "BatchKeyMissing",
                                 f"batch returned no result for {label_of(list(call.dims), key)}")
        elif isinstance(by_text[key], Failed):
            out[p] = _key_failed(call, p, attempt, share, "BatchKeyFailed",
                                 str(by_text[key].reason))
        else:
            to_write.append((p, by_text[key]))

    # one at a time: a second thread wrote 30,000 results 4-10% faster alone, and the other
    # core records them meanwhile
    began = time.perf_counter()
    rss = runner.peak_rss()  # what the call took (writing adds next to nothing)

    packs = None if call.sinks else runner.packs  # a sink copies a file of its own
    for p, item in to_write:
        key_began = time.perf_counter()
        try:
            fmt = choose_format(item, call.serializer)
            path, size, digest = write_packable(store, _target(call, p, fmt), item, fmt, packs)
        except SerializeError as exc:
            out[p] = _key_failed(call, p, attempt, share, "SerializeError", str(exc))
            continue
        errors = _sinks(root, store, call, p, path, fmt, lambda item=item: item)
        report(p, _success(call, p, attempt, share + time.perf_counter() - key_began, path,
                           fmt, size, digest, rss, errors))
    times.write += time.perf_counter() - began
    return out


def _target(call: CallSpec, p: int, fmt: str) -> str:
    """The store key key `p` of the call writes: as if it had run alone."""
    return f"{call.artifact_stems[p]}.{EXTENSIONS[fmt]}"


def _sinks(root: Path, store: ArtifactStore, call: CallSpec, p: int, key: str, fmt: str,
           value: Callable[[], Any]) -> tuple[str, ...]:
    """Write key `p`'s sinks (store.sinks); what failed."""
    if not call.sinks:
        return ()
    return write_sinks(str(root), call.sinks[p], store.local_path(key), fmt, value)


def _success(call: CallSpec, p: int, attempt: int, elapsed: float, path: str, fmt: str,
             size: int, digest: str, rss: int, sink_errors: tuple[str, ...]) -> StepOutcome:
    return StepOutcome(call.key_step_ids[p], call.node_id, call.keys[p], call.indices[p],
                       call.run_hashes[p], "success", attempt, elapsed, path, fmt, size,
                       digest, rss, batch=call.batch, sink_errors=sink_errors)


def _key_failed(call: CallSpec, p: int, attempt: int, elapsed: float, error_type: str,
                message: str) -> StepOutcome:
    return StepOutcome(call.key_step_ids[p], call.node_id, call.keys[p], call.indices[p],
                       call.run_hashes[p], "failed", attempt, elapsed, error_type=error_type,
                       error_message=message, batch=call.batch)


def _all_failed(call: CallSpec, positions: list[int], attempt: int, began: float,
                exc: BaseException, user_frames: Callable[..., Any]) -> dict[int, StepOutcome]:
    share = (time.perf_counter() - began) / len(positions)
    if isinstance(exc, _CallFailed):
        error_type, message, tb = "BatchResultError", str(exc), None
    else:
        error_type, message, tb = user_frames(exc)
    return {p: StepOutcome(call.key_step_ids[p], call.node_id, call.keys[p], call.indices[p],
                           call.run_hashes[p], "failed", attempt, share,
                           error_type=error_type, error_message=message, traceback=tb,
                           batch=call.batch)
            for p in positions}
