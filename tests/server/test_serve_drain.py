"""How `barca serve` stops and how much it runs at once (a real server on loopback, signalled
by pid): `--max-runs` bounds the runs at once, `--capacity` the `weight=` units their steps
hold together; SIGTERM drains (the running runs finish, up to `--drain-timeout`, then are
cancelled), and the runs still waiting, in a paused queue too, stay in the database's queue
and run on the next start."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from conftest import barca, db_rows, lines, poll, write
from held_runs import HOLD


def _status(server, run_id: str) -> str:
    got = server.get(f"/status/{run_id}")
    assert got.status_code == 200, got.text
    return got.json()["status"]


def _exit_code(server, timeout: float = 30.0) -> int:
    try:
        return server.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        raise AssertionError(f"barca serve still running {timeout}s after SIGTERM:\n"
                             f"{server.stderr}") from None


def _queued(project: Path) -> list[str]:
    return [r[0] for r in db_rows(project, "SELECT run_id FROM run_queue ORDER BY seq")]


def test_max_runs_bounds_the_runs_at_once(project: Path, serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py", "--no-schedule", "--max-runs", "1")
    first = server.start_run({"command": "run", "targets": ["hold"]})
    poll(lambda: list(project.glob("started.*")), "the first run to start")
    second = server.start_run({"command": "run", "targets": ["mark"]})
    queue = server.get("/queue").json()
    assert queue["max_runs"] == 1, queue
    assert [r["run_id"] for r in queue["running"]] == [first], queue
    assert [(r["run_id"], r["position"]) for r in queue["queued"]] == [(second, 1)], queue
    assert _status(server, second) == "pending"
    (project / "go").touch()
    assert server.wait_ended(second)["run"]["status"] == "success"
    assert server.wait_ended(first)["run"]["status"] == "success"


HEAVY = """
    import os
    import time
    from pathlib import Path
    from barca import task

    @task(weight=2)
    def heavy() -> None:
        Path(f"started.{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while not Path("go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
"""


def test_capacity_is_one_budget_shared_by_the_steps_of_every_run(project: Path,
                                                                  serve) -> None:
    write(project, {"p.py": HEAVY})
    server = serve(project, "p.py", "--no-schedule", "--max-runs", "2", "--capacity", "3")
    assert "[barca] warning: 'heavy' has weight=2" not in server.stderr
    first = server.start_run({"command": "run", "targets": ["heavy"]})
    poll(lambda: list(project.glob("started.*")), "the first heavy step to start")
    second = server.start_run({"command": "run", "targets": ["heavy"]})
    capacity = poll(lambda: (c := server.get("/queue").json()["capacity"])["waiting"] and c,
                    "the second run's step to wait for units")
    # both runs run (two slots), but 2 + 2 units do not fit in 3: the second step waits
    assert [r["run_id"] for r in server.get("/queue").json()["running"]] == [first, second]
    assert (capacity["total"], capacity["in_use"]) == (3, 2), capacity
    assert capacity["runs"] == [{"run_id": first, "units": 2}], capacity
    assert [(w["run_id"], w["weight"]) for w in capacity["waiting"]] == [(second, 2)], capacity
    assert len(list(project.glob("started.*"))) == 1

    (project / "go").touch()
    for run_id in (first, second):
        assert server.wait_ended(run_id)["run"]["status"] == "success"
    assert len(list(project.glob("started.*"))) == 2
    assert server.get("/queue").json()["capacity"] == {
        "total": 3, "source": "--capacity", "in_use": 0, "runs": [], "waiting": []}


def test_a_step_heavier_than_the_capacity_is_said_and_runs_alone(project: Path,
                                                                 serve) -> None:
    write(project, {"p.py": HEAVY})
    (project / "go").touch()
    server = serve(project, "p.py", "--no-schedule", "--capacity", "1")
    assert "[barca] warning: 'heavy' has weight=2, more than the capacity 1 (--capacity); it " \
        "runs alone" in server.stderr
    run_id = server.start_run({"command": "run", "targets": ["heavy"]})
    assert server.wait_ended(run_id)["run"]["status"] == "success"


def test_a_second_sigterm_cancels_the_draining_runs_and_exits_1(project: Path,
                                                                 serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py", "--no-schedule", "--drain-timeout", "600")
    running = server.start_run({"command": "run", "targets": ["hold"]})
    poll(lambda: list(project.glob("started.*")), "the held run to start")
    server.proc.send_signal(signal.SIGTERM)
    poll(lambda: "gets up to 600s to finish" in server.stderr, "the drain to begin")
    server.proc.send_signal(signal.SIGTERM)
    assert _exit_code(server) == 1, server.stderr
    assert "[barca] SIGTERM received again: cancelling the running runs now" in server.stderr
    assert db_rows(project, "SELECT status FROM runs WHERE run_id = ?", (running,)) \
        == [("cancelled",)]


def test_bad_serve_limits_are_usage_errors(project: Path) -> None:
    write(project, {"p.py": HOLD})
    for flag, value, said in [("--max-runs", "0", "--max-runs 0 is below 1"),
                              ("--capacity", "0", "--capacity 0 is below 1"),
                              ("--drain-timeout", "-1", "--drain-timeout -1 is negative")]:
        got = barca(project, "serve", "p.py", "--port", "0", flag, value).expect(2)
        assert said in got.stderr, got.stderr


def test_sigterm_lets_running_runs_finish_and_keeps_waiting_ones_for_the_next_start(
        project: Path, serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py", "--no-schedule", "--max-runs", "1")
    running = server.start_run({"command": "run", "targets": ["hold"]})
    poll(lambda: list(project.glob("started.*")), "the held run to start")
    waiting = server.start_run({"command": "run", "targets": ["mark"]})

    server.proc.send_signal(signal.SIGTERM)
    poll(lambda: "draining — 1 running run gets up to 30s to finish; 1 waiting stay queued "
         "for the next start" in server.stderr, "the drain to be said")
    assert server.get("/health").json()["status"] == "draining"
    assert server.get("/queue").json()["draining"] is True
    # still accepted while draining, kept for the next start; a dry run could not wait
    late = server.start_run({"command": "run", "targets": ["mark"]})
    dry = server.post("/runs", json={"targets": ["regional"], "dry_run": True})
    assert dry.status_code == 503, dry.text
    assert _status(server, running) == "running"

    (project / "go").touch()
    assert _exit_code(server) == 0, server.stderr
    assert f"[barca] run {running} complete — run hold (api): 1 of 1 step ran" in server.stderr
    assert db_rows(project, "SELECT status FROM runs WHERE run_id = ?", (running,)) \
        == [("success",)]
    assert not (project / "marked.log").exists()
    assert _queued(project) == [waiting, late]

    again = serve(project, "p.py", "--no-schedule")
    for run_id in (waiting, late):
        assert again.wait_ended(run_id)["run"]["status"] == "success"
    assert lines(project / "marked.log") == ["mark", "mark"]


def test_past_the_drain_timeout_runs_are_cancelled_and_a_paused_queue_keeps_its_runs(
        project: Path, serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py", "--no-schedule", "--drain-timeout", "1")
    running = server.start_run({"command": "run", "targets": ["hold"]})
    poll(lambda: list(project.glob("started.*")), "the held run to start")
    assert server.post("/queue/pause").status_code == 200
    waiting = server.start_run({"command": "run", "targets": ["mark"]})

    server.proc.send_signal(signal.SIGTERM)
    assert _exit_code(server) == 0, server.stderr
    assert f"[barca] run cancelled: server shutdown ({running})" in server.stderr
    assert db_rows(project, "SELECT status FROM runs WHERE run_id = ?", (running,)) \
        == [("cancelled",)]
    assert _queued(project) == [waiting]

    again = serve(project, "p.py", "--no-schedule")
    assert again.get("/queue").json()["paused"] is True
    assert _status(again, waiting) == "pending"
    assert again.post("/queue/resume").status_code == 200
    assert again.wait_ended(waiting)["run"]["status"] == "success"
    assert lines(project / "marked.log") == ["mark"]
