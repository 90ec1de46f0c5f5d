"""DuckDB databases a run's steps open read-only (engine.worker.duckdb_reuse), through the real
`barca` with two workers: per-key steps running side by side get the cores' share of DuckDB's
threads, a step of a whole node gets DuckDB's default, and a step that opens the file with a
configuration of its own gets it, as in a fresh process, though the worker holds the file
open for the keys before it."""

from __future__ import annotations

import os

import duckdb
import pytest

from conftest import barca, write

PIPELINE = """
import duckdb
from barca import asset, collect, partitions

def threads(con) -> int:
    return con.execute("select current_setting('threads')").fetchone()[0]

@asset(partitions={"k": partitions([f"k{i:02d}" for i in range(24)])})
def per_key(k: str) -> dict:
    con = duckdb.connect("w.duckdb", read_only=True)
    return {"threads": threads(con), "v": con.execute("select v from t").fetchone()[0]}

@asset(inputs={"per_key": collect(per_key)})
def whole(per_key: list) -> dict:
    mine = duckdb.connect("w.duckdb", read_only=True, config={"threads": 1})
    return {"own": threads(mine), "keys": len(per_key)}

@asset(inputs={"_whole": whole})
def after(_whole: dict) -> int:
    return threads(duckdb.connect("w.duckdb", read_only=True))
"""


DEFAULT = duckdb.connect().execute("select current_setting('threads')").fetchone()[0]
SHARE = max(1, (os.cpu_count() or 1) // 2)  # two workers' share of the cores


@pytest.mark.skipif(DEFAULT == SHARE, reason="DuckDB's default is the two workers' share here")
def test_per_key_steps_share_the_cores_and_a_step_may_open_its_own_configuration(project):
    write(project, {"pipeline.py": PIPELINE})
    con = duckdb.connect(str(project / "w.duckdb"))
    con.execute("create table t as select 7 as v")
    con.close()
    env = {"BARCA_POOL_SIZE": "2"}
    assert barca(project, "get", "after", "pipeline.py", "-o", "value", env=env
                 ).expect(0).json == DEFAULT
    values = barca(project, "get", "per_key", "pipeline.py", "-o", "value", env=env
                   ).expect(0).json
    assert len(values) == 24 and {v["v"] for v in values.values()} == {7}
    # a lease sent before the second worker started says one worker: DuckDB's default
    assert {v["threads"] for v in values.values()} <= {SHARE, DEFAULT}
    assert any(v["threads"] == SHARE for v in values.values())
    whole = barca(project, "get", "whole", "pipeline.py", "-o", "value", env=env).expect(0).json
    assert whole == {"own": 1, "keys": 24}
