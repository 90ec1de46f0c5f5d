"""`barca get` / `barca run`: what runs, what comes from cache, and the refresh controls.

End to end against real workers: a cache miss then hit, a refresh cascade, an `env=` variable
in a worker's environment, a dry run, and the refusals. The rest of these rules is tested at
the driver level in tests/engine/test_cache_rules.py.

Every asset appends its name to `executed.log` when its body runs, so the tests can check both
what barca reports (`steps[].status`, `steps_executed`) and what really executed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, edit, lines, run_statuses, write
from rule_pipelines.cache import CHAIN


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


def test_get_on_a_task_or_run_on_an_asset_is_a_usage_error(chain: Path) -> None:
    got = barca(chain, "get", "publish", "pipeline.py").expect(2)
    assert "barca run" in got.envelope["remediation"]
    ran = barca(chain, "run", "b", "pipeline.py").expect(2)
    assert "barca get" in ran.envelope["remediation"]
    assert not (chain / "executed.log").exists()


def test_refresh_recomputes_named_asset_and_its_readers_in_the_cone(chain: Path) -> None:
    barca(chain, "get", "pipeline.py").expect(0)
    result = barca(chain, "get", "d", "pipeline.py", "--refresh", "b").expect(0)
    assert result.statuses() == {"a": "cached", "b": "ran", "d": "ran"}
    assert result.steps["b"]["reason"] == "refresh"
    assert result.steps["d"]["reason"] == "refresh_cascade"
    # c reads a, not b, and is outside `get d`'s cone anyway: still cached afterwards
    after = barca(chain, "get", "pipeline.py").expect(0)
    assert after.json["steps_executed"] == 0


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


@pytest.mark.parametrize("warm, change, flags", [
    (True, True, []),
], ids=["edited"])  # every case: tests/engine/test_cache_rules.py
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


