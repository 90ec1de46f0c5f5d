"""What a warm pool started for a run imports before its first fork (engine.local.warm_pool.
top_level_imports): the pipeline's top-level imports, pyarrow beside a table library, and the
library a table library's conversion calls import on first use (DuckDB's `.df()` imports
pandas), read from the source with `ast`, never by importing it."""

from __future__ import annotations

import textwrap

import pytest

from barca.engine.local.warm_pool import top_level_imports

CASES = [
    ("duckdb converting to pandas",
     """
     import duckdb
     def cleaned(r):
         return duckdb.connect("w.duckdb").execute("select 1").df()
     """, {"duckdb", "pyarrow", "pandas"}),
    ("duckdb converting to polars",
     """
     from duckdb import connect
     def cleaned(r):
         return connect().sql("select 1").pl()
     """, {"duckdb", "pyarrow", "polars"}),
    ("duckdb returning rows: nothing more",
     """
     import duckdb
     def cleaned(r):
         return duckdb.connect().execute("select 1").fetchall()
     """, {"duckdb", "pyarrow"}),
    ("no table library: a method of the same name is the pipeline's own",
     """
     import json
     def cleaned(r):
         return r.df()
     """, {"json"}),
]


@pytest.mark.parametrize("name,source,expected", CASES, ids=[c[0] for c in CASES])
def test_preloaded_modules(tmp_path, name, source, expected):
    (tmp_path / "pipeline.py").write_text(textwrap.dedent(source))
    assert top_level_imports(tmp_path, ["pipeline.py"]) == expected
