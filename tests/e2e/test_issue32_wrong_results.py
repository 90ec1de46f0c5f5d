"""Issue 32's wrong results and crashes, on the real CLI with real workers.

1. Two pipeline directories each with their own `helpers.py`, both `from helpers import value`:
   one worker used to hand the second file the first one's module, recording its value as the
   second's result. The layout is refused before any step runs (exit 2 naming the module, both
   files and the qualified import), at pool size 1 and 2; what discovery cannot see (a module
   one directory has and another pipeline's root import would find, a computed import name) is
   kept apart in the worker.
2. `collect()` around an underscore-named input hands the list (the name rule used to win).
3. A dry run whose `partitions_from` source's stored file is gone plans it again instead of
   crashing.
2 and 3 are planning rules, tested at the driver level in tests/engine/test_issue32_rules.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import barca, edit, write

POOLS = pytest.mark.parametrize("pool", ["1", "2"])


def reader(name: str, module: str = "helpers") -> str:
    return f"""
        from barca import asset
        from {module} import value

        @asset()
        def {name}():
            return value()
    """


def returns(number: int) -> str:
    return f"def value():\n    return {number}\n"


def values(result) -> dict:
    return {name: target["final_output"] for name, target in result.json["targets"].items()}


def artifacts(project: Path) -> list[Path]:
    return sorted((project / ".barca" / "artifacts").rglob("*.*"))


# -- 1. one module name, two files ---------------------------------------------------------

@POOLS
def test_same_named_helpers_in_two_directories_are_refused_then_computed_once_qualified(
        project: Path, pool: str):
    write(project, {"a/pa.py": reader("ra"), "a/helpers.py": returns(11),
                    "b/pb.py": reader("rb"), "b/helpers.py": returns(22)})
    refused = barca(project, "get", "ra,rb", ".", env={"BARCA_POOL_SIZE": pool}).expect(2)
    error, fix = refused.envelope["error"], refused.envelope["remediation"]
    assert "module 'helpers'" in error
    assert "a/helpers.py for a/pa.py" in error and "b/helpers.py for b/pb.py" in error
    assert "`from a.helpers import value` in a/pa.py" in fix
    assert "`from b.helpers import value` in b/pb.py" in fix
    assert artifacts(project) == []  # no user code ran, nothing was recorded

    edit(project / "a/pa.py", "from helpers", "from a.helpers")
    edit(project / "b/pb.py", "from helpers", "from b.helpers")
    first = barca(project, "get", "ra,rb", ".", env={"BARCA_POOL_SIZE": pool}).expect(0)
    assert values(first) == {"ra": 11, "rb": 22}
    other = "2" if pool == "1" else "1"
    again = barca(project, "get", "ra,rb", ".", env={"BARCA_POOL_SIZE": other}).expect(0)
    assert values(again) == {"ra": 11, "rb": 22} and again.json["steps_executed"] == 0


@POOLS
def test_pipeline_files_named_alike_with_their_own_helpers_are_refused(project: Path,
                                                                       pool: str):
    """Equal stems used to fail the second file's step at pool size 1 and pass at 2."""
    write(project, {"a/p.py": reader("ra"), "a/helpers.py": returns(11),
                    "b/p.py": reader("rb"), "b/helpers.py": returns(22)})
    refused = barca(project, "get", "ra,rb", ".", env={"BARCA_POOL_SIZE": pool}).expect(2)
    assert "a/helpers.py for a/p.py" in refused.envelope["error"]
    assert "b/helpers.py for b/p.py" in refused.envelope["error"]
    assert artifacts(project) == []


def test_a_clash_reached_through_a_helper_or_inside_a_function_is_refused(project: Path):
    """The import that clashes may sit in a module the pipeline imports, or in a function
    body (it runs when the function does): both count."""
    write(project, {
        "a/pa.py": reader("ra", "tools"),
        "a/tools.py": "from helpers import base\n\n\ndef value():\n    return base() + 1\n",
        "a/helpers.py": "def base():\n    return 10\n",
        "b/pb.py": """
            from barca import asset

            @asset()
            def rb():
                import helpers
                return helpers.base()
        """,
        "b/helpers.py": "def base():\n    return 20\n",
    })
    refused = barca(project, "get", "ra,rb", ".", env={"BARCA_POOL_SIZE": "1"}).expect(2)
    error, fix = refused.envelope["error"], refused.envelope["remediation"]
    assert "a/helpers.py for a/pa.py (imported in a/tools.py)" in error
    assert "b/helpers.py for b/pb.py" in error
    assert "`from a.helpers import base` in a/tools.py" in fix
    assert "`from b import helpers` in b/pb.py" in fix
    assert artifacts(project) == []


def at_each_pool_size(project: Path) -> list[dict]:
    """`get ra,rb .` at pool size 1, then afresh at 2: the values each computed."""
    out = []
    for pool in ("1", "2"):
        shutil.rmtree(project / ".barca", ignore_errors=True)
        result = barca(project, "get", "ra,rb", ".", env={"BARCA_POOL_SIZE": pool}).expect(0)
        out.append(values(result))
    return out


def test_a_module_of_one_pipeline_directory_never_shadows_anothers_root_import(
        project: Path):
    """a/helpers.py exists but a/pa.py does not import it; b/pb.py imports the root's
    helpers.py. A worker that had imported a/pa.py kept a/ on its path and gave b/pb.py
    a/helpers.py."""
    write(project, {"a/pa.py": "from barca import asset\n\n@asset()\ndef ra():\n    return 1\n",
                    "a/helpers.py": returns(11),
                    "b/pb.py": reader("rb"), "helpers.py": returns(5)})
    assert at_each_pool_size(project) == [{"ra": 1, "rb": 5}] * 2


def test_imports_no_parser_sees_still_get_their_own_directorys_module(project: Path):
    """`importlib.import_module(name)` is invisible to discovery: the worker keeps each
    pipeline directory's modules apart (they used to be {'ra': 11, 'rb': 11} at pool 1)."""
    dynamic = """
        import importlib

        from barca import asset

        @asset()
        def {name}():
            return importlib.import_module("help" + "ers").value()
    """
    write(project, {"a/pa.py": dynamic.replace("{name}", "ra"), "a/helpers.py": returns(11),
                    "b/pb.py": dynamic.replace("{name}", "rb"), "b/helpers.py": returns(22)})
    assert at_each_pool_size(project) == [{"ra": 11, "rb": 22}] * 2


@POOLS
def test_shared_root_helpers_and_package_pipelines_still_work(project: Path, pool: str):
    """One helpers.py at the root for files in two directories; a pipeline inside a package
    (pkg/__init__.py) imports `helpers` from the root, as its worker does, not pkg/helpers.py:
    discovery used to hash pkg/helpers.py for it, so an edit of the root's file reran
    nothing and kept the old value."""
    write(project, {"a/pa.py": reader("ra"), "b/pb.py": reader("rb"),
                    "helpers.py": returns(5), "pkg/__init__.py": "",
                    "pkg/helpers.py": returns(100), "pkg/pc.py": reader("rc")})
    result = barca(project, "get", "ra,rb,rc", ".", env={"BARCA_POOL_SIZE": pool}).expect(0)
    assert values(result) == {"ra": 5, "rb": 5, "rc": 5}
    edit(project / "helpers.py", "return 5", "return 6")
    again = barca(project, "get", "ra,rb,rc", ".", env={"BARCA_POOL_SIZE": pool}).expect(0)
    assert values(again) == {"ra": 6, "rb": 6, "rc": 6}


def test_a_result_recorded_under_one_import_spelling_is_not_served_to_another(project: Path):
    """`helpers` and `b.helpers` are one file to discovery but may be two modules to a worker
    (the old build recorded rb = 11 under the bare spelling): qualifying the import computes
    the value again instead of serving what the other spelling recorded."""
    write(project, {"b/pb.py": reader("rb"), "b/helpers.py": returns(22)})
    assert barca(project, "get", "rb", ".").expect(0).json["final_output"] == 22
    edit(project / "b" / "pb.py", "from helpers import value", "from b.helpers import value")
    again = barca(project, "get", "rb", ".").expect(0).json
    assert again["steps_executed"] == 1 and again["final_output"] == 22
    assert barca(project, "get", "rb", ".").expect(0).json["steps_executed"] == 0
