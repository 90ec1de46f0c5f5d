"""Issue 32, wrong exits and refusals the published tool's suite found: `.barca` that is a file,
stdout that cannot be written, a step's own KeyboardInterrupt or sys.exit(), `barca status`
of a task, and definitions we refused (`timeout_seconds=0`, `description=`/`tags=` bound to
module constants). Each test runs the real command on a real pipeline with real workers.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import (CLI, barca, barca_env, lines, read_runs, stop_pools, wait_until_ready,
                      write)

PIPELINE = """
    from barca import asset, task

    @asset()
    def numbers() -> list:
        return [1, 2, 3]

    @asset(inputs={"numbers": numbers})
    def total(numbers: list) -> int:
        return sum(numbers)

    @task(inputs={"total": total})
    def report(total: int) -> None:
        print("total", total)
"""


@dataclass
class Ran:
    pid: int  # of the command started here (a warm pool may run it in another process)
    returncode: int
    stderr: str


def run_with_stdout(root: Path, stdout, *args: str, env: dict | None = None) -> Ran:
    """`barca ARGS` with stdout on the given file object or descriptor; stderr captured."""
    proc = subprocess.Popen([*CLI, *args], cwd=root, env=barca_env(env),
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                            text=True)
    _, err = proc.communicate(timeout=60)
    return Ran(proc.pid, proc.returncode, err)


def with_closed_pipe(root: Path, *args: str, env: dict | None = None
                     ) -> Ran:
    """stdout is a pipe whose reader is gone (`barca ... | head` after head exited)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return run_with_stdout(root, write_end, *args, env=env)
    finally:
        os.close(write_end)


def with_full_disk(root: Path, *args: str, env: dict | None = None
                   ) -> Ran:
    """stdout on /dev/full: every write fails with ENOSPC."""
    with open("/dev/full", "w") as full:
        return run_with_stdout(root, full, *args, env=env)


def with_hung_up_terminal(root: Path, *args: str, env: dict | None = None
                          ) -> Ran:
    """stdout on a terminal whose other side is closed (the window was closed, ssh dropped):
    every write fails with EIO."""
    master, slave = pty.openpty()
    os.close(master)
    try:
        return run_with_stdout(root, slave, *args, env=env)
    finally:
        os.close(slave)


def last_envelope(stderr: str) -> dict:
    return json.loads(stderr.strip().splitlines()[-1])


# -- item 4: .barca that is not a directory -----------------------------------------------


def test_a_file_where_barca_keeps_its_state_is_an_infra_error_naming_it(project: Path) -> None:
    write(project, {"p.py": PIPELINE})
    blocker = project / ".barca"
    blocker.write_text("not a directory\n")
    for args in (["get", "total", "p.py"], ["run", "report", "p.py"], ["history"],
                 ["status", "p.py"], ["list", "p.py"], ["logs"], ["stats", "total", "p.py"],
                 ["gc"], ["sql", "SELECT 1"], ["get", "total", "p.py", "--dry-run"]):
        got = barca(project, *args).expect(3)
        envelope = got.envelope
        assert envelope["kind"] == "infra", (args, envelope)
        assert envelope["path"] == str(blocker), (args, envelope)
        assert f"{blocker} is not a directory" in envelope["error"], (args, envelope)
        assert "move" in envelope["remediation"] and str(blocker) in envelope["remediation"]
        assert "Traceback" not in got.stderr and got.stdout == "", (args, got.stderr)
    doctor = barca(project, "doctor").expect(3)
    cache = next(c for c in doctor.json["checks"] if c["name"] == "cache")
    assert not cache["ok"] and f"{blocker} is not a directory" in cache["detail"]
    assert blocker.read_text() == "not a directory\n"  # nothing of it touched

    blocker.unlink()  # an environment's directory blocked the same way
    (project / ".barca").mkdir()
    (project / ".barca" / "envs").write_text("")
    got = barca(project, "history", "--env", "staging").expect(3)
    assert got.envelope["path"] == str(project / ".barca" / "envs")
    assert "state (results, run history) in .barca/envs/staging/" in got.envelope["error"]
    assert barca(project, "get", "total", "p.py").expect(0).json["final_output"] == 6


# -- item 5: stdout that cannot be written ------------------------------------------------


STDOUT_ERROR = "could not write the result to stdout"


def test_stdout_that_cannot_be_written_is_exit_3_and_a_closed_pipe_exit_0(project: Path
                                                                          ) -> None:
    write(project, {"p.py": PIPELINE})
    full = with_full_disk(project, "get", "total", "p.py")
    assert full.returncode == 3, full.stderr
    envelope = last_envelope(full.stderr)
    assert envelope["kind"] == "infra" and envelope["error"].startswith(STDOUT_ERROR)
    assert "No space left on device" in envelope["error"]
    assert "Traceback" not in full.stderr
    assert read_runs(project) == [("success",)]  # the run itself was recorded first

    hung_up = with_hung_up_terminal(project, "history")
    assert hung_up.returncode == 3, hung_up.stderr
    assert STDOUT_ERROR in hung_up.stderr and "Input/output error" in hung_up.stderr
    assert "Traceback" not in hung_up.stderr
    for args in (["--version"], ["--help"], ["get", "--help"], ["version"]):
        got = with_full_disk(project, *args)
        assert got.returncode == 3 and STDOUT_ERROR in got.stderr, (args, got.stderr)

    for args in (["--version"], ["--help"], ["get", "--help"], ["history", "--help"],
                 ["get", "total", "p.py"], ["history"], ["status", "p.py", "--pretty"]):
        closed = with_closed_pipe(project, *args)
        assert closed.returncode == 0, (args, closed.stderr)
        assert "Traceback" not in closed.stderr and "Error" not in closed.stderr, args


@pytest.fixture
def warm_project(project: Path):
    """A project whose warm pool, started by the test, is stopped at the end."""
    yield project
    stop_pools(project)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm pool is Linux-only")
def test_a_command_run_by_the_warm_pool_reports_its_stdout_the_same(warm_project: Path
                                                                    ) -> None:
    """`get` forked from the warm pool writes to the caller's stdout from another process:
    the same exits as a command that runs itself."""
    project, warm = warm_project, {"BARCA_WARM_SECONDS": "60"}
    write(project, {"p.py": PIPELINE})
    barca(project, "get", "total", "p.py", env=warm).expect(0)
    wait_until_ready(project)

    full = with_full_disk(project, "get", "total", "p.py", "--refresh", "total", env=warm)
    assert full.returncode == 3, full.stderr
    assert last_envelope(full.stderr)["error"].startswith(STDOUT_ERROR)
    assert "Traceback" not in full.stderr
    assert run_pid(project) != full.pid  # run by a process the pool forked

    hung_up = with_hung_up_terminal(project, "get", "total", "p.py", "--refresh", "total",
                                    env=warm)
    assert hung_up.returncode == 3 and STDOUT_ERROR in hung_up.stderr, hung_up.stderr
    assert "Traceback" not in hung_up.stderr
    assert run_pid(project) != hung_up.pid

    closed = with_closed_pipe(project, "get", "total", "p.py", "--refresh", "total", env=warm)
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr
    assert run_pid(project) != closed.pid
    helped = with_closed_pipe(project, "get", "--help", env=warm)
    assert helped.returncode == 0 and helped.stderr == "", helped.stderr
    assert [status for (status,) in read_runs(project)] == ["success"] * 4


def run_pid(root: Path) -> int:
    """The pid recorded by the newest run: the process that ran the command."""
    return read_runs(root, "pid")[-1][0]


# -- item 6: a step's own KeyboardInterrupt or sys.exit() ---------------------------------


STOPPING = """
    import os
    import sys
    from pathlib import Path
    from barca import asset, parallel, partitions

    def mark(name):
        with open("pids.log", "a") as log:
            log.write(f"{name} {os.getpid()}\\n")

    @asset(retries=3)
    def interrupted() -> int:
        mark("interrupted")
        raise KeyboardInterrupt

    @asset(retries=3)
    def exits_bare() -> int:
        mark("exits_bare")
        sys.exit()

    @asset()
    def exits_code() -> int:
        mark("exits_code")
        sys.exit(3)

    @asset()
    def exits_text() -> int:
        mark("exits_text")
        raise SystemExit("stop here")

    @asset()
    def fine() -> int:
        mark("fine")
        return 7

    @asset(partitions={"k": partitions(["a", "b"])}, batch="all")
    def batch_interrupted(k: list) -> dict:
        mark("batch_interrupted")
        raise KeyboardInterrupt

    def branch_interrupted():
        raise KeyboardInterrupt

    def branch_exits():
        sys.exit("bye")

    @asset()
    def in_branches() -> list:
        mark("in_branches")
        return parallel(branch_interrupted, branch_exits, lambda: 1)
"""


def test_a_steps_own_keyboard_interrupt_or_exit_is_its_error_and_the_worker_goes_on(
        project: Path) -> None:
    write(project, {"p.py": STOPPING})
    names = ["interrupted", "exits_bare", "exits_code", "exits_text", "fine",
             "batch_interrupted", "in_branches"]
    got = barca(project, "get", ",".join(names), "p.py", env={"BARCA_POOL_SIZE": "1"}).expect(1)
    errors = {name: target.get("error") for name, target in got.json["targets"].items()}
    branches = errors.pop("in_branches")
    assert errors == {
        "interrupted": "step raised KeyboardInterrupt() itself, not a Ctrl-C of the run",
        "exits_bare": "step called sys.exit()",
        "exits_code": "step called sys.exit(3)",
        "exits_text": "step called sys.exit('stop here')",
        "fine": None,
        "batch_interrupted": "step raised KeyboardInterrupt() itself, not a Ctrl-C of the "
                             "run",
    }
    assert "2 of 3 parallel branches failed" in branches
    assert "[0] branch_interrupted: KeyboardInterrupt: branch raised KeyboardInterrupt() " \
        "itself" in branches
    assert "[1] branch_exits: SystemExit: branch called sys.exit('bye')" in branches
    assert got.json["targets"]["fine"]["final_output"] == 7
    assert "WorkerLost" not in got.stdout + got.stderr

    # one worker ran every step: none of them took it down; none was retried
    marks = [line.split() for line in lines(project / "pids.log")]
    assert sorted(name for name, _ in marks) == sorted(names)
    assert len({pid for _, pid in marks}) == 1, marks

    # the tracebacks are the user's, kept with each failed step
    history = barca(project, "history", got.json["run_id"]).expect(0).json
    failed = {s["step_id"].split(":", 1)[1]: s for s in history["steps"]
              if s["status"] == "failed"}
    tracebacks = {step: s["error_traceback"] or "" for step, s in failed.items()}
    assert failed["interrupted"]["attempts"] == failed["exits_bare"]["attempts"] == 1
    assert 'raise KeyboardInterrupt\nKeyboardInterrupt' in tracebacks["interrupted"]
    assert 'sys.exit(3)\nSystemExit: 3' in tracebacks["exits_code"]
    assert 'raise KeyboardInterrupt\nKeyboardInterrupt' in tracebacks["batch_interrupted[k=a]"]
    assert "branch_interrupted" in tracebacks["in_branches"]

    alone = barca(project, "get", "interrupted", "p.py").expect(1)
    assert alone.envelope["kind"] == "step_failed"
    assert alone.envelope["error"] == ("step 'p.py:interrupted' failed: KeyboardInterrupt: step "
                                       "raised KeyboardInterrupt() itself, not a Ctrl-C "
                                       "of the run")
    assert "raise KeyboardInterrupt" in alone.envelope["traceback"]


# -- item 7: status of a task -----------------------------------------------------------


def test_status_of_a_task_shows_its_cone_with_the_task_always_running(project: Path) -> None:
    write(project, {"p.py": PIPELINE})
    before = barca(project, "status", "report", "p.py").expect(0).json
    assert before["targets"] == ["report"]
    assert {n["id"]: n["cache"]["state"] for n in before["nodes"]} == {
        "p.py:numbers": "never_run", "p.py:total": "never_run", "p.py:report": "always_runs"}
    assert not (project / ".barca").exists()  # read-only: nothing written

    barca(project, "get", "total", "p.py").expect(0)
    after = barca(project, "status", "report,total", "p.py").expect(0).json
    assert {n["id"]: n["cache"]["state"] for n in after["nodes"]} == {
        "p.py:numbers": "cached", "p.py:total": "cached", "p.py:report": "always_runs"}
    assert barca(project, "get", "report", "p.py").expect(2).envelope["kind"] == "usage"


# -- definitions the published tool accepts ---------------------------------------------


def test_timeout_zero_and_description_and_tags_from_module_constants_load(project: Path
                                                                          ) -> None:
    write(project, {"p.py": """
        import time
        from barca import asset

        DESCRIPTION = "numbers of the day"
        TAGS = {"team": "data"}

        @asset(timeout_seconds=0, description=DESCRIPTION, tags=TAGS)
        def slow() -> int:
            time.sleep(0.5)  # long past a deadline of "now + 0"
            return 3

        @asset(inputs={"slow": slow}, description=DESCRIPTION, tags=TAGS)
        def doubled(slow: int) -> int:
            return slow * 2
    """})
    got = barca(project, "get", "doubled", "p.py").expect(0)
    assert got.json["final_output"] == 6
    negative = project / "p.py"
    negative.write_text(negative.read_text().replace("timeout_seconds=0", "timeout_seconds=-1"))
    refused = barca(project, "get", "doubled", "p.py").expect(2)
    assert "timeout_seconds= must be a finite number literal of at least 0" in \
        refused.envelope["error"]
