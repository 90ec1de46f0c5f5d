"""Issue 32, contract gaps the published tool's suite found: flags and commands it accepts
(`status --sample`, `docs --fields`, `barca help`) or refuses (`--limit` with `--all`), JSON
fields it has (a multi-target dry run's `targets`, history's run fields, steps' time and
attempts, typed shape columns, plan's `pool_source`, stats' `cpu_seconds`), and what it says
on stderr (a `--no-cascade` refresh's stale readers, the tasks a bare `get` skipped, a long
step still running). Each test runs the real command on a real pipeline with real workers.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path

from barca.store.db import SCHEMA_VERSION
from conftest import as_schema_10, barca, poll, start_barca, write

CHAIN = """
    from barca import asset, task

    @asset()
    def src() -> int:
        return 1

    @asset(inputs={"s": src})
    def mid(s: int) -> int:
        return s + 1

    @asset()
    def other() -> int:
        return 7

    @task(inputs={"m": mid})
    def report(m: int) -> int:
        return m
"""

SHAPES = """
    import pandas as pd
    from barca import asset

    @asset()
    def rows() -> list:
        return [{"name": "a", "price": 1.5, "qty": 2}, {"name": "b", "price": None, "qty": 3},
                {"name": "c", "price": 2.0, "qty": 4}]

    @asset()
    def lookup() -> dict:
        return {"x": 1, "y": 2, "z": 3}

    @asset()
    def frame() -> pd.DataFrame:
        return pd.DataFrame({"city": ["oslo", "rome", "lima"], "temp": [3, 18, 22]})

    @asset()
    def thing() -> object:
        return {1, 2, 3}
"""


def _shapes(project: Path, *args: str) -> dict:
    body = barca(project, "status", "shapes.py", *args).expect(0).json
    return {n["name"]: n["shape"] for n in body["nodes"]}


def test_status_sample_adds_the_first_rows_of_each_stored_result(project: Path) -> None:
    write(project, {"shapes.py": SHAPES})
    barca(project, "get", "shapes.py").expect(0)
    shapes = _shapes(project, "--sample", "2")
    assert shapes["rows"]["sample"] == [{"name": "a", "price": 1.5, "qty": 2},
                                        {"name": "b", "price": None, "qty": 3}]
    assert shapes["lookup"]["sample"] == {"x": 1, "y": 2}
    assert shapes["frame"]["sample"] == [{"city": "oslo", "temp": 3}, {"city": "rome", "temp": 18}]
    assert "sample" not in shapes["thing"]  # a pickle is never read for a sample
    assert all("sample" not in s for s in _shapes(project).values())
    table = barca(project, "status", "shapes.py", "--sample", "1", "--pretty").expect(0).stdout
    assert "shapes.py:frame (first rows):" in table and '"city": "oslo"' in table


def test_status_shape_columns_carry_their_types(project: Path) -> None:
    write(project, {"shapes.py": SHAPES})
    barca(project, "get", "shapes.py").expect(0)
    shapes = _shapes(project)
    assert shapes["rows"]["columns"] == [{"name": "name", "type": "str"},
                                         {"name": "price", "type": "float | null"},
                                         {"name": "qty", "type": "int"}]
    frame = shapes["frame"]["columns"]  # Arrow's names (pandas picks the string type)
    assert [c["name"] for c in frame] == ["city", "temp"] and frame[1]["type"] == "int64"


def test_docs_fields_keeps_those_keys_of_each_topic_as_json(project: Path) -> None:
    index = barca(project, "docs", "--fields", "name").expect(0).json
    assert index["topics"] and all(set(t) == {"name"} for t in index["topics"])
    one = barca(project, "docs", "status", "--fields", "name,summary").expect(0).json
    assert set(one) == {"name", "summary"} and one["name"] == "status"
    with_content = barca(project, "docs", "--fields", "name,content").expect(0).json
    assert all(t["content"].startswith("# ") for t in with_content["topics"])
    bad = barca(project, "docs", "--fields", "name,nope").expect(2)
    assert "summary" in bad.envelope["remediation"]


def test_help_command_prints_a_commands_help(project: Path) -> None:
    get_help = barca(project, "help", "get").expect(0).stdout
    assert get_help == barca(project, "get", "--help").expect(0).stdout
    assert barca(project, "help", "pool", "stop").expect(0).stdout.startswith(
        "Usage: barca pool stop")
    assert barca(project, "help").expect(0).stdout == barca(project, "--help").expect(0).stdout
    unknown = barca(project, "help", "gett").expect(2)
    assert "'gett' is not a command" in unknown.envelope["error"]
    assert "get" in unknown.envelope["remediation"]


def test_limit_and_all_together_are_a_usage_error(project: Path) -> None:
    write(project, {"chain.py": CHAIN})
    refused = barca(project, "list", "chain.py", "--limit", "2", "--all").expect(2)
    assert refused.stdout == ""
    assert "--limit 2 and --all" in refused.envelope["error"]
    assert barca(project, "list", "chain.py", "--all").expect(0).json["total"] == 4
    assert len(barca(project, "list", "chain.py", "--limit", "2").expect(0).json["nodes"]) == 2
    for args in (("status", "chain.py"), ("history",)):
        barca(project, *args, "--limit", "1", "--all").expect(2)


def test_a_multi_target_dry_run_has_each_targets_summary(project: Path) -> None:
    write(project, {"chain.py": CHAIN})
    barca(project, "get", "src", "chain.py").expect(0)
    dry = barca(project, "get", "mid,other", "chain.py", "--dry-run").expect(0).json
    assert dry["targets"] == {"mid": {"summary": {"will_run": 1, "cached": 1, "unknown": 0}},
                              "other": {"summary": {"will_run": 1, "cached": 0, "unknown": 0}}}
    assert dry["summary"] == {"will_run": 2, "cached": 1, "unknown": 0}  # src counted once
    single = barca(project, "get", "mid", "chain.py", "--dry-run").expect(0).json
    assert "targets" not in single and single["target"] == "mid"


STALE = ("'mid' was served from cache but depends on refreshed 'src'; pass --refresh src,mid "
         "to recompute it too")


def test_a_no_cascade_dry_run_warns_on_the_stale_readers_as_the_run_does(project: Path) -> None:
    write(project, {"chain.py": CHAIN})
    barca(project, "run", "report", "chain.py").expect(0)
    args = ("run", "report", "chain.py", "--refresh", "src", "--no-cascade")
    dry = barca(project, *args, "--dry-run").expect(0)
    assert f"[barca] warning: {STALE}" in dry.stderr
    assert STALE in dry.steps["mid"]["warning"] and dry.steps["mid"]["action"] == "cached"
    real = barca(project, *args).expect(0)
    assert f"[barca] warning: {STALE}" in real.stderr
    assert STALE in real.steps["mid"]["warning"]
    cascading = barca(project, "run", "report", "chain.py", "--refresh", "src", "--dry-run")
    assert "served from cache" not in cascading.expect(0).stderr


def test_history_runs_say_their_job_attempts_and_trigger(project: Path) -> None:
    write(project, {"chain.py": CHAIN})
    barca(project, "get", "other,mid", "chain.py").expect(0)
    barca(project, "get", "chain.py").expect(0)
    runs = barca(project, "history").expect(0).json["runs"]
    bare, both = runs
    assert both["target"] == "other,mid"
    assert both["job"] == "chain.py:mid,chain.py:other"  # resolved and sorted
    assert bare["target"] is None and bare["job"] == "all"
    for run in runs:
        assert run["attempts"] == 1 and run["triggered_by"] == "cli"
        assert run["schedule_id"] is None and run["scheduled_at"] is None
        assert run["steps_total"] is not None
    picked = barca(project, "history", "--fields", "run_id,job,triggered_by").expect(0).json
    assert set(picked["runs"][0]) == {"run_id", "job", "triggered_by"}


def test_a_schema_8_database_is_upgraded_and_keeps_its_runs(project: Path) -> None:
    """Schema 9 added runs.job, runs.schedule_id, runs.scheduled_at and
    materializations.cpu_seconds: a database without them gets them, null for older rows."""
    write(project, {"chain.py": CHAIN})
    old_run = barca(project, "get", "mid", "chain.py").expect(0).json["run_id"]
    as_schema_10(project)
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    for table, column in (("runs", "job"), ("runs", "schedule_id"), ("runs", "scheduled_at"),
                          ("materializations", "cpu_seconds")):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 8")
    conn.commit()
    conn.close()
    new_run = barca(project, "get", "other", "chain.py").expect(0).json["run_id"]
    runs = {r["run_id"]: r for r in barca(project, "history").expect(0).json["runs"]}
    assert runs[old_run]["job"] is None and runs[old_run]["steps_executed"] == 2
    assert runs[new_run]["job"] == "chain.py:other"
    recent = barca(project, "stats", "mid", "chain.py").expect(0).json["recent_runs"]
    assert recent[0]["cpu_seconds"] is None
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


SCHEDULED = """
    from barca import Schedule, asset

    @asset(freshness=Schedule("*/1 * * * * *"))
    def tick() -> int:
        return 1
"""


def test_a_scheduled_run_records_its_schedule_and_tick(project: Path, serve) -> None:
    write(project, {"p.py": SCHEDULED})
    server = serve(project, "p.py")

    def scheduled():
        runs = barca(project, "history").expect(0).json["runs"]
        return next((r for r in runs if r["triggered_by"] == "schedule" and
                     r["status"] not in ("running",)), None)

    run = poll(scheduled, "a scheduled run recorded in history", timeout=60)
    assert run["schedule_id"] == "p.py:tick" and run["job"] == "p.py:tick"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", run["scheduled_at"])
    assert run["scheduled_at"] <= run["started_at"]  # one form: compared as text
    assert server.proc.poll() is None


FLAKY = """
    import os
    from pathlib import Path
    from barca import asset, partitions

    @asset(retries=2)
    def flaky() -> int:
        if not Path("tried").exists():
            Path("tried").write_text("1")
            raise RuntimeError("first attempt fails")
        return 1

    @asset(partitions={"k": partitions(["a", "b"])})
    def keyed(k: str) -> str:
        return k
"""


def test_executed_steps_carry_their_time_and_attempts(project: Path) -> None:
    write(project, {"flaky.py": FLAKY})
    steps = barca(project, "get", "flaky.py").expect(0).steps
    assert steps["flaky"]["attempts"] == 2
    assert steps["keyed"]["attempts"] == 1
    for step in steps.values():
        assert isinstance(step["elapsed_seconds"], float) and step["elapsed_seconds"] >= 0
    cached = barca(project, "get", "flaky.py").expect(0).steps
    assert all("attempts" not in s and "elapsed_seconds" not in s for s in cached.values())
    picked = barca(project, "get", "flaky.py", "--refresh", "flaky", "--fields",
                   "id,attempts").expect(0).steps
    assert picked["flaky"] == {"id": "flaky.py:flaky", "attempts": 1}


def test_plan_says_where_its_pool_size_comes_from(project: Path) -> None:
    write(project, {"chain.py": CHAIN})
    plan = barca(project, "plan", "chain.py", env={"BARCA_POOL_SIZE": "3"}).expect(0).json
    assert (plan["pool_size"], plan["pool_source"]) == (3, "BARCA_POOL_SIZE")
    capped = barca(project, "plan", "chain.py",
                   env={"BARCA_POOL_SIZE": "3", "BARCA_CAPACITY": "2"}).expect(0).json
    assert (capped["pool_size"], capped["pool_source"]) == (2, "BARCA_CAPACITY")
    assert barca(project, "plan", "chain.py").expect(0).json["pool_source"] == "cores"
    ids = [s["stream_id"] for phase in plan["phases"] for s in phase["streams"]]
    assert all(isinstance(i, str) for i in ids) and len(set(ids)) == len(ids) == 4


BUSY = """
    from barca import asset

    @asset()
    def busy() -> int:
        total = 0
        for i in range(3_000_000):
            total += i % 7
        return total
"""


def test_stats_recent_runs_carry_cpu_seconds(project: Path) -> None:
    write(project, {"busy.py": BUSY})
    barca(project, "get", "busy.py").expect(0)
    stats = barca(project, "stats", "busy", "busy.py").expect(0).json
    cpu = stats["recent_runs"][0]["cpu_seconds"]
    assert isinstance(cpu, float) and cpu > 0
    history = barca(project, "history").expect(0).json["runs"][0]["run_id"]
    step = barca(project, "history", history).expect(0).json["steps"][0]
    assert step["cpu_seconds"] == cpu
    picked = barca(project, "stats", "busy", "busy.py", "--fields", "cpu_seconds").expect(0)
    assert picked.json["recent_runs"] == [{"cpu_seconds": cpu}]


MIXED = """
    from barca import asset, task

    @asset()
    def data() -> int:
        return 1

    @task(inputs={"d": data})
    def report(d: int) -> None:
        print(d)

    @task()
    def notify() -> None:
        print("sent")
"""

TASKS_ONLY = """
    from barca import task

    @task()
    def deploy() -> None:
        print("deployed")
"""


def test_a_bare_get_names_the_tasks_it_skipped_and_how_to_run_them(project: Path) -> None:
    write(project, {"mixed.py": MIXED, "tasks.py": TASKS_ONLY})
    got = barca(project, "get", "mixed.py").expect(0)
    assert set(got.steps) == {"data"}
    assert "[barca] skipped 2 tasks (report, notify)" in got.stderr
    assert "Run a task with: barca run report mixed.py" in got.stderr
    dry = barca(project, "get", "mixed.py", "--dry-run").expect(0)
    assert "barca run report mixed.py" in dry.stderr
    only = barca(project, "get", "tasks.py").expect(0)
    assert only.json["steps"] == []
    assert "[barca] nothing to get" in only.stderr and "barca run deploy tasks.py" in only.stderr
    targeted = barca(project, "get", "data", "mixed.py").expect(0)
    assert "skipped" not in targeted.stderr


SLOW = """
    import time
    from pathlib import Path
    from barca import asset

    @asset()
    def slow() -> int:
        while not Path("go").exists():  # the test lets it end once it was said to run
            time.sleep(0.05)
        return 1
"""


def test_a_long_step_is_said_to_be_still_running(project: Path) -> None:
    write(project, {"slow.py": SLOW})
    proc = start_barca(project, "get", "slow", "slow.py", env={"BARCA_PROGRESS_SECS": "1"})
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        line = poll(lambda: next((x for x in list(seen) if "still running" in x), None),
                    "a still-running line", timeout=60)
        assert re.fullmatch(r"\[barca\] still running \(\d+s\): slow\.py:slow\n", line)
    finally:
        (project / "go").write_text("")
        out = proc.stdout.read()
        proc.wait(60)
        reader.join(10)
    assert proc.returncode == 0 and json.loads(out)["final_output"] == 1
    bad = barca(project, "get", "slow", "slow.py", env={"BARCA_PROGRESS_SECS": "soon"})
    assert "BARCA_PROGRESS_SECS" in bad.expect(2).envelope["error"]
