"""`barca serve --read-only`: every route that would start or stop a run is a 403, nothing
fires, the reads still answer, and the metadata database is not written (nor created)."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import barca, read_runs, sha256, write

PIPELINE = """
    from barca import Schedule, asset

    @asset()
    def base() -> int:
        print("base ran")
        return 1

    @asset(inputs={"base": base}, freshness=Schedule("*/1 * * * * *"))
    def ticking(base: int) -> int:
        return base + 1
"""

WRITES = [("POST", "/runs", {"targets": ["ticking"]}), ("DELETE", "/runs/x", None),
          ("POST", "/get/x", None), ("POST", "/run/x", None),
          ("POST", "/get/ticking", None), ("POST", "/runs", {"targets": ["base"],
                                                             "dry_run": True})]


def test_read_only_refuses_runs_fires_nothing_and_leaves_the_database_unchanged(
        project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    ran = barca(project, "get", "ticking", "p.py").expect(0).json
    db = project / ".barca" / "metadata.db"
    before = sha256(db)
    runs_before = read_runs(project, "run_id, status, triggered_by")
    assert runs_before == [(ran["run_id"], "success", "cli")]

    server = serve(project, "p.py", "--read-only")
    assert "read-only" in server.stderr
    for verb, path, body in WRITES:
        got = server.client.request(verb, path, json=body)
        assert got.status_code == 403, (verb, path, got.status_code, got.text)
        assert got.json()["error"]

    health = server.get("/health").json()
    assert health["read_only"] is True and health["scheduler"] is False

    runs = server.get("/runs")
    assert runs.status_code == 200
    assert [r["run_id"] for r in runs.json()["runs"]] == [ran["run_id"]]
    detail = server.get(f"/runs/{ran['run_id']}")
    assert detail.status_code == 200 and detail.json()["run"]["status"] == "success"
    assert server.get(f"/logs/{ran['run_id']}").json()["logs"][0]["line"] == "base ran"
    state = server.get("/state")
    assert state.status_code == 200, state.text
    assert {n["id"]: n["cache"]["state"] for n in state.json()} == {
        "p.py:base": "cached", "p.py:ticking": "cached"}
    assert server.get("/assets/ticking").status_code == 200
    assert server.get("/schedule").json() == []

    # a 1-second cron: a scheduler would have fired within a few seconds
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert len(server.get("/runs").json()["runs"]) == 1
        time.sleep(0.2)
    assert "scheduled run" not in server.stderr
    assert sha256(db) == before
    code = server.terminate()
    assert sha256(db) == before
    assert read_runs(project, "run_id, status, triggered_by") == runs_before
    assert code == 0, f"barca serve exited {code} after SIGTERM"


def test_read_only_in_a_project_never_run_creates_no_barca_directory(
        project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    server = serve(project, "p.py", "--read-only")
    assert server.get("/health").json()["read_only"] is True
    assert server.get("/runs").json() == {"runs": [], "total": 0, "truncated": False}
    assert server.get("/assets").status_code == 200
    assert server.get("/assets/base").json()["stats"]["total_runs"] == 0
    state = server.get("/state")
    assert state.status_code == 200, state.text
    assert {n["id"] for n in state.json()} == {"p.py:base", "p.py:ticking"}
    assert server.post("/get/base").status_code == 403
    assert not (project / ".barca").exists()
    code = server.terminate()
    assert not (project / ".barca").exists()
    assert code == 0, f"barca serve exited {code} after SIGTERM"
