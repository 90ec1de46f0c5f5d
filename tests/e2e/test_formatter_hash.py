"""A formatter run costs nothing (issue 29): code is hashed by its syntax tree, so `ruff
format` (or black) and comment edits over a keyed pipeline keep every key cached, while a
change that can alter a result still reruns what it reaches; and a project cached by a barca
that hashed code as text keeps its cache after the upgrade.

The real CLI on real files: the formatter is run as a user runs it, over the pipeline and
its helper module.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, edit, write

KEYS = 12

# Written the way people write before a formatter sees it: cramped, odd quotes, a hanging
# docstring, comments everywhere.
PROJECT = {
    "barca.toml": "",
    "helpers.py": """
        OFFSET=1 # added to every value
        def scaled(v,factor = 2):
          '''Scale a value.
               Used by every key.'''
          return (v*factor)+OFFSET   # the result
    """,
    "pipeline.py": f"""
        import json
        from barca import asset, collect, partitions_from, sensor
        from helpers import scaled
        # the source of keys
        @sensor()
        def regions()->dict:
            return {{ f'r{{i:02d}}' : i for i in range( {KEYS} ) }}
        @asset(partitions={{'region':partitions_from(regions)}})
        def region_value(region:str, regions:int)->str:
            '''One region's value.
                  Kept as text.'''
            with open('region_value.log','a') as fh: fh.write(region+'\\n')
            return f'{{region}}:{{scaled(regions)}}'   # text
        @asset(inputs={{'values':collect(region_value)}})
        def summary(values:list)->str:
            return ','.join( values )
    """,
}


def _formatter() -> list[str] | None:
    """How to run ruff format, or else black, from this interpreter or PATH."""
    for tool, args in (("ruff", ["format"]), ("black", ["-q"])):
        if importlib.util.find_spec(tool) is not None:
            return [sys.executable, "-m", tool, *args]
        found = shutil.which(tool)
        if found:
            return [found, *args]
    return None


FORMAT = _formatter()
needs_formatter = pytest.mark.skipif(
    FORMAT is None, reason="neither ruff nor black is installed (the dev extra brings ruff: "
    "pip install -e '.[dev]')")


def _format(root: Path) -> None:
    before = {name: (root / name).read_text() for name in ("pipeline.py", "helpers.py")}
    subprocess.run([*FORMAT, "pipeline.py", "helpers.py"], cwd=root, check=True,
                   capture_output=True)
    for name, text in before.items():
        assert (root / name).read_text() != text, f"the formatter left {name} as it was"


def _edit_comments(root: Path) -> None:
    edit(root / "pipeline.py", "# the source of keys", "# where the keys come from\n# (dict)")
    edit(root / "helpers.py", "# the result", "# the scaled result")


def _executed(root: Path) -> list[str]:
    """The keys region_value computed since the last call."""
    log = root / "region_value.log"
    keys = log.read_text().split() if log.exists() else []
    log.unlink(missing_ok=True)
    return keys


def _expected_summary(offset: int = 1, sep: str = ":") -> str:
    return ",".join(f"r{i:02d}{sep}{i * 2 + offset}" for i in range(KEYS))


def _fresh(root: Path, env: dict[str, str] | None = None) -> None:
    write(root, PROJECT)
    first = barca(root, "get", "summary", "pipeline.py", env=env).expect(0)
    assert first.json["steps_executed"] == 1 + KEYS + 1
    assert len(_executed(root)) == KEYS


def _only_the_sensor_ran(root: Path, env: dict[str, str] | None = None):
    got = barca(root, "get", "summary", "pipeline.py", env=env).expect(0)
    assert got.json["steps_executed"] == 1
    assert got.statuses() == {"regions": "ran", "region_value": "cached", "summary": "cached"}
    assert got.json["final_output"] == _expected_summary()
    assert _executed(root) == []
    return got


@needs_formatter
def test_a_formatter_run_and_comment_edits_rerun_only_the_sensor(tmp_path):
    _fresh(tmp_path)
    _edit_comments(tmp_path)
    _format(tmp_path)
    dry = barca(tmp_path, "get", "summary", "pipeline.py", "--dry-run").expect(0)
    assert dry.json["summary"] == {"will_run": 1, "cached": KEYS + 1, "unknown": 0}
    _only_the_sensor_ran(tmp_path)


@needs_formatter
@pytest.mark.parametrize("file, old, new, changed, summary", [
    ("helpers.py", "OFFSET = 1", "OFFSET = 3", ["helper helpers.py:OFFSET"],
     _expected_summary(offset=3)),
    ("pipeline.py", 'f"{region}:{scaled(regions)}"', 'f"{region}={scaled(regions)}"',
     ["code"], _expected_summary(sep="=")),
    ("pipeline.py", "One region's value.", "Each region's value.", ["code"],
     _expected_summary()),
    ("helpers.py", "factor=2", "factor=2.0", ["helper helpers.py:scaled"],
     ",".join(f"r{i:02d}:{i * 2.0 + 1}" for i in range(KEYS))),
], ids=["constant", "string", "docstring", "default"])
def test_after_a_formatter_run_a_behaviour_change_still_reruns(tmp_path, file, old, new,
                                                               changed, summary):
    _fresh(tmp_path)
    _format(tmp_path)
    _only_the_sensor_ran(tmp_path)
    edit(tmp_path / file, old, new)
    got = barca(tmp_path, "get", "summary", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 1 + KEYS + 1
    assert got.steps["region_value"]["changed"] == changed
    assert got.json["final_output"] == summary
    assert len(_executed(tmp_path)) == KEYS


OLD_COMMIT = "534ae85"  # the last barca that hashed code as text (hash scheme 1)


def _old_barca(tmp_path: Path) -> Path:
    """barca's sources as of OLD_COMMIT, from this repository's history."""
    repo = Path(__file__).resolve().parents[2]
    git = shutil.which("git")
    if git is None or subprocess.run([git, "-C", repo, "cat-file", "-e",
                                      f"{OLD_COMMIT}^{{commit}}"],
                                     capture_output=True).returncode != 0:
        pytest.skip(f"needs git and this repository's history (commit {OLD_COMMIT}) to run "
                    "the barca that hashed code as text")
    old = tmp_path / "old-barca"
    old.mkdir()
    archive = subprocess.run([git, "-C", repo, "archive", OLD_COMMIT, "src"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
    return old / "src"


@needs_formatter
def test_a_cache_made_before_the_upgrade_is_kept_and_then_survives_a_formatter(tmp_path):
    old_src = _old_barca(tmp_path)
    root = tmp_path / "project"
    _fresh(root, env={"PYTHONPATH": str(old_src)})

    dry = barca(root, "get", "summary", "pipeline.py", "--dry-run").expect(0)
    assert dry.json["summary"] == {"will_run": 1, "cached": KEYS + 1, "unknown": 0}
    upgraded = _only_the_sensor_ran(root)
    assert f"code hash upgraded: {KEYS + 1} keys of 2 nodes" in upgraded.stderr
    assert f"code hash upgraded: {KEYS + 1} keys" in barca(root, "logs").stdout

    _edit_comments(root)
    _format(root)
    again = _only_the_sensor_ran(root)
    assert "code hash upgraded" not in again.stderr
