"""A forced table format (`serializer="parquet"` or `"csv"`) on a value that is not a table is
stored as pickle, and said: a `[barca] warning:` line on stderr naming the node and an entry
in `warnings[]`, once per node; a real table gives no warning."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, db_rows, write

PIPELINE = """
    import pyarrow as pa
    from barca import asset, partitions

    @asset(serializer="parquet")
    def settings() -> dict:
        return {"threshold": 3}

    @asset(serializer="parquet")
    def table() -> pa.Table:
        return pa.table({"x": [1, 2]})

    @asset(partitions={"k": partitions(["a", "b", "c"])}, serializer="csv")
    def mixed(k: str):
        return pa.table({"k": [k]}) if k == "a" else {"k": k}

    @asset(inputs={"settings": settings})
    def uses(settings: dict) -> int:
        return settings["threshold"] * 2
"""


def test_a_forced_parquet_on_a_dict_is_stored_as_pickle_with_a_warning(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    got = barca(tmp_path, "get", "uses,table,mixed", "pipeline.py").expect(0)
    message = ('pipeline.py:settings: serializer="parquet" needs a table (pandas, polars, Arrow '
               'or DuckDB), but returned another value; stored as pickle instead')
    assert f"[barca] warning: {message}" in got.stderr.splitlines()
    partial = ('pipeline.py:mixed: serializer="csv" needs a table (pandas, polars, Arrow or '
               'DuckDB), but 2 of 3 keys (k=b, ...) returned another value; stored as pickle '
               'instead')
    assert f"[barca] warning: {partial}" in got.stderr.splitlines()
    assert sorted(got.json["warnings"], key=lambda w: w["node"]) == [
        {"kind": "serializer_fallback", "node": "pipeline.py:mixed", "param": None,
         "message": partial},
        {"kind": "serializer_fallback", "node": "pipeline.py:settings", "param": None,
         "message": message}]
    assert "pipeline.py:table" not in got.stderr
    # the value comes back whole, from pickle
    assert got.json["targets"]["uses"]["final_output"] == 6
    formats = [f for (f,) in db_rows(tmp_path, "SELECT format FROM materializations WHERE "
                                     "status = 'success' AND node_id != 'pipeline.py:uses'")]
    assert sorted(formats) == ["csv", "parquet", "pickle", "pickle", "pickle"]
    stored = sorted(p.suffix for p in (tmp_path / ".barca" / "artifacts").rglob("*.*"))
    assert stored.count(".parquet") == 1 and stored.count(".csv") == 1  # tables: own files
    # a cached run writes nothing, so it has nothing to say
    again = barca(tmp_path, "get", "uses", "pipeline.py").expect(0)
    assert again.json["warnings"] == [] and "warning" not in again.stderr
