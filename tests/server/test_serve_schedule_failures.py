"""A scheduled job's limits under `barca serve` (a real server on loopback, real every-second
crons): `Schedule(max_failures=N)` pauses a job whose last N ticks failed, says so in the log
and in `/schedule`, keeps the count across a restart and starts from 0 again once resumed;
`Schedule(timeout_seconds=S)` cancels a tick still running after S seconds."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, lines, poll, write

FLAKY = """
    from pathlib import Path
    from barca import Schedule, task

    @task(freshness=Schedule("*/1 * * * * *", max_failures=4))
    def flaky() -> None:
        with open("flaky.log", "a") as fh:
            fh.write("tick\\n")
        if not Path("healed").exists():
            raise ValueError("the feed is down\\nat line 2")
"""

SLOW = """
    import time
    from barca import Schedule, task

    @task(freshness=Schedule("*/1 * * * * *", timeout_seconds=1, max_failures=1))
    def slow() -> None:
        time.sleep(60)
"""


def _job(server) -> dict:
    got = server.get("/schedule")
    assert got.status_code == 200, got.text
    (job,) = got.json()
    return job


def test_a_job_failing_max_failures_ticks_in_a_row_pauses_itself_until_resumed(
        project: Path, serve) -> None:
    write(project, {"p.py": FLAKY})
    first = serve(project, "p.py")
    poll(lambda: _job(first)["failures"] >= 1, "a first failed tick")
    first.stop()
    before = len(lines(project / "flaky.log"))
    assert before < 4, first.stderr
    assert "[barca] run " in first.stderr and " failed — run p.py:flaky (schedule p.py:flaky): " \
        "step p.py:flaky failed: ValueError: the feed is down" in first.stderr

    # the count survives the restart: the job pauses at its 4th failed tick in a row
    server = serve(project, "p.py")
    said = ("[barca] p.py:flaky failing: 4 consecutive failed ticks (max_failures=4); paused "
            "until resumed (POST /schedule/p.py:flaky/resume)")
    poll(lambda: said in server.stderr, "the job to pause itself")
    job = _job(server)
    assert (job["paused"], job["failing"], job["failures"], job["max_failures"]) == \
        (True, True, 4, 4), job
    assert job["paused_reason"] == "4 consecutive failed ticks (max_failures=4)", job
    ran = len(lines(project / "flaky.log"))  # 4, or 5 when the first server's stop cancelled
    assert ran in (4, 5)                       # a tick that had begun (it does not count)
    poll(lambda: server.stderr.count("[barca] scheduled run p.py:flaky skipped — paused: 4 "
                                     "consecutive failed ticks") >= 2, "ticks skipped")
    assert len(lines(project / "flaky.log")) == ran  # the skipped ticks ran nothing
    server.stop()

    server = serve(project, "p.py")
    assert _job(server)["failing"] is True
    (project / "healed").touch()
    resumed = server.post("/schedule/flaky/resume")
    assert resumed.status_code == 200, resumed.text
    poll(lambda: "complete — run p.py:flaky (schedule p.py:flaky)" in server.stderr,
         "a tick after the resume")
    job = _job(server)
    assert (job["paused"], job["failing"], job["failures"]) == (False, False, 0), job


def test_a_tick_past_its_timeout_is_cancelled_and_counts_as_failed(project: Path,
                                                                   serve) -> None:
    write(project, {"p.py": SLOW})
    server = serve(project, "p.py")
    limit = "1s (Schedule(timeout_seconds=) of p.py:slow)"
    poll(lambda: f"timed out after {limit}: cancelling it" in server.stderr, "a tick to time out")
    poll(lambda: "p.py:slow failing: 1 consecutive failed tick" in server.stderr,
         "the job to pause itself")
    (run,) = [r for r in server.runs() if r["triggered_by"] == "schedule"]
    status = server.get(f"/status/{run['run_id']}").json()
    assert (status["status"], status["error"]) == ("failed", f"run timed out after {limit}")


def test_bad_schedule_limits_are_usage_errors(project: Path) -> None:
    for args, said in [("max_failures=0", "max_failures= must be an integer literal of at "
                                          "least 1"),
                       ('timeout_seconds="soon"', "timeout_seconds= must be a finite number"),
                       ("retries=2", "Schedule() takes exactly one positional argument")]:
        write(project, {"p.py": f"""
            from barca import Schedule, task

            @task(freshness=Schedule("0 * * * *", {args}))
            def job() -> None:
                pass
        """})
        got = barca(project, "list", "p.py").expect(2)
        assert said in got.stderr, got.stderr
    write(project, {"p.py": SLOW})
    barca(project, "list", "p.py").expect(0)
