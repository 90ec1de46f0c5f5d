"""The local executor's workers as processes: starting one, ending one, telling how one ended.
What a worker is given to do is `pool.LocalExecutor`'s business.

Workers are forked from the project's warm pool (with the pipeline's libraries already
imported, see `warm_pool`); a run that finds none starts one first, preloading what the
pipeline files import, and teaches it what its workers imported on top (`Starter.leave`).
Where no pool can run, workers are fresh interpreters.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from barca.engine.local.shared_capacity import SHARED_CAPACITY_ENV
from barca.errors import InfraError


class ForkedProcess:
    """A worker forked by the warm pool: the fork server's child, not ours, so watched by pidfd.
    Its exit status goes to the fork server, which says it when asked (`exit_status`)."""

    def __init__(self, pid: int, pool: Any) -> None:
        self.pid, self.pool = pid, pool
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            self._fd = None

    def _exited(self, timeout: float) -> bool:
        if self._fd is None:
            return True
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if ready:
            self.forget()
        return bool(ready)

    def poll(self) -> int | None:
        return 0 if self._exited(0) else None

    def wait(self, timeout: float | None = None) -> None:
        if not self._exited(timeout if timeout is not None else 1e9):
            raise subprocess.TimeoutExpired("warm worker", timeout or 0)

    def forget(self) -> None:
        """Close its pidfd: nothing more is asked of it (it has exited, or ends on its own)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def kill(self) -> None:
        if self._fd is not None:
            signal.pidfd_send_signal(self._fd, signal.SIGKILL)

    def exit_status(self) -> str | None:
        return self.pool.exit_status(self.pid) or None


WorkerProcess = subprocess.Popen | ForkedProcess


def exit_status(process: WorkerProcess) -> str | None:
    """How a worker that died in a step ended, as `history` shows it (`worker_exit`)."""
    if isinstance(process, ForkedProcess):
        return process.exit_status()
    from barca.engine.local.pool_messages import describe_exit

    return None if process.returncode is None else describe_exit(process.returncode)


class Starter:
    """Starts a run's workers: from the warm pool while it answers, else fresh."""

    def __init__(self, root: Path, files: Sequence[str], warm_seconds: float) -> None:
        self.root = root
        self.files = tuple(files)  # the pipeline files, root-relative: what workers import
        self.warm_seconds = warm_seconds
        self.warm_pool: Any = None  # a warm_pool.WarmPool, looked up at the first worker
        self.fresh_workers = 0

    def start(self) -> tuple[WorkerProcess, int, int]:
        """A new worker: its process, the pipe to it and the pipe from it."""
        env = dict(os.environ, BARCA_WORKER="1")
        env.pop(SHARED_CAPACITY_ENV, None)  # a step's own run never waits on its caller's units
        return self._fork_warm(env) or self._start_fresh(env)

    def _fork_warm(self, env: dict[str, str]) -> tuple[ForkedProcess, int, int] | None:
        """A worker from the warm pool, or None to start a fresh one."""
        if self.warm_seconds <= 0:
            return None
        from barca.engine.local import warm_pool

        if self.warm_pool is None and not self.fresh_workers and not warm_pool.unresponsive():
            self.warm_pool = warm_pool.WarmPool.connect(self.root) or warm_pool.start_and_connect(
                self.root, warm_pool.top_level_imports(self.root, self.files), self.warm_seconds)
        if self.warm_pool is None:
            return None
        to_r, to_w, from_r, from_w = _pipes()
        try:
            pid = self.warm_pool.fork_worker(self.root, env, (to_r, from_w), self.warm_seconds)
            return ForkedProcess(pid, self.warm_pool), to_w, from_r
        except (OSError, EOFError, ValueError):
            # the pool holds copies of these pipes' ends and may still fork a worker on them:
            # the fresh worker gets pipes of its own, and that one reads the end of this pipe
            for fd in (to_w, from_r):
                os.close(fd)
            self.warm_pool.close()
            self.warm_pool = None
            return None
        finally:
            os.close(to_r)
            os.close(from_w)

    def _start_fresh(self, env: dict[str, str]) -> tuple[subprocess.Popen, int, int]:
        to_r, to_w, from_r, from_w = _pipes()
        try:
            process = subprocess.Popen(  # -P: a project file (json.py) shadows no module
                [sys.executable, "-P", "-m", "barca.engine.local.worker", str(to_r),
                 str(from_w)],
                cwd=self.root, env=env, pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
                start_new_session=True)
        except OSError as exc:
            for fd in (to_w, from_r):
                os.close(fd)
            raise InfraError(f"cannot start a worker process: {exc}") from exc
        finally:
            os.close(to_r)
            os.close(from_w)
        self.fresh_workers += 1
        return process, to_w, from_r

    def leave(self, imported: set[str]) -> None:
        """Teach the warm pool what this run's workers imported, or start one if there was none."""
        from barca.engine.local import warm_pool

        if self.warm_pool is not None:
            self.warm_pool.learn(imported)
            self.warm_pool.close()
            self.warm_pool = None
        elif self.fresh_workers:
            warm_pool.start_pool_process(self.root, imported, self.warm_seconds)


def end(process: WorkerProcess, kill: bool, closed: bool = False) -> None:
    """Wait for a worker whose pipes are closed to exit; with `kill`, kill its process group
    first (the worker and whatever its step started). A forked worker that `closed` its pipe
    itself has run its exit handlers and is only being freed: the fork server reaps it."""
    if closed and isinstance(process, ForkedProcess):
        process.forget()
        return
    if kill:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _pipes() -> tuple[int, int, int, int]:
    """A worker's two pipes: (to it: read, write), (from it: read, write), writes widened."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    _widen(to_w)
    _widen(from_w)
    return to_r, to_w, from_r, from_w


def _widen(fd: int) -> None:
    """A 1 MiB pipe: a key source's columns (megabytes at 200,000 keys) then cross in a few
    reads instead of one per 64 KiB, and a lease (tens of KB for 256 steps) is written at
    once, not when the worker, busy with its last lease, reads it: meanwhile the coordinator
    could neither record outcomes nor refill the other workers."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError:  # above the system's pipe-max-size: the default size works, slower
        pass
