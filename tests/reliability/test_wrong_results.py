"""Silent wrong results of issue 13, each as found, on the real CLI: a decorator argument
barca cannot read must be exit 2, never dropped (the asset would run with its default and
cache a wrong value with exit 0)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import barca, write

UPSTREAM = """
    from barca import asset

    @asset()
    def up() -> int:
        return 41
"""


def test_inputs_from_a_module_constant_are_read_and_hash_like_the_literal(project: Path):
    write(project, {"p.py": UPSTREAM + """
    INPUTS = {"x": up}

    @asset(inputs=INPUTS)
    def down(x: int = 0) -> int:
        return x + 1
    """})
    first = barca(project, "get", "down", "p.py").expect(0).json
    assert first["final_output"] == 42 and first["steps_executed"] == 2
    source = (project / "p.py").read_text().replace("inputs=INPUTS", 'inputs={"x": up}')
    (project / "p.py").write_text(source)
    again = barca(project, "get", "down", "p.py").expect(0).json
    assert again["steps_executed"] == 0  # the same inputs, written in place: the same hash


@pytest.mark.parametrize("written, extra", [
    ("inputs=mk()", 'def mk():\n        return {"x": up}\n'),
    ("inputs=INPUTS", 'INPUTS = {}\n    INPUTS["x"] = up\n'),
    ("inputs=INPUTS", 'INPUTS = {"y": up}\n    INPUTS = {"x": up}\n'),
    ("inputs=INPUTS", 'from os import environ as INPUTS\n'),
    ("inputs=dict(x=up)", ''),
    ("inputs=CONFIG.inputs", 'class CONFIG:\n        inputs = {"x": up}\n'),
])
def test_inputs_barca_cannot_read_are_a_usage_error(project: Path, written: str, extra: str):
    write(project, {"p.py": UPSTREAM + f"""
    {extra}
    @asset({written})
    def down(x: int = 0) -> int:
        return x + 1
    """})
    result = barca(project, "get", "down", "p.py").expect(2)
    error = result.envelope["error"]
    assert "p.py:down" in error and "inputs=" in error
    assert "dict literal" in result.envelope["error"]
    assert "inputs={" in result.envelope["remediation"]
    assert not (project / ".barca" / "artifacts").exists()


@pytest.mark.parametrize("written", ["serializer=pick()", "serializer=FORMATS[0]"])
def test_a_serializer_barca_cannot_read_is_a_usage_error(project: Path, written: str):
    write(project, {"p.py": f"""
    from barca import asset

    FORMATS = ["pickle"]

    def pick():
        return "pickle"

    @asset({written})
    def a() -> dict:
        return {{"x": 1}}
    """})
    result = barca(project, "get", "a", "p.py").expect(2)
    assert "serializer=" in result.envelope["error"] and "p.py:a" in result.envelope["error"]


def test_a_pipeline_file_named_like_another_never_runs_the_others_function(project: Path):
    """a/p.py and b/p.py are both module `p`: one worker running both used to run a/p.py's x
    for b/p.py:x and cache "a" as b's value (then it failed b's step); each file's steps now
    import that file, whichever worker runs them."""
    write(project, {"a/p.py": 'from barca import asset\n\n@asset()\ndef x():\n    return "a"\n',
                    "b/p.py": 'from barca import asset\n\n@asset()\ndef x():\n    return "b"\n'})
    for pool in ("1", "2"):
        shutil.rmtree(project / ".barca", ignore_errors=True)
        barca(project, "get", "a/p.py", "b/p.py", env={"BARCA_POOL_SIZE": pool}).expect(0)
        assert barca(project, "get", "a/p.py:x", "a/p.py").expect(0).json["final_output"] == "a"
        assert barca(project, "get", "b/p.py:x", "b/p.py").expect(0).json["final_output"] == "b"
