"""Several runs on one project at once: each key of each run hash executes once in total.

A run leases the asset steps it submits in the metadata database; another run that wants the
same step at the same run hash waits for it and then serves it from cache (or, when the owner
failed or died, runs it itself). Every test drives real `barca` processes on one real SQLite
file, and counts executions in a log the steps append to. Gates (files the test creates) hold
a step open instead of guessing with sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
from pathlib import Path

from barca.store.db import SCHEMA_VERSION
from conftest import as_schema_10, barca, gone, lines, start_barca, take_executed, wait_for, write

KEYS = 120

PARTITIONED = f"""
    import time
    from barca import asset, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={{"k": partitions([f"k{{i:03d}}" for i in range({KEYS})])}})
    def base(k: str) -> str:
        _ran("base " + k)
        time.sleep(0.02)  # long enough that all four runs start before the first is done
        return "base-" + k

    @asset(partitions={{"k": partitions_from(base)}})
    def double(k: str, base: str) -> str:
        _ran("double " + k)
        return base + "!"
"""

GATED = """
    import os
    import time
    from pathlib import Path
    from barca import asset

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    def _gate():
        deadline = time.monotonic() + 60
        while not Path("gate").exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    @asset()
    def up() -> int:
        _ran("up start")
        Path(f"up.{os.getpid()}.pid").touch()  # the worker running it
        _gate()
        if Path("fail-once").exists():
            Path("fail-once").unlink()
            _ran("up failed")
            raise RuntimeError("up failed once")
        _ran("up done")
        return 20

    @asset(inputs={"up": up})
    def a(up: int) -> int:
        _ran("a")
        return up + 1

    @asset(inputs={"up": up})
    def b(up: int) -> int:
        _ran("b")
        return up + 2

    @asset()
    def other() -> int:
        return 0
"""


GATED_KEYS = """
    import time
    from pathlib import Path
    from barca import asset, partitions

    @asset(partitions={"k": partitions([f"k{i}" for i in range(10)])})
    def part(k: str) -> str:
        with open("executed.log", "a") as fh:
            fh.write(k + "\\n")
        deadline = time.monotonic() + 60
        while not Path("gate").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return k.upper()
"""



def _finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, json.loads(out) if out.strip() else {}, err


def _start_logged(project: Path, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
    """A background `barca` whose stderr goes to a file the test can read while it runs."""
    path = project / f"{name}.stderr"
    with path.open("w") as stderr:
        return start_barca(project, *args, stderr=stderr), path


def _leases(project: Path) -> list[tuple]:
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    try:
        return conn.execute("SELECT node_id, key, run_id FROM step_leases").fetchall()
    finally:
        conn.close()


def test_four_gets_started_together_execute_each_key_once_and_agree(project: Path) -> None:
    write(project, {"p.py": PARTITIONED})
    procs = [start_barca(project, "get", "double", "p.py") for _ in range(4)]
    results = [_finish(proc) for proc in procs]
    for code, body, err in results:
        assert code == 0, err
    executed = take_executed(project)
    expected = sorted([f"base k{i:03d}" for i in range(KEYS)] +
                      [f"double k{i:03d}" for i in range(KEYS)])
    assert executed == expected  # each key of each node once, in all four runs together
    assert sum(body["steps_executed"] for _, body, _ in results) == 2 * KEYS
    values = {f"k=k{i:03d}": f"base-k{i:03d}!" for i in range(KEYS)}
    assert [body["final_output"] for _, body, _ in results] == [values] * 4
    served = [body for _, body, _ in results if body["steps_executed"] < 2 * KEYS]
    assert len(served) >= 3
    for body in served:  # what another run computed is reported as such, not as run here
        steps = {s["id"]: s for s in body["steps"]}
        assert any("computed_by" in s for s in steps.values()), steps
    assert _leases(project) == []
    assert barca(project, "get", "double", "p.py").expect(0).json["steps_executed"] == 0


def test_two_targets_sharing_an_upstream_run_it_once(project: Path) -> None:
    write(project, {"p.py": GATED})
    first, _ = _start_logged(project, "first", "get", "a", "p.py")
    wait_for(lambda: "up start" in lines(project / "executed.log"), "up to start")
    second, second_err = _start_logged(project, "second", "get", "b", "p.py")
    wait_for(lambda: "waiting" in second_err.read_text(), "the second run to wait")

    # a dry run meanwhile neither waits nor takes a lease: it says what a run would do
    dry = barca(project, "get", "b", "p.py", "--dry-run", timeout=30).expect(0)
    assert {s["id"].split(":")[1]: s["action"] for s in dry.json["steps"]} == {
        "up": "run", "b": "run"}
    assert [(node, run) for node, _, run in _leases(project)] == [
        ("p.py:up", _running_run(project, "a"))]

    (project / "gate").write_text("")
    code_a, body_a, err_a = _finish(first)
    code_b, body_b, err_b = _finish(second)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    assert (body_a["final_output"], body_b["final_output"]) == (21, 22)
    assert take_executed(project) == ["a", "b", "up done", "up start"]
    up = {s["id"]: s for s in body_b["steps"]}["p.py:up"]
    assert up["status"] == "cached" and up["reason"] == "computed_by_other_run"
    assert up["computed_by"] == {body_a["run_id"]: 1}
    assert body_a["run_id"] in up["detail"]
    assert _leases(project) == []


def test_a_run_computes_the_keys_nobody_holds_and_waits_for_the_others(project: Path) -> None:
    write(project, {"p.py": GATED_KEYS})
    first, _ = _start_logged(project, "first", "get", "part", "p.py", "--partition",
                             "k=k0,k1,k2")
    wait_for(lambda: lines(project / "executed.log"), "the first run to start its keys")
    assert len(_leases(project)) == 3  # all of them, whether a worker is on it yet or not
    second, second_err = _start_logged(project, "second", "get", "part", "p.py")
    wait_for(lambda: "waiting" in second_err.read_text(), "the second run to wait")
    assert "3 keys of p.py:part" in second_err.read_text()
    (project / "gate").write_text("")
    code_a, body_a, err_a = _finish(first)
    code_b, body_b, err_b = _finish(second)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    assert take_executed(project) == [f"k{i}" for i in range(10)]
    assert (body_a["steps_executed"], body_b["steps_executed"]) == (3, 7)
    assert body_b["final_output"] == {f"k=k{i}": f"K{i}" for i in range(10)}
    part = body_b["steps"][0]
    assert part["status"] == "partial" and part["computed_by"] == {body_a["run_id"]: 3}
    assert f"3 keys computed by concurrent run {body_a['run_id']}" in part["detail"]


def _running_run(project: Path, target: str) -> str:
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    try:
        return conn.execute("SELECT run_id FROM runs WHERE target = ? AND status = 'running'",
                            (target,)).fetchone()[0]
    finally:
        conn.close()


def test_a_lease_whose_owner_was_killed_is_taken_over_once(project: Path) -> None:
    write(project, {"p.py": GATED})
    killed = start_barca(project, "get", "a", "p.py")
    try:
        wait_for(lambda: "up start" in lines(project / "executed.log"), "up to start")
        assert len(_leases(project)) == 1
    finally:
        killed.kill()  # SIGKILL: the lease stays behind, naming a dead process
        killed.communicate(timeout=60)  # its worker dies with it, its step unfinished
    assert killed.returncode == -signal.SIGKILL
    [worker] = [int(p.name.split(".")[1]) for p in project.glob("up.*.pid")]
    wait_for(lambda: gone(worker), f"the killed run's worker {worker} to die with it",
             timeout=30)
    (project / "gate").write_text("")
    assert take_executed(project) == ["up start"]
    assert len(_leases(project)) == 1

    # two runs now: one takes the dead run's lease over, the other waits for it
    procs = [start_barca(project, "get", name, "p.py") for name in ("a", "b")]
    results = [_finish(proc) for proc in procs]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    assert [body["final_output"] for _, body, _ in results] == [21, 22]
    assert take_executed(project) == ["a", "b", "up done", "up start"]
    assert _leases(project) == []


def test_a_lease_of_a_reused_pid_is_taken_over(project: Path) -> None:
    """The pid is alive (this test's own), but its process started at another time: the
    lease's owner is gone, and the run does not wait for it."""
    write(project, {"p.py": GATED})
    (project / "gate").write_text("")
    barca(project, "get", "other", "p.py").expect(0)  # the database exists
    run_hash = barca(project, "get", "up", "p.py", "--dry-run").expect(0).json["steps"][0][
        "run_hash"]
    owner = ("deadbeef0000", os.getpid(), socket.gethostname(), "1")
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    with conn:  # its run's row still says running: only the start time tells
        conn.execute("INSERT INTO runs (run_id, command, files, status, started_at, pid, host, "
                     "proc_start) VALUES (?, 'get', '[]', 'running', 0, ?, ?, ?)", owner)
        conn.execute("INSERT INTO step_leases (node_id, key, run_hash, run_id, pid, host, "
                     "proc_start, taken_at) VALUES ('p.py:up', '', ?, ?, ?, ?, ?, 0)",
                     (run_hash, *owner))
    conn.close()
    result = barca(project, "get", "up", "p.py", timeout=60).expect(0)
    assert result.json["final_output"] == 20
    assert take_executed(project) == ["up done", "up start"]
    assert _leases(project) == []


def test_a_run_waiting_on_a_step_that_fails_elsewhere_runs_it_itself(project: Path) -> None:
    """The owner's failure is not taken for this run's: the step may have failed for a
    passing reason, and this run was asked for the value, so it claims the step and runs it
    (as it would had the other run failed just before it started)."""
    write(project, {"p.py": GATED})
    (project / "fail-once").write_text("")
    first, _ = _start_logged(project, "first", "get", "a", "p.py")
    wait_for(lambda: "up start" in lines(project / "executed.log"), "up to start")
    second, second_err = _start_logged(project, "second", "get", "b", "p.py")
    wait_for(lambda: "waiting" in second_err.read_text(), "the second run to wait")
    (project / "gate").write_text("")
    code_a, body_a, _ = _finish(first)
    code_b, body_b, err_b = _finish(second)
    assert code_a == 1 and body_a["failed_node"] == "p.py:up"
    assert code_b == 0, err_b
    assert body_b["final_output"] == 22
    # one after the other: the second run started `up` only once the first had failed
    assert lines(project / "executed.log") == ["up start", "up failed", "up start", "up done",
                                               "b"]
    assert {s["id"]: s["status"] for s in body_b["steps"]}["p.py:up"] == "ran"
    assert _leases(project) == []


def test_a_schema_3_database_gets_the_step_lease_table(project: Path) -> None:
    write(project, {"p.py": GATED})
    (project / "gate").write_text("")
    barca(project, "get", "other", "p.py").expect(0)
    as_schema_10(project)
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    with conn:  # as barca before step leases left it
        conn.execute("DROP TABLE step_leases")
        conn.execute("PRAGMA user_version = 3")
    conn.close()
    assert barca(project, "get", "a", "p.py").expect(0).json["final_output"] == 21
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()
    assert _leases(project) == []


def test_a_run_waiting_on_a_cancelled_run_computes_the_step_itself(project: Path) -> None:
    write(project, {"p.py": GATED})
    first, _ = _start_logged(project, "first", "get", "a", "p.py")
    wait_for(lambda: "up start" in lines(project / "executed.log"), "up to start")
    second, second_err = _start_logged(project, "second", "get", "b", "p.py")
    wait_for(lambda: "waiting" in second_err.read_text(), "the second run to wait")
    first.send_signal(signal.SIGTERM)  # cancelled: its workers stop, its leases are given back
    assert _finish(first)[0] == 130
    wait_for(lambda: lines(project / "executed.log") == ["up start", "up start"],
              "the second run to start up itself")
    (project / "gate").write_text("")
    code, body, err = _finish(second)
    assert code == 0, err
    assert body["final_output"] == 22
    assert take_executed(project) == ["b", "up done", "up start", "up start"]
    assert _leases(project) == []
