"""The run hash covers the helper code a function reaches across project modules, at the
driver level (moved from tests/e2e/test_hashing_cone.py, which keeps a used helper's edit, the
reasons `status` names and a same-size edit against real workers).

An edit to a helper nothing uses reruns nothing; an edit to a used helper reruns exactly its
users (and, through their inputs, what reads them).
"""

from __future__ import annotations

import pytest

from conftest import edit, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.hashing import PROJECT


@pytest.fixture
def cone(engine: Engine) -> Engine:
    write(engine.root, PROJECT)
    engine.get(None, "pipeline.py").expect(0)
    return engine


def _ran(result) -> set[str]:
    return {name for name, status in result.statuses().items() if status in ("ran", "run")}


def test_editing_unused_helper_reruns_nothing(cone: Engine) -> None:
    edit(cone.root / "helpers.py", "return x - 1", "return x - 2")
    edit(cone.root / "lib/mid.py", "return x - 1", "return x - 3")
    edit(cone.root / "lib/deep.py", 'return "u"', 'return "v"')
    dry = cone.get(None, "pipeline.py", dry_run=True)
    assert dry.json["summary"]["will_run"] == 0
    result = cone.get(None, "pipeline.py").expect(0)
    assert result.json["steps_executed"] == 0
    assert set(result.statuses().values()) == {"cached"}


def test_helper_two_modules_away_is_in_the_cone_for_every_import_style(cone: Engine) -> None:
    edit(cone.root / "lib/deep.py", "SCALE = 10", "SCALE = 11")
    dry = cone.get(None, "pipeline.py", dry_run=True)
    styles = {"style_from", "style_alias", "style_module", "style_dotted"}
    assert _ran(dry) == styles
    for name in styles:
        assert dry.steps[name]["changed"] == ["helper lib/deep.py:SCALE"]
    result = cone.get(None, "pipeline.py").expect(0)
    assert _ran(result) == styles
    assert cone.get("style_dotted", "pipeline.py").json["final_output"] == 45


def test_editing_a_used_class_reruns_its_user(cone: Engine) -> None:
    edit(cone.root / "lib/mid.py", 'f"<{x}>"', 'f"[{x}]"')
    result = cone.get(None, "pipeline.py").expect(0)
    assert _ran(result) == {"uses_class"}
    assert result.steps["uses_class"]["changed"] == ["helper lib/mid.py:Fmt"]
    assert cone.get("uses_class").json["final_output"] == "[1]"


def test_comment_outside_used_code_reruns_nothing(cone: Engine) -> None:
    with open(cone.root / "lib/mid.py", "a") as fh:
        fh.write("\n# a note at the end of the module\n")
    with open(cone.root / "pipeline.py", "a") as fh:
        fh.write("\n\ndef not_a_node():\n    return 'new'\n")
    assert cone.get(None, "pipeline.py").expect(0).json["steps_executed"] == 0


def test_metadata_only_decorator_arguments_rerun_nothing(engine: Engine) -> None:
    write(engine.root, {"p.py": """
        from barca import asset, Schedule

        @asset(retries=2, retry_backoff=0.5, description="d", tags={"team": "a"},
               timeout_seconds=60)
        def a() -> int:
            return 1
    """})
    engine.get("a", "p.py").expect(0)
    edit(engine.root / "p.py",
         'retries=2, retry_backoff=0.5, description="d", tags={"team": "a"}',
         'retries=3, retry_backoff=1.5, description="e", tags={"team": "b"}, '
         'freshness=Schedule("0 * * * *")')
    assert engine.get("a", "p.py").expect(0).json["steps_executed"] == 0
    edit(engine.root / "p.py", "retries=3,", 'retries=3, serializer="pickle",')
    changed = engine.get("a", "p.py").expect(0)
    assert changed.json["steps_executed"] == 1  # serializer changes the stored bytes


def test_cutoff_asset_with_identical_output_does_not_rerun_readers(engine: Engine) -> None:
    write(engine.root, {"p.py": """
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
    engine.get("priced", "p.py").expect(0)
    edit(engine.root / "p.py", 'return {"eur": 1.5}', "return dict(eur=1.5)")  # same bytes
    same = engine.get("priced", "p.py").expect(0)
    assert same.statuses() == {"rates": "ran", "priced": "cached"}
    edit(engine.root / "p.py", "eur=1.5", "eur=2.5")
    different = engine.get("priced", "p.py").expect(0)
    assert different.statuses() == {"rates": "ran", "priced": "ran"}
    assert different.json["final_output"] == 25.0
    assert len((engine.root / "priced.log").read_text().split()) == 2
