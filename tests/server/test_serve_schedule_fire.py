"""`POST /schedule/{job}/fire` and `GET /schedule/{job}/fires` over a real `barca serve`: a
fire starts the job's tick run now, recorded as the job's (`schedule_id`, triggered by
`api`), never while the job's last run is in flight (409); a node without a Schedule is a
404; a read-only server refuses the fire (403) and lists no next fire (nothing fires)."""

from __future__ import annotations

from conftest import write

PIPELINE = """
    import time
    from pathlib import Path

    from barca import Schedule, asset

    RELEASE = Path({release!r})


    @asset(freshness=Schedule("0 6 * * *"))
    def nightly() -> str:
        while not RELEASE.exists():  # runs until the test lets it end
            time.sleep(0.05)
        return "done"


    @asset()
    def plain() -> int:
        return 1
"""


def test_a_fire_runs_the_job_now_and_never_overlaps_it(tmp_path, serve):
    write(tmp_path, {"barca.toml": "",
                     "p.py": PIPELINE.format(release=str(tmp_path / "release"))})
    server = serve(tmp_path, "p.py")
    first = server.post("/schedule/nightly/fire")
    assert first.status_code == 202, first.text
    run_id = first.json()["run_id"]
    assert first.json()["id"] == "p.py:nightly"
    again = server.post("/schedule/nightly/fire")
    assert again.status_code == 409 and run_id in again.json()["error"]
    assert server.post("/schedule/plain/fire").status_code == 404
    (tmp_path / "release").write_text("")
    assert server.wait_ended(run_id)["run"]["status"] == "success"

    fires = server.get("/schedule/p.py:nightly/fires", params={"next": "3"}).json()
    assert len(fires["next_fires"]) == 3 and fires["cron"] == "0 6 * * *"
    [run] = fires["runs"]
    assert (run["run_id"], run["triggered_by"], run["status"]) == (run_id, "api", "success")
    assert run["scheduled_at"] is not None
    [job] = server.get("/schedule").json()
    assert job["last_run"] == run_id
    # a second fire, once the server has handled the first one's end, is the newest of the
    # job's runs
    server.wait_status(run_id)
    second = server.post("/schedule/nightly/fire").json()["run_id"]
    server.wait_ended(second)
    assert [r["run_id"] for r in server.get("/schedule/nightly/fires").json()["runs"]] == [
        second, run_id]


def test_a_read_only_server_fires_nothing(tmp_path, serve):
    write(tmp_path, {"barca.toml": "",
                     "p.py": PIPELINE.format(release=str(tmp_path / "release"))})
    server = serve(tmp_path, "p.py", "--read-only")
    assert server.post("/schedule/nightly/fire").status_code == 403
    fires = server.get("/schedule/nightly/fires").json()
    assert fires["next_fires"] == [] and fires["runs"] == [] and fires["timezone"] is None
