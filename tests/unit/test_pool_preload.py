"""What a warm pool started for a run imports (engine.local.warm_pool.preloads): first, before
it answers, the pipeline's top-level imports; later, once it has forked the first worker,
pyarrow beside a table library and the library a table library's conversion calls import on
first use (DuckDB's `.df()` imports pandas). Read from the source with `ast`, never by
importing it."""

from __future__ import annotations

import textwrap

import pytest

from barca.engine.local.warm_pool import Preloads, preloads

CASES = [
    ("duckdb converting to pandas",
     """
     import duckdb
     def cleaned(r):
         return duckdb.connect("w.duckdb").execute("select 1").df()
     """, {"duckdb"}, {"pyarrow", "pandas"}),
    ("duckdb converting to polars",
     """
     from duckdb import connect
     def cleaned(r):
         return connect().sql("select 1").pl()
     """, {"duckdb"}, {"pyarrow", "polars"}),
    ("duckdb returning rows: nothing more",
     """
     import duckdb
     def cleaned(r):
         return duckdb.connect().execute("select 1").fetchall()
     """, {"duckdb"}, {"pyarrow"}),
    ("pandas imported at the top: first, not again later",
     """
     import duckdb
     import pandas as pd
     def cleaned(r):
         return duckdb.connect().execute("select 1").df()
     """, {"duckdb", "pandas"}, {"pyarrow"}),
    ("no table library: a method of the same name is the pipeline's own",
     """
     import json
     def cleaned(r):
         return r.df()
     """, {"json"}, set()),
]


@pytest.mark.parametrize("name,source,first,later", CASES, ids=[c[0] for c in CASES])
def test_preloaded_modules(tmp_path, name, source, first, later):
    (tmp_path / "pipeline.py").write_text(textwrap.dedent(source))
    found = preloads(tmp_path, ["pipeline.py"])
    assert (found.first, found.later) == (first, later)


def test_the_fork_servers_arguments_name_what_comes_later_after_a_separator():
    assert Preloads({"duckdb", "pandas"}, {"pandas", "pyarrow"}).argv() == \
        ["duckdb", "pandas", "--", "pyarrow"]
    assert Preloads({"json"}).argv() == ["json"]
