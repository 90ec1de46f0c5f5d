"""The Python API returns what the CLI prints with `--json`: `barca.plan`, `barca.history`,
`barca.stats`, and `barca.get(..., partition=)` narrowing keys as `--partition` does.

Each test runs a driver script in a fresh interpreter against a real project (as a user
would), then runs the real `barca` command on the same project and compares.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, drive, take_executed, write

PIPELINE = """
    from barca import asset, partitions, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def base() -> int:
        _ran("base")
        return 10

    @asset(partitions={"region": partitions(["emea", "amer", "apac"])}, inputs={"base": base})
    def sales(region: str, base: int) -> dict:
        _ran(f"sales[{region}]")
        return {"region": region, "total": base + len(region)}

    @asset()
    def broken() -> int:
        raise ValueError("broken on purpose")

    @task(inputs={"base": base})
    def publish(base: int) -> str:
        return f"published {base}"
"""


@pytest.fixture
def api(project: Path) -> Path:
    return write(project, {"pipeline.py": PIPELINE})


def test_plan_is_the_cli_plan_and_stays_callable_after_a_run(api: Path) -> None:
    out = drive(api, """
import json, barca
before = barca.plan("pipeline.py")
barca.get("base", "pipeline.py")  # loads the planner subpackage: barca.plan must survive
after = barca.plan(["pipeline.py"])
print(json.dumps({"before": before, "after": after}))
""")
    cli = barca(api, "plan", "pipeline.py").expect(0).json
    assert out["before"] == cli and out["after"] == cli
    assert cli["total_steps"] == 4


def test_history_lists_runs_as_the_cli_does(api: Path) -> None:
    barca(api, "get", "base", "pipeline.py").expect(0)
    barca(api, "get", "broken", "pipeline.py").expect(1)
    barca(api, "run", "publish", "pipeline.py").expect(0)
    out = drive(api, """
import json, barca
print(json.dumps({"default": barca.history(), "two": barca.history(limit=2),
                  "all": barca.history(all=True)}))
""")
    # the runs the command lists (its envelope's `runs`), newest first
    assert out["default"] == barca(api, "history", "--json").expect(0).json["runs"]
    assert out["two"] == barca(api, "history", "--limit", "2").expect(0).json["runs"]
    assert out["all"] == barca(api, "history", "--all").expect(0).json["runs"]
    runs = out["default"]
    assert [r["command"] for r in runs] == ["run", "get", "get"]  # newest first
    assert [r["status"] for r in runs] == ["success", "failed", "success"]
    assert out["two"] == runs[:2]


def test_history_of_one_run_is_the_cli_run_view(api: Path) -> None:
    barca(api, "get", "sales", "pipeline.py").expect(0)
    barca(api, "get", "broken", "pipeline.py").expect(1)
    runs = barca(api, "history").expect(0).json["runs"]
    failed, ok = runs[0]["run_id"], runs[1]["run_id"]
    out = drive(api, f"""
import json, barca
print(json.dumps({{"ok": barca.history(run_id="{ok}"),
                  "prefix": barca.history(run_id="{ok[:6]}"),
                  "failed": barca.history(run_id="{failed}"),
                  "one": barca.history(1, run_id="{ok}")}}))
""")
    assert out["ok"] == barca(api, "history", ok).expect(0).json == out["prefix"]
    assert out["failed"] == barca(api, "history", failed).expect(0).json
    assert out["one"] == barca(api, "history", ok, "--limit", "1").expect(0).json
    assert sorted(s["step_id"] for s in out["ok"]["steps"]) == [
        "pipeline.py:base", "pipeline.py:sales[region=amer]", "pipeline.py:sales[region=apac]",
        "pipeline.py:sales[region=emea]"]
    [step] = out["failed"]["steps"]
    assert step["status"] == "failed" and step["error_type"] == "ValueError"
    assert out["one"]["steps_page"]["truncated"] is True and len(out["one"]["steps"]) == 1


def test_stats_is_the_cli_stats(api: Path) -> None:
    barca(api, "get", "base", "pipeline.py").expect(0)
    barca(api, "get", "base", "pipeline.py", "--refresh", "base").expect(0)
    barca(api, "get", "broken", "pipeline.py").expect(1)
    out = drive(api, """
import json, barca
print(json.dumps({"base": barca.stats("base", "pipeline.py"),
                  "broken": barca.stats("pipeline.py:broken", ["pipeline.py"]),
                  "never": barca.stats("publish", "pipeline.py")}))
""")
    assert out["base"] == barca(api, "stats", "base", "pipeline.py").expect(0).json
    assert out["broken"] == barca(api, "stats", "broken", "pipeline.py").expect(0).json
    assert out["never"] == barca(api, "stats", "publish", "pipeline.py").expect(0).json
    assert out["base"]["total_runs"] == 2 and out["base"]["rerun_rate"] == 0.5
    assert out["broken"]["failures"] == 1 and out["never"]["total_runs"] == 0


def test_an_environment_reads_its_own_history_and_stats(api: Path) -> None:
    barca(api, "get", "base", "pipeline.py", "--env", "staging").expect(0)
    out = drive(api, """
import json, barca
print(json.dumps({"main": barca.history(), "staging": barca.history(env="staging"),
                  "stats": barca.stats("base", "pipeline.py", env="staging")}))
""")
    assert out["main"] == []
    assert out["staging"] == barca(api, "history", "--env", "staging").expect(0).json["runs"]
    assert len(out["staging"]) == 1
    assert out["stats"]["total_runs"] == 1


def test_get_partition_narrows_keys_like_the_cli_flag(api: Path) -> None:
    out = drive(api, """
import json, barca
print(json.dumps({
    "text": barca.get("sales", "pipeline.py", partition="region=emea"),
    "dict": barca.get("sales", "pipeline.py", partition={"region": ["amer", "emea"]}),
}))
""")
    assert out["text"] == {"region=emea": {"region": "emea", "total": 14}}
    assert out["dict"] == {"region=amer": {"region": "amer", "total": 14},
                           "region=emea": {"region": "emea", "total": 14}}
    assert take_executed(api) == ["base", "sales[amer]", "sales[emea]"]  # apac never ran
    cli = barca(api, "get", "sales", "pipeline.py", "--partition", "region=amer,emea")
    assert cli.expect(0).json["final_output"] == out["dict"]
    assert take_executed(api) == []


def test_api_errors_are_the_cli_usage_errors(api: Path) -> None:
    barca(api, "get", "base", "pipeline.py").expect(0)
    out = drive(api, """
import json, barca

def catch(call):
    try:
        call()
    except barca.BarcaError as exc:
        return [type(exc).__name__, exc.code, exc.message, exc.remediation]
    return None

print(json.dumps({
    "run_id": catch(lambda: barca.history(run_id="ffffffffffff")),
    "target": catch(lambda: barca.stats("nope", "pipeline.py")),
    "limit": catch(lambda: barca.history(limit=0)),
    "partition": catch(lambda: barca.get("sales", "pipeline.py", partition="region=mars")),
}))
""")
    cli = barca(api, "history", "ffffffffffff").expect(2).envelope
    assert out["run_id"] == ["UsageError", 2, cli["error"], cli["remediation"]]
    cli = barca(api, "stats", "nope", "pipeline.py").expect(2).envelope
    assert out["target"] == ["UsageError", 2, cli["error"], cli["remediation"]]
    assert out["limit"][:2] == ["UsageError", 2] and "limit" in out["limit"][2]
    cli = barca(api, "get", "sales", "pipeline.py", "--partition", "region=mars").expect(2)
    assert out["partition"] == ["UsageError", 2, cli.envelope["error"],
                                cli.envelope["remediation"]]


def test_results_are_typed(api: Path) -> None:
    """The return annotations name the TypedDicts (barca.python_types, imported by type
    checkers only) whose keys the CLI JSON has."""
    out = drive(api, """
import json, typing, barca
from barca import python_types as t
barca.get("base", "pipeline.py")
hints = {name: typing.get_type_hints(getattr(barca, name), None, vars(t))["return"].__name__
         for name in ("plan", "stats")}
run_id = barca.history()[0]["run_id"]
shapes = {
    "Plan": (barca.plan("pipeline.py"), t.Plan),
    "RunInfo": (barca.history()[0], t.RunInfo),
    "RunDetail": (barca.history(run_id=run_id), t.RunDetail),
    "StepInfo": (barca.history(run_id=run_id)["steps"][0], t.StepInfo),
    "NodeStats": (barca.stats("base", "pipeline.py"), t.NodeStats),
}
keys = {name: [sorted(value), sorted(cls.__required_keys__),
               sorted(cls.__required_keys__ | cls.__optional_keys__)]
        for name, (value, cls) in shapes.items()}
print(json.dumps({"hints": hints, "keys": keys}))
""")
    assert out["hints"] == {"plan": "Plan", "stats": "NodeStats"}
    for name, (actual, required, allowed) in out["keys"].items():
        assert set(required) <= set(actual) <= set(allowed), name
