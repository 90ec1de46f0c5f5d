"""`parallel()` and `parallel_map()`: fan out branches inside a step, results in order.

In a worker process each branch runs in a forked copy of the worker, at most the pool size
(BARCA_POOL_SIZE, default the number of cores) at a time; a branch's return value comes back
pickled. Anywhere else (a plain script, a unit test) the branches run one after the other in
this process. Either way every branch runs to its end, and then, if any raised, one
`ParallelError` names each failure. A DuckDB relation a branch returns is run by the branch
and comes back as a pyarrow Table (a relation lives on its process's connection). Branches
are not steps: not cached, not retried, not recorded apart from their step; what they print
is their step's output.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, Iterable, Sequence

_workers = 0  # set in a worker process (set_workers): how many branches may run at once


def set_workers(limit: int) -> None:
    """Called by a worker process: fork branches from now on, `limit` at a time."""
    global _workers
    _workers = max(1, limit)


class BranchFailure:
    """What one branch raised (or why its result could not come back). A plain class, not a
    NamedTuple or dataclass: `import barca` loads this module, and those cost more to make."""

    __slots__ = ("index", "function", "error_type", "message", "traceback")

    def __init__(self, index: int, function: str, error_type: str, message: str,
                 traceback: str) -> None:
        self.index, self.function, self.error_type = index, function, error_type
        self.message, self.traceback = message, traceback

    def __repr__(self) -> str:
        return f"BranchFailure({self.line()!r})"

    def line(self) -> str:
        return f"[{self.index}] {self.function}: {self.error_type}: {self.message}"


class ParallelError(Exception):
    """Raised by parallel() after every branch ended, when any failed.

    `failures`: each failed branch (index in argument order, function, error type, message,
    traceback); `results`: every branch's result in argument order, a failed branch's slot
    holding its BranchFailure.
    """

    def __init__(self, failures: Sequence[BranchFailure], results: Sequence[Any]) -> None:
        self.failures = list(failures)
        self.results = list(results)
        lines = "; ".join(f.line() for f in self.failures)
        super().__init__(f"{len(self.failures)} of {len(self.results)} parallel branches "
                         f"failed: {lines}")
        for failure in self.failures:
            self.add_note(f"branch {failure.line()}\n{failure.traceback.rstrip()}")


class BranchResultError(ParallelError):
    """Raised by parallel() instead of ParallelError when a branch's return value could not
    be passed back to its caller (it cannot be pickled, or the branch's process died before
    sending it), as the published barca raises it. A ParallelError, so that code catching
    that catches this too; its `failures` name every failed branch."""


def parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Run each call (e.g. `functools.partial(fetch, "emea")`); their results in argument
    order. Raises ParallelError once all have ended if any raised (BranchResultError if a
    branch's result could not come back)."""
    for i, call in enumerate(calls):
        if not callable(call):
            raise TypeError(f"parallel() takes callables such as functools.partial(fn, ...); "
                            f"argument {i} is a {type(call).__name__}")
    if _workers and calls:  # even one: a branch never changes its caller's process
        outcomes = _forked(calls, _workers)
    else:
        outcomes = [_call(i, call) for i, call in enumerate(calls)]
    failures = [o for o in outcomes if isinstance(o, BranchFailure)]
    if failures:
        lost = any(f.error_type == "BranchResultError" for f in failures)
        raise (BranchResultError if lost else ParallelError)(failures, outcomes)
    return outcomes


def parallel_map(fn: Callable[..., Any], items: Iterable[Any], **kwargs: Any) -> list[Any]:
    """`fn(item, **kwargs)` for each item, as parallel() runs them; results in item order."""
    return parallel(*(functools.partial(fn, item, **kwargs) for item in items))


def _name(call: Callable[[], Any]) -> str:
    fn = call.func if isinstance(call, functools.partial) else call
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    if isinstance(call, functools.partial):
        args = [repr(a) for a in call.args] + [f"{k}={v!r}" for k, v in call.keywords.items()]
        shown = ", ".join(args)
        return f"{name}({shown if len(shown) <= 60 else shown[:59] + '…'})"
    return name


def _call(index: int, call: Callable[[], Any]) -> Any:
    try:
        return _passable(call())
    except Exception as exc:  # noqa: BLE001 - collected, raised together by parallel()
        return _failure(index, call, exc)


def _passable(value: Any) -> Any:
    """A branch's value as it can come back: a DuckDB relation, which only its own process's
    connection can run, is run here into a pyarrow Table (the same outside a worker, so a
    step gets one type either way); anything else as it is."""
    duckdb = sys.modules.get("duckdb")  # no relation exists unless duckdb was imported
    if duckdb is None or not isinstance(value, duckdb.DuckDBPyRelation):
        return value
    table = value.arrow()  # newer DuckDB gives a batch reader, older versions the table
    return table.read_all() if hasattr(table, "read_all") else table


def _failure(index: int, call: Callable[[], Any], exc: BaseException) -> BranchFailure:
    import traceback

    from barca.engine.protocol import stop_message

    own = exc.__traceback__  # the frame that called the branch: barca's, not shown
    text = "".join(traceback.format_exception(type(exc), exc, own.tb_next if own else None))
    message = stop_message(exc, "branch") or str(exc) or type(exc).__name__
    return BranchFailure(index, _name(call), type(exc).__name__, message, text)


# -- in a worker: forked branches (their imports are here: `import barca` stays light) --

def _forked(calls: Sequence[Callable[[], Any]], limit: int) -> list[Any]:
    """Run each call in a child process, `limit` at a time; outcomes in argument order. Each
    branch's peak memory counts for the step (engine.peak_memory)."""
    import select

    from barca.engine.worker import peak_memory

    outcomes: list[Any] = [None] * len(calls)
    waiting = list(range(len(calls)))
    running: dict[int, tuple[int, int, list[bytes]]] = {}  # read fd -> (index, pid, chunks)
    try:
        while waiting or running:
            while waiting and len(running) < limit:
                index = waiting.pop(0)
                read_fd, pid = _start(calls[index])
                running[read_fd] = (index, pid, [])
            ready, _, _ = select.select(list(running), [], [])
            for fd in ready:
                index, pid, chunks = running[fd]
                data = os.read(fd, 1 << 16)
                if data:
                    chunks.append(data)
                    continue
                os.close(fd)
                del running[fd]
                _, status, usage = os.wait4(pid, 0)
                peak_memory.note_branch(usage)
                outcomes[index] = _received(index, calls[index], b"".join(chunks), status)
    finally:
        for fd, (_, pid, _) in running.items():  # interrupted: leave no branch behind
            os.close(fd)
            _kill(pid)
    return outcomes


def _start(call: Callable[[], Any]) -> tuple[int, int]:
    import warnings

    read_fd, write_fd = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    with warnings.catch_warnings():  # Python 3.12+ warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the branch
        os.close(read_fd)
        _branch(call, write_fd)
    os.close(write_fd)
    return read_fd, pid


def _branch(call: Callable[[], Any], write_fd: int) -> None:
    """In the child: run the call, send (ok, value) or (error, parts) back, exit at once
    (no atexit handlers, no flushing of what the parent had buffered)."""
    import pickle

    status = 0
    try:
        # the worker's own streams hand lines to its threads, which the child has not got:
        # write straight to fds 1 and 2, which the worker reads as its step's output
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        try:
            value = _passable(call())
        except BaseException as exc:  # noqa: BLE001 - reported to the caller as data, its
            payload = _error_payload(call, exc)  # sys.exit() and KeyboardInterrupt too
        else:
            try:
                payload = pickle.dumps(("ok", value), protocol=5)
            except Exception as exc:  # noqa: BLE001 - pickle refuses in many ways
                payload = pickle.dumps(("error", (
                    "BranchResultError", f"the branch returned a {type(value).__name__}, "
                    f"which cannot be passed back: {type(exc).__name__}: {exc}", "")))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - whatever happens, the child never returns
        status = 1
    finally:
        os._exit(status)


def _error_payload(call: Callable[[], Any], exc: BaseException) -> bytes:
    import pickle

    failure = _failure(0, call, exc)
    return pickle.dumps(("error", (failure.error_type, failure.message, failure.traceback)))


def _received(index: int, call: Callable[[], Any], data: bytes, status: int) -> Any:
    import pickle

    try:
        kind, value = pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - no (or a broken) result came back
        why = _exit_text(status)
        return BranchFailure(index, _name(call), "BranchResultError",
                             f"the branch's result could not be passed back ({why})",
                             f"{type(exc).__name__}: {exc}")
    if kind == "ok":
        return value
    error_type, message, text = value
    return BranchFailure(index, _name(call), error_type, message, text)


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        import signal

        return f"its process was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"its process exited with code {os.WEXITSTATUS(status)}"


def _kill(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
