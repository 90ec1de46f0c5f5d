"""Shared helpers for the end-to-end tests.

`barca(tmp_path, *args)` runs the real command (`python -m barca.cli.main`) in a project
directory with stdout piped, so barca answers in JSON mode; `write` puts pipeline files into
that directory. Nothing is mocked: every run uses the real SQLite file and real workers.
`ServeProcess` (and the `serve` fixture) is a real `barca serve` on a free loopback port
with an HTTP client on it. `Moto` (and the `moto` fixture) is a real S3 endpoint on loopback
(moto's server mode) for the remote store's tests, which count the requests it served.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import unquote, urlparse

import httpx
import pytest

# Variables a developer may have set that would change what barca does under test.
_ISOLATED = ("BARCA_OUTPUT", "BARCA_ENV", "BARCA_READ_ONLY", "BARCA_POOL_SIZE", "BARCA_CAPACITY",
             "BARCA_PROGRESS_SECS",
             "BARCA_REMOTE_URI", "BARCA_STORAGE_OPTIONS", "BARCA_STATE_URI", "BARCA_STATE", "BARCA_SERVER",
             "BARCA_WARM_SECONDS", "BARCA_SERVE_TOKEN", "BARCA_SERVER_TOKEN", "BARCA_EXECUTOR",
             "BARCA_SPARE_HEAP_MB", "RAY_ADDRESS")
# Commands run as a user's do, with the warm pool (its default), but one that idles out soon:
# each pytest process keeps its tests' pools apart (`pytest_configure`), as many at once as
# BARCA_WARM_POOLS' default lets a user keep, and stops those left at its end. A test about a
# fresh process (what the command itself imports, its own worker children) sets
# BARCA_WARM_SECONDS=0.
WARM_SECONDS = "20"
os.environ["BARCA_WARM_SECONDS"] = WARM_SECONDS

CLI = [sys.executable, "-m", "barca.cli.main"]

# -- running in parallel (pytest-xdist) -------------------------------------------------------
# Each pytest process (each xdist worker, or the one process of a serial run) keeps the warm
# pools its tests start in a private runtime directory of its own: a pool, its socket and the
# per-user bound on pools (BARCA_WARM_POOLS) then concern that process's tests alone, and no
# pool of the developer's own is seen or evicted.
_RUNTIME: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if worker == "main":
        # barca installed editable, under PYTHONDONTWRITEBYTECODE=1 (as this sandbox sets
        # it): no process would write its bytecode, so each of the thousands of
        # `barca` and worker processes the tests start would compile barca's sources again
        # (about 0.2 s each). Compiled once here, as a regular install does.
        import compileall

        import barca

        compileall.compile_dir(os.path.dirname(barca.__file__), quiet=1)
    # short: a pool's socket path must fit in 108 bytes
    _RUNTIME.append(Path(tempfile.mkdtemp(prefix=f"bx{worker}-", dir="/tmp")))
    os.environ["XDG_RUNTIME_DIR"] = str(_RUNTIME[-1])


def pytest_unconfigure(config: pytest.Config) -> None:
    from barca.engine.local import pool_registry

    for runtime in _RUNTIME:
        for info in pool_registry.live_pools(runtime / "barca"):
            pool_registry.stop(info)
        shutil.rmtree(runtime, ignore_errors=True)


# Tests that must not run beside each other: they start and kill pools, kill runs at chosen
# instants, or hold a deadline. They run one after the other on one worker (the others go on
# with the rest of the suite).
SERIAL = ("tests/reliability/test_warm_pool_faults.py", "tests/e2e/test_warm_pool.py",
          "tests/reliability/test_kill_trials.py")
# Files whose module- or session-scoped fixture builds something big (a 20,000-key project,
# a server answering every case, a table run): each runs whole on one worker, so that it is
# built once, not once per worker.
WHOLE = ("tests/browser/test_web_ui.py", "tests/reliability/test_fuzz.py",
         "tests/reliability/test_fuzz_http.py", "tests/server/test_openapi_conformance.py",
         "tests/server/test_serve_partitions.py", "tests/e2e/test_artifacts_and_types.py",
         "tests/e2e/test_inspect_sql.py")


# Tests on a Ray cluster (the `ray_cluster` fixture; `barca docs scale-out`'s example starts its
# own): one worker runs them all, one after the other, so that the cluster starts once and two
# never share the cores. Each is marked `ray` (`-m 'not ray'` leaves them out). The executor
# contract's Ray cases are named `[ray-...]`; another test that uses the cluster is named in
# RAY_TESTS (collection fails otherwise: run after the cluster was shut down, it found it gone).
RAY_FILES = ("tests/e2e/test_ray_executor.py", "tests/e2e/test_ray_operations.py")
RAY_CASES = ("[ray-", "[scale-out]")
RAY_TESTS = ("tests/engine/test_executor_contract.py::test_a_ray_lease_that_cannot_start_"
             "fails_its_step_with_the_workers_traceback",)


def work_unit(nodeid: str) -> str:
    """What is sent to one worker with this test: the serial group, its whole file, the Ray
    tests together, or itself."""
    path = nodeid.split("::", 1)[0]
    if path in RAY_FILES or nodeid in RAY_TESTS or any(case in nodeid for case in RAY_CASES):
        return "ray"
    return "serial" if path in SERIAL else path if path in WHOLE else nodeid


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist (a dev dependency) missing: the suite runs in one process
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class _Units(LoadScopeScheduling):
        """xdist's `load`, with the units of `work_unit` (largest first). xdist's own
        `xdist_group` does not work under pytest 9.2, which ignores the node id it rewrites."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        return _Units(config, log) if config.getvalue("dist") == "load" else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(node: Any) -> None:
        """Tell each worker whether its tests come in `work_unit`s (`_Units`), so that the
        Ray tests it gets run one after the other (`_more_ray_tests`)."""
        node.workerinput["barca_units"] = node.config.getvalue("dist") == "load"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if work_unit(item.nodeid) == "ray":
            item.add_marker(pytest.mark.ray)
        elif "ray_cluster" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} uses the Ray cluster but is not one of the "
                                    "Ray tests run together: name it in RAY_TESTS "
                                    "(tests/conftest.py)")


# What each test costs the machine, for finding where the suite's time goes: with
# BARCA_TEST_CPU_LOG=FILE, one line per test (its node id, then seconds of wall, of CPU in the
# pytest process, and of CPU in the child processes it waited for) is appended to FILE. A warm
# pool that a `barca` command started is not in it; one the pytest process started itself (a
# command run in-process) counts, all at once, in the test during which it is reaped.
_CPU_LOG = os.environ.get("BARCA_TEST_CPU_LOG")

if _CPU_LOG:
    import resource

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        def cpu(who: int) -> float:
            usage = resource.getrusage(who)
            return usage.ru_utime + usage.ru_stime

        began = (time.monotonic(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN))
        yield
        ended = (time.monotonic(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN))
        wall, own, children = (b - a for a, b in zip(began, ended))
        with open(_CPU_LOG, "a") as log:
            log.write(f"{item.nodeid}\t{wall:.3f}\t{own:.3f}\t{children:.3f}\n")


def barca_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The test process's environment without BARCA_* settings, plus `env` (None unsets)."""
    out = {k: v for k, v in os.environ.items() if k not in _ISOLATED}
    out["BARCA_WARM_SECONDS"] = WARM_SECONDS
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


def barca_here(cwd: Path, *args: Any, env: Mapping[str, str | None] | None = None) -> Result:
    """`barca ARGS` run in this process by click's test runner, with what `barca()` gives a
    command (cwd, the environment without BARCA_* settings, stdout captured: JSON mode), for
    read-only commands and refusals, which need no process of their own: the same entry
    point (`barca.cli.main.main`, its error envelopes and exit codes) without a cold start.
    Each such file keeps one test through `barca()`, the real process. (click 8.2's runner:
    the dev extra asks for it.)"""
    from click.testing import CliRunner

    from barca.cli.main import main

    settings = {**{name: None for name in _ISOLATED}, "BARCA_WARM_SECONDS": "0", **(env or {})}
    before, modules, path = os.getcwd(), set(sys.modules), list(sys.path)
    os.chdir(cwd)
    try:
        with CliRunner().isolation(env=settings) as (stdout, stderr, _):
            try:
                main([str(arg) for arg in args])
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else int(done.code is not None)
            except Exception:  # what the interpreter does with it: a traceback, exit 1
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            return Result(code, stdout.getvalue().decode(), stderr.getvalue().decode())
    finally:
        os.chdir(before)
        _forget_project_modules(modules, path)


def _forget_project_modules(modules: set[str], path: list[str]) -> None:
    """Drop the modules a command imported from outside the installed packages and barca
    (a pipeline file, imported to evaluate `partitions(EXPR)`), and restore `sys.path`: the
    next command, as a new process would, imports its own project's files."""
    import barca
    from barca.engine.worker import import_paths

    installed = tuple(os.path.realpath(p) + os.sep for p in
                      {sys.prefix, sys.base_prefix, sys.exec_prefix,
                       os.path.dirname(barca.__file__)})
    for name in set(sys.modules) - modules:
        module = sys.modules[name]
        origin = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", ())
                                                               or ()), None)
        if origin and not os.path.realpath(origin).startswith(installed):
            del sys.modules[name]
    sys.path[:] = path
    import_paths.for_root.cache_clear()  # its per-root view of those modules


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
    return proc, read_pty(master).decode().replace("\r\n", "\n"), err


def read_pty(master: int) -> bytes:
    """Everything written to a pseudo-terminal until its last writer closed it (then closed)."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: no writer left
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return b"".join(chunks)


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
    """Pids of warm pools serving this project (not what they forked: a child, a spare among
    them, has their command line too)."""
    pids = launcher_processes(root)
    return [pid for pid in pids if _parent(pid) not in pids]


def launcher_processes(root: Path) -> list[int]:
    """Pids of every process with the command line of this project's warm pool: the pools and
    the children they forked."""
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


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


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
        pools: list[int] = []
        while time.monotonic() < deadline:
            pool = WarmPool.connect(root)
            if pool is not None:
                pool.close()
                # one the project had before, replaced by this one, may still be on its way out
                pools = pool_processes(root)
                if len(pools) == 1:
                    return pools[0]
            time.sleep(0.1)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    raise AssertionError(f"no single warm pool answered for {root} within {timeout}s: {pools}")


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


# -- barca serve ------------------------------------------------------------------------------

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


def result_bytes(root: Path, artifact_path: str) -> bytes:
    """The bytes of a recorded result (`artifact_path`, project-relative): its file, or for
    a small result packed with others (`<pack>@<offset>:<length>`, store.packs) its range."""
    from barca.store.local_files import read_stored

    return read_stored(str(root / artifact_path))


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


_SCHEMA_10_HISTORY = """
CREATE TEMP TABLE history AS SELECT * FROM main.materializations;
DROP VIEW main.materializations;
CREATE TABLE materializations (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, node_id TEXT NOT NULL, key TEXT NOT NULL,
    step_id TEXT NOT NULL, run_hash TEXT NOT NULL, context TEXT, signature TEXT,
    status TEXT NOT NULL, artifact_path TEXT, format TEXT, size_bytes INTEGER,
    output_hash TEXT, elapsed_seconds REAL, attempts INTEGER, error_type TEXT,
    error_message TEXT, error_traceback TEXT, max_rss_bytes INTEGER, created_at REAL NOT NULL,
    batch TEXT, worker_exit TEXT, cpu_seconds REAL);
INSERT INTO materializations SELECT id, run_id, node_id, key, step_id, run_hash, context,
    signature, status, artifact_path, format, size_bytes, output_hash, elapsed_seconds,
    attempts, error_type, error_message, error_traceback, max_rss_bytes, created_at, batch,
    worker_exit, cpu_seconds FROM history;
DROP TABLE history;
DROP TABLE executions;
DROP TABLE nodes;
CREATE INDEX mat_by_key ON materializations (node_id, key, run_hash);
CREATE INDEX mat_by_node ON materializations (node_id, id);
CREATE INDEX mat_by_run ON materializations (run_id);
CREATE INDEX mat_failed ON materializations (node_id, key) WHERE status = 'failed';
PRAGMA user_version = 10;
"""


def as_schema_10(root: Path) -> None:
    """Rewrite a project's database as barca with schema 10 kept it: its history in one
    `materializations` table of text, which later versions compact (store.history_table)."""
    conn = sqlite3.connect(root / ".barca" / "metadata.db")
    try:
        conn.executescript(_SCHEMA_10_HISTORY)
    finally:
        conn.close()


class ServeProcess:
    """A running `barca serve`, its stderr lines and an HTTP client on its port."""

    def __init__(self, root: Path, args: tuple, warm: str = "0",
                 token: str | None = None, env: Mapping[str, str | None] | None = None,
                 port: int = 0) -> None:
        """`token`: the server is started with it (BARCA_SERVE_TOKEN) and the client sends it;
        `env`: more of the server's environment (a remote store's credentials); `port`: the
        port to listen on (0: any free one)."""
        self.root, self.args = root, args
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [*CLI, "serve", *map(str, args), "--port", str(port)], cwd=root,
            env=barca_env({**(env or {}), "BARCA_WARM_SECONDS": warm,
                           "BARCA_SERVE_TOKEN": token}),
            stdin=subprocess.DEVNULL,
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
        self.client = httpx.Client(base_url=self.url, timeout=60, headers={
            "Authorization": f"Bearer {token}"} if token else {})

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def _port_line(self):
        return next((m for m in map(re.compile(
            r"^\[barca\] serving on http://(?:127\.0\.0\.1|0\.0\.0\.0):(\d+)\s").match, list(self.lines)) if m),
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

    def wait_status(self, run_id: str, timeout: float = 30.0) -> dict:
        """GET /status/{run_id} once this server has handled its run's end (which follows
        the run's row saying how it ended by a few milliseconds)."""
        def ended():
            got = self.get(f"/status/{run_id}")
            assert got.status_code == 200, got.text
            return got.json() if got.json()["status"] not in ("pending", "running") else None
        return poll(ended, f"server to see run {run_id} end", timeout)

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


def stop_pools(root: Path, sig: int = signal.SIGTERM) -> None:
    """Stop the project's warm pools and what they forked, by pid (a child may end first)."""
    from barca.engine.local import pool_registry

    for pid in launcher_processes(root):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue
        wait_until_gone(pid)
    directory = pool_registry.state_dir()
    if directory is not None:
        pool_registry.project_paths(directory, root)[1].unlink(missing_ok=True)


@pytest.fixture
def serve():
    """`serve(root, *args, warm="0", token=None, env=None, port=0)`: a started `ServeProcess`. At teardown each one still
    running gets SIGTERM and must exit 0 within 10 s; the projects' warm pools are stopped."""
    started: list[ServeProcess] = []

    def start(root: Path, *args: Any, warm: str = "0", token: str | None = None,
              env: Mapping[str, str | None] | None = None, port: int = 0) -> ServeProcess:
        server = ServeProcess(root, args, warm, token, env, port)
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

# ---------------------------------------------------------------------------------------------
# The browser of the web UI's tests (tests/browser): one chromium for the whole session, here so
# that every test module shares it (two Playwright instances cannot run in one thread).

BROWSER_ARTIFACTS = Path(__file__).parent / "browser" / "artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def browser_unavailable(reason: str):
    if os.environ.get("BARCA_REQUIRE_BROWSER") == "1":
        pytest.fail(f"BARCA_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_unavailable("the playwright package is not installed")
    path = shutil.which("chromium")
    if not path:
        browser_unavailable("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, request):
    """A fresh page (1400x900, dark); its screenshot is saved at the end, and an uncaught
    script error fails the test."""
    size = getattr(request, "param", None) or {"width": 1400, "height": 900}
    context = chromium.new_context(viewport=size, color_scheme="dark")
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    BROWSER_ARTIFACTS.mkdir(exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", request.node.name)
    try:
        pg.screenshot(path=str(BROWSER_ARTIFACTS / f"{name}.png"))
    finally:
        context.close()
    assert not errors, f"script errors in the page: {errors}"


# A real S3 endpoint on loopback for the remote store's tests: moto's server mode.
MOTO_SERVER = Path(sys.executable).with_name("moto_server")


def require_moto() -> None:
    """Skip the calling test module unless s3fs and moto's server (the dev extra) are here."""
    pytest.importorskip("s3fs")
    if not MOTO_SERVER.exists():
        pytest.skip("moto[server] is not installed (pip install -e '.[dev]')",
                    allow_module_level=True)


def range_bytes(ranges: list[str | None], size: int) -> int:
    """How many bytes GETs with these Range headers (None: the whole object) read of an
    object of `size` bytes."""
    total = 0
    for r in ranges:
        if r is None:
            total += size
            continue
        first, _, last = r.removeprefix("bytes=").partition("-")
        total += min(int(last), size - 1) - int(first) + 1 if first else int(last)
    return total


class Moto:
    """A moto S3 server on a free loopback port, and the requests it served since `taken`."""

    def __init__(self, directory: Path) -> None:
        self.recording = directory / "requests.jsonl"
        env = dict(os.environ, MOTO_ENABLE_RECORDING="1",
                   MOTO_RECORDER_FILEPATH=str(self.recording))
        for _ in range(3):  # the free port found may be taken before moto binds it: it exits
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self.port = sock.getsockname()[1]
            self.url = f"http://127.0.0.1:{self.port}"
            self.proc = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p",
                                          str(self.port)], env=env, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            # its imports take seconds, more on a busy machine
            poll(lambda: self.proc.poll() is not None or self._answers(),
                 "moto server to answer", timeout=120)
            if self.proc.poll() is None:
                break
        else:
            raise AssertionError(f"moto's server exited with {self.proc.returncode} thrice")
        self.env = {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}
        import s3fs

        self.fs = s3fs.S3FileSystem(key="testing", secret="testing",
                                    endpoint_url=self.url, client_kwargs={
                                        "region_name": "eu-west-1"})

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
            return True
        except OSError:
            return False

    def bucket(self) -> str:
        name = f"team-{secrets.token_hex(4)}"
        self.fs.mkdir(name)
        self.taken()
        return name

    def taken(self) -> list[tuple[str, str]]:
        """(method, object path) of each request since the last call (the requests to the
        moto API itself are not recorded)."""
        if not self.recording.exists():
            return []
        text = self.recording.read_text()
        self.recording.write_text("")
        return [(r["method"], unquote(urlparse(r["url"]).path) + "?" +
                 unquote(urlparse(r["url"]).query)) for r in json_objects(text)]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """One moto server per pytest process, shared by every test module that asks for it (its
    start and first requests cost about a second of CPU). Each test keeps to a bucket of its
    own (`bucket()`, which also clears what was recorded before), so none sees another's
    objects or requests; a test that stops or restarts moto starts a `Moto` of its own."""
    server = Moto(tmp_path_factory.mktemp("moto"))
    try:
        yield server
    finally:
        server.stop()


# A real multi-node Ray cluster on this machine for the Ray executor's tests (marked `ray`).
class RayCluster:
    """`ray.cluster_utils.Cluster`: a head and a worker node, each its own raylet with one CPU
    (so a run spreads over both); `add_node(node_ip_address="127.0.0.2")` adds a node that Ray
    takes for another machine. The CLI reaches it through RAY_ADDRESS (`env`)."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args={
            "num_cpus": 1, "include_dashboard": False})
        self.cluster.add_node(num_cpus=1)
        self.address = self.cluster.address
        self.env = {"RAY_ADDRESS": self.address}

    def add_node(self, **args: Any) -> Any:
        node = self.cluster.add_node(num_cpus=1, **args)
        self.cluster.wait_for_nodes()
        return node

    def remove_node(self, node: Any) -> None:
        """Kill the node's processes, then wait until the cluster no longer counts it alive
        (a later test would otherwise see a cluster that still spans machines)."""
        self.cluster.remove_node(node, allow_graceful=False)
        self.cluster.wait_for_nodes(timeout=120)

    def shutdown(self) -> None:
        """Stop every node, then kill by pid whatever of Ray's this process started that is
        still there (worker processes outlive their raylet for a moment), and remove the
        cluster's session directory (its logs, the projects its jobs unpacked)."""
        started = _ray_processes()
        session = self.cluster.head_node.get_session_dir_path()
        self.cluster.shutdown()
        for pid in started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(session, ignore_errors=True)


def descendants(pid: int) -> set[int]:
    """`pid` and every process descended from it, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    found, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in found} - found
        grew = bool(more)
        found |= more
    return found


def _ray_processes() -> list[int]:
    """The Ray processes (raylets, GCS, workers) descended from this process."""
    mine = descendants(os.getpid())
    out = []
    for pid in mine - {os.getpid()}:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ray" in command:
            out.append(pid)
    return out


_RAY_CLUSTERS: list[RayCluster] = []  # the one a test of this process started, until shut down


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    pytest.importorskip("ray")
    cluster = RayCluster()
    _RAY_CLUSTERS.append(cluster)
    try:
        yield cluster
    finally:
        if cluster in _RAY_CLUSTERS:
            _RAY_CLUSTERS.remove(cluster)
            cluster.shutdown()


def _more_ray_tests(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Whether this process may run another test marked `ray` after `item`. Under xdist's
    `load` (`_Units`) the Ray tests are one unit (`work_unit`), sent whole to one worker and
    run there one after the other: the next test says it (under another --dist, assume so).
    In one process, any later test of the session may be."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is not None:
        if not workerinput.get("barca_units"):  # another --dist: Ray tests may come later
            return True
        return nextitem is not None and nextitem.get_closest_marker("ray") is not None
    items = item.session.items
    return any(later.get_closest_marker("ray") for later in items[items.index(item) + 1:])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The Ray cluster is shut down after the last Ray test of this process, not at the end
    of the session: an idle cluster's raylets, GCS and idle workers keep using CPU while the
    worker goes on with the rest of the suite."""
    yield
    if _RAY_CLUSTERS and item.get_closest_marker("ray") and not _more_ray_tests(item, nextitem):
        _RAY_CLUSTERS.pop().shutdown()


def json_objects(text: str) -> list[dict]:
    """The JSON objects moto's recording holds: one a line, except that two requests its
    threads record at once may share a line (seen in a full run: `Extra data`)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return out
        value, at = decoder.raw_decode(text, at)
        out.append(value)
