"""The worker process: import the pipeline module once, run leased steps, write artifacts.

Started by the local executor as `python -m barca.engine.worker IN_FD OUT_FD`. It never opens the
metadata database; it reports every result as a `StepOutcome`. What a step prints through
`sys.stdout` / `sys.stderr` goes back as `LogLine` messages tagged with the step id.
"""

from __future__ import annotations

import atexit
import importlib
import os
import resource
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from barca.engine.key_source import write_key_source
from barca.engine.protocol import (Imported, Lease, LogLine, Outcomes, Shutdown, StepOutcome,
                                   StepSpec, StepStarted, Warm, out_of_band, read_frame,
                                   write_frame)
from barca.engine.source_imports import is_project_file
from barca.store.artifacts import choose_format, read_value, write_value
from barca.store.paths import EXTENSIONS

FLUSH_EVERY = 16  # outcomes per message at most...
FLUSH_SECONDS = 0.02  # ...and never held longer than this


class _StepStream:
    """A text stream that forwards whole lines to the coordinator, tagged with the step id."""

    def __init__(self, worker: "Worker", stream: str) -> None:
        self._worker = worker
        self._stream = stream
        self._pending = ""
        self.encoding = "utf-8"

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self._worker.send(LogLine(self._worker.current, self._stream, line))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._worker.send(LogLine(self._worker.current, self._stream, self._pending))
            self._pending = ""

    def isatty(self) -> bool:
        return False


class Worker:
    def __init__(self, in_fd: int, out_fd: int, root: Path) -> None:
        self.in_fd, self.out_fd, self.root = in_fd, out_fd, root
        self.current = ""
        self.modules: dict[str, Any] = {}
        self.finished: list[StepOutcome] = []
        self.lock = threading.Lock()
        self.modules_seen = 0
        self.reported: set[str] = set()
        # the last step's value, freed once its outcome is sent: freeing a key source's
        # 200,000 entries takes about 10 ms the coordinator need not wait for
        self.last_value: Any = None

    def send(self, message: Any) -> None:
        with self.lock:
            write_frame(self.out_fd, message)

    def finish(self, outcome: StepOutcome) -> None:
        with self.lock:
            self.finished.append(outcome)
            full = len(self.finished) >= FLUSH_EVERY
        if full:
            self.flush()

    def flush(self) -> None:
        """Report finished steps; many small steps share one message."""
        with self.lock:
            if self.finished:
                write_frame(self.out_fd, Outcomes(tuple(self.finished)))
                self.finished = []

    def _flush_regularly(self) -> None:
        """No outcome waits longer than FLUSH_SECONDS, even behind a long step."""
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except OSError:
                return

    def serve(self) -> None:
        sys.stdout = _StepStream(self, "stdout")
        sys.stderr = _StepStream(self, "stderr")
        threading.Thread(target=self._flush_regularly, daemon=True).start()
        while True:
            try:
                message = read_frame(self.in_fd)
            except EOFError:
                return
            if isinstance(message, Shutdown):
                return
            if isinstance(message, Lease):
                for step in message.steps:
                    self.finish(self.run_step(step))
                self.flush()
                self.last_value = None
                self._report_imports()
            elif isinstance(message, Warm):
                for file in message.files:
                    try:
                        self._module(file)
                    except BaseException:  # noqa: BLE001 - the step that needs it reports it
                        self.modules.pop(file, None)

    def _report_imports(self) -> None:
        """Tell the coordinator which libraries steps imported, for the warm pool to preload."""
        if len(sys.modules) == self.modules_seen:
            return
        self.modules_seen = len(sys.modules)
        names = {name.partition(".")[0] for name in list(sys.modules)}
        new = names - self.reported
        self.reported |= new
        third_party = []
        for name in sorted(new):
            origin = getattr(sys.modules.get(name), "__file__", None)
            if not name.startswith("_") and name not in ("__main__", "barca") and \
                    not (origin and is_project_file(str(self.root), origin)):
                third_party.append(name)
        if third_party:
            self.send(Imported(tuple(third_party)))

    def run_step(self, step: StepSpec) -> StepOutcome:
        self.current = step.step_id
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1:  # the coordinator restarts this step's timeout
                self.flush()
                self.send(StepStarted(step.step_id, attempt))
            try:
                outcome = self._attempt(step, attempt, started)
            except BaseException as exc:  # the user's step failed: report it as data
                if isinstance(exc, KeyboardInterrupt):
                    raise
                if attempt < step.retries and not isinstance(exc, SystemExit):
                    time.sleep(step.retry_backoff * attempt)
                    continue
                outcome = _failure(step, attempt, started, exc)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            return outcome

    def _attempt(self, step: StepSpec, attempt: int, started: float) -> StepOutcome:
        fn = getattr(self._module(step.file), step.function)
        kwargs: dict[str, Any] = dict(step.key_args)
        for ref in step.inputs:
            kwargs[ref.param] = _load_input(ref)
        value = fn(**kwargs)
        if step.kind == "sensor" and isinstance(value, tuple) and len(value) == 2 \
                and isinstance(value[0], bool):
            value = value[1]
        self.last_value = value
        fmt = "json" if step.key_source else choose_format(value, step.serializer)
        path = Path(step.artifact_dir) / f"{step.run_hash}.{EXTENSIONS[fmt]}"
        columns = None
        if step.key_source:
            fmt, size, digest, columns = write_key_source(value, path, step.known_chunks)
            columns = columns._replace(keys=out_of_band(columns.keys), values=None
                                       if columns.values is None else out_of_band(columns.values))
        else:
            size, digest = write_value(value, path, fmt)
        return StepOutcome(step.step_id, step.node_id, step.key, step.index, step.run_hash,
                           "success",
                           attempt, time.perf_counter() - started, str(path), fmt, size, digest,
                           _peak_rss(), key_columns=columns)

    def _module(self, file: str) -> Any:
        module = self.modules.get(file)
        if module is None:
            module = self.modules[file] = _import_pipeline(self.root, file)
            if "duckdb" in sys.modules:
                from barca.engine import duckdb_reuse

                duckdb_reuse.install(sys.modules["duckdb"])
        return module


def _import_pipeline(root: Path, file: str) -> Any:
    """Import a pipeline file as a worker would: as its package's module, or standalone."""
    path = root / file
    parts = Path(file).with_suffix("").parts
    package_depth = 0
    for i in range(len(parts) - 1):
        if (root.joinpath(*parts[: i + 1]) / "__init__.py").exists():
            package_depth = i + 1
        else:
            break
    if package_depth == len(parts) - 1 and package_depth > 0:
        name = ".".join(parts)
    else:
        name = parts[-1]
        directory = str(path.parent)
        if directory not in sys.path:
            sys.path.insert(0, directory)
    if str(root) not in sys.path:
        sys.path.insert(1 if sys.path and sys.path[0] != str(root) else 0, str(root))
    return importlib.import_module(name)


def _load_input(ref: Any) -> Any:
    if ref.kind == "inline":
        return ref.value
    if ref.kind == "none":
        return None
    if ref.kind == "artifact":
        return read_value(Path(ref.paths[0]), ref.formats[0], ref.annotation)
    return [read_value(Path(p), f, _element_annotation(ref.annotation))
            for p, f in zip(ref.paths, ref.formats)]


def _element_annotation(annotation: str | None) -> str | None:
    """`list[pd.DataFrame]` -> `pd.DataFrame`, so collect() reads each element by its type."""
    if annotation and annotation.startswith("list[") and annotation.endswith("]"):
        return annotation[5:-1]
    return annotation


def _failure(step: StepSpec, attempt: int, started: float, exc: BaseException) -> StepOutcome:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    user_frames = [line for line in tb if "/barca/engine/worker.py" not in line
                   and "/barca/engine/key_source.py" not in line]
    message = str(exc) or type(exc).__name__
    if isinstance(exc, SystemExit):
        message = f"step called sys.exit({exc.code})"
    return StepOutcome(step.step_id, step.node_id, step.key, step.index, step.run_hash,
                       "failed", attempt,
                       time.perf_counter() - started, max_rss_bytes=_peak_rss(),
                       error_type=type(exc).__name__, error_message=message,
                       traceback="".join(user_frames))


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(in_fd: int, out_fd: int, root: Path) -> None:
    """Serve leases until told to stop; shared by a fresh worker and one forked warm."""
    from barca.engine import source_imports

    source_imports.install(str(root))
    try:
        Worker(in_fd, out_fd, root).serve()
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # interrupted, or the coordinator stopped listening: nothing is left to report
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    _exit_without_teardown()


def _exit_without_teardown() -> None:
    """Leave without unloading pandas, duckdb and the like, which takes a tenth of a second
    the run would wait for. Exit handlers (a library flushing its buffers) still run; as in a
    forked multiprocessing worker, module-level objects are not finalized."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


def main() -> None:
    run(int(sys.argv[1]), int(sys.argv[2]), Path.cwd())


if __name__ == "__main__":
    main()
