"""A pipeline written for the published 0.33 imports and runs unchanged: `unsafe`,
`duckdb_connection`, `group` and `BranchResultError` exist in `barca` and behave as there, and
`barca list --groups` lists the groups."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import barca, edit, write

PIPELINE = '''
import functools

import duckdb
import pyarrow as pa

from barca import (BranchResultError, ParallelError, asset, duckdb_connection, group,
                   parallel, task, unsafe)

# one-time setup of the connection relation inputs are opened on
duckdb_connection().execute("CREATE MACRO doubled(x) AS x * 2")


@asset(serializer="parquet")
def rows():
    return pa.table({"n": [1, 2, 3]})


@asset(inputs={"data": rows})
@unsafe
def model(data: duckdb.DuckDBPyRelation) -> dict:
    # the macro made at import is there: the input lives on that same connection
    count, total = data.query("data", "SELECT count(*), sum(doubled(n)) FROM data").fetchall()[0]
    return {"count": int(count), "total": int(total)}


def branch(kind: str):
    if kind == "function":
        return lambda: None  # a lambda cannot be pickled back to the caller
    return kind


@task(inputs={"result": model})
def check(result: dict) -> dict:
    try:
        parallel(functools.partial(branch, "ok"), functools.partial(branch, "function"))
    except BranchResultError as exc:
        return {"failed": [f.index for f in exc.failures],
                "kept": exc.results[0],
                "is_parallel_error": isinstance(exc, ParallelError),
                "count": result["count"]}
    return {}
'''

GROUPS = '''
preparation = group("Preparation", members=[rows], output=rows)
training = group("Training", members=[preparation, model, check], output=model,
                 description="fit and check")
'''


def test_a_033_pipeline_imports_and_runs_unchanged(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE + GROUPS})
    got = barca(project, "get", "model", "pipeline.py").expect(0).json
    assert got["final_output"] == {"count": 3, "total": 12}
    out = barca(project, "run", "check", "pipeline.py").expect(0).json["final_output"]
    assert out == {"failed": [1], "kept": "ok", "is_parallel_error": True, "count": 3}


def test_list_groups_shows_the_hierarchy_and_changes_nothing_else(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    flat = barca(project, "list", "pipeline.py").expect(0).json
    assert barca(project, "get", "model", "pipeline.py").expect(0).json["steps_executed"] == 2
    edit(project / "pipeline.py", "import functools\n", "import functools\n# grouped\n")
    (project / "pipeline.py").write_text((project / "pipeline.py").read_text() + GROUPS)
    assert barca(project, "list", "pipeline.py").expect(0).json == flat
    assert barca(project, "list", "pipeline.py", "--groups").expect(0).json == {"groups": [
        {"id": "group:pipeline.py:preparation", "name": "Preparation", "description": "",
         "members": ["pipeline.py:rows"], "output": "pipeline.py:rows"},
        {"id": "group:pipeline.py:training", "name": "Training",
         "description": "fit and check",
         "members": ["group:pipeline.py:preparation", "pipeline.py:model",
                     "pipeline.py:check"],
         "output": "pipeline.py:model"}]}
    # groups are labels: declaring, renaming or regrouping reruns nothing
    assert barca(project, "get", "model", "pipeline.py").expect(0).json["steps_executed"] == 0
    edit(project / "pipeline.py", '"Training"', '"Model training"')
    assert barca(project, "get", "model", "pipeline.py").expect(0).json["steps_executed"] == 0
    tree = barca(project, "list", "pipeline.py", "--groups", "--pretty").expect(0).stdout
    assert tree.splitlines() == [
        "Model training (group:pipeline.py:training): fit and check",
        "  Preparation (group:pipeline.py:preparation)",
        "    pipeline.py:rows *",
        "  pipeline.py:model *",
        "  pipeline.py:check",
        "(* the group's output)"]


def test_no_groups_lists_none(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    assert barca(project, "list", "pipeline.py", "--groups").expect(0).json == {"groups": []}
    assert barca(project, "list", "pipeline.py", "--groups", "--pretty").expect(
        0).stdout.strip() == "No groups declared."


@pytest.mark.parametrize("declaration, says", [
    ("g = group('g', members=[missing], output=missing)", "names no @asset"),
    ("g = group('g', members=[rows], output=model)", "output pipeline.py:model is not a member"),
    ("a = group('a', members=[rows], output=rows)\nb = group('b', members=[rows], output=rows)",
     "belongs to both"),
    ("a = group('a', members=[rows, rows], output=rows)", "listed twice"),
    ("a = group('a', members=make(), output=rows)", "members= must be a non-empty literal"),
    ("a = group('a', members=[], output=rows)", "members= must be a non-empty literal"),
    ("a = group('a', members=['rows'], output=rows)", "references, not strings"),
    ("a = group('a', members=[rows])", "output= is required"),
    ("a = group('a', members=[rows], output=rows, typo=True)", "no argument 'typo'"),
    ("a = group(name, members=[rows], output=rows)", "non-empty string literal"),
    ("a = group('a', members=[b], output=b)\nb = group('b', members=[rows], output=rows)",
     "assigned later"),
    ("model = 1\nrows = group('r', members=[check], output=check)", "also a function"),
])
def test_an_invalid_group_is_exit_2_on_every_command(project: Path, declaration: str,
                                                     says: str) -> None:
    write(project, {"pipeline.py": PIPELINE + "\n" + declaration + "\n"})
    for args in (("list", "pipeline.py"), ("get", "model", "pipeline.py"),
                 ("list", "pipeline.py", "--groups")):
        envelope = barca(project, *args).expect(2).envelope
        assert "invalid group" in envelope["error"] or "names no @asset" in envelope["error"]
        assert says in envelope["error"]
    assert not (project / ".barca" / "artifacts").exists()  # nothing ran


def test_unsafe_is_a_marker_outside_the_hash(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "model", "pipeline.py").expect(0)
    edit(project / "pipeline.py", "@unsafe\n", "")
    assert barca(project, "get", "model", "pipeline.py").expect(0).json["steps_executed"] == 0


def test_a_sensor_may_say_freshness_always(project: Path) -> None:
    write(project, {"sensors.py": """
from barca import Always, asset, sensor

@sensor(freshness=Always)
def versions() -> dict:
    return {"emea": 1}

@asset(inputs={"seen": versions})
def report(seen: dict) -> int:
    return len(seen)
"""})
    nodes = barca(project, "list", "sensors.py").expect(0).json["nodes"]
    assert nodes[0]["id"] == "sensors.py:versions" and nodes[0]["freshness"] == "always"
    got = barca(project, "get", "report", "sensors.py").expect(0)
    assert got.json["final_output"] == 1
    assert barca(project, "get", "report", "sensors.py").expect(0).statuses() == {
        "versions": "ran", "report": "cached"}  # polled by every run that reads it
