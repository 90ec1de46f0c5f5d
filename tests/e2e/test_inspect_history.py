"""`barca history`: the list of runs, one run's steps (per key), failures, and interrupted runs.

The module runs real `get` / `run` commands on a tiny pipeline once, then each test reads
them back (in a copy) through `barca history` only: no test opens the database to check what
history prints. `barca history` runs in this process (`barca_here`) but for the first test and
the interrupted run's, which run the real command.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from conftest import barca, barca_here, result_bytes, start_barca, write

PIPELINE = """
    import sys
    from barca import asset, collect, partitions, task

    KEYS = [f"r{i:02d}" for i in range(12)]

    @asset()
    def orders() -> list:
        print("reading orders")
        return [{"customer": "ada", "amount": 120.0}]

    @asset(partitions={"retailer": partitions(KEYS_LITERAL)})
    def scored(retailer: str) -> dict:
        print("scoring", retailer)
        if retailer == "r07":
            raise ValueError("no data for r07")
        return {"retailer": retailer, "score": len(retailer)}

    @task(inputs={"orders": orders})
    def publish(orders: list) -> None:
        print("publishing", len(orders))
        print("about to fail", file=sys.stderr)
        raise RuntimeError("mail server down")
""".replace("KEYS_LITERAL", repr([f"r{i:02d}" for i in range(12)]))


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> Path:
    """Three runs, made once for the module: a good get, a partitioned get with one failed
    key, a failing task."""
    root = write(tmp_path_factory.mktemp("runs"), {"barca.toml": "", "pipeline.py": PIPELINE})
    barca(root, "get", "orders", "pipeline.py").expect(0)
    barca(root, "get", "scored", "pipeline.py").expect(1)
    barca(root, "run", "publish", "pipeline.py").expect(1)
    return root


@pytest.fixture
def runs(computed: Path, project: Path) -> Path:
    """The three runs' project, copied to `project`."""
    shutil.copytree(computed, project, dirs_exist_ok=True)
    return project


def _ids(root: Path) -> list[str]:
    return [r["run_id"] for r in barca_here(root, "history", "--all").expect(0).json["runs"]]


def test_history_lists_runs_newest_first_with_counts_and_status(runs: Path) -> None:
    body = barca(runs, "history").expect(0).json
    assert body["total"] == 3 and body["truncated"] is False and "hint" not in body
    first, second, third = body["runs"]
    assert [r["command"] for r in body["runs"]] == ["run", "get", "get"]
    assert [r["target"] for r in body["runs"]] == ["publish", "scored", "orders"]
    assert [r["status"] for r in body["runs"]] == ["failed", "failed", "success"]
    assert third["steps_executed"] == 1 and third["steps_cached"] == 0
    assert third["files"] == ["pipeline.py"]
    assert second["steps_executed"] == 12
    assert first["failed_node"] == "pipeline.py:publish"
    assert first["failure"] == {"node": "pipeline.py:publish", "error": "mail server down"}
    assert first["steps_cached"] == 1  # orders came from cache
    assert len(first["run_id"]) == 12 and first["started_at"] <= first["finished_at"]


def test_history_table_has_the_documented_columns(runs: Path) -> None:
    out = barca_here(runs, "history", "--pretty").expect(0).stdout.splitlines()
    assert out[0].split() == ["RUN_ID", "CMD", "TARGET", "STATUS", "STEPS", "CACHED", "TIME",
                              "STARTED", "ERROR"]
    assert out[1].split()[:6] == [_ids(runs)[0], "run", "publish", "failed", "1", "1"]
    assert out[1].endswith("publish: mail server down")
    assert out[3].split()[:4] == [_ids(runs)[2], "get", "orders", "success"]
    assert " UTC" in out[3]


def test_limit_and_all_bound_the_list_and_say_how_to_see_more(runs: Path) -> None:
    one = barca_here(runs, "history", "--limit", "1").expect(0).json
    assert len(one["runs"]) == 1 and one["total"] == 3 and one["truncated"] is True
    assert one["hint"] == "pass --limit N for more, or --all for all 3 runs"
    assert one["runs"][0]["command"] == "run"
    table = barca_here(runs, "history", "-l", "2", "--pretty").expect(0)
    assert len(table.stdout.splitlines()) == 3
    assert "showing 2 of 3 runs" in table.stderr
    assert len(barca_here(runs, "history", "--all").expect(0).json["runs"]) == 3


def test_fields_keep_only_the_chosen_keys_and_reject_unknown_ones(runs: Path) -> None:
    body = barca_here(runs, "history", "--fields", "run_id,status").expect(0).json
    assert [set(r) for r in body["runs"]] == [{"run_id", "status"}] * 3
    bad = barca_here(runs, "history", "--fields", "run_id,colour").expect(2)
    assert "colour" in bad.envelope["error"] and "run_id" in bad.envelope["remediation"]
    assert barca_here(runs, "history", "--fields", "run_id", "--pretty").code == 2


def test_no_history_prints_an_empty_result_and_creates_nothing(tmp_path: Path) -> None:
    body = barca_here(tmp_path, "history").expect(0).json
    assert body == {"runs": [], "total": 0, "truncated": False}
    assert barca_here(tmp_path, "history", "--pretty").expect(0).stdout.strip() == \
        "No run history found."
    assert not (tmp_path / ".barca").exists()


def test_one_run_lists_each_key_as_a_step_with_its_artifact(runs: Path) -> None:
    run_id = _ids(runs)[1]
    body = barca_here(runs, "history", run_id).expect(0).json
    assert body["run"]["run_id"] == run_id and body["run"]["status"] == "failed"
    steps = {s["step_id"]: s for s in body["steps"]}
    assert len(steps) == 12 and body["steps_page"] == {
        "total": 12, "truncated": False,
        "nodes": [{"node_id": "pipeline.py:scored", "keys": 12, "failed": 1,
                   "elapsed_seconds": body["steps_page"]["nodes"][0]["elapsed_seconds"],
                   "calls": 12}]}
    good = steps["pipeline.py:scored[retailer=r03]"]
    assert good["partition_key"] == "retailer=r03" and good["node_id"] == "pipeline.py:scored"
    assert good["status"] == "success" and good["attempts"] == 1
    assert good["artifact_format"] == "json"
    assert result_bytes(runs, good["artifact_path"]) == b'{"retailer":"r03","score":3}'
    assert good["artifact_size_bytes"] == len('{"retailer":"r03","score":3}')
    assert good["artifact_path"].startswith(".barca/artifacts/pipeline.py--scored/")
    assert good["error"] is None
    bad = steps["pipeline.py:scored[retailer=r07]"]
    assert bad["status"] == "failed" and bad["artifact_path"] is None
    assert bad["error"] == "ValueError: no data for r07"
    assert "raise ValueError" in bad["error_traceback"]
    assert bad["output_tail"] == ["scoring r07"]
    assert body["steps"][0]["step_id"] == "pipeline.py:scored[retailer=r07]"  # failures first


def test_one_run_table_shows_ten_keys_per_node_and_the_failure(runs: Path) -> None:
    run_id = _ids(runs)[1]
    out = barca_here(runs, "history", run_id, "--pretty").expect(0)
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("STEP"))
    assert lines[header].split() == ["STEP", "STATUS", "ATTEMPTS", "TIME", "PEAK_RSS",
                                     "RUN_HASH", "ARTIFACT"]
    rows = lines[header + 1:header + 12]
    assert rows[0].startswith("pipeline.py:scored[retailer=r07]") and " failed " in rows[0]
    assert sum(r.startswith("pipeline.py:scored[retailer=") for r in rows) == 10
    assert rows[10].startswith("pipeline.py:scored[+2 more keys]")
    assert "(json, 28 B)" in rows[1]
    assert "pipeline.py:scored[retailer=r07] failed after 1 attempt: ValueError: no data" \
        in out.stdout
    assert "raise ValueError" in out.stdout and "scoring r07" in out.stdout
    assert f"barca logs {run_id} --step 'pipeline.py:scored[retailer=r07]'" in out.stderr
    every = barca_here(runs, "history", run_id, "--pretty", "--all").expect(0).stdout
    assert len(re.findall(r"^pipeline\.py:scored\[retailer=r\d+\]\s+(?:success|failed)\s+\d",
                          every, re.MULTILINE)) == 12


def test_failed_task_shows_error_traceback_tail_and_output(runs: Path) -> None:
    run_id = _ids(runs)[0]
    out = barca_here(runs, "history", run_id, "--pretty").expect(0).stdout
    assert "Status   failed" in out and "1 executed, 1 cached" in out
    assert "pipeline.py:publish failed after 1 attempt: RuntimeError: mail server down" in out
    assert 'raise RuntimeError("mail server down")' in out
    assert "publishing 1" in out and "about to fail" in out
    step = barca_here(runs, "history", run_id).expect(0).json["steps"][0]
    assert step["output_tail"] == ["publishing 1", "about to fail"]


def test_limit_bounds_the_steps_of_one_run_keeping_failures(runs: Path) -> None:
    run_id = _ids(runs)[1]
    body = barca_here(runs, "history", run_id, "--limit", "3").expect(0).json
    assert len(body["steps"]) == 3 and body["steps"][0]["status"] == "failed"
    assert body["steps_page"]["total"] == 12 and body["steps_page"]["truncated"] is True
    assert "hint" in body


def test_a_unique_prefix_names_a_run_and_an_unknown_id_is_exit_2(runs: Path) -> None:
    run_id = _ids(runs)[2]
    assert barca_here(runs, "history", run_id[:8]).expect(0).json["run"]["run_id"] == run_id
    bad = barca_here(runs, "history", "ffffffffffff").expect(2)
    assert bad.envelope["kind"] == "usage"
    assert "unknown run id 'ffffffffffff'" in bad.envelope["error"]
    assert "barca history" in bad.envelope["remediation"]
    human = barca_here(runs, "history", "nope", "--pretty").expect(2)
    assert "unknown run id" in human.stderr and "Traceback" not in human.stderr
    assert human.stdout == ""


def test_fields_do_not_apply_to_one_run(runs: Path) -> None:
    run_id = _ids(runs)[0]
    assert barca_here(runs, "history", run_id, "--fields", "status").expect(2).envelope[
        "kind"] == "usage"


SLOW = """
    import time
    from pathlib import Path
    from barca import asset

    @asset()
    def quick() -> int:
        return 1

    @asset(inputs={"quick": quick})
    def gated(quick: int) -> int:
        Path("waiting").write_text("")
        deadline = time.monotonic() + 30
        while not Path("gate").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return quick + 1
"""


def test_run_of_a_killed_process_shows_as_interrupted_and_keeps_its_steps(
        project: Path) -> None:
    write(project, {"pipeline.py": SLOW})
    proc = start_barca(project, "get", "gated", "pipeline.py",
                       env={"BARCA_POOL_SIZE": "1"})
    try:
        deadline = time.monotonic() + 30
        while not (project / "waiting").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "step never started"
            time.sleep(0.02)
        live = barca(project, "history").expect(0).json["runs"][0]
        assert live["status"] == "running" and live["finished_at"] is None
        while barca(project, "history", live["run_id"]).expect(0).json["steps_page"][
                "total"] < 1:  # `quick` is recorded within half a second
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        (project / "gate").write_text("")
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = barca(project, "history").expect(0).json["runs"][0]
    assert run["status"] == "interrupted"
    assert run["finished_at"] is None and run["elapsed_seconds"] is None
    assert run["steps_executed"] == 1
    steps = barca(project, "history", run["run_id"]).expect(0).json["steps"]
    assert [s["step_id"] for s in steps] == ["pipeline.py:quick"]
    table = barca(project, "history", "--pretty").expect(0).stdout
    assert " interrupted " in table
    again = barca(project, "get", "gated", "pipeline.py").expect(0).json
    assert again["steps_executed"] == 1  # quick was kept; only gated runs
