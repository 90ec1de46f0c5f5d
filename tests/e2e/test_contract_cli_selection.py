"""Output selection on the real CLI: status with last_materialization, shape, env, --state,
--problems, --limit/--all/--fields; list with --limit/--all/--fields and next_fire; history
with --status, --since and --target. The runs use the real command, as does the first test's
status; the other reads run barca's entry point in this process (`barca_here`)."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, barca_here, write

PIPELINE = """
import os
from barca import Schedule, asset, task

@asset(env=["REGION"])
def orders() -> list:
    return [{"id": 1, "amount": 2.5}, {"id": 2, "amount": 4.0}]

@asset(inputs={"orders": orders})
def summary(orders: list) -> dict:
    if os.environ.get("FAIL"):
        raise ValueError("summary broke")
    return {"n": len(orders)}

@asset(freshness=Schedule("*/5 * * * *"))
def watch() -> int:
    return 1

@task(inputs={"summary": summary})
def publish(summary: dict) -> None:
    print(summary)
"""


def _nodes(body: dict) -> dict[str, dict]:
    return {n["id"].split(":")[1]: n for n in body["nodes"]}


def test_status_shows_last_materialization_shape_and_env(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    ran = barca(project, "get", "summary", "pipeline.py").expect(0).json
    nodes = _nodes(barca(project, "status", "pipeline.py").expect(0).json)
    orders = nodes["orders"]
    last = orders["last_materialization"]
    assert last["status"] == "success" and last["run_id"] == ran["run_id"]
    assert last["format"] == "json" and last["size_bytes"] > 0
    assert last["run_hash"] == orders["cache"]["run_hash"]
    assert (project / last["artifact"]).exists()
    assert orders["shape"] == {"type": "list", "rows": 2, "columns": [
        {"name": "id", "type": "int"}, {"name": "amount", "type": "float"}]}
    assert nodes["summary"]["shape"] == {"type": "dict", "keys": ["n"], "key_count": 1}
    assert orders["env"] == ["REGION"] and nodes["summary"]["env"] == []
    assert nodes["watch"]["last_materialization"] is None and nodes["watch"]["shape"] is None
    table = barca(project, "status", "pipeline.py", "--pretty").expect(0).stdout.splitlines()
    assert table[0].split() == ["NAME", "KIND", "STATE", "WHY", "LAST", "RUN", "SHAPE"]
    row = next(line for line in table if line.startswith("pipeline.py:orders"))
    assert "success " in row and row.endswith("list (2 rows)")


def test_status_state_problems_limit_and_fields(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "summary", "pipeline.py", env={"FAIL": "1"}).expect(1)
    body = barca_here(project, "status", "pipeline.py", "--state", "never-run").expect(0).json
    assert set(_nodes(body)) == {"watch"} and body["total"] == 1
    assert body["summary"]["never_run"] == 1 and body["summary"]["cached"] == 1  # all nodes
    problems = barca_here(project, "status", "pipeline.py", "--problems").expect(0).json
    assert set(_nodes(problems)) == {"summary"}
    assert _nodes(problems)["summary"]["last_materialization"]["error"] == "summary broke"
    cut = barca_here(project, "status", "pipeline.py", "--limit", "2", "--fields", "id,cache")
    body = cut.expect(0).json
    assert len(body["nodes"]) == 2 and body["total"] == 4 and body["truncated"] is True
    assert body["hint"] == "pass --limit N for more, or --all for all 4 nodes"
    assert all(set(n) == {"id", "cache"} for n in body["nodes"])
    every = barca_here(project, "status", "pipeline.py", "--all").expect(0).json
    assert len(every["nodes"]) == 4 and every["truncated"] is False
    both = barca_here(project, "status", "pipeline.py", "--limit", "1", "--all").expect(2)
    assert "--limit 1 and --all" in both.envelope["error"]
    human = barca_here(project, "status", "pipeline.py", "--limit", "1", "--pretty").expect(0)
    assert "showing 1 of 4 nodes; pass --limit N for more" in human.stderr
    bad = barca_here(project, "status", "pipeline.py", "--state", "fresh").expect(2)
    assert "never_run" in bad.envelope["remediation"]
    assert barca_here(project, "status", "--fields", "nope").expect(2).envelope["kind"] == "usage"


def test_list_limit_all_fields_and_next_fire(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    body = barca_here(project, "list", "pipeline.py", "--limit", "1").expect(0).json
    assert len(body["nodes"]) == 1 and body["total"] == 4 and body["truncated"] is True
    assert "--all for all 4 nodes" in body["hint"]
    fields = barca_here(project, "list", "pipeline.py", "--all", "--fields", "id,next_fire")
    nodes = _nodes(fields.expect(0).json)
    assert set(nodes["watch"]) == {"id", "next_fire"} and set(nodes["orders"]) == {"id"}
    human = barca_here(project, "list", "pipeline.py", "--limit", "2", "--pretty").expect(0)
    assert len(human.stdout.splitlines()) == 3
    assert "showing 2 of 4 nodes" in human.stderr
    conflict = barca_here(project, "list", "pipeline.py", "--fields", "id", "--pretty").expect(2)
    assert conflict.envelope["kind"] == "usage"


def test_history_filters_by_status_since_and_target(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    ok = barca(project, "get", "summary", "pipeline.py").expect(0).json["run_id"]
    bad = barca(project, "get", "summary", "pipeline.py", "--refresh", "summary",
                env={"FAIL": "1"}).expect(1).json["run_id"]
    other = barca(project, "get", "watch", "pipeline.py").expect(0).json["run_id"]

    def ids(*args: str) -> list[str]:
        return [r["run_id"] for r in barca_here(project, "history", *args).expect(0).json["runs"]]
    assert ids() == [other, bad, ok]
    assert ids("--status", "failed") == [bad]
    assert ids("--status", "success,cancelled") == [other, ok]
    assert ids("--target", "summary") == [bad, ok]
    assert ids("--target", "pipeline.py:watch") == [other]
    assert ids("--since", "1h", "--target", "summary", "--status", "success") == [ok]
    assert ids("--since", "2999-01-01") == []
    body = barca_here(project, "history", "--target", "summary", "--limit", "1").expect(0).json
    assert body["total"] == 2 and body["truncated"] is True
    assert barca_here(project, "history", "--since", "soon").expect(2).envelope["kind"] == "usage"
    assert barca_here(project, "history", "--status", "done").expect(2).envelope["kind"] == "usage"
    assert barca_here(project, "history", ok, "--status", "failed").expect(2)
