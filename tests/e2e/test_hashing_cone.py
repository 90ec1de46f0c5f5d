"""The run hash covers the helper code a function reaches across project modules.

An edit to a helper nothing uses reruns nothing; an edit to a used helper reruns exactly its
users (and, through their inputs, what reads them). The hash parts are stored, so `status` and
`--dry-run` name the reason.

End to end against real workers: a used helper's edit, the reasons `status` and a dry run
name, and a same-size edit a worker must not run from stale bytecode. The other hashing rules
are tested at the driver level in tests/engine/test_hashing_rules.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, barca_env, edit, write
from rule_pipelines.hashing import PROJECT


ALL = {"source", "uses_helper", "reads_user", "no_helper", "style_from", "style_alias",
       "style_module", "style_dotted", "uses_class"}


@pytest.fixture
def cone(project: Path) -> Path:
    write(project, PROJECT)
    barca(project, "get", "pipeline.py").expect(0)
    return project


def _ran(result) -> set[str]:
    return {name for name, status in result.statuses().items() if status in ("ran", "run")}


def test_editing_used_helper_reruns_exactly_its_users(cone: Path) -> None:
    edit(cone / "helpers.py", "return x + 1", "return x + 100")
    result = barca(cone, "get", "pipeline.py").expect(0)
    assert _ran(result) == {"uses_helper", "reads_user"}
    assert result.steps["uses_helper"]["changed"] == ["helper helpers.py:used"]
    assert result.steps["reads_user"]["changed"] == ["input pipeline.py:uses_helper"]
    again = barca(cone, "get", "reads_user", "pipeline.py").expect(0)
    assert again.json["final_output"] == 202


def test_status_and_dry_run_name_the_reason_from_stored_parts(cone: Path) -> None:
    edit(cone / "helpers.py", "return x + 1", "return x + 7")
    edit(cone / "pipeline.py", "return source + 5", "return source + 6")
    status = barca(cone, "status", "pipeline.py").expect(0).json
    cache = {n["name"]: n["cache"] for n in status["nodes"]}
    assert cache["uses_helper"]["state"] == "stale"
    assert cache["uses_helper"]["changed"] == ["helper helpers.py:used"]
    assert "helpers.py:used" in cache["uses_helper"]["detail"]
    assert cache["no_helper"]["changed"] == ["code"]
    assert cache["reads_user"]["changed"] == ["input pipeline.py:uses_helper"]
    assert cache["source"]["state"] == "cached"
    assert status["summary"]["stale"] == 3

    pretty = barca(cone, "get", "pipeline.py", "--dry-run", "--pretty").expect(0).stdout
    row = next(line for line in pretty.splitlines() if line.endswith("pipeline.py:uses_helper"))
    assert row.startswith("will run") and "helpers.py:used" in row


def test_same_size_edit_with_unchanged_mtime_runs_the_new_code(cone: Path) -> None:
    # bytecode cached by an ordinary import (the user's own tests, say), validated by mtime+size
    with_bytecode = {"PYTHONDONTWRITEBYTECODE": None}
    subprocess.run([sys.executable, "-c", "import helpers"], cwd=cone,
                   env=barca_env(with_bytecode), check=True)
    assert list((cone / "__pycache__").glob("helpers.*.pyc"))
    helpers = cone / "helpers.py"
    stat = helpers.stat()
    edit(helpers, "return x + 1", "return x + 5")  # same length
    os.utime(helpers, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = barca(cone, "get", "uses_helper", "pipeline.py", env=with_bytecode).expect(0)
    assert result.statuses() == {"source": "cached", "uses_helper": "ran"}
    assert result.json["final_output"] == 6


