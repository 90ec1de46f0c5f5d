"""A pipeline file that changes between planning and the worker's import fails its step
(engine.source_check) instead of recording a result of new code under the run hash of the old.

It happens for real here: a sensor (which runs first, after the run was planned from the files
as discovered) rewrites another pipeline file, which the in-process executor imports only when
that file's first step runs. Real SQLite, the real step runner, through the driver.
"""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest

from barca.engine import driver
from barca.engine.inprocess import InProcessExecutor

GENERATOR = '''
import pathlib
from barca import sensor

@sensor()
def regenerate() -> str:
    model = pathlib.Path(__file__).parent / "model.py"
    model.write_text(model.read_text().replace("return 1", "return 2"))
    return "generated"
'''

MODEL = '''
from barca import asset

@asset(inputs={"stamp": "gen.py:regenerate"})
def answer(stamp: str) -> int:
    return 1
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "barca.toml").write_text("")
    (root / "gen.py").write_text(textwrap.dedent(GENERATOR))
    (root / "model.py").write_text(textwrap.dedent(MODEL))
    monkeypatch.chdir(tmp_path)
    return root


def get(root: Path):
    return driver.run("get", "answer", ["gen.py", "model.py"], cwd=root,
                      new_executor=lambda: InProcessExecutor(root))


def successes(root: Path) -> list[tuple]:
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        return conn.execute("SELECT run_hash FROM materializations WHERE node_id = ? AND "
                            "status = 'success'", ("model.py:answer",)).fetchall()


def test_a_file_rewritten_after_planning_fails_its_step_and_records_no_result(project):
    result = get(project)
    assert result.status == "failed"
    [failure] = result.failed
    assert (failure.node_id, failure.error_type, failure.attempts) == (
        "model.py:answer", "SourceChanged", 1)
    assert "model.py is not the source this run was planned with" in failure.error_message
    assert "return 2" in (project / "model.py").read_text()  # the sensor did rewrite it
    assert successes(project) == []  # nothing recorded over the planned run hash

    result = get(project)  # planned from the file as it is now: it runs, and says 2
    assert result.status == "success" and result.values("model.py:answer") == 2
    assert len(successes(project)) == 1
