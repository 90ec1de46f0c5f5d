"""The warm pool: after a run, a background process per project keeps the pipeline's libraries
imported and forks the next run's workers.

Each test turns the pool on with BARCA_WARM_SECONDS, waits until the pool answers (it imports
in the background after the first run), and stops it at the end. Facts about where a step ran
(its parent pid, whether a library was already imported when the step began) are written by
the steps themselves.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from barca.engine.local.pool_registry import SPARE_NAME
from conftest import (CLI, barca, barca_env, descendants, edit, in_terminal, lines, poll,
                      pool_processes, read_runs, start_barca, stop_pools, wait_until_gone,
                      wait_until_ready, write)

WARM = {"BARCA_WARM_SECONDS": "60"}

PIPELINE = """
    import json
    import os
    import sys
    import wave  # a library the pipeline imports at its top: preloaded by a new pool
    from barca import asset

    CALLS = []

    @asset()
    def probe() -> dict:
        CALLS.append(1)
        seen = {"colorsys_loaded": "colorsys" in sys.modules, "parent": os.getppid(),
                "pid": os.getpid(), "name": open("/proc/self/comm").read().strip(),
                "calls": len(CALLS), "version": 1}
        import colorsys  # stands for a library a step imports (pandas through .df(), ...)
        print("probe ran")
        return seen
"""


@pytest.fixture
def project(tmp_path: Path):
    yield tmp_path
    stop_pools(tmp_path)


def probe(root: Path, *args: str, env: dict | None = None) -> dict:
    barca(root, "get", "probe", "p.py", "--refresh", "probe", *args, env=env or WARM).expect(0)
    return barca(root, "get", "probe", "p.py", env=env or WARM).expect(0).json["final_output"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm pool is Linux-only")
class TestWarmPool:
    def test_a_first_run_starts_the_pool_and_the_next_one_finds_what_it_learned(self, project):
        write(project, {"p.py": PIPELINE})
        first = probe(project)
        pool = wait_until_ready(project)
        assert first["parent"] == pool  # forked from the pool the first run started
        started_with = Path(f"/proc/{pool}/cmdline").read_bytes().split(b"\0")
        assert b"wave" in started_with
        assert b"pyarrow" not in started_with  # no table library imported: not preloaded
        assert first["colorsys_loaded"] is False  # imported inside the step: not known yet
        second = probe(project)
        assert second["parent"] == pool
        assert second["colorsys_loaded"] is True  # learned from the first run's worker
        doctor = {c["name"]: c for c in barca(project, "doctor", env=WARM).expect(0).json["checks"]}
        assert doctor["warm"]["data"]["pid"] == pool
        assert f"pid {pool}" in doctor["warm"]["detail"]

    def test_the_pool_imports_no_tracing_library_for_its_forked_workers(self, project):
        """ddtrace, once imported, hooks every later import and every fork: a pool that
        preloaded it (with the rest of barca) made every untraced tick's workers pay for it."""
        pytest.importorskip("ddtrace", reason="the datadog extra (in dev) is not installed")
        write(project, {"p.py": """
            import os
            import sys
            from barca import asset

            @asset()
            def seen() -> dict:
                return {"parent": os.getppid(), "tracing": sorted(
                    {m.split(".")[0] for m in sys.modules} & {"ddtrace", "opentelemetry"})}
        """})
        barca(project, "get", "seen", "p.py", env=WARM).expect(0)
        pool = wait_until_ready(project)
        forked = barca(project, "get", "seen", "p.py", "--refresh", "seen",
                       env=WARM).expect(0).json["final_output"]
        assert forked == {"parent": pool, "tracing": []}

    def test_two_first_runs_started_together_share_one_new_pool(self, project):
        write(project, {"p.py": PIPELINE})
        procs = [start_barca(project, "get", "probe", "p.py", "--refresh", "probe", "--json",
                             env=WARM) for _ in range(2)]
        outputs = [proc.communicate(timeout=120) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], outputs
        pool = wait_until_ready(project)  # and only one
        assert [json.loads(out)["final_output"]["parent"] for out, _ in outputs] == [pool, pool]

    def test_each_run_imports_the_project_code_afresh(self, project):
        write(project, {"p.py": PIPELINE})
        probe(project)
        wait_until_ready(project)
        assert probe(project)["calls"] == 1  # module state of an earlier run is not kept
        assert probe(project)["calls"] == 1
        edit(project / "p.py", '"version": 1', '"version": 2')
        result = barca(project, "get", "probe", "p.py", env=WARM).expect(0)
        assert result.json["steps_executed"] == 1
        assert barca(project, "get", "probe", "p.py", env=WARM).json["final_output"]["version"] == 2

    def test_output_and_logs_of_forked_workers_reach_the_run(self, project):
        write(project, {"p.py": PIPELINE})
        probe(project)
        wait_until_ready(project)
        barca(project, "get", "probe", "p.py", "--refresh", "probe", env=WARM).expect(0)
        logs = barca(project, "logs", "--json", env=WARM).expect(0)
        assert [entry["line"] for entry in logs.json] == ["probe ran"]

    def test_what_a_forked_worker_held_is_free_when_the_run_returns(self, project):
        """A step that leaves a file locked (a database connection it never closes): the run
        does not wait for its worker's memory to be freed, but it does for that lock; and once
        the client has exited, no process of the run holds its stdout (a caller reading to the
        end would wait for it)."""
        write(project, {"p.py": """
            import fcntl
            import os
            from barca import asset

            HELD = []

            @asset()
            def locker() -> int:
                fd = os.open("db.lock", os.O_RDWR | os.O_CREAT)
                fcntl.lockf(fd, fcntl.LOCK_EX)
                HELD.append(fd)  # never closed: the worker's exit lets it go
                HELD.append(b"x" * (256 << 20))  # memory that takes the kernel a while to free
                return os.getppid()
        """})
        barca(project, "get", "locker", "p.py", env=WARM).expect(0)
        pool = wait_until_ready(project)
        for _ in range(5):
            run = subprocess.Popen([*CLI, "get", "locker", "p.py", "--refresh", "locker"],
                                   cwd=project, env=barca_env(WARM), stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
            assert run.wait(timeout=60) == 0
            fd = os.open(project / "db.lock", os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while still held
            finally:
                os.close(fd)
            # no process of the run has stdout open any more: it reads to its end at once
            os.set_blocking(run.stdout.fileno(), False)
            printed = run.stdout.read()  # None if a writer were left and nothing buffered
            assert printed is not None and run.stdout.read() == b""
            assert json.loads(printed)["final_output"] == pool  # a forked worker ran it
            run.stdout.close()

    def test_a_timed_out_step_in_a_forked_worker_is_killed(self, project):
        write(project, {"p.py": """
            import os
            import time
            from barca import asset

            @asset()
            def warmup() -> int:
                return 1

            @asset(timeout_seconds=1)
            def slow() -> int:
                with open("parents.log", "a") as fh:
                    fh.write(f"{os.getppid()}\\n")
                time.sleep(30)
                return 1
        """})
        barca(project, "get", "warmup", "p.py", env=WARM).expect(0)
        pool = wait_until_ready(project)
        result = barca(project, "get", "slow", "p.py", env=WARM, timeout=25).expect(1)
        assert "timed out" in result.json["error"]
        assert lines(project / "parents.log") == [str(pool)]
        assert wait_until_ready(project) == pool  # the pool itself is unharmed

    def test_partitioned_results_match_fresh_workers(self, project, tmp_path_factory):
        pipeline = """
            from barca import asset, collect, partitions

            @asset(partitions={"k": partitions([f"k{i:03d}" for i in range(60)])})
            def square(k: str) -> int:
                return int(k[1:]) ** 2

            @asset(inputs={"square": collect(square)})
            def total(square: list) -> int:
                return sum(square)
        """
        cold = tmp_path_factory.mktemp("cold")
        write(cold, {"p.py": pipeline})
        write(project, {"p.py": pipeline})
        expected = barca(cold, "get", "total", "p.py").expect(0).json["final_output"]
        barca(project, "get", "square", "p.py", "--partition", "k=k000", env=WARM).expect(0)
        pool = wait_until_ready(project)
        for size in ("1", "2", "16"):
            got = barca(project, "get", "total", "p.py", "--refresh", "square",
                        env={**WARM, "BARCA_POOL_SIZE": size}).expect(0)
            assert got.json["final_output"] == expected == sum(i * i for i in range(60))
        assert pool_processes(project) == [pool]

    def test_zero_seconds_leaves_no_pool_and_a_bad_value_is_a_usage_error(self, project):
        write(project, {"p.py": PIPELINE})
        barca(project, "get", "probe", "p.py", env={"BARCA_WARM_SECONDS": "0"}).expect(0)
        assert pool_processes(project) == []  # a pool is started before the command ends
        bad = barca(project, "get", "probe", "p.py", "--refresh", "probe",
                    env={"BARCA_WARM_SECONDS": "soon"}).expect(2)
        assert "BARCA_WARM_SECONDS" in bad.envelope["error"]
        assert "0" in bad.envelope["remediation"]
        doctor = barca(project, "doctor", env={"BARCA_WARM_SECONDS": "soon"}).expect(3)
        assert not {c["name"]: c for c in doctor.json["checks"]}["warm"]["ok"]

    def test_an_idle_pool_exits_on_its_own(self, project):
        write(project, {"p.py": PIPELINE})
        barca(project, "get", "probe", "p.py", env={"BARCA_WARM_SECONDS": "3"}).expect(0)
        # its process, seen as the run leaves it (a busy machine may not let a client reach
        # it before its 3 idle seconds are up)
        [pid] = poll(lambda: pool_processes(project), "the warm pool's process")
        wait_until_gone(pid)
        assert not (Path(f"/proc/{pid}")).exists()

    def test_installing_packages_retires_the_pool(self, project, tmp_path_factory):
        """A directory of packages of the run's own (on PYTHONPATH) stands for site-packages,
        which the test must not touch."""
        packages = tmp_path_factory.mktemp("packages")
        env = {**WARM, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(packages), os.environ.get("PYTHONPATH")]))}
        write(project, {"p.py": PIPELINE})
        probe(project, env=env)
        old = wait_until_ready(project, env)
        (packages / "newly_installed.py").write_text("")  # what `pip install` does to it
        wait_until_gone(old)
        assert probe(project, env=env)["parent"] != old  # fresh, not from the retired pool
        assert wait_until_ready(project, env) != old

    def test_a_library_edited_while_a_run_runs_is_not_served_stale(self, project,
                                                                    tmp_path_factory):
        """The pool learns modules (and imports the rest of barca) after it started; a file it
        loaded before, edited in between, must still count as changed: its copy in the pool
        is the old one. Here the step itself edits the library, after its run reached the
        pool and before the run teaches the pool what its worker imported."""
        lib = tmp_path_factory.mktemp("lib")
        helper = lib / "pool_helper.py"
        helper.write_text("VERSION = 1\n")
        env = {**WARM, "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ changing lib/
               "PYTHONPATH": os.pathsep.join(filter(None, [str(lib),
                                                           os.environ.get("PYTHONPATH")]))}
        write(project, {"p.py": f"""
            import pool_helper  # outside the installed packages: stamped by the pool
            from barca import asset

            @asset()
            def probe() -> dict:
                import colorsys  # new to the pool: the run teaches it at its end
                seen = pool_helper.VERSION
                with open({str(helper)!r}, "w") as fh:
                    fh.write("VERSION = 22\\n")  # edited while the pool holds version 1
                return {{"version": seen}}
        """})
        assert barca(project, "get", "probe", "p.py", env=env).expect(0).json[
            "final_output"]["version"] == 1
        again = barca(project, "get", "probe", "p.py", "--refresh", "probe", env=env).expect(0)
        assert again.json["final_output"]["version"] == 22

    def test_a_changed_environment_gets_a_new_pool_and_the_old_one_exits(self, project,
                                                                          monkeypatch):
        write(project, {"p.py": PIPELINE})
        monkeypatch.setenv("SOME_SETTING", "a")  # read at import by some library, say
        probe(project)
        old = wait_until_ready(project)
        monkeypatch.setenv("SOME_SETTING", "b")
        assert probe(project)["parent"] != old
        wait_until_gone(old)
        new = wait_until_ready(project)
        assert probe(project)["parent"] == new

    def test_a_quiet_pool_forks_spares_that_the_next_command_and_its_worker_become(
            self, project):
        """Forking a process of the pool's size costs 3-4 ms, twice on a tick's path: once it
        is quiet, the pool forks two children ahead, which the next command and its first
        worker become (a step there sees what it would see in a child forked for it); spares
        end with the pool."""
        write(project, {"p.py": PIPELINE})
        probe(project)
        pool = wait_until_ready(project)
        spares = poll(lambda: _spares(pool), "two spares forked by the quiet pool", 90)
        seen = probe(project)  # the refreshing command in one spare, its worker in the other
        assert seen["pid"] in spares and seen["parent"] == pool
        assert seen["name"] != SPARE_NAME  # named as before once it took the request
        assert seen["colorsys_loaded"] is True  # forked after the pool learned it
        assert spares - {seen["pid"]} <= {pid for (pid,) in read_runs(project, "pid")}
        new = poll(lambda: _spares(pool), "the spares forked again", 90)
        assert not new & spares
        os.kill(pool, signal.SIGTERM)
        for pid in new:
            wait_until_gone(pid)

    def test_spares_make_ready_memory_as_runs_took_it_and_barca_pool_counts_it(self, project):
        """A forked worker takes each page of new memory with a fault: once the pool's runs
        took much memory afresh, each spare fills pymalloc arenas ahead, half of it and at
        most BARCA_SPARE_HEAP_MB, and keeps them for the run it serves; `barca pool` counts
        what the spares hold of their own. With the bound at 0 they prepare nothing."""
        write(project, {"p.py": HEAVY})
        for _ in range(2):  # the first run's workers may start fresh, before the pool is up
            heavy(project, WARM)
        pool = wait_until_ready(project)
        heavy(project, WARM)  # forked from the pool, which reaps it and learns
        held = poll(lambda: _spare_bytes(project, pool, WARM, at_least=2 * 16 * MB),
                    "spares holding memory made ready", 90)
        assert held <= 2 * (64 + 8) * MB  # the bound (64 MB each), and their own few MB
        prepared = _spares(pool)
        # prepared spares serve the next run; its bound applies to the running pool's next ones
        off = {**WARM, "BARCA_SPARE_HEAP_MB": "0"}
        assert heavy(project, off) == 300_000
        poll(lambda: (_spares(pool) or prepared) & prepared == set(), "new spares", 90)
        assert _spare_bytes(project, pool, off) < 2 * 8 * MB


MB = 1 << 20
HEAVY = """
    from barca import asset

    @asset()
    def many() -> int:
        held = {i: (str(i), i) for i in range(300_000)}  # some 60 MB of small objects
        return len(held)
"""


def heavy(root: Path, env: dict) -> int:
    return barca(root, "get", "many", "p.py", "--refresh", "many", env=env).expect(0).json[
        "final_output"]


def _spare_bytes(root: Path, pool: int, env: dict, at_least: int = 0) -> int | None:
    """What `barca pool --json` says this project's spares hold, once there are two (and it
    is `at_least` that)."""
    if _spares(pool) is None:
        return None
    listed = barca(root, "pool", "--json", env=env).expect(0).json["pools"]
    held = next(p["spare_bytes"] for p in listed if p["pid"] == pool)
    return held if held >= at_least else None


def _spares(pool: int) -> set[int] | None:
    """The pool's two spares (named so while they wait), when it has them."""
    spares = {pid for pid in descendants(pool) - {pool} if _name(pid) == SPARE_NAME}
    return spares if len(spares) == 2 else None


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


SLOW_AND_FAILING = """
    import os
    import time
    from pathlib import Path
    from barca import asset

    @asset()
    def quick() -> int:
        return 1

    @asset()
    def slow() -> int:
        Path("slow.started").write_text(str(os.getpid()))
        time.sleep(60)
        return 2

    @asset()
    def broken() -> int:
        raise ValueError("no good")
"""


# What the command a pool takes must not import before the pool has it, nor while it waits:
# modules of several milliseconds each, paid on every tick (`barca.cli.warm_launcher`).
NOT_FOR_THE_LAUNCHER = ("pathlib", "typing", "enum", "re", "hashlib", "dataclasses", "json",
                        "socket", "signal", "fnmatch", "selectors", "subprocess", "click")


def loaded_since_start(body: str) -> str:
    """Python code that runs `body` in a fresh interpreter, then writes on the last line of
    stderr which of NOT_FOR_THE_LAUNCHER it imported."""
    return (f"import sys\nbefore = set(sys.modules)\n{body}\n"
            f"sys.stderr.write('\\n' + repr(sorted((set(sys.modules) - before)"
            f" & {set(NOT_FOR_THE_LAUNCHER)!r})))\n")


# what `barca ARGV` does up to running a `get` or `run` here, if no pool takes it; then the
# exit code the pool's child gave (None: none did) and what it imported, on stderr
LAUNCHER = loaded_since_start(
    "from barca.cli import main\nfrom barca.cli.warm_launcher import run_in_warm_pool\n"
    "print(run_in_warm_pool(sys.argv[1:], main._warm_seconds()), file=sys.stderr)")


def launcher(project: Path, *args: str, env: dict | None = None) -> list[str]:
    """LAUNCHER's last two lines: what run_in_warm_pool returned, and what it imported."""
    out = subprocess.run([sys.executable, "-c", LAUNCHER, *args], cwd=project,
                         env=barca_env({**WARM, **(env or {})}), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stderr.splitlines() if line][-2:]


def test_the_launcher_finds_no_pool_without_importing_what_it_does_not_need(project):
    write(project, {"p.py": PIPELINE})
    assert launcher(project, "get", "p.py", "--dry-run") == ["None", "[]"]
    assert pool_processes(project) == []  # a dry run runs no step: it starts no pool


def test_a_command_that_finds_no_pool_starts_one_before_it_reads_the_project(project):
    """The run waits for its pool before its first worker: started by the command as soon as
    it finds none, the pool imports the pipeline's libraries while the command imports barca
    and plans, instead of after."""
    write(project, {"p.py": PIPELINE})
    assert launcher(project, "get", "p.py")[0] == "None"  # not taken: the run is this process's
    pool = wait_until_ready(project)
    assert pool_processes(project) == [pool]
    # asked to preload what the pipeline imports at its top
    assert b"wave" in (Path("/proc") / str(pool) / "cmdline").read_bytes().split(b"\0")


@pytest.mark.parametrize("args, env, toml", [
    (("--executor", "ray"), {}, None),
    ((), {"BARCA_EXECUTOR": "ray"}, None),
    ((), {}, '[executor]\nkind = "ray"\n'),
], ids=["--executor", "BARCA_EXECUTOR", "barca.toml"])
def test_no_pool_is_started_for_a_run_on_ray(project, args, env, toml):
    write(project, {"p.py": PIPELINE, **({"barca.toml": toml} if toml else {})})
    assert launcher(project, "get", "p.py", *args, env=env)[0] == "None"
    assert pool_processes(project) == []  # started before it returned, it would be there


def run_pid(root: Path) -> int:
    """The pid recorded by the newest run (the process that ran the command)."""
    return read_runs(root, "pid")[-1][0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm pool is Linux-only")
class TestCommandsInTheWarmPool:
    """With a pool up, `barca get` / `run` are run by a process forked from it; the command
    the user started forwards signals and exits with that process's exit code."""

    @pytest.fixture
    def warm(self, project):
        """Ready, but started from the test itself: the pool is specific to the environment,
        and pytest's PYTEST_CURRENT_TEST differs between a fixture and the test."""
        def start() -> tuple[Path, int]:
            write(project, {"p.py": SLOW_AND_FAILING})
            barca(project, "get", "quick", "p.py", env=WARM).expect(0)
            return project, wait_until_ready(project)
        return start

    def test_get_is_run_by_a_forked_process_with_the_same_output(self, warm):
        project, pool = warm()
        proc = start_barca(project, "get", "quick", "p.py", "--refresh", "quick", env=WARM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out)["final_output"] == 1
        assert run_pid(project) != proc.pid
        off = start_barca(project, "get", "quick", "p.py", "--refresh", "quick",
                          env={"BARCA_WARM_SECONDS": "0"})
        assert off.wait(timeout=60) == 0
        assert run_pid(project) == off.pid  # the pool turned off: the command runs itself

    def test_a_forked_command_answers_before_checkpointing_and_loses_no_record(self, warm):
        """A command the pool forked ends with os._exit and leaves its run's last writes in
        SQLite's log for the next run to copy (store.db.leave_open_at_exit): every run is
        recorded all the same, for the next command and for any reader."""
        project, _ = warm()
        ids = [barca(project, "get", "quick", "p.py", "--refresh", "quick", env=WARM)
               .expect(0).json["run_id"] for _ in range(3)]
        assert (project / ".barca" / "metadata.db-wal").exists()  # not checkpointed at exit
        assert read_runs(project, "run_id, status")[-3:] == [(i, "success") for i in ids]
        history = barca(project, "history", "--json", env={"BARCA_WARM_SECONDS": "0"})
        assert [r["run_id"] for r in history.expect(0).json["runs"]][:3] == ids[::-1]

    def test_exit_codes_and_error_envelopes_come_through(self, warm):
        project, _ = warm()
        failed = barca(project, "get", "broken", "p.py", env=WARM).expect(1)
        assert failed.envelope["kind"] == "step_failed"
        assert "no good" in failed.envelope["error"]
        usage = barca(project, "get", "missing", "p.py", env=WARM).expect(2)
        assert usage.envelope["kind"] == "usage"

    def test_ctrl_c_reaches_the_run_which_records_itself_cancelled(self, warm):
        project, _ = warm()
        proc = start_barca(project, "get", "slow", "p.py", env=WARM)
        try:
            deadline = time.monotonic() + 30
            while not (project / "slow.started").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert json.loads(err.strip().splitlines()[-1])["kind"] == "cancelled"
        assert read_runs(project)[-1] == ("cancelled",)
        worker = int((project / "slow.started").read_text())
        wait_until_gone(worker)

    def test_the_command_imports_nothing_it_does_not_need_to_reach_the_pool(self, warm):
        project, _ = warm()
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, "get", "quick", "p.py"],
                                cwd=project, env=barca_env(WARM), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
        assert json.loads(out)["final_output"] == 1, err
        assert [line for line in err.splitlines() if line][-2:] == ["0", "[]"]  # exit, imports
        assert run_pid(project) != proc.pid  # the pool's child ran it

    def test_a_terminal_still_gets_human_output(self, warm):
        project, _ = warm()
        proc, text, err = in_terminal(project, "get", "quick", "p.py", env=WARM)
        assert proc.returncode == 0, err
        assert text.startswith("Run ") and "Value:" in text
        assert run_pid(project) != proc.pid
