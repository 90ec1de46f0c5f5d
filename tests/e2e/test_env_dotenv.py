"""The project's `.env` as 0.33 reads it: a variable declared in `env=` and not set in the
process environment takes its value from the root's `.env`, which enters the run hash as the
same value set in the environment would; the environment wins; barca does not set the value
for the step; other dotenv files are never read; a line it cannot read is exit 2 naming the
line and never its value."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, write

PIPELINE = """
    import os
    from barca import asset

    @asset(env=["REGION", "GREETING", "DSN", "EMPTY", "MISSING"])
    def config() -> dict:
        return {"seen_by_step": os.environ.get("REGION")}
"""

DOTENV = """\
# settings for local runs
export REGION=emea  # a comment after the value
GREETING="hello ${REGION}\\nworld"
DSN='postgres://${USER}@db/#1'
EMPTY=
UNUSED=${NOPE:-fallback}
"""

UNSET = {"REGION": None, "GREETING": None, "DSN": None, "EMPTY": None, "MISSING": None}


def test_declared_variables_fall_back_to_the_project_dotenv(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE, ".env": DOTENV,
                     ".env.local": "REGION=local\nMISSING=from-local\n"})
    got = barca(tmp_path, "get", "config", "pipeline.py", env=UNSET).expect(0)
    assert got.steps["config"]["env"] == {
        "REGION": "emea", "GREETING": "hello emea\nworld", "DSN": "postgres://${USER}@db/#1",
        "EMPTY": "", "MISSING": None}  # .env.local is not read
    # barca does not set the file's values for the step
    assert got.json["final_output"] == {"seen_by_step": None}

    # the same values from the environment hash the same: served from cache
    same = {"REGION": "emea", "GREETING": "hello emea\nworld", "DSN": "postgres://${USER}@db/#1",
            "EMPTY": "", "MISSING": None}
    assert barca(tmp_path, "get", "config", "pipeline.py",
                 env=same).expect(0).json["steps_executed"] == 0

    # an edit of the file reruns the node, naming the variable
    (tmp_path / ".env").write_text(DOTENV.replace("REGION=emea", "REGION=amer"))
    dry = barca(tmp_path, "get", "config", "pipeline.py", "--dry-run", env=UNSET).expect(0)
    assert dry.steps["config"]["action"] == "run"
    assert dry.steps["config"]["changed"] == ["env GREETING", "env REGION"]

    # the process environment wins over the file
    won = barca(tmp_path, "get", "config", "pipeline.py", env={**UNSET, "REGION": "emea"})
    assert won.expect(0).steps["config"]["env"]["REGION"] == "emea"
    assert won.steps["config"]["env"]["GREETING"] == "hello emea\nworld"  # ${REGION}: env first


def test_a_dotenv_line_barca_cannot_read_is_exit_2_without_its_value(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE,
                     ".env": "REGION=emea\nAPI_TOKEN=\"s3cr3t\n"})
    bad = barca(tmp_path, "get", "config", "pipeline.py", env=UNSET).expect(2)
    assert bad.envelope["error"].endswith(".env, line 2: the line of API_TOKEN opens a \" quote "
                                          "it never closes")
    assert "KEY=VALUE" in bad.envelope["remediation"]
    assert "s3cr3t" not in bad.stderr
    # every declared variable set in the environment: the file is not read at all
    assert barca(tmp_path, "get", "config", "pipeline.py",
                 env={k: "x" for k in UNSET}).expect(0).json["steps_executed"] == 1
