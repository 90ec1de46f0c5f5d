"""`barca stats TARGET`: executions, timings, failures, repeated work and recent runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, write

PIPELINE = """
    import os
    from barca import asset, partitions, task

    @asset(env=["VERSION"])
    def data() -> dict:
        if os.environ.get("VERSION") == "bad":
            raise ValueError("bad version")
        return {"version": os.environ.get("VERSION")}

    @asset(partitions={"region": partitions(["emea", "amer"])})
    def sales(region: str) -> int:
        return len(region)

    @task(inputs={"data": data})
    def publish(data: dict) -> str:
        return "ok"
"""


@pytest.fixture
def pipeline(project: Path) -> Path:
    return write(project, {"pipeline.py": PIPELINE})


def test_stats_count_executions_time_them_and_list_recent_runs(pipeline: Path) -> None:
    first = barca(pipeline, "get", "data", "pipeline.py", env={"VERSION": "1"}).expect(0)
    barca(pipeline, "get", "data", "pipeline.py", env={"VERSION": "1"}).expect(0)  # cached
    barca(pipeline, "get", "data", "pipeline.py", env={"VERSION": "bad"}).expect(1)
    last = barca(pipeline, "get", "data", "pipeline.py", env={"VERSION": "2"}).expect(0)
    body = barca(pipeline, "stats", "data", "pipeline.py").expect(0).json
    assert body["id"] == "pipeline.py:data" and body["kind"] == "asset"
    assert body["total_runs"] == 3 and body["failures"] == 1
    assert body["rerun_rate"] == 0.0  # every execution had a new run hash
    for name in ("avg", "median", "p95", "max"):
        assert body[f"{name}_elapsed_seconds"] >= 0
    assert body["max_elapsed_seconds"] >= body["median_elapsed_seconds"]
    assert body["max_rss_bytes"] > 0 and body["median_max_rss_bytes"] > 0
    recent = body["recent_runs"]
    assert [r["status"] for r in recent] == ["success", "failed", "success"]
    assert recent[0]["run_id"] == last.json["run_id"]
    assert recent[2]["run_id"] == first.json["run_id"]
    assert recent[1]["error_message"] == "bad version" and recent[0]["error_message"] is None
    assert recent[0]["partition_key"] is None and recent[0]["attempts"] == 1


def test_repeated_run_hashes_count_as_repeated_work(pipeline: Path) -> None:
    env = {"VERSION": "1"}
    for _ in range(3):
        barca(pipeline, "run", "publish", "pipeline.py", env=env).expect(0)
    body = barca(pipeline, "stats", "publish", "pipeline.py").expect(0).json
    assert body["kind"] == "task" and body["total_runs"] == 3
    assert body["rerun_rate"] == pytest.approx(2 / 3, abs=1e-3)
    refreshed = barca(pipeline, "get", "data", "pipeline.py", "--refresh", "data", env=env)
    refreshed.expect(0)
    data = barca(pipeline, "stats", "data", "pipeline.py").expect(0).json
    assert data["total_runs"] == 2 and data["rerun_rate"] == 0.5


def test_partitioned_node_counts_each_key_and_names_it(pipeline: Path) -> None:
    barca(pipeline, "get", "sales", "pipeline.py").expect(0)
    body = barca(pipeline, "stats", "sales", "pipeline.py").expect(0).json
    assert body["total_runs"] == 2
    assert sorted(r["partition_key"] for r in body["recent_runs"]) == ["region=amer",
                                                                        "region=emea"]
    only = barca(pipeline, "stats", "sales", "--fields", "partition_key").expect(0).json
    assert all(set(r) == {"partition_key"} for r in only["recent_runs"])


def test_human_report_names_the_node_and_its_timing(pipeline: Path) -> None:
    barca(pipeline, "get", "data", "pipeline.py", env={"VERSION": "bad"}).expect(1)
    out = barca(pipeline, "stats", "data", "--pretty").expect(0).stdout
    lines = out.splitlines()
    assert lines[0] == "Asset: pipeline.py:data"
    assert lines[1] == "Total materializations: 1 (1 failed)"
    assert lines[2] == "Timing:  avg -  median -  p95 -  max -"
    assert "Recent runs:" in out and "└─ bad version" in out


def test_never_run_node_has_null_timings(pipeline: Path) -> None:
    body = barca(pipeline, "stats", "data", "pipeline.py").expect(0).json
    assert body["total_runs"] == 0 and body["recent_runs"] == []
    assert body["median_elapsed_seconds"] is None and body["rerun_rate"] is None
    assert not (pipeline / ".barca").exists()


@pytest.mark.parametrize("args, text", [
    (["nothing", "pipeline.py"], "unknown target 'nothing'"),
    (["pipeline.py", "data"], "takes the target first"),
    (["data,sales", "pipeline.py"], "one target"),
    (["data", "--fields", "colour"], "unknown field colour"),
])
def test_bad_arguments_are_exit_2(pipeline: Path, args: list[str], text: str) -> None:
    bad = barca(pipeline, "stats", *args).expect(2)
    assert text in bad.envelope["error"] and bad.envelope["remediation"]
