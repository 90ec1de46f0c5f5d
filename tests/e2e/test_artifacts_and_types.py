"""Artifacts: where they live, which format a value gets, and how a consumer reads it back.

Layout `.barca/artifacts/<file>--<node>/<run_hash>.<ext>` with `.barca/.gitignore`; JSON for
values plain JSON holds, parquet for pandas / polars / Arrow / DuckDB tables, pickle otherwise.
Inputs are read by the consumer's annotation, lazily for `duckdb.DuckDBPyRelation` and
`polars.LazyFrame`. A value is written to a temporary file and renamed, and only then recorded.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from conftest import barca, lines, write

TABLES = """
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from barca import asset

    @asset()
    def from_pandas() -> pd.DataFrame:
        return pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})

    @asset()
    def from_polars() -> pl.DataFrame:
        return pl.DataFrame({"x": [1, 2, 3, 4]})

    @asset()
    def from_arrow() -> pa.Table:
        return pa.table({"x": [1, 2, 3, 4, 5]})

    @asset()
    def from_duckdb() -> duckdb.DuckDBPyRelation:
        return duckdb.sql("SELECT range AS x FROM range(6)")

    @asset(inputs={"t": from_pandas})
    def lazy_relation(t: duckdb.DuckDBPyRelation) -> dict:
        return {"type": type(t).__name__, "sum": t.aggregate("sum(x)").fetchall()[0][0]}

    @asset(inputs={"t": from_duckdb})
    def lazy_polars(t: pl.LazyFrame) -> dict:
        return {"type": type(t).__name__,
                "sum": t.select(pl.col("x").sum()).collect().item()}

    @asset(inputs={"t": from_polars})
    def as_pandas(t: pd.DataFrame) -> dict:
        return {"type": type(t).__module__.split(".")[0] + "." + type(t).__name__, "n": len(t)}

    @asset(inputs={"t": from_duckdb})
    def as_polars(t: pl.DataFrame) -> dict:
        return {"type": type(t).__module__.split(".")[0] + "." + type(t).__name__,
                "n": t.height}

    @asset(inputs={"t": from_pandas})
    def as_arrow(t: pa.Table) -> dict:
        return {"type": type(t).__module__.split(".")[0] + "." + type(t).__name__,
                "n": t.num_rows}

    @asset(inputs={"t": from_arrow})
    def unannotated(t) -> dict:
        return {"type": type(t).__module__.split(".")[0] + "." + type(t).__name__,
                "n": len(t)}
"""


def _artifact(root: Path, node: str, result) -> Path:
    """The one artifact file of a node, checked against the run hash barca reported."""
    files = [p for p in (root / ".barca" / "artifacts" / f"p.py--{node}").iterdir()]
    assert len(files) == 1, files
    run_hash = result.steps[node]["run_hash"]
    assert files[0].name.startswith(run_hash + "."), (files[0].name, run_hash)
    return files[0]


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> tuple[Path, object]:
    """One run of the table pipeline, shared: importing pandas, polars and duckdb is slow."""
    root = write(tmp_path_factory.mktemp("tables"), {"barca.toml": "", "p.py": TABLES})
    return root, barca(root, "get", "p.py", env={"BARCA_POOL_SIZE": "2"}).expect(0)


@pytest.mark.parametrize("node", ["from_pandas", "from_polars", "from_arrow", "from_duckdb"])
def test_table_results_are_stored_as_parquet(tables, node: str) -> None:
    root, result = tables
    path = _artifact(root, node, result)
    assert path.suffix == ".parquet"
    data = path.read_bytes()
    assert data[:4] == b"PAR1" and data[-4:] == b"PAR1"


@pytest.mark.parametrize("node, expected", [
    ("lazy_relation", {"type": "DuckDBPyRelation", "sum": 6}),
    ("lazy_polars", {"type": "LazyFrame", "sum": 15}),
    ("as_pandas", {"type": "pandas.DataFrame", "n": 4}),
    ("as_polars", {"type": "polars.DataFrame", "n": 6}),
    ("as_arrow", {"type": "pyarrow.Table", "n": 3}),
    ("unannotated", {"type": "pandas.DataFrame", "n": 5}),
])
def test_consumer_annotation_chooses_how_a_table_is_read(tables, node: str, expected) -> None:
    root, result = tables
    assert result.steps[node]["status"] == "ran"
    assert json.loads(_artifact(root, node, result).read_bytes()) == expected


def test_table_final_output_is_a_pointer_to_the_parquet_file(tables) -> None:
    root, _ = tables
    result = barca(root, "get", "from_pandas", "p.py").expect(0)
    pointer = result.json["final_output"]["_barca_artifact"]
    assert pointer["format"] == "parquet"
    path = root / pointer["path"]
    assert path.is_file() and pointer["size_bytes"] == path.stat().st_size


def test_layout_is_file_node_dir_and_run_hash_with_gitignore(project: Path) -> None:
    write(project, {"jobs/p.py": """
        from barca import asset

        @asset()
        def numbers() -> dict:
            return {"a": [1, 2.5, None, True, "x"]}
    """})
    result = barca(project, "get", "numbers", "jobs/p.py").expect(0)
    run_hash = result.steps["numbers"]["run_hash"]
    path = project / ".barca" / "artifacts" / "jobs/p.py--numbers" / f"{run_hash}.json"
    assert path.is_file()
    assert json.loads(path.read_bytes()) == {"a": [1, 2.5, None, True, "x"]}
    assert (project / ".barca" / "metadata.db").is_file()
    gitignore = (project / ".barca" / ".gitignore").read_text().split()
    assert "*" in gitignore  # nothing under .barca/ is ever committed
    cached = barca(project, "get", "numbers", "jobs/p.py").expect(0)
    assert cached.steps["numbers"]["artifact"] == str(path.relative_to(project))


def test_json_values_are_json_and_other_values_are_pickles(project: Path) -> None:
    write(project, {"p.py": """
        import datetime
        from barca import asset

        class Point:
            def __init__(self, x):
                self.x = x

        @asset()
        def nothing() -> None:
            return None

        @asset()
        def words() -> list:
            return ["a", "b"]

        @asset()
        def a_set() -> set:
            return {3, 1, 2}

        @asset()
        def a_point() -> Point:
            return Point(7)

        @asset()
        def a_date() -> datetime.date:
            return datetime.date(2024, 1, 2)

        @asset(inputs={"s": a_set, "p": a_point, "d": a_date})
        def reader(s: set, p: Point, d: datetime.date) -> dict:
            return {"s": sorted(s), "set": isinstance(s, set), "x": p.x,
                    "point": type(p).__name__, "d": d.isoformat()}
    """})
    result = barca(project, "get", "p.py").expect(0)
    suffix = {n: _artifact(project, n, result).suffix for n in
              ("nothing", "words", "a_set", "a_point", "a_date", "reader")}
    assert suffix == {"nothing": ".json", "words": ".json", "a_set": ".pkl",
                      "a_point": ".pkl", "a_date": ".pkl", "reader": ".json"}
    assert pickle.loads(_artifact(project, "a_set", result).read_bytes()) == {1, 2, 3}
    reader = barca(project, "get", "reader", "p.py").expect(0).json["final_output"]
    assert reader == {"s": [1, 2, 3], "set": True, "x": 7, "point": "Point",
                      "d": "2024-01-02"}
    pointer = barca(project, "get", "a_set", "p.py").expect(0).json["final_output"]
    assert pointer["_barca_artifact"]["format"] == "pickle"


@pytest.mark.parametrize("expression, check", [
    pytest.param('float("nan")', "isinstance(v, float) and v != v", id="nan"),
    pytest.param('{1: "a", 2: "b"}', 'v[1] == "a"', id="int-keys"),
], )
def test_value_reads_back_equal_in_its_consumer(project: Path, expression: str, check: str
                                               ) -> None:
    write(project, {"p.py": f"""
        from barca import asset

        @asset()
        def value():
            return {expression}

        @asset(inputs={{"v": value}})
        def check(v) -> bool:
            try:
                return bool({check})
            except Exception:
                return False
    """})
    assert barca(project, "get", "check", "p.py").expect(0).json["final_output"] is True


def test_value_that_cannot_be_written_fails_the_step_and_is_not_recorded(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset(serializer="json")
        def not_json() -> set:
            with open("attempts.log", "a") as fh:
                fh.write("x\\n")
            return {1, 2}

        @asset()
        def fine() -> int:
            return 1
    """})
    result = barca(project, "get", "p.py").expect(1)
    assert result.json["status"] == "failed"
    assert result.json["failed_node"] == "p.py:not_json"
    node_dir = project / ".barca" / "artifacts" / "p.py--not_json"
    assert not node_dir.exists() or not list(node_dir.iterdir())  # no file, no temp file
    again = barca(project, "get", "p.py", "--dry-run").expect(0)
    assert again.statuses() == {"not_json": "run", "fine": "cached"}
    assert len(lines(project / "attempts.log")) == 1
