"""The scheduler of `barca serve`, end to end: a scheduled sensor's tick (a real every-second
cron) runs only the changed key in runs forked from the warm pool, and a restart fires a
missed tick once (a job never seen before does not fire at start).

Which runs the scheduler starts when (jobs due together share a run, or run apart when
sharing would delay one; a job never overlaps itself; a catch-up at start) is tested on data
with a clock the test sets in tests/unit/test_scheduler_fires.py and test_scheduler.py."""

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
