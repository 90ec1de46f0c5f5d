"""`--env NAME` / `BARCA_ENV`: a separate cache and history under `.barca/envs/NAME/`, seen
the same way by every inspect command; a bad name is exit 2 everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, write

PIPELINE = """
    import os
    from barca import asset

    @asset(env=["LABEL"])
    def labelled() -> dict:
        print("computing", os.environ.get("LABEL"))
        return {"label": os.environ.get("LABEL")}
"""


@pytest.fixture
def two_envs(project: Path) -> Path:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "labelled", "pipeline.py", env={"LABEL": "main"}).expect(0)
    barca(project, "get", "labelled", "pipeline.py", "--env", "staging",
          env={"LABEL": "staging"}).expect(0)
    return project


def test_each_environment_has_its_own_history(two_envs: Path) -> None:
    main = barca(two_envs, "history").expect(0).json["runs"]
    staging = barca(two_envs, "history", "--env", "staging").expect(0).json["runs"]
    by_variable = barca(two_envs, "history", env={"BARCA_ENV": "staging"}).expect(0).json
    assert len(main) == 1 and len(staging) == 1
    assert main[0]["run_id"] != staging[0]["run_id"]
    assert by_variable["runs"] == staging
    assert (two_envs / ".barca" / "envs" / "staging" / "metadata.db").exists()
    assert barca(two_envs, "history", "--env", "other").expect(0).json["runs"] == []
    assert not (two_envs / ".barca" / "envs" / "other").exists()


def test_flag_beats_the_variable(two_envs: Path) -> None:
    body = barca(two_envs, "history", "--env", "default", env={"BARCA_ENV": "staging"})
    assert body.expect(0).json["runs"] == barca(two_envs, "history").expect(0).json["runs"]


def test_logs_stats_and_sql_read_the_chosen_environment(two_envs: Path) -> None:
    staging_run = barca(two_envs, "history", "--env", "staging").expect(0).json["runs"][0]
    logs = barca(two_envs, "logs", staging_run["run_id"], "--env", "staging").expect(0)
    assert logs.stdout == "[pipeline.py:labelled] computing staging\n"
    assert barca(two_envs, "logs", staging_run["run_id"]).code == 2  # not in default
    rows = barca(two_envs, "sql", "select label from labelled", "--env", "staging").expect(0)
    assert rows.json["rows"] == [{"label": "staging"}]
    assert barca(two_envs, "sql", "select label from labelled").expect(0).json["rows"] == [
        {"label": "main"}]
    stats = barca(two_envs, "stats", "labelled", "--env", "staging").expect(0).json
    assert stats["recent_runs"][0]["run_id"] == staging_run["run_id"]


@pytest.mark.parametrize("command", [
    ["history"], ["logs"], ["stats", "labelled"], ["sql", "select 1"], ["gc"], ["doctor"],
])
@pytest.mark.parametrize("how", ["flag", "variable"])
def test_bad_environment_name_is_exit_2_naming_the_rule(project: Path, command: list[str],
                                                        how: str) -> None:
    write(project, {"pipeline.py": PIPELINE})
    if how == "flag":
        bad = barca(project, *command, "--env", "no/slash")
    else:
        bad = barca(project, *command, env={"BARCA_ENV": "has space"})
    bad.expect(2)
    assert "invalid environment name" in bad.envelope["error"]
    assert "letters, digits" in bad.envelope["remediation"]
    assert not (project / ".barca").exists()
