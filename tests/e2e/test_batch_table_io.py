"""Tables in and out of batch calls, on the real CLI (`barca docs batch`, "Writing a batch
function"): a lazy table input in each of the three libraries (DuckDB, polars, pyarrow
dataset) covers the call's keys with the dimension as a column; an input whose artifacts are
not tables is a step error naming `dict[str, T]`; a table result from DuckDB, polars or Arrow
is split per key, each key's rows sorted so that the same rows in another order give the same
bytes (and a `cutoff=True` reader stays cached); a row of a key the call was not given fails
the whole call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, take_calls, write

LOG_CALL = """
    import json

    def _call(node, *what):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, *what]) + "\\n")
"""

UPSTREAM = LOG_CALL + """
    import pandas as pd
    from barca import asset, partitions, partitions_from

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def cleaned(k: str) -> pd.DataFrame:
        return pd.DataFrame({"amount": [1, 2] if k == "a" else [10]})
"""

LAZY_READERS = {
    "polars": """
    import polars as pl

    @asset(partitions={"k": partitions_from(cleaned)}, batch="all")
    def scored(k: list[str], cleaned: pl.LazyFrame) -> dict:
        rows = cleaned.group_by("k").agg(pl.col("amount").sum()).collect().rows()
        _call("scored", k, sorted([list(r) for r in rows]))
        return dict(rows)
""",
    "arrow": """
    import pyarrow.dataset as ds

    @asset(partitions={"k": partitions_from(cleaned)}, batch="all")
    def scored(k: list[str], cleaned: ds.Dataset) -> dict:
        table = cleaned.to_table()
        totals = {}
        for key, amount in zip(table.column("k").to_pylist(), table.column("amount").to_pylist()):
            totals[key] = totals.get(key, 0) + amount
        _call("scored", k, sorted([key, n] for key, n in totals.items()))
        return totals
""",
}


@pytest.mark.parametrize("library", sorted(LAZY_READERS))
def test_a_lazy_input_in_polars_and_arrow_covers_the_calls_keys(project: Path,
                                                                 library: str) -> None:
    write(project, {"pipeline.py": UPSTREAM + LAZY_READERS[library]})
    got = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(project) == {"scored": [[["a", "b", "c"],
                                               [["a", 3], ["b", 10], ["c", 10]]]]}
    assert got.json["final_output"] == {"k=a": 3, "k=b": 10, "k=c": 10}


NOT_TABLES = """
    import duckdb
    from barca import asset, partitions, partitions_from

    @asset(partitions={"k": partitions(["a", "b"])})
    def cleaned(k: str) -> dict:
        return {"k": k}                        # a JSON object: not a table

    @asset(partitions={"k": partitions_from(cleaned)}, batch="all")
    def scored(k: list[str], cleaned: duckdb.DuckDBPyRelation) -> dict:
        return {key: 1 for key in k}
"""


def test_a_lazy_input_over_artifacts_that_are_not_tables_names_the_dict_form(
        project: Path) -> None:
    write(project, {"pipeline.py": NOT_TABLES})
    failed = barca(project, "get", "scored", "pipeline.py").expect(1)
    assert "dict[str, T]" in failed.json["error"], failed.json
    run_id = barca(project, "history", "--limit", "1").expect(0).json["runs"][0]["run_id"]
    steps = barca(project, "history", run_id, "--json").expect(0).json["steps"]
    scored = [s for s in steps if s["node_id"] == "pipeline.py:scored"]
    assert len(scored) == 2 and {s["status"] for s in scored} == {"failed"}
    assert all("dict[str, T]" in s["error_message"] for s in scored)


PRODUCERS = {
    "duckdb": """
    import duckdb

    def make(rows):
        values = ", ".join(f"('{k}', {n})" for k, n in rows)
        return duckdb.sql(f"select * from (values {values}) t(k, amount)")
""",
    "polars": """
    import polars as pl

    def make(rows):
        return pl.DataFrame({"k": [k for k, _ in rows], "amount": [n for _, n in rows]})
""",
    "arrow": """
    import pyarrow as pa

    def make(rows):
        return pa.table({"k": [k for k, _ in rows], "amount": [n for _, n in rows]})
""",
}

TABLE_RESULT = LOG_CALL + """
    from pathlib import Path
    from barca import asset, partitions, partitions_from
{producer}
    @asset(partitions={{"k": partitions(["a", "b", "empty"])}}, batch="all")
    def table(k: list[str]):
        rows = [("a", 1), ("b", 3), ("b", 2), ("b", 3)]
        if Path("reversed").exists():
            rows.reverse()
        if Path("extra").exists():
            rows.append(("zz", 9))
        _call("table", k)
        return make(rows)

    @asset(partitions={{"k": partitions_from(table)}}, batch="all")
    def counted(k: list[str], table: dict) -> dict:
        _call("counted", k)
        return {{key: len(table[key]) for key in k}}
"""


def _artifacts(project: Path, run_id: str, node: str) -> dict[str, bytes]:
    steps = barca(project, "history", run_id, "--json").expect(0).json["steps"]
    return {s["partition_key"]: (project / s["artifact_path"]).read_bytes()
            for s in steps if s["node_id"] == f"pipeline.py:{node}"}


@pytest.mark.parametrize("library", sorted(PRODUCERS))
def test_a_table_result_is_split_per_key_sorted_and_byte_stable(project: Path,
                                                                library: str) -> None:
    import pyarrow.parquet as pq

    write(project, {"pipeline.py": TABLE_RESULT.format(producer=PRODUCERS[library])})
    first = barca(project, "get", "table", "pipeline.py").expect(0)
    take_calls(project)
    files = _artifacts(project, first.json["run_id"], "table")
    assert set(files) == {"k=a", "k=b", "k=empty"}
    by_key = {key: pq.read_table(
        project / next(s["artifact_path"] for s in barca(
            project, "history", first.json["run_id"], "--json").json["steps"]
            if s["partition_key"] == key)).to_pylist() for key in files}
    assert by_key["k=b"] == [{"k": "b", "amount": 2}, {"k": "b", "amount": 3},
                             {"k": "b", "amount": 3}]  # every column sorted
    assert by_key["k=a"] == [{"k": "a", "amount": 1}] and by_key["k=empty"] == []

    # the same rows in another order: the same bytes, per key
    (project / "reversed").write_text("")
    again = barca(project, "get", "table", "pipeline.py", "--refresh", "table").expect(0)
    assert _artifacts(project, again.json["run_id"], "table") == files


def test_same_rows_in_another_order_keep_a_cutoff_reader_cached(project: Path) -> None:
    source = TABLE_RESULT.format(producer=PRODUCERS["duckdb"]).replace(
        '@asset(partitions={"k": partitions(["a", "b", "empty"])}, batch="all")\n'
        '    def table(', '@asset(partitions={"k": partitions(["a", "b", "empty"])}, '
        'batch="all", cutoff=True)\n    def table(')
    assert "cutoff=True" in source
    write(project, {"pipeline.py": source})
    barca(project, "get", "counted", "pipeline.py").expect(0)
    assert take_calls(project) == {"table": [["a", "b", "empty"]],
                                   "counted": [["a", "b", "empty"]]}
    (project / "reversed").write_text("")
    got = barca(project, "get", "counted", "pipeline.py", "--refresh", "table",
                "--no-cascade").expect(0)
    assert take_calls(project) == {"table": [["a", "b", "empty"]]}  # counted stays cached
    assert got.json["final_output"] == {"k=a": 1, "k=b": 3, "k=empty": 0}


def test_a_row_of_a_key_the_call_was_not_given_fails_the_whole_call(project: Path) -> None:
    write(project, {"pipeline.py": TABLE_RESULT.format(producer=PRODUCERS["arrow"])})
    (project / "extra").write_text("")
    failed = barca(project, "get", "table", "pipeline.py").expect(1)
    assert "k=zz" in failed.json["error"] and "not one of this call's keys" in \
        failed.json["error"], failed.json
    run_id = barca(project, "history", "--limit", "1").expect(0).json["runs"][0]["run_id"]
    steps = barca(project, "history", run_id, "--json").expect(0).json["steps"]
    assert sorted(s["status"] for s in steps) == ["failed"] * 3
    assert not list((project / ".barca" / "artifacts").glob("*/*.parquet"))


TWO_DIMENSIONS = LOG_CALL + """
    import duckdb
    import pandas as pd
    from barca import asset, partitions, partitions_from

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["1", "2"])})
    def sales(region: str, day: str) -> pd.DataFrame:
        return pd.DataFrame({"amount": [len(region) * int(day)]})

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["1", "2"])},
           batch="all", inputs={"sales": sales})
    def total(region: list, day: list, sales: duckdb.DuckDBPyRelation) -> dict:
        rows = sales.aggregate("day, region, sum(amount)::INTEGER", "day, region").fetchall()
        _call("total", sorted(list(r) for r in rows))
        return {(d, r): n for d, r, n in rows}
"""


def test_a_lazy_input_of_two_dimensions_carries_both_as_columns(project: Path) -> None:
    write(project, {"pipeline.py": TWO_DIMENSIONS})
    got = barca(project, "get", "total", "pipeline.py").expect(0)
    assert take_calls(project) == {"total": [[["1", "amer", 4], ["1", "emea", 4],
                                              ["2", "amer", 8], ["2", "emea", 8]]]}
    assert got.json["final_output"] == {"day=1,region=amer": 4, "day=1,region=emea": 4,
                                        "day=2,region=amer": 8, "day=2,region=emea": 8}
    assert json.dumps(got.json["final_output"])  # plain JSON values
