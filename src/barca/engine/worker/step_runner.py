"""Running one step: import the pipeline file, load the inputs, call the function, write the
artifact, and report the result as a `StepOutcome`.

It knows nothing of how the step reached it: a worker process reading leases from a pipe, an
in-process executor in a test, a remote worker. What the step prints goes to `emit` as
`LogLine`s tagged with its step id, and a retry announces itself there with `StepStarted`.
Results are read from and written to the artifact store the step names (by its address,
store.artifact_store.open_store; a local store resolves against the project root given to the
runner, whatever the current directory); the outcome names the result by its store key. The
pipeline file must be the one the run was planned with (engine.source_check).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable

from barca.engine.protocol import (CallFinished, CallSpec, LogLine, RunInterrupted, StepOutcome,
                                   StepSpec, StepStarted, stop_message)
from barca.engine.worker import duckdb_reuse, import_paths, peak_memory, source_check
from barca.engine.worker.key_source import KeySourceError, write_key_source
from barca.engine.worker.retries import attempt_failed
from barca.engine.worker.step_inputs import fetch_whole, load_input, read_in_place
from barca.store.artifact_store import ArtifactStore, open_store
from barca.store.artifacts import SerializeError, choose_format, read_result, write_packable
from barca.store.paths import EXTENSIONS
from barca.store.ranged_tables import damaged_page
from barca.store.sinks import write_sinks
from barca.store.packs import PackWriter

Emit = Callable[[Any], None]  # takes a LogLine, a StepStarted, or a batch key written


class StepStream:
    """A text stream that hands whole lines to `emit`, tagged with the current step id."""

    def __init__(self, emit: Emit, stream: str, step_id: str = "") -> None:
        self.emit, self.stream, self.step_id = emit, stream, step_id
        self._pending = ""
        self.encoding = "utf-8"

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self.emit(LogLine(self.step_id, self.stream, line))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.emit(LogLine(self.step_id, self.stream, self._pending))
            self._pending = ""

    def isatty(self) -> bool:
        return False


class StepRunner:
    """Runs steps in this process; imports each pipeline file once."""

    def __init__(self, root: Path, hold_uploads: bool = False) -> None:
        self.root = root
        # a remote store's uploads are held for the caller to make (`held_uploads`): a pool
        # worker makes them on a thread of its own while it runs its next steps
        self.hold_uploads = hold_uploads
        self.modules: dict[str, Any] = {}
        self.digests: dict[str, str] = {}  # pipeline file -> digest of the bytes imported
        self.stores: dict[str, ArtifactStore] = {}
        self.packs = PackWriter()  # small results, written whole before their outcomes go
        # what the last step left (its value, a key source's packing lists), kept until its
        # caller has sent the outcome: freeing a key source's 200,000 entries and positions
        # takes over 10 ms that need not delay it
        self.left: list[Any] = []
        self.side_by_side = 1  # workers the run has, as the last lease said

    def let_go(self) -> None:
        """Once the outcomes are sent: free what the last steps left, and the results they
        replaced."""
        self.left = []
        for store in self.stores.values():
            store.free_replaced()

    def warm(self, files: Any) -> None:
        """Import pipeline files ahead of their steps; a file that fails is left for the step
        that needs it to report."""
        for file in files:
            try:
                self.module(file)
            except BaseException:  # noqa: BLE001 - the step that needs it reports it
                self.modules.pop(file, None)

    def run(self, step: StepSpec | CallSpec, emit: Emit) -> list[StepOutcome | CallFinished]:
        """Run a step, or a batch call (the keys it wrote go through `emit` as they are written;
        the rest, then a `CallFinished`, are returned). Its peak memory is its own: the
        process's high-water mark is reset first (engine.peak_memory). A step of a traced
        run runs inside its `barca.execute` span (barca.telemetry.execute)."""
        peak_memory.reset()
        duckdb_reuse.side_by_side(self.side_by_side if not isinstance(step, StepSpec) or step.key
                                  else 1)
        if step.trace:
            from barca.telemetry.execute import traced

            return traced(step, step.trace, lambda: self._run(step, emit))
        return self._run(step, emit)

    def _run(self, step: StepSpec | CallSpec, emit: Emit) -> list[StepOutcome | CallFinished]:
        if isinstance(step, StepSpec):
            return [self.run_step(step, emit)]
        from barca.engine.worker.call_runner import run_call

        streams = (StepStream(emit, "stdout", step.step_id),
                   StepStream(emit, "stderr", step.step_id))
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = streams
        try:
            return run_call(self, step, emit)
        finally:
            for stream in streams:
                stream.flush()
            sys.stdout, sys.stderr = saved

    def run_step(self, step: StepSpec, emit: Emit) -> StepOutcome:
        streams = (StepStream(emit, "stdout", step.step_id),
                   StepStream(emit, "stderr", step.step_id))
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = streams
        started = time.perf_counter()
        cpu_began = time.process_time()  # this process's CPU: the step's, as it runs alone here
        attempt = 0
        try:
            while True:
                attempt += 1
                if attempt > 1:  # whoever delivered the step restarts its timeout
                    emit(StepStarted(step.step_id, attempt))
                try:
                    outcome = self._attempt(step, attempt, started)
                except BaseException as exc:  # the user's step failed: report it as data,
                    if RunInterrupted.within(exc):  # its own KeyboardInterrupt too
                        raise
                    # never retried: an exit (not an Exception) or a changed source
                    retryable = isinstance(exc, Exception) and \
                        not isinstance(exc, source_check.SourceChanged)
                    then, at = attempt_failed(attempt, step.retries, step.retry_backoff,
                                              retryable, time.monotonic())
                    if then == "retry":
                        time.sleep(max(0.0, at - time.monotonic()))
                        continue
                    outcome = _failure(step, attempt, started, exc)
                finally:
                    for stream in streams:
                        stream.flush()
                return outcome._replace(cpu_seconds=time.process_time() - cpu_began)
        finally:
            sys.stdout, sys.stderr = saved

    def _attempt(self, step: StepSpec, attempt: int, started: float) -> StepOutcome:
        fn = getattr(self.module(step.file, step.source_digest), step.function)
        store = self.store(step.store)
        kwargs: dict[str, Any] = dict(step.key_args)
        in_place = read_in_place(store, step.inputs)
        for ref in step.inputs:
            kwargs[ref.param] = load_input(store, ref)
        try:
            value = fn(**kwargs)
        except Exception as exc:
            if not (in_place and damaged_page(exc)):
                raise
            # a page read by range failed its checksum: once more on the whole objects, which
            # their digests check (a damaged object is named; one damaged in transit is read)
            fetch_whole(store, in_place)
            for ref in step.inputs:
                kwargs[ref.param] = load_input(store, ref)
            value = fn(**kwargs)
        if isinstance(value, types.CoroutineType):
            value.close()  # never run, so that Python does not warn where barca drops it
        update = None
        if step.kind == "sensor" and isinstance(value, tuple) and len(value) == 2 \
                and isinstance(value[0], bool):
            update, value = value
        out = self.store(step.scratch) if step.scratch else store
        if update is False and step.previous is not None:
            if not step.key_source:
                return self._keep(step, store, out, attempt, started)
            value = read_result(store, step.previous[0], step.previous[1])
            update = None  # its digest is that of the same value, as before
        self.left = [value]
        fmt = "json" if step.key_source else choose_format(value, step.serializer)
        key = f"{step.artifact_stem}.{EXTENSIONS[fmt]}"
        if step.kind == "sensor":
            _observation(out, key)
        columns = None
        if step.key_source:
            fmt, size, digest, columns = write_key_source(value, out, key, step.known_chunks,
                                                         self.left)
        else:  # a partitioned node's key may share a pack (store.packs); a sink copies a file
            packable = bool(step.key) and step.kind != "sensor" and not step.sinks
            key, size, digest = write_packable(out, key, value, fmt,
                                               self.packs if packable else None)
        if update is True:  # an update however alike the bytes: every reader reruns
            digest = forced_digest(digest)
        if step.kind == "sensor":
            _observed(out, key, digest, size)
        sink_errors = write_sinks(str(self.root), step.sinks, out.local_path(key), fmt,
                                  lambda: value) if step.sinks else ()
        return StepOutcome(step.step_id, step.node_id, step.key, step.index, step.run_hash,
                           "success", attempt, time.perf_counter() - started, key, fmt,
                           size, digest, peak_memory.peak(), key_columns=columns,
                           sink_errors=sink_errors)

    def _keep(self, step: StepSpec, store: ArtifactStore, out: ArtifactStore, attempt: int,
              started: float) -> StepOutcome:
        """A sensor's `(False, value)`: no update, so its last observation stands, byte for
        byte, as this one (copied when its key changed with the sensor's code)."""
        old_key, fmt, digest = step.previous  # type: ignore[misc]
        key = f"{step.artifact_stem}.{EXTENSIONS[fmt]}"
        data = store.get(old_key)
        # the digest readers were computed from (an update's, if the last one was forced)
        digest = digest or hashlib.blake2b(data, digest_size=16).hexdigest()
        if out is not store or key != old_key:
            _observation(out, key)
            out.put(key, data)
            _observed(out, key, digest, len(data))
        return StepOutcome(step.step_id, step.node_id, step.key, step.index, step.run_hash,
                           "success", attempt, time.perf_counter() - started, key, fmt,
                           len(data), digest, peak_memory.peak())

    def store(self, address: str) -> ArtifactStore:
        """The artifact store a step names, opened once per runner."""
        store = self.stores.get(address)
        if store is None:
            store = self.stores[address] = open_store(address, self.root)
            if self.hold_uploads and hasattr(store, "hold_uploads"):
                store.hold_uploads()
        return store

    def held_uploads(self) -> list[Callable[[], None]]:
        """The uploads the stores hold since the last call (of every result written so far,
        the packs' once they are flushed), taken: each writes one result's object."""
        return [upload for store in list(self.stores.values())
                if hasattr(store, "held_uploads") for upload in store.held_uploads()]

    def error_parts(self, exc: BaseException) -> tuple[str, str, str | None]:
        return error_parts(exc)

    def peak_rss(self) -> int:
        return peak_memory.peak()

    def module(self, file: str, planned: str = "") -> Any:
        """The pipeline file's module, with the process readied for its imports (its steps
        import lazily, and read pickles, in the same surroundings as the file did). `planned`:
        the digest of the file the run was planned with; other bytes are a SourceChanged."""
        import_paths.for_root(str(self.root)).enter(file)
        module = self.modules.get(file)
        if module is None:
            before = source_check.digest_of(self.root / file)
            try:
                module = self.modules[file] = import_pipeline(self.root, file)
            except Exception as exc:  # the file's own top-level code: say so, not the step
                raise PipelineImportError(file, _line_in(self.root / file, exc), exc) from exc
            after = source_check.digest_of(self.root / file)
            # changed while it was imported: which bytes ran is not known, so none match
            self.digests[file] = before if before == after else f"changed-{after}"
            if "duckdb" in sys.modules:
                duckdb_reuse.install(sys.modules["duckdb"])
        source_check.check(file, planned, self.digests[file])
        return module


def _observation(store: ArtifactStore, key: str) -> None:
    """Tell a shared store that `key` is about to hold a sensor's observation, which it
    uploads once `_observed` tells its digest, unless this machine uploaded that one last
    (store.remote_observations)."""
    mark = getattr(store, "observation", None)
    if mark is not None:
        mark(key)


def _observed(store: ArtifactStore, key: str, digest: str, size: int) -> None:
    done = getattr(store, "observed", None)
    if done is not None:
        done(key, digest, size)


def import_pipeline(root: Path, file: str) -> Any:
    """Import a pipeline file as a worker would: as its package's module, or standalone from
    its own directory, never with another pipeline directory's modules (import_paths.py)."""
    name = import_paths.for_root(str(root)).enter(file)
    _check_importable(name, root / file)
    return importlib.import_module(name)


class PipelineImportError(Exception):
    """Importing a pipeline file raised: the file and line to fix are the file's top-level
    code, whichever step happened to import it first."""

    def __init__(self, file: str, line: int | None, cause: Exception) -> None:
        where = f"{file} (line {line})" if line else file
        super().__init__(f"importing {where} failed: {cause}")
        self.file, self.line, self.cause = file, line, cause


def _line_in(path: Path, exc: BaseException) -> int | None:
    """The line of `path` that was running when `exc` was raised (its last frame there)."""
    target = str(path.resolve())
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
             if f.filename and Path(f.filename).resolve().as_posix() == target]
    return lines[-1] if lines else None


def _check_importable(name: str, path: Path) -> None:
    """A file named like a module that is already loaded (json.py, barca.py) would be that
    module, and a '.' in a file's name reads as a package: say so instead of failing on an
    attribute of the wrong module or on a package that does not exist."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        where = getattr(loaded, "__file__", None)
        if where is None or Path(where).resolve() != path.resolve():
            raise ImportError(f"{path.name} would be imported as module '{name}', which is "
                              f"already loaded from {where or 'Python itself'}; rename "
                              f"{path.name}")
    if "." in path.stem:
        raise ImportError(f"{path.name} cannot be imported as a module: the '.' in its name "
                          f"reads as a package; rename it (e.g. {path.stem.replace('.', '_')}.py)")


_OWN_FRAMES = ("/barca/engine/worker/step_runner.py", "/barca/engine/worker/key_source.py",
               "/barca/engine/worker/call_runner.py", "/barca/fanout.py", "<frozen importlib.",
               "/importlib/__init__.py")
# What the step returned could not be stored or cannot define keys: the user's code did not
# raise, so there is no traceback of theirs to show, and the message names the fix.
_VALUE_ERRORS = (SerializeError, KeySourceError, source_check.SourceChanged)


def error_parts(exc: BaseException) -> tuple[str, str, str | None]:
    """A step's exception as data: its type name, message and the user's frames only."""
    if isinstance(exc, PipelineImportError):
        tb = traceback.format_exception(type(exc.cause), exc.cause, exc.cause.__traceback__)
        user_frames = [line for line in tb if not any(own in line for own in _OWN_FRAMES)]
        return type(exc.cause).__name__, str(exc), "".join(user_frames) or None
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    user_frames = [] if isinstance(exc, _VALUE_ERRORS) else \
        [line for line in tb if not any(own in line for own in _OWN_FRAMES)]
    message = stop_message(exc, "step") or str(exc) or type(exc).__name__
    return type(exc).__name__, message, "".join(user_frames) or None


def _failure(step: StepSpec, attempt: int, started: float, exc: BaseException) -> StepOutcome:
    error_type, message, tb = error_parts(exc)
    return StepOutcome(step.step_id, step.node_id, step.key, step.index, step.run_hash,
                       "failed", attempt,
                       time.perf_counter() - started, max_rss_bytes=peak_memory.peak(),
                       error_type=error_type, error_message=message, traceback=tb)


def forced_digest(digest: str) -> str:
    """An output digest no earlier observation had: a sensor's `(True, value)` says its value
    was updated even when its bytes are the same, so its readers' run hashes must change."""
    return hashlib.blake2b(f"{digest}:update:{os.urandom(8).hex()}".encode(),
                           digest_size=16).hexdigest()
