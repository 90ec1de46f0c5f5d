"""`barca get` / `barca run`: what runs, what comes from cache, and the refresh controls.

Every asset appends its name to `executed.log` when its body runs, so the tests can check both
what barca reports (`steps[].status`, `steps_executed`) and what really executed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, edit, lines, run_statuses, write

CHAIN = """
    from barca import asset, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def a() -> int:
        _ran("a")
        return 1

    @asset(inputs={"a": a})
    def b(a: int) -> int:
        _ran("b")
        return a + 1

    @asset(inputs={"b": b})
    def d(b: int) -> int:
        _ran("d")
        return b * 10

    @asset(inputs={"a": a})
    def c(a: int) -> int:
        _ran("c")
        return a + 100

    @task(inputs={"b": b})
    def publish(b: int) -> str:
        _ran("publish")
        return f"published {b}"
"""


@pytest.fixture
def chain(project: Path) -> Path:
    return write(project, {"pipeline.py": CHAIN})


def test_get_runs_the_target_cone_then_serves_it_from_cache(chain: Path) -> None:
    first = barca(chain, "get", "d", "pipeline.py").expect(0)
    assert first.json["status"] == "success"
    assert first.json["final_output"] == 20
    assert first.json["steps_executed"] == 3
    assert first.statuses() == {"a": "ran", "b": "ran", "d": "ran"}  # c, publish not in cone
    assert lines(chain / "executed.log") == ["a", "b", "d"]

    second = barca(chain, "get", "d", "pipeline.py").expect(0)
    assert second.json["steps_executed"] == 0
    assert second.json["final_output"] == 20
    assert second.statuses() == {"a": "cached", "b": "cached", "d": "cached"}
    assert lines(chain / "executed.log") == ["a", "b", "d"]
    assert run_statuses(chain) == ["success", "success"]


def test_get_without_target_computes_every_asset_but_no_task(chain: Path) -> None:
    result = barca(chain, "get", "pipeline.py").expect(0)
    assert set(result.statuses()) == {"a", "b", "c", "d"}
    assert "publish" not in lines(chain / "executed.log")
    # the last asset in topological order is the value returned
    assert result.json["final_output"] in (20, 101)


def test_get_on_a_task_or_run_on_an_asset_is_a_usage_error(chain: Path) -> None:
    got = barca(chain, "get", "publish", "pipeline.py").expect(2)
    assert "barca run" in got.envelope["remediation"]
    ran = barca(chain, "run", "b", "pipeline.py").expect(2)
    assert "barca get" in ran.envelope["remediation"]
    assert not (chain / "executed.log").exists()


def test_run_always_runs_the_task_and_takes_assets_from_cache(chain: Path) -> None:
    barca(chain, "get", "b", "pipeline.py").expect(0)
    for _ in range(2):
        result = barca(chain, "run", "publish", "pipeline.py").expect(0)
        assert result.json["final_output"] == "published 2"
        assert result.statuses() == {"a": "cached", "b": "cached", "publish": "ran"}
        assert result.steps["publish"]["reason"] == "task"
    assert lines(chain / "executed.log") == ["a", "b", "publish", "publish"]


def test_editing_an_asset_reruns_it_and_its_readers_only(chain: Path) -> None:
    barca(chain, "get", "pipeline.py").expect(0)
    edit(chain / "pipeline.py", "return a + 1", "return a + 2")
    result = barca(chain, "get", "pipeline.py").expect(0)
    assert result.statuses() == {"a": "cached", "b": "ran", "c": "cached", "d": "ran"}
    assert result.steps["b"]["changed"] == ["code"]
    assert result.steps["d"]["changed"] == ["input pipeline.py:b"]
    assert result.json["steps_executed"] == 2


def test_refresh_recomputes_named_asset_and_its_readers_in_the_cone(chain: Path) -> None:
    barca(chain, "get", "pipeline.py").expect(0)
    result = barca(chain, "get", "d", "pipeline.py", "--refresh", "b").expect(0)
    assert result.statuses() == {"a": "cached", "b": "ran", "d": "ran"}
    assert result.steps["b"]["reason"] == "refresh"
    assert result.steps["d"]["reason"] == "refresh_cascade"
    # c reads a, not b, and is outside `get d`'s cone anyway: still cached afterwards
    after = barca(chain, "get", "pipeline.py").expect(0)
    assert after.json["steps_executed"] == 0


def test_refresh_takes_one_comma_list(chain: Path) -> None:
    barca(chain, "get", "pipeline.py").expect(0)
    result = barca(chain, "get", "pipeline.py", "--refresh", "a,c").expect(0)
    assert result.steps["a"]["reason"] == "refresh"
    assert result.steps["c"]["reason"] == "refresh"
    assert result.steps["b"]["reason"] == "refresh_cascade"
    assert result.json["steps_executed"] == 4


def test_no_cascade_recomputes_only_the_named_asset(chain: Path) -> None:
    barca(chain, "get", "d", "pipeline.py").expect(0)
    result = barca(chain, "get", "d", "pipeline.py", "--refresh", "b", "--no-cascade").expect(0)
    assert result.statuses() == {"a": "cached", "b": "ran", "d": "cached"}
    assert lines(chain / "executed.log") == ["a", "b", "d", "b"]


def test_no_cascade_warns_about_cached_readers_of_the_refreshed_asset(chain: Path) -> None:
    barca(chain, "get", "d", "pipeline.py").expect(0)
    result = barca(chain, "get", "d", "pipeline.py", "--refresh", "b", "--no-cascade").expect(0)
    assert "b" in result.steps["d"].get("warning", "")


def test_refresh_all_recomputes_the_whole_cone(chain: Path) -> None:
    barca(chain, "get", "d", "pipeline.py").expect(0)
    result = barca(chain, "get", "d", "pipeline.py", "--refresh-all").expect(0)
    assert result.statuses() == {"a": "ran", "b": "ran", "d": "ran"}
    assert {s["reason"] for s in result.steps.values()} == {"refresh_all"}
    assert lines(chain / "executed.log") == ["a", "b", "d", "a", "b", "d"]


@pytest.mark.parametrize("args, why", [
    (["--no-cascade"], "--refresh"),            # --no-cascade needs --refresh
    (["--refresh", "c"], "a, b, d"),            # c is not in d's cone: lists the valid names
    (["--refresh", "publish"], "a, b, d"),      # a task cannot be refreshed
    (["--refresh", "a", "b"], "'b'"),           # two lists: the second is not a file
])
def test_bad_refresh_arguments_are_usage_errors_and_run_nothing(chain: Path, args, why) -> None:
    result = barca(chain, "get", "d", "pipeline.py", *args).expect(2)
    envelope = result.envelope
    assert envelope["kind"] == "usage" and envelope["code"] == 2
    assert why in envelope["error"] + (envelope["remediation"] or "")
    assert result.stdout == ""
    assert not (chain / "executed.log").exists()


def test_underscore_input_orders_without_loading_and_reruns_on_change(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset()
        def setup() -> int:
            with open("order.log", "a") as fh:
                fh.write("setup\\n")
            return 41

        @asset(inputs={"_setup": setup})
        def after(_setup) -> dict:
            with open("order.log", "a") as fh:
                fh.write("after\\n")
            return {"got": _setup}
    """})
    first = barca(project, "get", "after", "p.py").expect(0)
    assert first.json["final_output"] == {"got": None}
    assert lines(project / "order.log") == ["setup", "after"]
    edit(project / "p.py", "return 41", "return 42")
    second = barca(project, "get", "after", "p.py").expect(0)
    assert second.statuses() == {"setup": "ran", "after": "ran"}
    assert second.steps["after"]["changed"] == ["input p.py:setup"]


def test_sensor_always_runs_and_its_reader_reruns_only_when_the_value_changes(
        project: Path) -> None:
    write(project, {"p.py": """
        from pathlib import Path
        from barca import asset, sensor

        @sensor()
        def version() -> str:
            return Path("version.txt").read_text()

        @asset(inputs={"v": version})
        def data(v: str) -> str:
            with open("data.log", "a") as fh:
                fh.write(v + "\\n")
            return "data@" + v
    """})
    (project / "version.txt").write_text("v1")
    barca(project, "get", "data", "p.py").expect(0)
    same = barca(project, "get", "data", "p.py").expect(0)
    assert same.statuses() == {"version": "ran", "data": "cached"}
    (project / "version.txt").write_text("v2")
    changed = barca(project, "get", "data", "p.py").expect(0)
    assert changed.statuses() == {"version": "ran", "data": "ran"}
    assert changed.steps["data"]["changed"] == ["sensor p.py:version"]
    assert changed.json["final_output"] == "data@v2"
    assert lines(project / "data.log") == ["v1", "v2"]


def test_declared_env_variable_is_part_of_the_cache_key(project: Path) -> None:
    write(project, {"p.py": """
        import os
        from barca import asset

        @asset(env=["REGION"])
        def regional() -> str:
            return repr(os.environ.get("REGION"))
    """})
    emea = barca(project, "get", "regional", "p.py", env={"REGION": "emea"}).expect(0)
    assert emea.json["final_output"] == "'emea'"
    again = barca(project, "get", "regional", "p.py", env={"REGION": "emea"}).expect(0)
    assert again.json["steps_executed"] == 0
    amer = barca(project, "get", "regional", "p.py", env={"REGION": "amer"}).expect(0)
    assert amer.statuses() == {"regional": "ran"}
    assert amer.steps["regional"]["changed"] == ["env REGION"]
    unset = barca(project, "get", "regional", "p.py", env={"REGION": None}).expect(0)
    assert unset.json["final_output"] == "None"
    empty = barca(project, "get", "regional", "p.py", env={"REGION": ""}).expect(0)
    assert empty.json["steps_executed"] == 1  # unset and "" are different values
    back = barca(project, "get", "regional", "p.py", env={"REGION": "emea"}).expect(0)
    assert back.json["steps_executed"] == 0  # the older result is served again


def test_env_flag_keeps_a_separate_cache_and_history(chain: Path) -> None:
    barca(chain, "get", "b", "pipeline.py").expect(0)
    staging = barca(chain, "get", "b", "pipeline.py", "--env", "staging").expect(0)
    assert staging.json["steps_executed"] == 2
    assert (chain / ".barca" / "envs" / "staging" / "metadata.db").is_file()
    assert list((chain / ".barca" / "envs" / "staging" / "artifacts").iterdir())
    by_variable = barca(chain, "get", "b", "pipeline.py", env={"BARCA_ENV": "staging"}).expect(0)
    assert by_variable.json["steps_executed"] == 0
    assert run_statuses(chain) == ["success"]
    assert run_statuses(chain, "staging") == ["success", "success"]
    bad = barca(chain, "get", "b", "pipeline.py", "--env", "../escape").expect(2)
    assert bad.envelope["kind"] == "usage"


def test_same_file_spelled_differently_is_the_same_node(chain: Path) -> None:
    barca(chain, "get", "b", "pipeline.py").expect(0)
    for spelling in ("./pipeline.py", str(chain / "pipeline.py")):
        result = barca(chain, "get", "b", spelling).expect(0)
        assert result.json["steps_executed"] == 0
        assert {s["id"] for s in result.json["steps"]} == {"pipeline.py:a", "pipeline.py:b"}


def test_get_several_targets_returns_each_targets_value(chain: Path) -> None:
    result = barca(chain, "get", "c,d", "pipeline.py").expect(0)
    targets = result.json["targets"]
    assert targets["c"]["final_output"] == 101
    assert targets["d"]["final_output"] == 20


def test_deleted_artifact_is_recomputed_when_something_reads_it(chain: Path) -> None:
    barca(chain, "get", "d", "pipeline.py").expect(0)
    for artifact in (chain / ".barca" / "artifacts" / "pipeline.py--a").iterdir():
        artifact.unlink()
    edit(chain / "pipeline.py", "return a + 1", "return a + 3")  # b must read a again
    dry = barca(chain, "get", "d", "pipeline.py", "--dry-run").expect(0)
    assert dry.steps["a"]["reason"] == "artifact_missing"
    result = barca(chain, "get", "d", "pipeline.py").expect(0)
    assert result.steps["a"]["reason"] == "artifact_missing"
    assert result.json["final_output"] == 40


@pytest.mark.parametrize("warm, change, flags", [
    (False, False, []),
    (True, False, []),
    (True, True, []),
    (True, False, ["--refresh", "b"]),
    (True, False, ["--refresh", "b", "--no-cascade"]),
    (True, False, ["--refresh-all"]),
], ids=["cold", "warm", "edited", "refresh", "refresh-no-cascade", "refresh-all"])
def test_dry_run_predicts_exactly_what_the_real_run_executes(chain: Path, warm, change,
                                                             flags) -> None:
    if warm:
        barca(chain, "get", "pipeline.py").expect(0)
    if change:
        edit(chain / "pipeline.py", "return a + 100", "return a + 200")
    executed_before = lines(chain / "executed.log")
    runs_before = run_statuses(chain) if warm else None

    dry = barca(chain, "get", "pipeline.py", "--dry-run", *flags).expect(0)
    assert dry.json["dry_run"] is True
    assert lines(chain / "executed.log") == executed_before  # nothing executed
    if warm:
        assert run_statuses(chain) == runs_before  # no run recorded
    else:
        assert not (chain / ".barca").exists()  # nothing written at all

    real = barca(chain, "get", "pipeline.py", *flags).expect(0)
    assert dry.json["summary"]["will_run"] == real.json["steps_executed"]
    predicted = {n for n, action in dry.statuses().items() if action == "run"}
    ran = {n for n, status in real.statuses().items() if status == "ran"}
    assert predicted == ran
    for name in ran:
        assert dry.steps[name]["reason"] == real.steps[name]["reason"]


def test_a_deleted_artifact_read_under_two_names_is_recomputed_once(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset()
        def a() -> int:
            return 2

        @asset(inputs={"x": a, "y": a})
        def both(x: int, y: int) -> int:
            return x + y
    """})
    barca(project, "get", "both", "p.py").expect(0)
    for artifact in (project / ".barca" / "artifacts" / "p.py--a").iterdir():
        artifact.unlink()
    edit(project / "p.py", "return x + y", "return x * y")  # both must read a again
    result = barca(project, "get", "both", "p.py").expect(0)
    assert result.steps["a"]["reason"] == "artifact_missing"
    assert result.json["final_output"] == 4
    assert result.stderr.count("cached result of the node is missing") == 1
