"""The warm pool must be as trustworthy as a fresh process: killed, stopped, limited, edited
under, and piled up, it behaves as `barca` without it would (issue 13, items 5 and 7-14).

Each test turns the pool on in a private temp directory of its own (so its pools, and the
per-user bound, concern it alone), starts the pool from the test body (the pool's identity
covers the environment, and pytest's differs between fixture and test), and stops what it
started.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import (barca, poll, pool_processes, read_runs, start_barca, stop_pools,
                      wait_for, wait_until_gone, wait_until_ready, write)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the warm pool is Linux-only")

STEPS = """
    import os
    import signal
    import subprocess
    import time
    from pathlib import Path
    from barca import asset

    @asset()
    def quick() -> int:
        return 1

    @asset()
    def slow() -> int:
        Path(f"slow.started.{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while not Path("go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        Path("slow.finished").write_text("yes")
        return 2

    @asset()
    def exits() -> int:
        os._exit(3)

    @asset()
    def segfaults() -> int:
        import ctypes
        return ctypes.string_at(0)

    @asset()
    def aborts() -> int:
        os.abort()

    @asset()
    def big() -> int:
        return len(bytearray(3 * 1024 ** 3))

    @asset()
    def noisy() -> int:
        subprocess.run(["echo", "from a subprocess"], check=True)
        os.write(1, b"from os.write 1\\n")
        os.write(2, b"from os.write 2\\n")
        print("from print")
        return 3

    @asset()
    def orphan() -> int:
        subprocess.Popen(["sleep", "1237"])
        return 4
"""


@pytest.fixture
def warm(project: Path):
    """(project, env): the pool on, its state in a short private temp directory (a socket
    path must fit in 108 bytes)."""
    temp = tempfile.mkdtemp(prefix="bw")
    env = {"BARCA_WARM_SECONDS": "60", "TMPDIR": temp, "XDG_RUNTIME_DIR": None}
    write(project, {"p.py": STEPS})
    yield project, env
    (project / "go").touch()  # a `slow` step still running ends
    stop_pools(project, signal.SIGKILL)
    shutil.rmtree(temp, ignore_errors=True)


def with_path(lib: Path) -> str:
    """PYTHONPATH with `lib` first, keeping what the suite runs with (barca's sources when
    they are not installed)."""
    return os.pathsep.join(filter(None, [str(lib), os.environ.get("PYTHONPATH")]))


def start_pool(project: Path, env: dict) -> int:
    barca(project, "get", "quick", "p.py", "--refresh", "quick", env=env).expect(0)
    return wait_until_ready(project, env)



def _proc(pid: int, name: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in Path(f"/proc/{pid}/{name}").read_text()
                .splitlines() if ":" in line)


def identity_checked(pid: int) -> None:
    """Wait until the pool has made its next periodic identity check (fork_server's
    CHECK_SECONDS) and gone back to waiting for requests, or exited. An idle pool reads a
    file only then (its owner file: `syscr` in /proc/PID/io grows)."""
    def idle_reads() -> int | None:
        if not alive(pid):
            return -1
        reads = int(_proc(pid, "io")["syscr"])
        return reads if _proc(pid, "status")["State"].split()[0] == "S" else None

    before = poll(idle_reads, f"pool {pid} to wait for requests")
    poll(lambda: not alive(pid) or (idle_reads() or 0) > before,
         f"pool {pid} to check its identity", timeout=30)


def after_last_use(env: dict) -> None:
    """Wait until the file system stamps a file written now later than any pool's last use
    (its lock file's mtime, which eviction orders pools by): a pool used next is then the
    most recently used by its stamp too."""
    state = Path(env["TMPDIR"])
    last = max((p.stat().st_mtime_ns for p in state.rglob("*.lock")), default=0)
    probe = state / "probe"

    def later() -> bool:
        probe.touch()
        return probe.stat().st_mtime_ns > last

    wait_for(later, "the file system's clock to pass the last pool use")
    probe.unlink()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def started(project: Path) -> list[int]:
    """Pids of the processes that started the `slow` step."""
    return [int(path.suffix[1:]) for path in project.glob("slow.started.*")]


def assert_step_never_finishes(project: Path, worker: int) -> None:
    """The step was let go, but the one process that had started it is gone and no other
    took it up: it never finishes (the run that could retry it is gone too)."""
    (project / "go").touch()
    assert started(project) == [worker] and not alive(worker)
    assert not (project / "slow.finished").exists()


def newest_run(project: Path, env: dict) -> dict:
    listing = barca(project, "history", "--json", env=env).expect(0).json
    run_id = listing["runs"][0]["run_id"]
    return barca(project, "history", run_id, "--json", env=env).expect(0).json


# -- item 7: a forked run dies with its client -------------------------------------------

@pytest.mark.parametrize("how", ["the command", "its process group"])
def test_killing_the_command_stops_the_forked_run_and_it_is_recorded_interrupted(warm, how):
    project, env = warm
    start_pool(project, env)
    proc = start_barca(project, "get", "slow", "p.py", env=env, start_new_session=True)
    wait_for(lambda: started(project), "slow to start", timeout=30)
    [worker] = started(project)
    run = read_runs(project, "pid")[-1][0]
    assert run != proc.pid  # the run was forked from the pool
    if how == "the command":
        proc.kill()
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    wait_for(lambda: not alive(run) and not alive(worker), "the run and its worker to end",
             timeout=10)
    assert_step_never_finishes(project, worker)
    assert read_runs(project)[-1][0] in ("running", "interrupted")  # a row of a dead process
    assert barca(project, "history", "--json", env=env).expect(0).json["runs"][0][
        "status"] == "interrupted"


def test_killing_a_fresh_run_stops_its_worker_too(project: Path):
    write(project, {"p.py": STEPS})
    proc = start_barca(project, "get", "slow", "p.py")  # BARCA_WARM_SECONDS=0: fresh workers
    wait_for(lambda: started(project), "slow to start", timeout=30)
    [worker] = started(project)
    proc.kill()
    proc.wait(timeout=10)
    wait_for(lambda: not alive(worker), "the worker to end", timeout=10)
    assert_step_never_finishes(project, worker)


# -- item 8: the client sees the forked run die ------------------------------------------

def test_a_killed_forked_run_is_reported_at_once_naming_the_signal(warm):
    project, env = warm
    start_pool(project, env)
    proc = start_barca(project, "get", "slow", "p.py", env=env)
    wait_for(lambda: started(project), "slow to start", timeout=30)
    os.kill(read_runs(project, "pid")[-1][0], signal.SIGKILL)  # as the OOM killer would
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 3
    assert "SIGKILL" in err and "OOM" in err


# -- item 9: a stopped pool costs a second, said once -----------------------------------

def test_a_stopped_pool_is_passed_by_within_a_second_with_one_note(warm):
    project, env = warm
    pool = start_pool(project, env)
    os.kill(pool, signal.SIGSTOP)
    try:
        result = barca(project, "get", "quick", "p.py", "--refresh", "quick", env=env,
                       timeout=30).expect(0)
    finally:
        os.kill(pool, signal.SIGCONT)
    assert result.json["final_output"] == 1
    notes = [line for line in result.stderr.splitlines() if "did not answer" in line]
    assert len(notes) == 1 and str(pool) in notes[0] and "stopped" in notes[0]


# -- item 10: how a forked worker died is recorded ---------------------------------------

@pytest.mark.parametrize("node, ended", [("exits", "code 3"), ("segfaults", "SIGSEGV"),
                                         ("aborts", "SIGABRT")])
def test_a_dead_forked_workers_exit_is_recorded(warm, node, ended):
    project, env = warm
    start_pool(project, env)
    failed = barca(project, "get", node, "p.py", env=env).expect(1)
    assert ended in failed.envelope["error"]
    step = newest_run(project, env)["steps"][0]
    assert step["worker_exit"] == ended
    assert step["error_type"] == "WorkerLost"


# -- item 11: the caller's resource limits hold in forked processes ----------------------

def test_the_callers_memory_limit_reaches_a_forked_worker(warm):
    project, env = warm
    start_pool(project, env)  # started without the limit

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024 ** 3, 2 * 1024 ** 3))

    proc = start_barca(project, "get", "big", "p.py", env=env, preexec_fn=limit)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "MemoryError" in err
    assert read_runs(project, "pid")[-1][0] != proc.pid  # it did run in the pool


# -- items 5 and 12: what a fresh process would import, no more, no less -------------------

def test_a_library_edited_in_place_is_not_served_stale(warm, tmp_path_factory):
    project, env = warm
    lib = tmp_path_factory.mktemp("lib")
    (lib / "shared_lib.py").write_text("VALUE = 1\n")
    env = {**env, "PYTHONPATH": with_path(lib)}
    write(project, {"lib.py": """
        import shared_lib  # preloaded by the pool: a top-level import of the pipeline
        from barca import asset

        @asset()
        def value() -> int:
            return shared_lib.VALUE
    """})
    barca(project, "get", "value", "lib.py", env=env).expect(0)
    pool = wait_until_ready(project, env)
    assert barca(project, "get", "value", "lib.py", "--refresh", "value",
                 env=env).expect(0).json["final_output"] == 1
    (lib / "shared_lib.py").write_text("VALUE = 2\n")  # in place: the directory is unchanged
    assert barca(project, "get", "value", "lib.py", "--refresh", "value",
                 env=env).expect(0).json["final_output"] == 2
    wait_until_gone(pool, timeout=10)  # the pool that loaded the old file retired


def test_a_library_setting_a_variable_at_import_does_not_retire_the_pool(warm,
                                                                          tmp_path_factory):
    project, env = warm
    lib = tmp_path_factory.mktemp("lib")
    (lib / "sets_env.py").write_text("import os\nos.environ['SET_AT_IMPORT'] = '1'\n")
    env = {**env, "PYTHONPATH": with_path(lib)}
    write(project, {"env.py": """
        import sets_env  # like polars, which sets _RJEM_MALLOC_CONF
        from barca import asset

        @asset()
        def e() -> int:
            return 5
    """})
    barca(project, "get", "e", "env.py", env=env).expect(0)
    pool = wait_until_ready(project, env)
    identity_checked(pool)
    assert pool_processes(project) == [pool]
    barca(project, "get", "e", "env.py", "--refresh", "e", env=env).expect(0)
    assert pool_processes(project) == [pool]


# -- item 13: pools are bounded, visible and stoppable -------------------------------------

def test_pools_are_bounded_listed_and_stopped(warm, tmp_path_factory):
    project, env = warm
    env = {**env, "BARCA_WARM_POOLS": "2"}
    projects = [project]
    for name in ("second", "third"):
        other = tmp_path_factory.mktemp(name)
        (other / "barca.toml").write_text("")
        write(other, {"p.py": STEPS})
        projects.append(other)
    pids = []
    try:
        for root in projects:
            after_last_use(env)  # distinct last-use times
            pids.append(start_pool(root, env))
        wait_until_gone(pids[0], timeout=10)  # the least recently used made room
        listed = barca(project, "pool", "--json", env=env).expect(0).json["pools"]
        assert [(p["pid"], p["project"]) for p in listed] == [
            (pids[2], os.path.realpath(projects[2])), (pids[1], os.path.realpath(projects[1]))]
        assert all(p["rss_bytes"] > 0 and p["idle_seconds"] >= 0 for p in listed)
        assert listed[0]["exits_after_idle_seconds"] == 60

        barca(projects[1], "get", "quick", "p.py", "--refresh", "quick",
              env={**env, "BARCA_WARM_SECONDS": "30"}).expect(0)
        listed = barca(project, "pool", "--json", env=env).expect(0).json["pools"]
        assert {p["pid"]: p["exits_after_idle_seconds"] for p in listed}[pids[1]] == 30

        stopped = barca(projects[2], "pool", "stop", "--json", env=env).expect(0).json
        assert stopped == {"stopped": [pids[2]]}
        assert barca(project, "pool", "stop", "--all", "--json", env=env).expect(0).json == {
            "stopped": [pids[1]]}
        assert barca(project, "pool", "--json", env=env).expect(0).json == {"pools": []}
    finally:
        for root in projects[1:]:
            for pid in pool_processes(root):
                os.kill(pid, signal.SIGKILL)


def test_a_bad_pool_bound_is_a_usage_error(project: Path):
    write(project, {"p.py": STEPS})
    failed = barca(project, "get", "quick", "p.py", env={"BARCA_WARM_POOLS": "many"}).expect(2)
    assert "BARCA_WARM_POOLS" in failed.envelope["error"]
    failed = barca(project, "get", "quick", "p.py", env={"BARCA_SPARE_HEAP_MB": "lots"}).expect(2)
    assert "BARCA_SPARE_HEAP_MB" in failed.envelope["error"]
    assert "BARCA_SPARE_HEAP_MB to 0" in failed.envelope["remediation"]


# -- item 14: a step's own output is the step's ---------------------------------------------

@pytest.mark.parametrize("pooled", [True, False], ids=["forked", "fresh"])
def test_what_a_step_writes_to_its_file_descriptors_goes_to_its_logs(warm, pooled):
    project, env = warm
    if pooled:
        start_pool(project, env)
    else:
        env = {**env, "BARCA_WARM_SECONDS": "0"}
    result = barca(project, "get", "noisy", "p.py", env=env).expect(0)
    assert json.loads(result.stdout)["final_output"] == 3  # stdout is the JSON alone
    logged = barca(project, "logs", "--json", env=env).expect(0).json
    assert {(line["stream"], line["line"]) for line in logged} >= {
        ("stdout", "from a subprocess"), ("stdout", "from os.write 1"),
        ("stderr", "from os.write 2"), ("stdout", "from print")}


@pytest.mark.parametrize("pooled", [True, False], ids=["forked", "fresh"])
def test_a_steps_orphaned_child_does_not_hold_the_callers_pipe(warm, pooled):
    project, env = warm
    if pooled:
        start_pool(project, env)
    else:
        env = {**env, "BARCA_WARM_SECONDS": "0"}
    proc = start_barca(project, "get", "orphan", "p.py", env=env)
    try:
        out, _ = proc.communicate(timeout=60)  # EOF on stdout: nobody else holds the pipe
        assert json.loads(out)["final_output"] == 4
    finally:
        subprocess.run(["pkill", "-f", "sleep 1237"], check=False)


# -- a pool that answers a fork too late ---------------------------------------------------

def test_a_worker_the_pool_forks_too_late_never_reads_the_pipe_of_the_one_started_instead(
        project: Path, monkeypatch):
    """A run that gives up waiting for the pool to fork a worker starts a fresh one; the pool,
    once it runs again, still forks on the pipe ends it was sent. Had the fresh worker been
    given those same pipes, two workers would read one lease stream (a step taken by the one
    the run does not know: never reported)."""
    from barca.engine.local import pool_address, warm_pool
    from barca.engine.local.worker_processes import Starter

    write(project, {"p.py": STEPS})
    monkeypatch.setattr(warm_pool, "REQUEST_SECONDS", 0.5)
    starter = Starter(project, ["p.py"], 60)
    forked, forked_to, forked_from = starter.start()  # starts the pool, which forks it
    pool = starter.warm_pool.pid
    sock_path, _ = pool_address.paths(str(warm_pool.state_dir()), warm_pool.identity(project))
    os.kill(pool, signal.SIGSTOP)
    try:
        fresh, to_fresh, from_fresh = starter.start()  # the request times out: started fresh
    finally:
        os.kill(pool, signal.SIGCONT)
    try:
        assert isinstance(fresh, subprocess.Popen) and starter.warm_pool is None
        # the pool reads the request, forks on what it was sent, then closes the connection
        wait_for(lambda: _connections_to(sock_path) == 0, "the pool to close the request's "
                 "connection")
        # the fresh worker's /proc/PID/fd cannot be read for a moment while it starts (its
        # exec): seen as holding nothing then, so wait until it is seen
        for end in (to_fresh, from_fresh):
            held = poll(lambda: fresh.pid in (found := _holders(end)) and found,
                        "the fresh worker to be seen holding its pipe", 10)
            assert held == {fresh.pid}
    finally:
        for fd in (forked_to, forked_from, to_fresh, from_fresh):
            os.close(fd)  # each worker sees its pipe close, and exits
        fresh.wait(timeout=10)
        forked.wait(timeout=10)
        os.kill(pool, signal.SIGKILL)  # this process started it: reaped here
        os.waitpid(pool, 0)
        stop_pools(project, signal.SIGKILL)  # what it forked


def _connections_to(sock_path: str) -> int:
    """Connections a listening Unix socket has accepted and not yet closed (an accepted
    socket is listed under the listener's path in /proc/net/unix)."""
    rows = [line.split() for line in Path("/proc/net/unix").read_text().splitlines()[1:]]
    return sum(1 for row in rows if len(row) == 8 and row[7] == sock_path) - 1


def _holders(fd: int) -> set[int]:
    """Pids, other than this process, holding either end of the pipe `fd` is an end of."""
    link = f"pipe:[{os.fstat(fd).st_ino}]"
    holders = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(os.readlink(f) == link for f in (entry / "fd").iterdir()):
                holders.add(int(entry.name))
        except OSError:
            continue
    return holders
