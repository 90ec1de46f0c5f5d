"""A worker keeps read-only DuckDB databases open (engine.worker.duckdb_reuse): a step's
`duckdb.connect(path, read_only=True)` gets a connection of its own to the database already
open, the file its path names from where the step stands, with what the file holds."""

from __future__ import annotations

import duckdb
import pytest

from barca.engine.worker import duckdb_reuse


@pytest.fixture
def reuse(monkeypatch):
    monkeypatch.setattr(duckdb, "connect", duckdb.connect)  # put back after the test
    monkeypatch.setattr(duckdb_reuse, "_held", {})
    duckdb_reuse.install(duckdb)
    yield duckdb.connect
    for held in duckdb_reuse._held.values():
        held.close()


def _warehouse(path, value: int) -> None:
    con = duckdb.connect(str(path))
    con.execute("create table t as select ? as v", [value])
    con.close()


def test_a_read_only_database_is_opened_once_and_each_connect_is_its_own(tmp_path, reuse,
                                                                         monkeypatch):
    _warehouse(tmp_path / "w.duckdb", 1)
    monkeypatch.chdir(tmp_path)
    first = reuse("w.duckdb", read_only=True)
    second = reuse("w.duckdb", read_only=True)
    assert first is not second
    assert first.execute("select v from t").fetchall() == [(1,)]
    assert second.execute("select v from t").fetchall() == [(1,)]
    first.execute("create temp table mine as select 1")  # a connection's own state
    assert second.execute("select count(*) from duckdb_tables() where table_name = 'mine'"
                          ).fetchall() == [(0,)]
    first.close()
    assert second.execute("select v from t").fetchall() == [(1,)]
    assert len(duckdb_reuse._held) == 1


def test_a_relative_path_names_the_file_where_the_step_stands(tmp_path, reuse, monkeypatch):
    for name, value in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        _warehouse(tmp_path / name / "w.duckdb", value)
    seen = []
    for name in ("a", "b", "a"):
        monkeypatch.chdir(tmp_path / name)
        seen.append(reuse("w.duckdb", read_only=True).execute("select v from t").fetchone()[0])
    assert seen == [1, 2, 1]


def test_read_write_connections_are_not_held(tmp_path, reuse):
    con = reuse(str(tmp_path / "rw.duckdb"))
    con.execute("create table t as select 1 as v")
    con.close()
    assert duckdb_reuse._held == {}
