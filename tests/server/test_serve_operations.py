"""The operator's routes of `barca serve` (a real server on loopback, restarted where a
setting must outlive it): the run queue paused and resumed, a schedule paused and resumed,
and `POST /state/reset`, which needs its confirmation, keeps a copy of the database and
refuses while a run waits. Each is refused by a read-only server and by another site's
page, as every change is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import barca, poll, write

PIPELINE = """
    from barca import Schedule, asset, task

    @asset()
    def plain() -> int:
        return 1

    @task()
    def mark() -> None:
        with open("marked.log", "a") as fh:
            fh.write("mark\\n")
"""

TICKING = """
    from barca import Schedule, task

    @task(freshness=Schedule("*/1 * * * * *"))
    def tick() -> None:
        with open("ticks.log", "a") as fh:
            fh.write("tick\\n")
"""

WRITES = [("/queue/pause", None), ("/queue/resume", None), ("/schedule/tick/pause", None),
          ("/schedule/tick/resume", None), ("/state/reset", {"confirm": True}), ("/run", None)]


def _ok(response) -> dict:
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()


def _run_status(server, run_id: str) -> str:
    return _ok(server.get(f"/runs/{run_id}"))["run"]["status"]


def test_a_paused_queue_starts_nothing_until_resumed_across_a_restart(project: Path,
                                                                      serve) -> None:
    write(project, {"p.py": PIPELINE})
    server = serve(project, "p.py", "--no-schedule")
    assert _ok(server.get("/queue"))["paused"] is False
    paused = _ok(server.post("/queue/pause"))
    assert paused["paused"] is True and paused["paused_at"].endswith("Z")
    server.stop()

    server = serve(project, "p.py", "--no-schedule")
    queue = _ok(server.get("/queue"))
    assert (queue["paused"], queue["paused_at"]) == (True, paused["paused_at"])
    run_id = server.start_run({"command": "run", "targets": ["mark"]})
    queue = _ok(server.get("/queue"))
    assert queue["running"] == [] and [(r["run_id"], r["position"]) for r in
                                       queue["queued"]] == [(run_id, 1)]
    assert _run_status(server, run_id) == "pending"
    dry = server.post("/runs", json={"targets": ["plain"], "dry_run": True})
    assert dry.status_code == 409 and "/queue/resume" in dry.json()["remediation"]
    assert not (project / "marked.log").exists()

    assert _ok(server.post("/queue/resume"))["paused"] is False
    assert server.wait_ended(run_id)["run"]["status"] == "success"
    assert (project / "marked.log").read_text() == "mark\n"
    server.stop()
    assert _ok(serve(project, "p.py", "--no-schedule").get("/queue"))["paused"] is False


def test_a_paused_schedule_skips_its_ticks_across_a_restart(project: Path, serve) -> None:
    write(project, {"t.py": TICKING})
    server = serve(project, "t.py")
    poll(lambda: (project / "ticks.log").exists(), "a first tick")
    job = _ok(server.post("/schedule/tick/pause"))
    assert job == {"id": "t.py:tick", "paused": True, "paused_until": None}
    (listed,) = _ok(server.get("/schedule"))
    assert (listed["paused"], listed["paused_until"]) == (True, None)
    poll(lambda: server.stderr.count("tick skipped — paused") >= 1, "a tick skipped")
    poll(lambda: all(not r["status"] in ("pending", "running") for r in server.runs()),
         "the ticks started before the pause to end")
    ticks = (project / "ticks.log").read_text()
    poll(lambda: server.stderr.count("tick skipped — paused") >= 3, "more ticks skipped")
    assert (project / "ticks.log").read_text() == ticks
    server.stop()

    server = serve(project, "t.py")
    assert _ok(server.get("/schedule"))[0]["paused"] is True
    poll(lambda: server.stderr.count("tick skipped — paused") >= 2, "ticks skipped after "
         "the restart")
    assert (project / "ticks.log").read_text() == ticks
    assert _ok(server.post("/schedule/t.py:tick/resume"))["paused"] is False
    poll(lambda: (project / "ticks.log").read_text() != ticks, "a tick after the resume")

    until = server.post("/schedule/tick/pause", params={"until": "2000-01-01T00:00:00Z"})
    assert until.status_code == 400 and "has passed" in until.json()["error"]
    assert server.post("/schedule/nope/pause").status_code == 404


def test_a_schedule_pause_until_a_moment_is_said(project: Path, serve) -> None:
    write(project, {"t.py": TICKING, "p.py": PIPELINE})
    server = serve(project, "t.py", "p.py", "--no-schedule")
    job = _ok(server.post("/schedule/tick/pause", params={"until": "2099-01-01T10:00:00+02:00"}))
    assert job["paused_until"] == "2099-01-01T08:00:00.000Z"
    unscheduled = server.post("/schedule/plain/pause")
    assert unscheduled.status_code == 404 and "no Schedule" in unscheduled.json()["error"]


def test_state_reset_needs_its_confirmation_and_keeps_a_copy(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    run_id = barca(project, "get", "plain", "p.py").expect(0).json["run_id"]
    server = serve(project, "p.py", "--no-schedule")
    for body in (None, {}, {"confirm": False}, {"confirm": "yes"}):
        refused = server.post("/state/reset", json=body)
        assert refused.status_code == 400, refused.text
        assert '{"confirm": true}' in refused.json()["remediation"]
    assert [r["run_id"] for r in _ok(server.get("/history"))["runs"]] == [run_id]

    # a waiting run: refused, nothing changed
    server.post("/queue/pause")
    waiting = server.start_run({"command": "run", "targets": ["mark"]})
    busy = server.post("/state/reset", json={"confirm": True})
    assert busy.status_code == 409 and waiting in busy.json()["error"]
    assert [r["run_id"] for r in _ok(server.get("/history"))["runs"]] == [run_id]
    server.delete(f"/runs/{waiting}")
    poll(lambda: _run_status(server, waiting) == "cancelled", "the waiting run cancelled")

    done = _ok(server.post("/state/reset", json={"confirm": True}))
    assert done["runs_removed"] == 2 and done["materializations_removed"] == 1
    backup = Path(done["backup"])
    assert backup.parent == project / ".barca" and backup.name.startswith("metadata.db.reset-")
    kept = sqlite3.connect(backup)
    assert {r[0] for r in kept.execute("SELECT run_id FROM runs")} == {run_id, waiting}
    kept.close()
    assert _ok(server.get("/history"))["runs"] == []
    assert _ok(server.get("/materializations"))["total"] == 0
    assert _ok(server.get("/queue"))["paused"] is True  # the operator's pause is kept
    # the artifacts stay; the next get has no record of them and runs again
    again = barca(project, "get", "plain", "p.py").expect(0).json
    assert again["steps_executed"] == 1


@pytest.mark.parametrize("read_only", [True, False])
def test_every_change_is_refused_read_only_and_from_another_site(project: Path, serve,
                                                                 read_only: bool) -> None:
    write(project, {"t.py": TICKING})
    barca(project, "run", "tick", "t.py").expect(0)
    server = serve(project, "t.py", "--no-schedule", *(["--read-only"] if read_only else []))
    for path, body in WRITES:
        if read_only:
            got = server.post(path, json=body)
            assert got.status_code == 403 and "read-only" in got.json()["error"], path
        else:
            got = server.post(path, json=body, headers={"Origin": "http://evil.example"})
            assert got.status_code == 403 and "origin" in got.json()["error"], path
            got = server.post(path, content=b"{}", headers={"Content-Type": "text/plain"})
            assert got.status_code == 415, path
        assert server.get(path).status_code == (200 if path == "/queue" else 405), path
    assert _ok(server.get("/queue"))["paused"] is False
    assert _ok(server.get("/history"))["total"] == 1
