"""What runs, what comes from cache, and the refresh controls, at the driver level (moved from
tests/e2e/test_get_and_cache.py, which keeps a cache hit and miss, a refresh cascade, an
env= variable and a dry run against real workers).

Every asset appends its name to `executed.log` when its body runs, so the tests check both
what barca reports (`steps[].status`, `steps_executed`) and what really executed.
"""

from __future__ import annotations

import pytest

from barca.errors import UsageError
from conftest import edit, lines, run_statuses, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.cache import CHAIN


@pytest.fixture
def chain(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": CHAIN})
    return engine


def test_get_without_target_computes_every_asset_but_no_task(chain: Engine) -> None:
    result = chain.get(None, "pipeline.py").expect(0)
    assert set(result.statuses()) == {"a", "b", "c", "d"}
    assert "publish" not in lines(chain.root / "executed.log")
    # the last asset in topological order is the value returned
    assert result.json["final_output"] in (20, 101)


def test_run_always_runs_the_task_and_takes_assets_from_cache(chain: Engine) -> None:
    chain.get("b", "pipeline.py").expect(0)
    for _ in range(2):
        result = chain.run("publish", "pipeline.py").expect(0)
        assert result.json["final_output"] == "published 2"
        assert result.statuses() == {"a": "cached", "b": "cached", "publish": "ran"}
        assert result.steps["publish"]["reason"] == "task"
    assert lines(chain.root / "executed.log") == ["a", "b", "publish", "publish"]


def test_editing_an_asset_reruns_it_and_its_readers_only(chain: Engine) -> None:
    chain.get(None, "pipeline.py").expect(0)
    edit(chain.root / "pipeline.py", "return a + 1", "return a + 2")
    result = chain.get(None, "pipeline.py").expect(0)
    assert result.statuses() == {"a": "cached", "b": "ran", "c": "cached", "d": "ran"}
    assert result.steps["b"]["changed"] == ["code"]
    assert result.steps["d"]["changed"] == ["input pipeline.py:b"]
    assert result.json["steps_executed"] == 2
    assert result.json["final_output"] in (30, 101)


def test_refresh_takes_one_comma_list(chain: Engine) -> None:
    chain.get(None, "pipeline.py").expect(0)
    result = chain.get(None, "pipeline.py", refresh="a,c").expect(0)
    assert result.steps["a"]["reason"] == "refresh"
    assert result.steps["c"]["reason"] == "refresh"
    assert result.steps["b"]["reason"] == "refresh_cascade"
    assert result.json["steps_executed"] == 4


def test_no_cascade_recomputes_only_the_named_asset(chain: Engine) -> None:
    chain.get("d", "pipeline.py").expect(0)
    result = chain.get("d", "pipeline.py", refresh="b", cascade=False).expect(0)
    assert result.statuses() == {"a": "cached", "b": "ran", "d": "cached"}
    assert lines(chain.root / "executed.log") == ["a", "b", "d", "b"]


def test_no_cascade_warns_about_cached_readers_of_the_refreshed_asset(chain: Engine) -> None:
    chain.get("d", "pipeline.py").expect(0)
    result = chain.get("d", "pipeline.py", refresh="b", cascade=False).expect(0)
    assert "b" in result.steps["d"].get("warning", "")
    assert "'d' was served from cache but depends on refreshed 'b'" in result.stderr


def test_refresh_all_recomputes_the_whole_cone(chain: Engine) -> None:
    chain.get("d", "pipeline.py").expect(0)
    result = chain.get("d", "pipeline.py", refresh_all=True).expect(0)
    assert result.statuses() == {"a": "ran", "b": "ran", "d": "ran"}
    assert {s["reason"] for s in result.steps.values()} == {"refresh_all"}
    assert lines(chain.root / "executed.log") == ["a", "b", "d", "a", "b", "d"]


def test_underscore_input_orders_without_loading_and_reruns_on_change(engine: Engine) -> None:
    write(engine.root, {"p.py": """
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
    first = engine.get("after", "p.py").expect(0)
    assert first.json["final_output"] == {"got": None}
    assert lines(engine.root / "order.log") == ["setup", "after"]
    edit(engine.root / "p.py", "return 41", "return 42")
    second = engine.get("after", "p.py").expect(0)
    assert second.statuses() == {"setup": "ran", "after": "ran"}
    assert second.steps["after"]["changed"] == ["input p.py:setup"]


def test_sensor_always_runs_and_its_reader_reruns_only_when_the_value_changes(
        engine: Engine) -> None:
    write(engine.root, {"p.py": """
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
    (engine.root / "version.txt").write_text("v1")
    engine.get("data", "p.py").expect(0)
    same = engine.get("data", "p.py").expect(0)
    assert same.statuses() == {"version": "ran", "data": "cached"}
    (engine.root / "version.txt").write_text("v2")
    changed = engine.get("data", "p.py").expect(0)
    assert changed.statuses() == {"version": "ran", "data": "ran"}
    assert changed.steps["data"]["changed"] == ["sensor p.py:version"]
    assert changed.json["final_output"] == "data@v2"
    assert lines(engine.root / "data.log") == ["v1", "v2"]


def test_env_flag_keeps_a_separate_cache_and_history(chain: Engine) -> None:
    root = chain.root
    chain.get("b", "pipeline.py").expect(0)
    staging = chain.get("b", "pipeline.py", env="staging").expect(0)
    assert staging.json["steps_executed"] == 2
    assert (root / ".barca" / "envs" / "staging" / "metadata.db").is_file()
    assert list((root / ".barca" / "envs" / "staging" / "artifacts").iterdir())
    by_variable = chain.get("b", "pipeline.py", environ={"BARCA_ENV": "staging"}).expect(0)
    assert by_variable.json["steps_executed"] == 0
    assert run_statuses(root) == ["success"]
    assert run_statuses(root, "staging") == ["success", "success"]
    with pytest.raises(UsageError, match="invalid environment name") as bad:
        chain.get("b", "pipeline.py", env="../escape")
    assert bad.value.exit_code == 2


def test_same_file_spelled_differently_is_the_same_node(chain: Engine) -> None:
    chain.get("b", "pipeline.py").expect(0)
    for spelling in ("./pipeline.py", str(chain.root / "pipeline.py")):
        result = chain.get("b", spelling).expect(0)
        assert result.json["steps_executed"] == 0
        assert {s["id"] for s in result.json["steps"]} == {"pipeline.py:a", "pipeline.py:b"}


def test_get_several_targets_returns_each_targets_value(chain: Engine) -> None:
    result = chain.get("c,d", "pipeline.py").expect(0)
    targets = result.json["targets"]
    assert targets["c"]["final_output"] == 101
    assert targets["d"]["final_output"] == 20


def test_deleted_artifact_is_recomputed_when_something_reads_it(chain: Engine) -> None:
    root = chain.root
    chain.get("d", "pipeline.py").expect(0)
    for artifact in (root / ".barca" / "artifacts" / "pipeline.py--a").iterdir():
        artifact.unlink()
    edit(root / "pipeline.py", "return a + 1", "return a + 3")  # b must read a again
    dry = chain.get("d", "pipeline.py", dry_run=True)
    assert dry.steps["a"]["reason"] == "artifact_missing"
    result = chain.get("d", "pipeline.py").expect(0)
    assert result.steps["a"]["reason"] == "artifact_missing"
    assert result.json["final_output"] == 40


@pytest.mark.parametrize("warm, change, options", [
    (False, False, {}),
    (True, False, {}),
    (True, True, {}),
    (True, False, {"refresh": "b"}),
    (True, False, {"refresh": "b", "cascade": False}),
    (True, False, {"refresh_all": True}),
], ids=["cold", "warm", "edited", "refresh", "refresh-no-cascade", "refresh-all"])
def test_dry_run_predicts_exactly_what_the_real_run_executes(chain: Engine, warm, change,
                                                             options) -> None:
    root = chain.root
    if warm:
        chain.get(None, "pipeline.py").expect(0)
    if change:
        edit(root / "pipeline.py", "return a + 100", "return a + 200")
    executed_before = lines(root / "executed.log")
    runs_before = run_statuses(root) if warm else None

    dry = chain.get(None, "pipeline.py", dry_run=True, **options)
    assert dry.json["dry_run"] is True
    assert lines(root / "executed.log") == executed_before  # nothing executed
    assert dry.executors == 0
    if warm:
        assert run_statuses(root) == runs_before  # no run recorded
    else:
        assert not (root / ".barca").exists()  # nothing written at all

    real = chain.get(None, "pipeline.py", **options).expect(0)
    assert dry.json["summary"]["will_run"] == real.json["steps_executed"]
    predicted = {n for n, action in dry.statuses().items() if action == "run"}
    ran = {n for n, status in real.statuses().items() if status == "ran"}
    assert predicted == ran
    for name in ran:
        assert dry.steps[name]["reason"] == real.steps[name]["reason"]


def test_a_deleted_artifact_read_under_two_names_is_recomputed_once(engine: Engine) -> None:
    write(engine.root, {"p.py": """
        from barca import asset

        @asset()
        def a() -> int:
            return 2

        @asset(inputs={"x": a, "y": a})
        def both(x: int, y: int) -> int:
            return x + y
    """})
    engine.get("both", "p.py").expect(0)
    for artifact in (engine.root / ".barca" / "artifacts" / "p.py--a").iterdir():
        artifact.unlink()
    edit(engine.root / "p.py", "return x + y", "return x * y")  # both must read a again
    result = engine.get("both", "p.py").expect(0)
    assert result.steps["a"]["reason"] == "artifact_missing"
    assert result.json["final_output"] == 4
    assert result.stderr.count("cached result of the node is missing") == 1


def test_a_shared_scheduled_run_computes_its_assets_and_runs_its_tasks(engine: Engine) -> None:
    """An asset and a task due together share a run of command `serve` (the scheduler's,
    tests/unit/test_scheduler_fires.py): the task runs in it, the asset as `get` would."""
    write(engine.root, {"p.py": """
        from barca import asset, task

        @asset()
        def alpha() -> int:
            with open("executed.log", "a") as fh:
                fh.write("alpha\\n")
            return 1

        @task(inputs={"alpha": alpha})
        def notify(alpha: int) -> None:
            with open("executed.log", "a") as fh:
                fh.write(f"notified {alpha}\\n")
    """})
    first = engine("serve", "p.py:alpha,p.py:notify", "p.py").expect(0)
    assert first.statuses() == {"alpha": "ran", "notify": "ran"}
    again = engine("serve", "p.py:alpha,p.py:notify", "p.py").expect(0)
    assert again.statuses() == {"alpha": "cached", "notify": "ran"}
    assert lines(engine.root / "executed.log") == ["alpha", "notified 1", "notified 1"]
