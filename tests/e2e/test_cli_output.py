"""What the commands print: JSON when piped, human text in a terminal, the error envelope,
`--agent` progress lines, and the JSON shapes of list, status, plan and version.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import barca as barca_package
from conftest import barca, in_terminal, write

PIPELINE = """
    from barca import asset, sensor, task, Schedule

    @asset()
    def a() -> int:
        return 1

    @asset(inputs={"a": a}, env=["REGION"])
    def b(a: int) -> int:
        return a + 1

    @sensor(freshness=Schedule("*/5 * * * *"))
    def watch() -> str:
        return "v1"

    @task(inputs={"b": b})
    def publish(b: int) -> str:
        return f"published {b}"
"""

FAILING = """
    from barca import asset

    @asset()
    def good() -> int:
        return 1

    @asset(inputs={"good": good})
    def bad(good: int) -> int:
        raise ValueError("bad value\\nsecond line")
"""


@pytest.fixture
def pipeline(project: Path) -> Path:
    return write(project, {"pipeline.py": PIPELINE})


def test_piped_stdout_is_one_json_line_and_progress_goes_to_stderr(pipeline: Path) -> None:
    result = barca(pipeline, "get", "b", "pipeline.py").expect(0)
    assert len(result.stdout.splitlines()) == 1
    body = result.json
    assert body["status"] == "success"
    assert re.fullmatch(r"[0-9a-f]{12}", body["run_id"])
    assert isinstance(body["elapsed_seconds"], (int, float))
    assert body["steps_executed"] == 2 and body["final_output"] == 2
    assert body["warnings"] == []
    for step in body["steps"]:
        assert {"id", "kind", "status"} <= set(step)
    assert re.search(r"^\[barca\] 2/2 steps \| done in [0-9.]+s$", result.stderr, re.M)


def test_bare_file_argument_means_get(pipeline: Path) -> None:
    result = barca(pipeline, "pipeline.py").expect(0)
    assert {s["id"] for s in result.json["steps"]} == {
        "pipeline.py:a", "pipeline.py:b", "pipeline.py:watch"}


def test_terminal_gets_human_output_and_json_flag_forces_json(pipeline: Path) -> None:
    def terminal_output(*args: str) -> str:
        proc, out, err = in_terminal(pipeline, *args)
        assert proc.returncode == 0, err
        return out

    human = terminal_output("get", "b", "pipeline.py")
    assert re.match(r"Run [0-9a-f]{12} \| got 'b' in [0-9.]+s \(2 steps, 2 phases\)", human)
    assert "Value:\n2" in human
    forced = terminal_output("get", "b", "pipeline.py", "--json")
    assert json.loads(forced)["final_output"] == 2


def test_pretty_flag_and_barca_output_choose_the_format(pipeline: Path) -> None:
    pretty = barca(pipeline, "get", "b", "pipeline.py", "--pretty").expect(0).stdout
    assert pretty.startswith("Run ") and "got 'b'" in pretty and "Value:" in pretty
    by_env = barca(pipeline, "get", "b", "pipeline.py", env={"BARCA_OUTPUT": "pretty"})
    assert by_env.expect(0).stdout.startswith("Run ")
    bad = barca(pipeline, "get", "b", "pipeline.py", env={"BARCA_OUTPUT": "xml"}).expect(2)
    assert "BARCA_OUTPUT" in bad.envelope["error"]
    both = barca(pipeline, "get", "b", "pipeline.py", "--json", "--pretty").expect(2)
    assert both.envelope["kind"] == "usage"


def test_usage_error_envelope_is_the_last_stderr_line(pipeline: Path) -> None:
    result = barca(pipeline, "get", "nope", "pipeline.py").expect(2)
    assert result.stdout == ""
    envelope = result.envelope
    assert {"error", "code", "kind", "remediation"} <= set(envelope)
    assert envelope["code"] == 2 and envelope["kind"] == "usage"
    assert "nope" in envelope["error"]
    assert "barca list" in envelope["remediation"]
    flag = barca(pipeline, "get", "--jsn", "pipeline.py").expect(2)
    assert flag.envelope["kind"] == "usage" and "--jsn" in flag.envelope["error"]


def test_human_error_is_prose_with_the_remediation_last(pipeline: Path) -> None:
    result = barca(pipeline, "get", "nope", "pipeline.py", "--pretty").expect(2)
    assert result.stdout == ""
    text = result.stderr.strip().splitlines()
    assert "nope" in text[0]
    assert "barca list" in text[-1]
    assert "Traceback" not in result.stderr and "{" not in result.stderr


def test_step_failure_prints_a_failed_result_and_a_step_failed_envelope(project: Path) -> None:
    write(project, {"p.py": FAILING})
    result = barca(project, "get", "bad", "p.py").expect(1)
    body = result.json
    assert body["status"] == "failed" and body["failed_node"] == "p.py:bad"
    assert "bad value" in body["error"]
    envelope = result.envelope
    assert envelope["code"] == 1 and envelope["kind"] == "step_failed"
    assert envelope["node"] == "p.py:bad"
    assert envelope["artifact_dir"] == ".barca/artifacts/p.py--bad"
    assert 'raise ValueError("bad value' in envelope["traceback"]
    assert "/barca/" not in envelope["traceback"]  # user frames only
    assert {"error", "code", "kind", "remediation"} <= set(envelope)
    run_failed = [line for line in result.stderr.splitlines()
                  if line.startswith("[barca] run failed:")]
    assert len(run_failed) == 1 and "'p.py:bad'" in run_failed[0]
    assert run_failed[0].endswith("(exit 1)")


def _not_a_database(db: Path) -> None:
    db.write_bytes(b"this is not a sqlite database" * 10)


def _foreign_schema(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE runs (something_else TEXT)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("spoil", [
    _not_a_database,
    _foreign_schema,
], ids=["not-a-database", "foreign-schema"])
def test_metadata_database_barca_cannot_use_is_exit_3(pipeline: Path, spoil) -> None:
    (pipeline / ".barca").mkdir()
    spoil(pipeline / ".barca" / "metadata.db")
    result = barca(pipeline, "get", "b", "pipeline.py").expect(3)
    assert result.envelope["kind"] == "infra" and result.envelope["code"] == 3
    assert "metadata" in result.envelope["error"]
    assert "Traceback" not in result.stderr


def test_agent_prints_one_line_per_step(project: Path) -> None:
    write(project, {"p.py": FAILING})
    result = barca(project, "get", "bad", "p.py", "--agent").expect(1)
    err = result.stderr
    assert re.search(r"^\[barca\] step:p\.py:good completed [0-9.]+s \(\d+/2\)$", err, re.M)
    assert re.search(r"^\[barca\] step:p\.py:bad failed: bad value$", err, re.M)
    assert re.search(r"^\[barca\] 2/2 steps \| failed in [0-9.]+s$", err, re.M)
    assert result.json["status"] == "failed"  # stdout is still the result only
    plain = barca(project, "get", "good", "p.py", "--refresh", "good").expect(0)
    assert "[barca] step:" not in plain.stderr  # step lines only with --agent


def test_agent_prints_a_line_for_each_cached_step(pipeline: Path) -> None:
    barca(pipeline, "get", "b", "pipeline.py").expect(0)
    result = barca(pipeline, "get", "b", "pipeline.py", "--agent").expect(0)
    assert re.search(r"^\[barca\] step:pipeline\.py:a cached", result.stderr, re.M)
    assert re.search(r"^\[barca\] step:pipeline\.py:b cached", result.stderr, re.M)


def test_dry_run_json_and_table(pipeline: Path) -> None:
    body = barca(pipeline, "get", "b", "pipeline.py", "--dry-run").expect(0).json
    assert body["dry_run"] is True and body["command"] == "get" and body["target"] == "b"
    summary = body["summary"]
    assert (summary["will_run"], summary["cached"], summary["unknown"]) == (2, 0, 0)
    assert [s["action"] for s in body["steps"]] == ["run", "run"]
    assert all(s["reason"] == "not_materialized" for s in body["steps"])
    assert body["warnings"] == []
    table = barca(pipeline, "get", "b", "pipeline.py", "--dry-run", "--pretty").expect(0).stdout
    rows = table.splitlines()
    assert rows[0] == "Dry run: barca get b (nothing executed, nothing written)"
    assert rows[2].split() == ["STATUS", "WHY", "STEP"]
    assert rows[-1] == "2 will run, 0 cached, 0 unknown"
    assert not (pipeline / ".barca").exists()


def test_list_json_shape(pipeline: Path) -> None:
    body = barca(pipeline, "list", "pipeline.py").expect(0).json
    assert body["total"] == 4 and body["truncated"] is False
    assert body["root"] == str(pipeline.resolve())
    nodes = {n["id"]: n for n in body["nodes"]}
    assert set(nodes) == {"pipeline.py:a", "pipeline.py:b", "pipeline.py:watch",
                          "pipeline.py:publish"}
    assert nodes["pipeline.py:b"]["kind"] == "asset"
    assert nodes["pipeline.py:b"]["inputs"] == ["pipeline.py:a"]
    assert nodes["pipeline.py:b"]["env"] == ["REGION"]
    assert nodes["pipeline.py:b"]["freshness"] == "always"
    assert nodes["pipeline.py:watch"]["kind"] == "sensor"
    assert nodes["pipeline.py:watch"]["freshness"] == "schedule"
    assert nodes["pipeline.py:watch"]["schedule"] == "*/5 * * * *"
    assert nodes["pipeline.py:publish"]["kind"] == "task"
    assert nodes["pipeline.py:a"]["env"] == [] and nodes["pipeline.py:a"]["inputs"] == []
    text = nodes["pipeline.py:watch"]["next_fire"]  # RFC 3339 UTC, as every JSON moment
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z", text), text
    fires = datetime.fromisoformat(text)
    assert timedelta(0) < fires - datetime.now(timezone.utc) <= timedelta(minutes=5, seconds=2)
    assert fires.minute % 5 == 0 and fires.second == 0
    assert "next_fire" not in nodes["pipeline.py:b"]
    human = barca(pipeline, "list", "pipeline.py", "--pretty").expect(0).stdout.splitlines()
    assert human[0].split() == ["NAME", "KIND", "FRESHNESS", "NEXT", "FIRE", "DEPS"]
    watch = next(line for line in human if line.startswith("pipeline.py:watch"))
    assert "cron: */5 * * * *" in watch and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:00", watch)


def test_status_json_shape(pipeline: Path) -> None:
    barca(pipeline, "get", "a", "pipeline.py").expect(0)
    body = barca(pipeline, "status", "b", "pipeline.py").expect(0).json
    assert body["target"] == "b"
    assert body["total"] == len(body["nodes"]) and body["truncated"] is False
    assert {"cached", "stale", "never_run", "partial", "unknown", "always_runs"} <= set(
        body["summary"])  # unknown keys are tolerated
    nodes = {n["name"]: n for n in body["nodes"]}
    assert set(nodes) == {"a", "b"}
    assert nodes["a"]["cache"]["state"] == "cached"
    assert nodes["a"]["cache"]["reason"] == "materialized"
    assert nodes["b"]["cache"]["state"] == "never_run"
    assert nodes["b"]["cache"]["reason"] == "no_record"
    for node in body["nodes"]:
        assert {"id", "name", "kind", "inputs", "partitioned", "cache"} <= set(node)
        assert {"state", "reason", "detail"} <= set(node["cache"])
    assert body["summary"]["cached"] == 1 and body["summary"]["never_run"] == 1


def test_status_lists_every_node_including_tasks(pipeline: Path) -> None:
    body = barca(pipeline, "status", "pipeline.py").expect(0).json
    states = {n["name"]: n["cache"]["state"] for n in body["nodes"]}
    assert states["publish"] == "always_runs"
    assert states["watch"] == "always_runs"


def test_plan_json_shape(pipeline: Path) -> None:
    body = barca(pipeline, "plan", "pipeline.py").expect(0).json
    assert body["total_steps"] == 4
    assert body["warnings"] == []
    phases = body["phases"]
    assert phases[0]["reason"] == {"type": "initial"}
    steps = [s for phase in phases for stream in phase["streams"] for s in stream["steps"]]
    assert sorted(steps) == sorted(["pipeline.py:a", "pipeline.py:b", "pipeline.py:watch",
                                    "pipeline.py:publish"])
    order = {s: i for i, phase in enumerate(phases) for st in phase["streams"]
             for s in st["steps"]}
    assert order["pipeline.py:a"] < order["pipeline.py:b"] < order["pipeline.py:publish"]
    for phase in phases[1:]:
        assert phase["reason"]["type"] == "fan_in"


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    result = barca(tmp_path, "version").expect(0)
    assert barca_package.__version__ in result.stdout
    flag = barca(tmp_path, "--version").expect(0)
    assert barca_package.__version__ in flag.stdout


def test_version_json_shape(tmp_path: Path) -> None:
    result = barca(tmp_path, "version", "--json").expect(0)
    assert result.json["version"] == barca_package.__version__
