"""A fully cached plain `barca get` is answered from the answer its last run kept
(engine.cached_get), without the engine: the same JSON and exit code as a full run, recorded
in the history as one, and never an answer that a change since has made stale."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import conftest
from conftest import CLI, barca, barca_env, read_runs, write

PIPELINE = """
from barca import asset
from helpers import bump


@asset()
def a() -> dict:
    with open("outside.txt") as fh:  # read in its body: an input barca cannot see
        return {"n": int(fh.read())}


@asset(inputs={"a": a})
def b(a: dict) -> dict:
    return {"n": bump(a["n"])}
"""

PER_RUN = ("run_id", "elapsed_seconds", "metadata_seconds")


@pytest.fixture(autouse=True)
def fresh_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command runs in its own process, not in a warm pool's child: what a command
    imported to answer is seen (`printed`), and each kept answer is for that environment."""
    monkeypatch.setattr(conftest, "WARM_SECONDS", "0")


def kept_project(project: Path) -> Path:
    """b computed, then got once more from cache: that run keeps its answer."""
    write(project, {"p.py": PIPELINE, "helpers.py": "def bump(n):\n    return n + 1\n",
                    "outside.txt": "1"})
    barca(project, "get", "b", "p.py").expect(0)
    assert barca(project, "get", "b", "p.py").expect(0).json["steps_executed"] == 0
    return project


def get(project: Path, *args: str) -> tuple[dict, bool]:
    """`barca get b p.py`: its JSON, and whether the engine (or click) was imported to answer
    it."""
    out, engine = printed(project, *args)
    return json.loads(out), engine


def printed(project: Path, *args: str) -> tuple[str, bool]:
    """What `barca get b p.py ARGS` prints on stdout, and whether the engine (or click) was
    imported to answer it."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *CLI[1:], "get", "b", "p.py",
                           *args], cwd=project, env=barca_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines()}
    return proc.stdout, bool(imported & {"barca.engine.coordinator", "click"})


def full_run(project: Path) -> dict:
    """What a full run prints (`-o json` is never answered from a kept answer)."""
    return barca(project, "get", "b", "p.py", "-o", "json").expect(0).json


def same(one: dict, other: dict) -> bool:
    return {k: v for k, v in one.items() if k not in PER_RUN} == \
        {k: v for k, v in other.items() if k not in PER_RUN}


def test_an_unchanged_cached_get_is_answered_without_the_engine_and_recorded(project):
    kept_project(project)
    before = len(read_runs(project))
    got, engine = get(project)
    assert not engine
    assert same(got, full_run(project)) and got["final_output"] == {"n": 2}
    runs = read_runs(project, "run_id, status, steps_total, steps_executed, steps_cached, "
                              "command, target, job, triggered_by, pid")
    assert len(runs) == before + 2  # the answered run, then the full one
    answered = next(r for r in runs if r[0] == got["run_id"])
    assert answered[1:9] == ("success", 2, 0, 2, "get", "b", "p.py:b", "cli")
    again, engine = get(project)
    assert not engine and again["run_id"] != got["run_id"]


def test_the_human_output_is_answered_too(project):
    kept_project(project)
    out, engine = printed(project, "--pretty")
    assert not engine
    full = barca(project, "get", "b", "p.py", "--pretty", "--agent").expect(0).stdout
    shape = r"Run [0-9a-f]{12} \| got 'b' in \d+\.\d{3}s \(0 steps, 0 phases\)\n"
    assert re.fullmatch(shape, out.partition("\n")[0] + "\n")
    assert re.fullmatch(shape, full.partition("\n")[0] + "\n")
    assert out.partition("\n")[2] == full.partition("\n")[2] and '"n": 2' in out


def test_an_edit_of_the_pipeline_or_a_helper_is_seen(project):
    kept_project(project)
    (project / "helpers.py").write_text("def bump(n):\n    return n + 10\n")
    got, engine = get(project)
    assert engine and got["steps_executed"] == 1 and got["final_output"] == {"n": 11}
    get(project)  # keeps the new answer
    (project / "p.py").write_text(PIPELINE.replace('"n": bump', '"m": bump'))
    got, _ = get(project)
    assert got["steps_executed"] == 1 and got["final_output"] == {"m": 11}


def test_a_module_that_now_shadows_an_import_is_seen(project):
    kept_project(project)
    write(project, {"helpers/__init__.py": "def bump(n):\n    return n + 100\n"})
    got, _ = get(project)
    assert got["steps_executed"] == 1 and got["final_output"] == {"n": 101}


def test_a_result_recomputed_by_another_run_is_seen(project):
    kept_project(project)
    (project / "outside.txt").write_text("5")
    refreshed = barca(project, "get", "b", "p.py", "--refresh", "a").expect(0).json
    assert refreshed["final_output"] == {"n": 6}
    got, _ = get(project)
    assert got["steps_executed"] == 0 and got["final_output"] == {"n": 6}


def test_a_changed_result_file_is_read_and_a_missing_one_is_not_answered_for(project):
    kept_project(project)
    a_file, b_file = (project / step["artifact"] for step in full_run(project)["steps"])
    b_file.write_text('{"n": 7}')
    got, _ = get(project)
    assert got["final_output"] == {"n": 7} and same(got, full_run(project))
    a_file.unlink()
    _, engine = get(project)
    assert engine  # the run, not the kept answer, decides what a missing file means


def test_another_environment_has_its_own_cache(project):
    kept_project(project)
    proc = subprocess.run([*CLI, "get", "b", "p.py"], cwd=project, capture_output=True,
                          env=barca_env({"BARCA_ENV": "other"}), text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["steps_executed"] == 2


SENSED = """
from barca import asset, sensor


@sensor()
def level() -> int:
    with open("outside.txt") as fh:
        return int(fh.read())


@asset(inputs={"level": level})
def b(level: int) -> dict:
    return {"n": level}
"""


def test_a_sensor_is_observed_on_every_get(project):
    write(project, {"p.py": SENSED, "outside.txt": "1"})
    for _ in range(3):
        assert barca(project, "get", "b", "p.py").expect(0).json["final_output"] == {"n": 1}
    (project / "outside.txt").write_text("2")
    got, _ = get(project)
    assert got["final_output"] == {"n": 2}
