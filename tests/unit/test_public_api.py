"""The public surface: `barca.__all__` is pinned, and `import barca` stays light.

A name becomes public only by being added here on purpose (httpx's test_exported_members).
Each check runs in a fresh interpreter, so what other tests imported cannot hide or cause a
failure.
"""

from __future__ import annotations

import json
import subprocess
import sys


PUBLIC = [
    "Always", "BarcaError", "BranchResultError", "Cancelled", "Failed", "InfraError", "Manual",
    "ParallelError", "Schedule", "StepFailed", "UsageError", "asset", "asset_ref", "batches",
    "batches_by", "collect", "duckdb_connection", "get", "group", "history", "parallel",
    "parallel_map", "partitions", "partitions_from", "plan", "run", "sensor", "signed_url",
    "sink", "stats", "task", "unsafe",
]


def fresh(code: str) -> object:
    """Run `code` in a new interpreter; it prints one JSON document, returned parsed."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_all_is_the_pinned_sorted_list_of_public_names():
    import barca

    assert barca.__all__ == PUBLIC
    assert barca.__all__ == sorted(barca.__all__)


def test_all_equals_the_public_non_module_names_the_package_defines():
    """Every public name resolved (they load on first use), the package defines no other."""
    names = fresh(
        "import barca, json, types\n"
        "from barca import *\n"
        "print(json.dumps({'all': barca.__all__, 'public': sorted(\n"
        "    n for n, v in vars(barca).items()\n"
        "    if not n.startswith('_') and not isinstance(v, types.ModuleType))}))")
    assert names["public"] == names["all"] == PUBLIC


def test_every_exported_name_resolves():
    import barca

    missing = [name for name in barca.__all__ if getattr(barca, name, None) is None]
    assert missing == []


def test_exported_errors_share_one_root():
    import barca

    for name in ("Cancelled", "InfraError", "StepFailed", "UsageError"):
        assert issubclass(getattr(barca, name), barca.BarcaError), name


def test_importing_barca_imports_no_table_library():
    loaded = subprocess.run(
        [sys.executable, "-c", "import barca, sys; print(sorted(m for m in "
         "('duckdb','pyarrow','pandas','polars') if m in sys.modules))"],
        capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_barca_run_stays_the_function_after_a_first_call_loaded_the_engine():
    kinds = fresh(
        "import barca, json, types\n"
        "before = callable(barca.run)\n"
        "import barca.engine.driver  # what barca.get() and barca.run() import on first use\n"
        "print(json.dumps([before, callable(barca.run)]))")
    assert kinds == [True, True]


def test_barca_plan_stays_the_function_after_the_planner_package_loaded():
    """The planner package is `barca.planner`: loading it never shadows `barca.plan()`."""
    kinds = fresh(
        "import barca, json, types\n"
        "before = callable(barca.plan)\n"
        "import barca.planner.planner\n"
        "from barca.planner.model import NodePlan\n"
        "print(json.dumps([before, callable(barca.plan)]))")
    assert kinds == [True, True]


def test_a_submodule_is_reached_as_an_attribute_without_importing_it_first():
    """Scripts written for the published barca call `barca.api.run` after `import barca`."""
    found = fresh("import barca, json\n"
                  "print(json.dumps([callable(barca.api.run), hasattr(barca, 'no_such')]))")
    assert found == [True, False]
