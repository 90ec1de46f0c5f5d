"""The scheduler of `barca serve`: a scheduled sensor's tick runs only the changed key, jobs
due together share a run, a job never overlaps itself, and a restart fires a missed tick once
(a job never seen before does not fire at start)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path

from conftest import db_rows, poll, pool_processes, write

EVERY_SECOND = "*/1 * * * * *"

KEYED = """
    import json
    import os
    from pathlib import Path
    from barca import Schedule, asset, partitions_from, sensor

    def _ancestors():
        out, pid = [], os.getpid()
        while pid > 1:
            try:
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                break
            out.append(pid)
        return out

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")
        with open("lineage.log", "a") as fh:
            fh.write(json.dumps([name, _ancestors()]) + "\\n")

    @sensor(freshness=Schedule("%s"))
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def cleaned(k: str, versions: int) -> int:
        _ran("cleaned " + k)
        return versions * 10

    @asset(partitions={"k": partitions_from(cleaned)})
    def scored(k: str, cleaned: int) -> int:
        _ran("scored " + k)
        return cleaned + 1
""" % EVERY_SECOND


def _write_json(path: Path, value) -> None:
    """Replace the file at once: a tick never reads half of it."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_scheduled_keyed_tick_runs_the_sensor_and_only_the_changed_key(
        project: Path, serve) -> None:
    versions = {f"k{i:02d}": 1 for i in range(50)}
    write(project, {"p.py": KEYED})
    _write_json(project / "versions.json", versions)
    server = serve(project, "p.py", warm="30")  # runs fork from the project's warm pool

    def first_scheduled_run():
        runs = [r for r in server.runs() if r["triggered_by"] == "schedule"]
        return runs[-1] if runs and runs[-1]["status"] not in ("pending", "running") else None

    first = poll(first_scheduled_run, "the first scheduled run to end", timeout=60)
    assert first["status"] == "success", first
    assert first["target"].split(",") == ["p.py:versions", "p.py:cleaned", "p.py:scored"]
    assert first["steps_executed"] == 101, first  # the sensor and 2 x 50 keys
    log = project / "executed.log"
    assert len(log.read_text().splitlines()) == 100
    assert f"scheduled run p.py:versions → {first['run_id']}" in server.stderr

    # later ticks with nothing changed run the sensor alone
    server.wait_run(lambda r: r["triggered_by"] == "schedule" and r["status"] == "success"
                    and r["run_id"] != first["run_id"], "a second scheduled run")
    quiet = [r for r in server.runs() if r["run_id"] != first["run_id"]
             and r["status"] == "success"]
    assert quiet and all(r["steps_executed"] == 1 for r in quiet), quiet
    assert len(log.read_text().splitlines()) == 100
    poll(lambda: pool_processes(project), "the project's warm pool")
    log.unlink()

    versions["k17"] = 2
    _write_json(project / "versions.json", versions)
    changed = server.wait_run(lambda r: r["run_id"] != first["run_id"]
                              and r["steps_executed"] >= 2, "a tick running the key")
    changed = server.wait_ended(changed["run_id"])["run"]
    assert changed["status"] == "success" and changed["triggered_by"] == "schedule", changed
    assert changed["steps_executed"] == 3, changed  # the sensor and the key of each asset
    assert sorted(log.read_text().splitlines()) == ["cleaned k17", "scored k17"]
    pools = set(pool_processes(project))
    lineage = dict(json.loads(line) for line in
                   (project / "lineage.log").read_text().splitlines()[-2:])
    assert set(lineage) == {"cleaned k17", "scored k17"}
    assert all(pools & set(chain) for chain in lineage.values()), (pools, lineage)
    detail = server.get(f"/runs/{changed['run_id']}").json()
    ran = sorted((s["node_id"], s["key"]) for s in detail["steps"] if s["status"] == "success")
    assert ("p.py:cleaned", "k=k17") in ran, ran  # a key as every answer writes it
    # a tick reads no value (nobody asked for the 50 keys' values)
    outcome = server.wait_status(changed["run_id"])["result"]
    assert outcome["status"] == "success" and "final_output" not in outcome, outcome
    assert "final_output" not in outcome["targets"]["p.py:scored"], outcome["targets"]

    # every other run after the first ran the sensor alone, and nothing ran k17 twice
    later = [r for r in server.runs() if r["run_id"] not in (first["run_id"],
                                                              changed["run_id"])]
    assert all(r["steps_executed"] <= 1 for r in later), later
    assert sorted(log.read_text().splitlines()) == ["cleaned k17", "scored k17"]


def test_two_scheduled_readers_of_one_upstream_share_one_run(project: Path, serve) -> None:
    write(project, {"p.py": f"""
        from barca import Schedule, asset

        @asset()
        def base() -> int:
            return 1

        @asset(inputs={{"base": base}}, freshness=Schedule("{EVERY_SECOND}"))
        def alpha(base: int) -> int:
            return base

        @asset(inputs={{"base": base}}, freshness=Schedule("{EVERY_SECOND}"))
        def beta(base: int) -> int:
            return base + 1
    """})
    server = serve(project, "p.py")
    run = server.wait_run(lambda r: r["triggered_by"] == "schedule" and r["status"] == "success",
                          "a scheduled run to succeed")
    assert set(run["target"].split(",")) == {"p.py:alpha", "p.py:beta"}, run
    scheduled = [r for r in server.runs() if r["triggered_by"] == "schedule"]
    assert all(set(r["target"].split(",")) == {"p.py:alpha", "p.py:beta"} for r in scheduled)
    assert f"scheduled run p.py:alpha, p.py:beta → {run['run_id']}" in server.stderr
    assert "scheduled run p.py:alpha →" not in server.stderr
    jobs = {j["id"]: j for j in server.get("/schedule").json()}
    assert set(jobs) == {"p.py:alpha", "p.py:beta"}


def test_an_asset_and_a_task_due_together_share_one_run_of_command_serve(
        project: Path, serve) -> None:
    write(project, {"p.py": f"""
        from barca import Schedule, asset, task

        @asset(freshness=Schedule("{EVERY_SECOND}"))
        def alpha() -> int:
            return 1

        @task(inputs={{"alpha": alpha}}, freshness=Schedule("{EVERY_SECOND}"))
        def notify(alpha: int) -> None:
            print("notified", alpha)
    """})
    server = serve(project, "p.py")
    run = server.wait_run(lambda r: r["triggered_by"] == "schedule" and r["status"] == "success",
                          "a scheduled run to succeed")
    assert run["command"] == "serve", run
    assert set(run["target"].split(",")) == {"p.py:alpha", "p.py:notify"}, run
    logs = server.get(f"/logs/{run['run_id']}").json()["logs"]
    assert any(line["line"] == "notified 1" for line in logs), logs  # the task ran in it


def test_jobs_due_together_run_apart_when_sharing_would_delay_one(project: Path, serve) -> None:
    write(project, {"p.py": f"""
        from barca import Schedule, asset

        @asset()
        def base() -> int:
            return 1

        @asset(inputs={{"base": base}})
        def middle(base: int) -> int:
            return base

        @asset(inputs={{"base": base}}, freshness=Schedule("{EVERY_SECOND}"))
        def near(base: int) -> int:
            return base

        @asset(inputs={{"middle": middle}}, freshness=Schedule("{EVERY_SECOND}"))
        def far(middle: int) -> int:
            return middle

        @asset(freshness=Schedule("{EVERY_SECOND}"))
        def alone() -> int:
            return 3
    """})
    server = serve(project, "p.py")
    poll(lambda: {r["target"] for r in server.runs() if r["status"] == "success"}
         >= {"p.py:near", "p.py:far", "p.py:alone"}, "a run of each job on its own")
    assert all("," not in r["target"] for r in server.runs()), server.runs()
    # far, two levels below base, would wait behind near's level: said once
    poll(lambda: server.stderr.count("scheduled run p.py:far →") >= 2, "far to fire twice")
    said = [line for line in server.lines if "runs apart" in line]
    assert len(said) == 1, server.stderr
    assert said[0].endswith("from the jobs due with it: in one run p.py:far would wait for "
                            "p.py:near, which it does not read"), said
    assert "p.py:alone runs apart" not in server.stderr  # nothing in common: nothing to say


def test_a_job_never_overlaps_itself_a_fire_in_flight_is_skipped(project: Path, serve) -> None:
    write(project, {"p.py": f"""
        import time
        from barca import Schedule, task

        @task(freshness=Schedule("{EVERY_SECOND}"))
        def nap() -> None:
            time.sleep(2)
    """})
    server = serve(project, "p.py")
    poll(lambda: "scheduled run p.py:nap skipped — previous run" in server.stderr,
         "a fire skipped while the last run is in flight")
    poll(lambda: len([r for r in server.runs() if r["status"] == "success"]) >= 2,
         "two scheduled runs to finish", timeout=40)
    runs = sorted(server.runs(), key=lambda r: _instant(r["started_at"]))
    assert all(r["triggered_by"] == "schedule" and r["command"] == "run" for r in runs), runs
    assert sum(r["status"] in ("pending", "running") for r in runs) <= 1, runs
    done = [r for r in runs if r["finished_at"]]
    for before, after in zip(done, runs[1:]):
        assert _instant(after["started_at"]) >= _instant(before["finished_at"]), (before, after)
    skipped = [line for line in server.lines if "skipped" in line]
    ran = {r["run_id"] for r in runs}
    assert all(line.rsplit("previous run ", 1)[1].split()[0] in ran for line in skipped)


def _schedule_row(root: Path, job: str):
    try:
        rows = db_rows(root, "SELECT cron, timezone, last_fired, last_run_id "
                             "FROM schedule_state WHERE job_id = ?", (job,))
    except sqlite3.OperationalError:
        return None
    return rows[0] if rows else None


def test_a_restart_fires_a_missed_tick_once_and_a_new_job_not_at_all(
        project: Path, serve) -> None:
    # hourly, at the minute half an hour from now: no regular fire during the test
    minute = (datetime.now(timezone.utc).minute + 30) % 60
    cron = f"{minute} * * * *"
    hourly = f"""
        from barca import Schedule, asset

        @asset(freshness=Schedule("{cron}"))
        def hourly() -> int:
            return 1
    """
    write(project, {"p.py": hourly})
    codes = []

    first = serve(project, "p.py", "--timezone", "utc")
    row = poll(lambda: _schedule_row(project, "p.py:hourly"), "the job's schedule_state row")
    assert row[:2] == (cron, "utc") and row[3] is None
    assert first.runs() == []  # a job never seen is anchored at now: no fire
    codes.append(first.terminate())
    assert "catch-up" not in first.stderr and "scheduled run" not in first.stderr

    missed_at = time.time() - 3 * 3600
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    with conn:
        conn.execute("UPDATE schedule_state SET last_fired = ? WHERE job_id = ?",
                     (missed_at, "p.py:hourly"))
    conn.close()

    restarted_at = time.time()
    second = serve(project, "p.py", "--timezone", "utc")
    catch_up = second.wait_run(lambda r: r["triggered_by"] == "catch_up", "a catch-up run")
    detail = second.wait_ended(catch_up["run_id"])
    assert detail["run"]["status"] == "success", detail["run"]
    assert catch_up["target"] == "p.py:hourly"
    assert [r["triggered_by"] for r in second.runs()] == ["catch_up"]  # once, not 3 times
    assert second.stderr.count("catch-up run") == 1
    assert f"catch-up run p.py:hourly → {catch_up['run_id']}" in second.stderr
    row = _schedule_row(project, "p.py:hourly")
    assert row[3] == catch_up["run_id"] and row[2] >= restarted_at - 1, row
    codes.append(second.terminate())

    write(project, {"p.py": hourly + f"""
        @asset(freshness=Schedule("{cron}"))
        def newcomer() -> int:
            return 2
    """})
    third = serve(project, "p.py", "--timezone", "utc")
    poll(lambda: _schedule_row(project, "p.py:newcomer"), "the new job to be anchored")
    jobs = poll(lambda: [j for j in third.get("/schedule").json() if j["last_fired"]],
                "both jobs anchored")
    assert {j["id"] for j in third.get("/schedule").json()} == {"p.py:hourly", "p.py:newcomer"}
    assert len(jobs) == 2
    codes.append(third.terminate())
    assert "catch-up" not in third.stderr and "scheduled run" not in third.stderr, third.stderr
    rows = db_rows(project, "SELECT triggered_by, target FROM runs")
    assert rows == [("catch_up", "p.py:hourly")], rows
    new_row = _schedule_row(project, "p.py:newcomer")
    assert new_row[3] is None  # anchored, never fired

    assert codes == [0, 0, 0], f"exit codes after SIGTERM: {codes}"
