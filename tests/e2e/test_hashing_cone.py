"""The run hash covers the helper code a function reaches across project modules.

An edit to a helper nothing uses reruns nothing; an edit to a used helper reruns exactly its
users (and, through their inputs, what reads them). The hash parts are stored, so `status` and
`--dry-run` name the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, barca_env, edit, write

PROJECT = {
    "lib/__init__.py": "",
    "lib/deep.py": """
        SCALE = 10

        def scale(x):
            return x * SCALE

        def unrelated():
            return "u"
    """,
    "lib/mid.py": """
        from lib.deep import scale

        def prepare(x):
            return scale(x) + 1

        class Fmt:
            def show(self, x):
                return f"<{x}>"

        def unused_helper(x):
            return x - 1
    """,
    "helpers.py": """
        def used(x):
            return x + 1

        def unused(x):
            return x - 1
    """,
    "pipeline.py": """
        from barca import asset
        import lib.mid
        import lib.mid as m
        from lib import mid
        from lib.mid import Fmt, prepare
        from helpers import used

        @asset()
        def source() -> int:
            return 1

        @asset(inputs={"source": source})
        def uses_helper(source: int) -> int:
            return used(source)

        @asset(inputs={"value": uses_helper})
        def reads_user(value: int) -> int:
            return value * 2

        @asset(inputs={"source": source})
        def no_helper(source: int) -> int:
            return source + 5

        @asset()
        def style_from() -> int:
            return prepare(1)

        @asset()
        def style_alias() -> int:
            return m.prepare(2)

        @asset()
        def style_module() -> int:
            return mid.prepare(3)

        @asset()
        def style_dotted() -> int:
            return lib.mid.prepare(4)

        @asset()
        def uses_class() -> str:
            return Fmt().show(1)
    """,
}

ALL = {"source", "uses_helper", "reads_user", "no_helper", "style_from", "style_alias",
       "style_module", "style_dotted", "uses_class"}


@pytest.fixture
def cone(project: Path) -> Path:
    write(project, PROJECT)
    barca(project, "get", "pipeline.py").expect(0)
    return project


def _ran(result) -> set[str]:
    return {name for name, status in result.statuses().items() if status in ("ran", "run")}


def test_editing_unused_helper_reruns_nothing(cone: Path) -> None:
    edit(cone / "helpers.py", "return x - 1", "return x - 2")
    edit(cone / "lib/mid.py", "return x - 1", "return x - 3")
    edit(cone / "lib/deep.py", 'return "u"', 'return "v"')
    dry = barca(cone, "get", "pipeline.py", "--dry-run").expect(0)
    assert dry.json["summary"]["will_run"] == 0
    result = barca(cone, "get", "pipeline.py").expect(0)
    assert result.json["steps_executed"] == 0
    assert set(result.statuses().values()) == {"cached"}


def test_editing_used_helper_reruns_exactly_its_users(cone: Path) -> None:
    edit(cone / "helpers.py", "return x + 1", "return x + 100")
    result = barca(cone, "get", "pipeline.py").expect(0)
    assert _ran(result) == {"uses_helper", "reads_user"}
    assert result.steps["uses_helper"]["changed"] == ["helper helpers.py:used"]
    assert result.steps["reads_user"]["changed"] == ["input pipeline.py:uses_helper"]
    again = barca(cone, "get", "reads_user", "pipeline.py").expect(0)
    assert again.json["final_output"] == 202


def test_helper_two_modules_away_is_in_the_cone_for_every_import_style(cone: Path) -> None:
    edit(cone / "lib/deep.py", "SCALE = 10", "SCALE = 11")
    dry = barca(cone, "get", "pipeline.py", "--dry-run").expect(0)
    styles = {"style_from", "style_alias", "style_module", "style_dotted"}
    assert _ran(dry) == styles
    for name in styles:
        assert dry.steps[name]["changed"] == ["helper lib/deep.py:SCALE"]
    result = barca(cone, "get", "pipeline.py").expect(0)
    assert _ran(result) == styles
    assert barca(cone, "get", "style_dotted", "pipeline.py").json["final_output"] == 45


def test_editing_a_used_class_reruns_its_user(cone: Path) -> None:
    edit(cone / "lib/mid.py", 'f"<{x}>"', 'f"[{x}]"')
    result = barca(cone, "get", "pipeline.py").expect(0)
    assert _ran(result) == {"uses_class"}
    assert result.steps["uses_class"]["changed"] == ["helper lib/mid.py:Fmt"]
    assert barca(cone, "get", "uses_class").json["final_output"] == "[1]"


def test_comment_outside_used_code_reruns_nothing(cone: Path) -> None:
    with open(cone / "lib/mid.py", "a") as fh:
        fh.write("\n# a note at the end of the module\n")
    with open(cone / "pipeline.py", "a") as fh:
        fh.write("\n\ndef not_a_node():\n    return 'new'\n")
    assert barca(cone, "get", "pipeline.py").expect(0).json["steps_executed"] == 0


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


def test_metadata_only_decorator_arguments_rerun_nothing(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset, Schedule

        @asset(retries=2, retry_backoff=0.5, description="d", tags={"team": "a"},
               timeout_seconds=60)
        def a() -> int:
            return 1
    """})
    barca(project, "get", "a", "p.py").expect(0)
    edit(project / "p.py", 'retries=2, retry_backoff=0.5, description="d", tags={"team": "a"}',
         'retries=3, retry_backoff=1.5, description="e", tags={"team": "b"}, '
         'freshness=Schedule("0 * * * *")')
    assert barca(project, "get", "a", "p.py").expect(0).json["steps_executed"] == 0
    edit(project / "p.py", "retries=3,", 'retries=3, serializer="pickle",')
    changed = barca(project, "get", "a", "p.py").expect(0)
    assert changed.json["steps_executed"] == 1  # serializer changes the stored bytes


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


def test_cutoff_asset_with_identical_output_does_not_rerun_readers(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset(cutoff=True)
        def rates() -> dict:
            return {"eur": 1.5}

        @asset(inputs={"r": rates})
        def priced(r: dict) -> float:
            with open("priced.log", "a") as fh:
                fh.write("x\\n")
            return r["eur"] * 10
    """})
    barca(project, "get", "priced", "p.py").expect(0)
    edit(project / "p.py", 'return {"eur": 1.5}', "return dict(eur=1.5)")  # same bytes out
    same = barca(project, "get", "priced", "p.py").expect(0)
    assert same.statuses() == {"rates": "ran", "priced": "cached"}
    edit(project / "p.py", "eur=1.5", "eur=2.5")
    different = barca(project, "get", "priced", "p.py").expect(0)
    assert different.statuses() == {"rates": "ran", "priced": "ran"}
    assert different.json["final_output"] == 25.0
    assert len((project / "priced.log").read_text().split()) == 2
