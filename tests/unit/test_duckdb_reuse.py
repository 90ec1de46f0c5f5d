"""A worker keeps read-only DuckDB databases open (engine.worker.duckdb_reuse): a step's
`duckdb.connect(path, read_only=True)` gets a connection of its own to the database already
open, the file its path names from where the step stands, with what the file holds; another
configuration or a write opens the file as a fresh process would; a per-key step beside other
workers gets the cores' share of DuckDB's threads."""

from __future__ import annotations

import duckdb
import pytest

from barca.engine.worker import duckdb_reuse


@pytest.fixture
def reuse(monkeypatch):
    monkeypatch.setattr(duckdb, "connect", duckdb.connect)  # put back after the test
    monkeypatch.setattr(duckdb_reuse, "_held", {})
    monkeypatch.setattr(duckdb_reuse, "_wanted", None)
    duckdb_reuse.install(duckdb)
    yield duckdb.connect
    for held in duckdb_reuse._held.values():
        held.connection.close()


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


def test_another_configuration_or_a_write_closes_the_held_database_first(tmp_path, reuse):
    """In a fresh process the step before would have closed its connection: DuckDB refuses a
    second configuration of an open file, and a read-write open of a file open read-only."""
    path = str(tmp_path / "w.duckdb")
    _warehouse(path, 1)
    assert reuse(path, read_only=True).execute("select v from t").fetchone() == (1,)
    other = reuse(path, read_only=True, config={"threads": 1})
    assert other.execute("select current_setting('threads')").fetchone() == (1,)
    del other  # the step that opened it ended
    writer = reuse(path)
    writer.execute("update t set v = 2")
    writer.close()
    assert duckdb_reuse._held == {}
    assert reuse(path, read_only=True).execute("select v from t").fetchone() == (2,)


def test_a_per_key_step_beside_other_workers_gets_the_cores_share(tmp_path, reuse,
                                                                  monkeypatch):
    path = str(tmp_path / "w.duckdb")
    _warehouse(path, 1)
    monkeypatch.setattr(duckdb_reuse, "_CORES", 8)

    def threads(**config):
        return reuse(path, read_only=True, **config).execute(
            "select current_setting('threads')").fetchone()[0]

    default = threads()
    duckdb_reuse.side_by_side(2)
    assert threads() == min(4, default)  # never more than DuckDB's own
    duckdb_reuse.side_by_side(8)
    assert threads() == 1
    duckdb_reuse.side_by_side(16)
    assert threads() == 1
    duckdb_reuse.side_by_side(1)
    assert threads() == default
    duckdb_reuse.side_by_side(4)
    assert threads(config={"threads": 3}) == 3  # the step's own choice stands


def test_a_connection_still_in_use_keeps_duckdb_refusing_another_configuration(tmp_path,
                                                                             reuse):
    path = str(tmp_path / "w.duckdb")
    _warehouse(path, 1)
    kept = reuse(path, read_only=True)
    with pytest.raises(duckdb.ConnectionException, match="different configuration"):
        reuse(path, read_only=True, config={"threads": 1})
    assert kept.execute("select v from t").fetchone() == (1,)
