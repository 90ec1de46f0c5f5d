"""Run admission under `barca serve`: one running run per core, the rest wait as `pending`
in order (cancelling one that waits ends it at once, recorded cancelled), and a run past `--run-timeout` is
cancelled and reported failed, while its history row says cancelled."""

from __future__ import annotations

from pathlib import Path

from conftest import db_rows, poll, write
from held_runs import HOLD, SLOTS, fill_slots


def _status(server, run_id: str) -> str:
    got = server.get(f"/status/{run_id}")
    assert got.status_code == 200, got.text
    return got.json()["status"]


def test_runs_past_one_per_core_wait_pending_and_start_in_order(project: Path, serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py")
    first = fill_slots(server, project)
    waiting = [server.start_run({"command": "run", "targets": ["hold"]}) for _ in range(2)]
    assert [_status(server, r) for r in first] == ["running"] * SLOTS
    assert [_status(server, r) for r in waiting] == ["pending", "pending"]
    listed = {r["run_id"]: r["status"] for r in server.runs()}
    assert [listed[r] for r in waiting] == ["pending", "pending"], listed
    # waiting runs have not started: no row in history, no step
    assert not db_rows(project, "SELECT run_id FROM runs WHERE run_id IN (?, ?)", tuple(waiting))

    gone = server.delete(f"/runs/{waiting[0]}")
    assert gone.status_code == 200, gone.text
    assert _status(server, waiting[0]) == "cancelled"
    assert server.get(f"/runs/{waiting[0]}").json()["run"]["status"] == "cancelled"

    (project / "go").touch()
    for run_id in first + waiting[1:]:
        assert server.wait_ended(run_id)["run"]["status"] == "success"
    assert len(list(project.glob("started.*"))) == SLOTS + 1  # the cancelled one never ran
    rows = {r[0]: r[1:] for r in db_rows(project, "SELECT run_id, status, error, "
                                                  "steps_executed FROM runs")}
    # the cancelled one is recorded so (an accepted id stays known), with nothing run
    assert rows[waiting[0]] == ("cancelled", "cancelled before it started", 0), rows
    assert rows[waiting[1]][0] == "success", rows


def test_a_run_past_its_time_limit_is_cancelled_and_reported_failed(project: Path,
                                                                    serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py", "--run-timeout", "1")
    run_id = server.start_run({"command": "run", "targets": ["nap"]})
    poll(lambda: _status(server, run_id) not in ("pending", "running"), "the run to end", 20)
    status = server.get(f"/status/{run_id}").json()
    assert status["status"] == "failed" and status["error"] == "run timed out after 1s", status
    detail = server.wait_ended(run_id)
    assert detail["run"]["status"] == "cancelled", detail["run"]  # history: cancelled
    assert f"[barca] run {run_id} timed out after 1s: cancelling it" in server.stderr


def test_a_negative_run_timeout_is_a_usage_error(project: Path) -> None:
    from conftest import barca

    write(project, {"p.py": HOLD})
    got = barca(project, "serve", "p.py", "--run-timeout", "-1").expect(2)
    assert "--run-timeout -1 is negative" in got.stderr
