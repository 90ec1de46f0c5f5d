"""`@sink(path, serializer=None)`: an extra copy of an asset's result, written when it runs.

Real `barca` commands on real pipelines: the files a sink writes are read back from disk; a
cached step writes none, so a new or edited sink reruns its asset; a key of a partitioned
asset writes its own file, or its own directory for a dataset sink (`path/`); a sink that
fails leaves the run's exit code alone; what cannot work is exit 2 before anything runs.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from conftest import barca, edit, take_executed, write

LOG = """
def _ran(name):
    with open("executed.log", "a") as fh:
        fh.write(name + "\\n")
"""


def test_a_sink_writes_the_result_in_the_format_its_path_names(project: Path) -> None:
    out = project.parent / f"{project.name}-outside"
    write(project, {"pipeline.py": f"""
        import pandas as pd
        from barca import asset, sink

        @asset()
        @sink("exports/summary.json")
        @sink("exports/summary.pkl")
        @sink("exports/summary.data", serializer="pickle")
        @sink("{out}/summary.json")
        def summary() -> dict:
            return {{"total": 3, "regions": ["emea", "amer"]}}

        @asset()
        @sink("file://exports/table.parquet")
        @sink("file://{project}/exports/table.csv")
        def table():
            return pd.DataFrame({{"x": [1, 2], "y": ["a", "b"]}})
    """})
    result = barca(project, "get", "pipeline.py").expect(0)
    assert "SINK FAILED" not in result.stderr
    value = {"total": 3, "regions": ["emea", "amer"]}
    assert json.loads((project / "exports/summary.json").read_text()) == value
    assert pickle.loads((project / "exports/summary.pkl").read_bytes()) == value
    assert pickle.loads((project / "exports/summary.data").read_bytes()) == value
    assert json.loads((out / "summary.json").read_text()) == value
    import pandas as pd

    frame = pd.read_parquet(project / "exports/table.parquet")
    assert frame.to_dict("list") == {"x": [1, 2], "y": ["a", "b"]}
    assert (project / "exports/table.csv").read_text().splitlines() == ["x,y", "1,a", "2,b"]
    # a sink is a copy, not the result: the artifact is what readers and `get` use
    assert result.json["final_output"] == {
        "_barca_artifact": result.json["final_output"]["_barca_artifact"]}
    assert barca(project, "get", "summary", "pipeline.py").expect(0).json[
        "final_output"] == value


def test_a_cached_step_writes_no_sink_so_a_new_or_edited_sink_reruns_it(project: Path) -> None:
    write(project, {"pipeline.py": LOG + """
from barca import asset, sink

@asset()
def base() -> int:
    _ran("base")
    return 2

@asset(inputs={"base": base})
@sink("exports/doubled.json")
def doubled(base: int) -> int:
    _ran("doubled")
    return base * 2
"""})
    barca(project, "get", "doubled", "pipeline.py").expect(0)
    assert take_executed(project) == ["base", "doubled"]
    sink_file = project / "exports/doubled.json"
    assert sink_file.read_text() == "4"
    sink_file.unlink()
    cached = barca(project, "get", "doubled", "pipeline.py").expect(0)
    assert cached.statuses() == {"base": "cached", "doubled": "cached"}
    assert not sink_file.exists() and take_executed(project) == []

    edit(project / "pipeline.py", '@sink("exports/doubled.json")', '@sink("exports/d.json")')
    predicted = barca(project, "get", "doubled", "pipeline.py", "--dry-run").expect(0)
    assert predicted.steps["doubled"]["action"] == "run"
    assert "sink" in predicted.steps["doubled"]["detail"]
    edited = barca(project, "get", "doubled", "pipeline.py").expect(0)
    assert edited.statuses() == {"base": "cached", "doubled": "ran"}
    assert take_executed(project) == ["doubled"]
    assert (project / "exports/d.json").read_text() == "4"

    edit(project / "pipeline.py", '@sink("exports/d.json")',
         '@sink("exports/d.json")\n@sink("exports/d.pkl")')
    assert barca(project, "get", "doubled", "pipeline.py").expect(0).statuses()["doubled"] \
        == "ran"
    assert pickle.loads((project / "exports/d.pkl").read_bytes()) == 4
    edit(project / "pipeline.py", '@sink("exports/d.pkl")',
         '@sink("exports/d.pkl", serializer="json")')
    assert barca(project, "get", "doubled", "pipeline.py").expect(0).statuses()["doubled"] \
        == "ran"
    assert (project / "exports/d.pkl").read_text() == "4"
    assert barca(project, "get", "doubled", "pipeline.py").expect(0).statuses()["doubled"] \
        == "cached"


PARTITIONED = """
import pandas as pd
from barca import asset, partitions, sink

REGIONS = ["emea", "amer", "apac"]

@asset(partitions={"region": partitions(REGIONS)})
@sink("exports/sales.json")
@sink("exports/sales/")
def sales(region: str) -> dict:
    return {"region": region, "total": len(region)}

@asset(partitions={"region": partitions(REGIONS)}, batch="all")
@sink("exports/scored/")
@sink("exports/scored.csv")
def scored(region: list[str]):
    return pd.DataFrame({"region": region, "score": [len(r) * 10 for r in region]})

@asset(partitions={"region": partitions(REGIONS)}, batch=2)
@sink("exports/flags.json")
def flags(region: list[str]) -> dict:
    return {r: r.startswith("a") for r in region}
"""


def test_each_key_writes_its_own_file_and_a_dataset_sink_one_directory_a_key(
        project: Path) -> None:
    write(project, {"pipeline.py": PARTITIONED})
    barca(project, "get", "pipeline.py").expect(0)
    exports = project / "exports"
    for region in ("emea", "amer", "apac"):
        expected = {"region": region, "total": len(region)}
        assert json.loads((exports / f"sales_region_{region}.json").read_text()) == expected
        assert json.loads((exports / f"sales/region={region}/data.json").read_text()) == \
            expected
        assert (exports / f"scored_region_{region}.csv").read_text().splitlines() == [
            "region,score", f"{region},{len(region) * 10}"]
        assert json.loads((exports / f"flags_region_{region}.json").read_text()) == \
            region.startswith("a")
    import pyarrow.parquet as pq

    assert sorted(p.name for p in (exports / "scored").iterdir()) == [
        "region=amer", "region=apac", "region=emea"]
    for region in ("emea", "amer", "apac"):  # each key's directory holds its own rows
        rows = pq.read_table(exports / f"scored/region={region}/data.parquet").to_pylist()
        assert rows == [{"region": region, "score": 40}]
    # --partition runs (and writes the sinks of) the chosen keys only
    for path in exports.rglob("*"):
        if path.is_file():
            path.unlink()
    barca(project, "get", "sales", "pipeline.py", "--refresh", "sales", "--partition",
          "region=emea").expect(0)
    assert sorted(str(p.relative_to(exports)) for p in exports.rglob("*") if p.is_file()) == [
        "sales/region=emea/data.json", "sales_region_emea.json"]


def test_a_failing_sink_does_not_fail_the_asset(project: Path) -> None:
    write(project, {"pipeline.py": LOG + """
from barca import asset, sink

@asset()
@sink("exports/not_a_table.parquet")
@sink("exports/taken.json")
@sink("exports/linked.json")
@sink("exports/fine.json")
def summary() -> dict:
    _ran("summary")
    return {"total": 3}
"""})
    exports = project / "exports"
    (exports / "taken.json").mkdir(parents=True)
    (exports / "taken.json" / "keep.txt").write_text("mine")
    (project / "real.json").write_text("old")
    (exports / "linked.json").symlink_to(project / "real.json")
    result = barca(project, "get", "summary", "pipeline.py").expect(0)
    assert result.json["status"] == "success" and result.json["final_output"] == {"total": 3}
    failures = [line for line in result.stderr.splitlines() if "SINK FAILED" in line]
    assert len(failures) == 2, result.stderr
    assert failures[0].startswith("[barca] SINK FAILED: pipeline.py:summary: "
                                  "exports/not_a_table.parquet: SerializeError: ")
    assert "a parquet sink needs a table" in failures[0]
    assert "exports/taken.json: IsADirectoryError" in failures[1]
    assert (exports / "taken.json" / "keep.txt").read_text() == "mine"  # left as it was
    assert not (exports / "not_a_table.parquet").exists()
    assert json.loads((exports / "fine.json").read_text()) == {"total": 3}
    # a symlink at the path is kept, and what it points to is written
    assert (exports / "linked.json").is_symlink()
    assert json.loads((project / "real.json").read_text()) == {"total": 3}
    # the failure is kept with the step's output
    logs = barca(project, "logs", "--step", "summary").expect(0).stdout
    assert "[barca] SINK FAILED: exports/not_a_table.parquet: SerializeError" in logs
    # the asset succeeded, so it is cached: its sinks are not tried again
    again = barca(project, "get", "summary", "pipeline.py").expect(0)
    assert again.statuses() == {"summary": "cached"} and "SINK FAILED" not in again.stderr
    assert take_executed(project) == ["summary"]


BAD = {
    "on a task": ("from barca import sink, task\n\n@task()\n@sink('x.json')\n",
                  "@sink exports an asset's result, but f is a @task", "make it an @asset"),
    "on a sensor": ("from barca import sensor, sink\n\n@sensor()\n@sink('x.json')\n",
                    "but f is a @sensor", "make it an @asset"),
    "without an asset": ("from barca import sink\n\n@sink('x.json')\n",
                         "@sink on f, which is not an @asset", "stack it under @asset"),
    "bare": ("from barca import asset, sink\n\n@asset()\n@sink\n",
             "@sink needs the path to write to", '@sink("exports/summary.parquet")'),
    "no path": ("from barca import asset, sink\n\n@asset()\n@sink()\n",
                "@sink takes one positional argument, the path, and serializer=", "@sink("),
    "path by keyword": ("from barca import asset, sink\n\n@asset()\n@sink(path='x.json')\n",
                        "it has no argument 'path'", "@sink("),
    "two positionals": ("from barca import asset, sink\n\n@asset()\n@sink('x', 'json')\n",
                        "@sink takes one positional argument", "serializer="),
    "unknown keyword": ("from barca import asset, sink\n\n@asset()\n@sink('x', mode='w')\n",
                        "it has no argument 'mode'", "@sink("),
    "path not a string": ("from barca import asset, sink\n\n@asset()\n@sink(123)\n",
                          "the path of @sink must be a non-empty string literal", "@sink("),
    "path computed": ("from pathlib import Path\nfrom barca import asset, sink\n\n"
                      "@asset()\n@sink(Path('x.json'))\n",
                      "not `Path('x.json')`", "@sink("),
    "bad serializer": ("from barca import asset, sink\n\n@asset()\n"
                       "@sink('x.xml', serializer='xml')\n",
                       "@sink serializer= must be one of 'json', 'pickle', 'parquet', 'csv'",
                       'serializer="parquet"'),
    "same path twice": ("from barca import asset, sink\n\n@asset()\n@sink('x.json')\n"
                        "@sink('x.json', serializer='json')\n",
                        "two @sink decorators write 'x.json'", "its own path"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_sink_that_cannot_work_is_exit_2_naming_the_fix(project: Path, case: str) -> None:
    head, message, fix = BAD[case]
    (project / "pipeline.py").write_text(head + "def f() -> int:\n    return 1\n")
    for command in (["get", "pipeline.py"], ["list", "pipeline.py"]):
        bad = barca(project, *command).expect(2)
        assert bad.envelope["kind"] == "usage"
        assert bad.envelope["error"].startswith("Parse error: pipeline.py:f (line ")
        assert message in bad.envelope["error"], bad.envelope
        assert fix in bad.envelope["remediation"], bad.envelope
    assert not (project / "x.json").exists()


def test_a_sink_path_may_be_a_module_constant_and_the_decorator_stays_a_no_op(
        project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset, sink

        OUT = "exports/answer.json"

        @asset()
        @sink(OUT)
        def answer() -> int:
            return 42

        if __name__ == "__main__":
            print(answer() + 1)  # the decorators leave a plain function
    """})
    barca(project, "get", "pipeline.py").expect(0)
    assert (project / "exports/answer.json").read_text() == "42"
    import subprocess
    import sys

    plain = subprocess.run([sys.executable, "pipeline.py"], cwd=project, capture_output=True,
                           text=True, check=True)
    assert plain.stdout.strip() == "43"


def test_an_fsspec_url_without_fsspec_is_exit_2_before_anything_runs(project: Path) -> None:
    # fsspec made unimportable for this project's commands, whether or not it is installed
    (project / "shim" / "fsspec").mkdir(parents=True)
    (project / "shim" / "fsspec" / "__init__.py").write_text(
        "raise ImportError('No module named fsspec')\n")
    write(project, {"pipeline.py": LOG + """
from barca import asset, sink

@asset()
def base() -> int:
    _ran("base")
    return 1

@asset(inputs={"base": base})
@sink("memory://bucket/out.json")
def exported(base: int) -> int:
    _ran("exported")
    return base
"""})
    env = {"PYTHONPATH": str(project / "shim")}
    bad = barca(project, "get", "exported", "pipeline.py", env=env).expect(2)
    assert bad.envelope["error"] == ("sink 'memory://bucket/out.json' is an fsspec URL, and "
                                     "fsspec is not installed (@sink of pipeline.py:exported)")
    assert "pip install fsspec" in bad.envelope["remediation"]
    assert take_executed(project) == []
    # what does not write sinks still works: other targets, status, a dry run
    barca(project, "get", "base", "pipeline.py", env=env).expect(0)
    assert take_executed(project) == ["base"]
    barca(project, "status", "pipeline.py", env=env).expect(0)
    dry = barca(project, "get", "exported", "pipeline.py", "--dry-run", env=env).expect(0)
    assert dry.steps["exported"]["action"] == "run"


def test_an_fsspec_url_is_written_through_fsspec_per_key(project: Path) -> None:
    """`local://` is fsspec's own local file system: the upload path, run for real."""
    remote = project / "remote"
    write(project, {"pipeline.py": f"""
        from barca import asset, partitions, sink

        @asset(partitions={{"region": partitions(["emea", "amer"])}})
        @sink("local://{remote}/totals.json")
        @sink("local://{remote}/rows/")
        def totals(region: str) -> dict:
            return {{"region": region, "total": len(region)}}
    """})
    barca(project, "get", "totals", "pipeline.py").expect(0)
    for region in ("emea", "amer"):
        expected = {"region": region, "total": len(region)}
        assert json.loads((remote / f"totals_region_{region}.json").read_text()) == expected
        assert json.loads((remote / f"rows/region={region}/data.json").read_text()) == expected
