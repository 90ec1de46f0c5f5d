"""Shared helpers for the end-to-end tests.

`barca(tmp_path, *args)` runs the real command (`python -m barca.cli.main`) in a project
directory with stdout piped, so barca answers in JSON mode; `write` puts pipeline files into
that directory. Nothing is mocked: every run uses the real SQLite file and real workers.
"""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pytest

# Variables a developer may have set that would change what barca does under test.
_ISOLATED = ("BARCA_OUTPUT", "BARCA_ENV", "BARCA_READ_ONLY", "BARCA_POOL_SIZE", "BARCA_PROGRESS_SECS",
             "BARCA_REMOTE_URI", "BARCA_STATE_URI", "BARCA_STATE", "BARCA_SERVER",
             "BARCA_WARM_SECONDS")
# Tests start every worker fresh unless they ask for the warm pool (tests/e2e/test_warm_pool.py):
# a pool left behind by each of hundreds of test projects would outlive the suite.
os.environ["BARCA_WARM_SECONDS"] = "0"

CLI = [sys.executable, "-m", "barca.cli.main"]


def barca_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The test process's environment without BARCA_* settings, plus `env` (None unsets)."""
    out = {k: v for k, v in os.environ.items() if k not in _ISOLATED}
    out["BARCA_WARM_SECONDS"] = "0"
    for name, value in (env or {}).items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        """stdout parsed as one JSON document."""
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"stdout is not JSON ({exc}).\nstdout:\n{self.stdout}\n"
                                 f"stderr:\n{self.stderr}") from None

    @property
    def envelope(self) -> dict[str, Any]:
        """The last stderr line parsed as the JSON error envelope."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert lines, f"stderr is empty (exit {self.code}); stdout:\n{self.stdout}"
        try:
            return json.loads(lines[-1])
        except ValueError:
            raise AssertionError(f"last stderr line is not JSON:\n{self.stderr}") from None

    def expect(self, code: int) -> "Result":
        assert self.code == code, (f"exit {self.code}, expected {code}\nstdout:\n{self.stdout}\n"
                                   f"stderr:\n{self.stderr}")
        return self

    @property
    def steps(self) -> dict[str, dict[str, Any]]:
        """steps[] keyed by node name (the part of the id after ':')."""
        return {s["id"].split(":", 1)[1]: s for s in self.json["steps"]}

    def statuses(self) -> dict[str, str]:
        """name -> status (real runs) or action (dry runs)."""
        return {name: s.get("status", s.get("action")) for name, s in self.steps.items()}


def barca(cwd: Path, *args: Any, env: Mapping[str, str | None] | None = None,
          timeout: float = 60) -> Result:
    """Run `barca ARGS` in `cwd` with stdout piped (JSON mode) and return what it printed."""
    proc = subprocess.run([*CLI, *map(str, args)], cwd=cwd, env=barca_env(env),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def start_barca(cwd: Path, *args: Any, env: Mapping[str, str | None] | None = None,
                **popen: Any) -> subprocess.Popen:
    """Start `barca ARGS` in the background (for signals and concurrency)."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([*CLI, *map(str, args)], cwd=cwd, env=barca_env(env),
                            stdin=subprocess.DEVNULL, text=True, **popen)


def in_terminal(cwd: Path, *args: Any, env: Mapping[str, str | None] | None = None
                ) -> tuple[subprocess.Popen, str, str]:
    """Run `barca ARGS` with stdout on a pseudo-terminal (output small enough for its buffer);
    returns the finished process, what it printed there and its stderr."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, *map(str, args)], cwd=cwd, env=barca_env(env), stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    _, err = proc.communicate(timeout=60)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc, b"".join(chunks).decode().replace("\r\n", "\n"), err


def write(root: Path, files: Mapping[str, str]) -> Path:
    """Write each file (dedented) under root, creating directories."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def edit(path: Path, old: str, new: str) -> None:
    """Replace one exact piece of a file's text (fails loudly when it is not there)."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def lines(path: Path) -> list[str]:
    """The lines of a log file written by a pipeline, [] when it does not exist."""
    return path.read_text().splitlines() if path.exists() else []


def take_executed(root: Path) -> list[str]:
    """What the pipeline logged to executed.log since the last call (sorted), then forget it."""
    log = root / "executed.log"
    out = sorted(lines(log))
    log.unlink(missing_ok=True)
    return out


def drive(root: Path, script: str) -> dict:
    """Run a Python script in the project; it prints one JSON object as its last line."""
    (root / "drive.py").write_text(script)
    proc = subprocess.run([sys.executable, "drive.py"], cwd=root, env=barca_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def take_calls(root: Path) -> dict[str, list]:
    """What batch functions logged to calls.log since the last look, as node -> its calls'
    entries (sorted; an entry is what followed the node in a line, often the call's keys),
    then forget it."""
    log = root / "calls.log"
    out: dict[str, list] = {}
    for line in lines(log):
        node, *rest = json.loads(line)
        out.setdefault(node, []).append(rest[0] if len(rest) == 1 else rest)
    log.unlink(missing_ok=True)
    return {node: sorted(calls) for node, calls in out.items()}


def run_statuses(root: Path, env_name: str | None = None) -> list[str]:
    """`status` of every row in the runs table, oldest first (read-only)."""
    base = root / ".barca"
    db = base / "metadata.db" if env_name is None else base / "envs" / env_name / "metadata.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT status FROM runs ORDER BY started_at")]
    finally:
        conn.close()


def read_runs(root: Path, columns: str = "status") -> list[tuple]:
    conn = sqlite3.connect(f"file:{root / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT {columns} FROM runs ORDER BY started_at").fetchall()
    finally:
        conn.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project directory (its own root: it holds a barca.toml)."""
    (tmp_path / "barca.toml").write_text("")
    return tmp_path


def pool_processes(root: Path) -> list[int]:
    """Pids of warm pools serving this project."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"barca.cli.warm_launcher" in argv and str(root).encode() in argv:
            out.append(int(entry.name))
    return out


def wait_until_ready(root: Path, env: dict | None = None, timeout: float = 60) -> int:
    """The pid of the project's warm pool, once it accepts requests; `env`: what the runs
    added to this process's environment (the pool's identity covers it)."""
    from barca.engine.local.warm_pool import WarmPool

    saved = dict(os.environ)
    for name, value in (env or {}).items():
        if name.startswith("BARCA_"):
            continue
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pool = WarmPool.connect(root)
            if pool is not None:
                pool.close()
                pids = pool_processes(root)
                assert len(pids) == 1, pids
                return pids[0]
            time.sleep(0.1)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    raise AssertionError(f"no warm pool answered for {root} within {timeout}s")


def wait_until_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"warm pool {pid} still running after {timeout}s")


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    """Poll `predicate` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Server:
    """A `barca serve` process started by a test: its URL and what it printed on stderr."""

    proc: subprocess.Popen
    url: str
    stderr: list[str]

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, as a service manager stops it; its exit code (it must exit in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(15)
        return self.proc.wait(timeout)


def start_server(root: Path, *args: Any, env: Mapping[str, str | None] | None = None,
                 timeout: float = 60) -> Server:
    """Start `barca serve ARGS --port 0` in `root` and wait for its `serving on` line."""
    import threading

    proc = start_barca(root, "serve", *args, "--port", "0", env=env, stdout=subprocess.DEVNULL)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if "serving on http://" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout) or proc.poll() is not None:
        proc.kill()
        raise AssertionError("barca serve did not start:\n" + "\n".join(lines))
    url = next(line for line in lines if "serving on" in line).split("serving on ")[1].split()[0]
    return Server(proc, url, lines)
