"""Discovery is reused between commands only while every file and import lookup it used holds."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, write

PIPELINE = """
from barca import asset
from helpers import bonus


@asset()
def total() -> int:
    return 10 + bonus()
"""


def test_a_run_keeps_discovery_and_a_cached_get_reuses_it(project: Path) -> None:
    write(project, {"p.py": PIPELINE, "helpers.py": "def bonus():\n    return 1\n"})
    barca(project, "get", "total", "p.py").expect(0)
    barca(project, "get", "total", "p.py").expect(0)
    assert (project / ".barca" / "discovery.pickle").is_file()
    again = barca(project, "get", "total", "p.py").expect(0)
    assert again.json["steps_executed"] == 0 and again.json["final_output"] == 11


def test_an_edited_helper_is_seen_although_discovery_was_kept(project: Path) -> None:
    write(project, {"p.py": PIPELINE, "helpers.py": "def bonus():\n    return 1\n"})
    barca(project, "get", "total", "p.py").expect(0)
    barca(project, "get", "total", "p.py").expect(0)
    (project / "helpers.py").write_text("def bonus():\n    return 2\n")
    got = barca(project, "get", "total", "p.py").expect(0)
    assert got.json["steps_executed"] == 1 and got.json["final_output"] == 12


def test_a_new_module_that_shadows_an_import_is_seen(project: Path) -> None:
    write(project, {"p.py": PIPELINE, "helpers.py": "def bonus():\n    return 1\n"})
    barca(project, "get", "total", "p.py").expect(0)
    barca(project, "get", "total", "p.py").expect(0)
    # a package directory wins over the same-named module: the import now means other code
    write(project, {"helpers/__init__.py": "def bonus():\n    return 5\n"})
    got = barca(project, "get", "total", "p.py").expect(0)
    assert got.json["steps_executed"] == 1 and got.json["final_output"] == 15


def test_a_dry_run_writes_no_discovery_cache(project: Path) -> None:
    write(project, {"p.py": PIPELINE, "helpers.py": "def bonus():\n    return 1\n"})
    barca(project, "get", "total", "p.py", "--dry-run").expect(0)
    assert not (project / ".barca").exists()
