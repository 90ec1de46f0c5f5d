"""Helpers for the `barca serve` tests: the real server over real HTTP on loopback.

`serve(root, *args)` starts `python -m barca.cli.main serve ARGS --port 0` in a project,
reads the port from the first stderr line (a thread keeps every stderr line) and returns a
`ServeProcess` whose `client` is an httpx client on that port. At the end of the test every server
still running gets SIGTERM and must exit 0 within 10 seconds; the warm pools of the projects
the servers ran are stopped (as tests/e2e/test_warm_pool.py does).

This conftest also re-exports the helpers of tests/conftest.py: conftest modules outside a
package all import as `conftest`, and pytest replaces the top one with this one when it
enters this directory, so the test files of other directories collected after it still find
`barca`, `write`, ... here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

_spec = importlib.util.spec_from_file_location("barca_tests_conftest",
                                               Path(__file__).parents[1] / "conftest.py")
_top = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _top
_spec.loader.exec_module(_top)
globals().update({name: value for name, value in vars(_top).items()
                  if not name.startswith("__") and name not in globals()
                  and type(value).__name__ != "FixtureFunctionDefinition"})

from barca_tests_conftest import (CLI, barca, barca_env, pool_processes,  # noqa: E402
                                  read_runs, wait_until_gone, write)

STOP_SECONDS = 10.0  # SIGTERM to exit
LIVE = ("pending", "running")


def poll(fn: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.1) -> Any:
    """Call `fn` until it returns something truthy and return that; fail naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def db_rows(root: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{root / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


class ServeProcess:
    """A running `barca serve`, its stderr lines and an HTTP client on its port."""

    def __init__(self, root: Path, args: tuple, warm: str) -> None:
        self.root, self.args = root, args
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [*CLI, "serve", *map(str, args), "--port", "0"], cwd=root,
            env=barca_env({"BARCA_WARM_SECONDS": warm}), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        try:
            first = poll(lambda: self._port_line() or self.proc.poll() is not None,
                         f"`barca serve {' '.join(map(str, args))}` to print its port")
            if first is True:
                self.reader.join(5)
                raise AssertionError(f"barca serve exited {self.proc.returncode} before "
                                     f"serving:\n{self.stderr}")
            self.port = int(first.group(1))
        except BaseException:
            self.kill()
            raise
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, timeout=60)

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def _port_line(self):
        return next((m for m in map(re.compile(
            r"^\[barca\] serving on http://127\.0\.0\.1:(\d+)\s").match, list(self.lines)) if m),
            None)

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    # HTTP -------------------------------------------------------------------------------

    def get(self, path: str, **kw) -> httpx.Response:
        return self.client.get(path, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return self.client.post(path, **kw)

    def delete(self, path: str, **kw) -> httpx.Response:
        return self.client.delete(path, **kw)

    def runs(self) -> list[dict]:
        got = self.get("/runs", params={"limit": "1000"})
        assert got.status_code == 200, got.text
        return got.json()["runs"]

    def wait_run(self, predicate: Callable[[dict], bool], what: str,
                 timeout: float = 30.0) -> dict:
        """The first run in GET /runs (newest first) for which `predicate` holds."""
        return poll(lambda: next((r for r in self.runs() if predicate(r)), None), what, timeout)

    def wait_ended(self, run_id: str, timeout: float = 30.0) -> dict:
        """GET /runs/{run_id} once its run is no longer pending or running."""
        def ended():
            got = self.get(f"/runs/{run_id}")
            assert got.status_code == 200, got.text
            return got.json() if got.json()["run"]["status"] not in LIVE else None
        return poll(ended, f"run {run_id} to end", timeout)

    def start_run(self, body: dict) -> str:
        got = self.post("/runs", json=body)
        assert got.status_code == 202, (got.status_code, got.text)
        return got.json()["run_id"]

    # life -------------------------------------------------------------------------------

    def terminate(self, timeout: float = STOP_SECONDS) -> int | None:
        """SIGTERM; the exit code, or None (and the process group killed) if it did not
        exit within `timeout` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        self.client.close()
        self.reader.join(5)
        return code

    def stop(self) -> None:
        """SIGTERM, asserting exit 0 within 10 seconds."""
        code = self.terminate()
        assert code is not None, f"barca serve still running {STOP_SECONDS}s after SIGTERM"
        assert code == 0, f"barca serve exited {code} after SIGTERM:\n{self.stderr}"

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


def stop_pools(root: Path) -> None:
    from barca.engine.local import pool_registry

    for pid in pool_processes(root):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        wait_until_gone(pid)
    directory = pool_registry.state_dir()
    if directory is not None:
        pool_registry.project_paths(directory, root)[1].unlink(missing_ok=True)


@pytest.fixture
def serve():
    """`serve(root, *args, warm="0")`: a started `ServeProcess`. At teardown each one still
    running gets SIGTERM and must exit 0 within 10 s; the projects' warm pools are stopped."""
    started: list[ServeProcess] = []

    def start(root: Path, *args: Any, warm: str = "0") -> ServeProcess:
        server = ServeProcess(root, args, warm)
        started.append(server)
        return server

    yield start
    problems = []
    for server in started:
        if server.proc.returncode is not None and not server.client.is_closed:
            server.client.close()
        if server.proc.returncode is not None:
            continue
        code = server.terminate()
        if code != 0:
            problems.append(f"barca serve {' '.join(map(str, server.args))}: "
                            + ("still running 10 s after SIGTERM" if code is None
                               else f"exit {code} after SIGTERM")
                            + "\n" + server.stderr[-3000:])
    for root in dict.fromkeys(s.root for s in started):
        stop_pools(root)
    assert not problems, "\n\n".join(problems)
