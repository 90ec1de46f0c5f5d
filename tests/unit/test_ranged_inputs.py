"""Lazy table inputs read in place (store.ranged_tables; a batch call's, store.batch_inputs
`lazy_input`): over a real remote store on a shared directory (`file://`, the same RemoteStore
as S3's), one project writes the results and another reads them as a second machine would.
Read in place, a batch call's table holds the same rows as `lazy_table` over local copies, in
all three libraries, with every dimension as a column, and nothing is copied here; what cannot
be read so exactly as `lazy_table` would (files of different schemas for DuckDB or polars) is
fetched whole, and so is a result no bigger than a footer read, for a step or a call.
tests/e2e/test_remote_batch_ranges.py proves the byte ranges over S3."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from barca.store import ranged_tables
from barca.store.artifacts import write_result
from barca.store.batch_inputs import in_place, lazy_input, lazy_table
from barca.store.remote_config import Remote
from barca.store.remote_store import RemoteStore

ANNOTATIONS = ["duckdb.DuckDBPyRelation", "polars.LazyFrame", "pyarrow.dataset.Dataset"]
ROWS = 10_000  # a key's table: bigger than a footer read (64 KB)


def machine(tmp_path: Path, name: str) -> RemoteStore:
    """A project's store over the shared directory `tmp_path/shared`."""
    (tmp_path / "shared").mkdir(exist_ok=True)
    remote = Remote(f"file://{tmp_path / 'shared'}", "file")
    return RemoteStore(str(tmp_path / name), ".barca/artifacts", remote, "default")


def wide(n: int, rows: int = ROWS, **extra: list) -> pa.Table:
    return pa.table({"n": [n] * rows, "text": [f"row {i:08d} of a wide table" for i in range(rows)],
                     **extra})


def rows_of(table) -> list[dict]:
    if isinstance(table, duckdb.DuckDBPyRelation):
        data = table.to_arrow_table().to_pylist()
    elif hasattr(table, "collect"):
        data = table.collect().to_dicts()
    else:
        data = table.to_table().to_pylist()
    return sorted(data, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def copies(store: RemoteStore) -> list[Path]:
    return [p for p in Path(store.local.dir).rglob("*") if p.is_file()]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_a_call_read_in_place_has_the_rows_of_local_copies_with_every_dimension(tmp_path,
                                                                                annotation):
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    dims, keys = ["day", "region"], [("d1", "emea"), ("d1", "apac"), ("d2", "emea")]
    store_keys = [f"node/{day}_{region}.parquet" for day, region in keys]
    for i, key in enumerate(store_keys):
        write_result(a, key, wide(i), "parquet")

    table = lazy_input(b, annotation, dims, keys, store_keys, ["parquet"] * 3)
    assert not copies(b)  # read in place: nothing fetched here
    local = lazy_table(annotation, dims, keys, [Path(a.local_path(k)) for k in store_keys],
                       ["parquet"] * 3)
    got = rows_of(table)
    assert got == rows_of(local) and len(got) == 3 * ROWS
    assert {(r["n"], r["day"], r["region"]) for r in got} == {
        (0, "d1", "emea"), (1, "d1", "apac"), (2, "d2", "emea")}


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_keys_already_here_and_keys_in_the_store_make_one_table(tmp_path, annotation):
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    store_keys = [f"node/k{i}.parquet" for i in range(3)]
    for i, key in enumerate(store_keys):
        write_result(a, key, wide(i, k=[f"own{i}"] * ROWS), "parquet")  # its own k column
    b.local_path(store_keys[1])  # fetched whole before, by an earlier reader

    table = in_place(b, annotation, ["k"], [("k0",), ("k1",), ("k2",)], store_keys,
                     ["parquet"] * 3)
    assert table is not None
    assert len(copies(b)) == 1
    got = rows_of(table)
    assert len(got) == 3 * ROWS
    assert {(r["n"], r["k"]) for r in got} == {(0, "own0"), (1, "own1"), (2, "own2")}


@pytest.mark.parametrize("annotation", ["duckdb.DuckDBPyRelation", "polars.LazyFrame"])
def test_files_of_different_schemas_are_fetched_whole_for_duckdb_and_polars(tmp_path,
                                                                            annotation):
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    store_keys = ["node/k0.parquet", "node/k1.parquet"]
    write_result(a, store_keys[0], wide(0), "parquet")
    write_result(a, store_keys[1], wide(1).append_column("extra", pa.array([1.5] * ROWS)),
                 "parquet")
    keys, formats = [("k0",), ("k1",)], ["parquet"] * 2
    assert in_place(b, annotation, ["k"], keys, store_keys, formats) is None
    if annotation.startswith("duckdb"):  # DuckDB unifies them by name, as locally
        table = lazy_input(b, annotation, ["k"], keys, store_keys, formats)
        assert len(copies(b)) == 2
        assert sorted({(r["n"], r["extra"], r["k"]) for r in rows_of(table)},
                      key=str) == [(0, None, "k0"), (1, 1.5, "k1")]


def test_results_no_bigger_than_a_footer_read_are_fetched_whole(tmp_path):
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    store_keys = ["node/k0.parquet", "node/k1.parquet"]
    for i, key in enumerate(store_keys):
        write_result(a, key, wide(i, rows=10), "parquet")
    annotation = "duckdb.DuckDBPyRelation"
    keys = [("k0",), ("k1",)]
    assert in_place(b, annotation, ["k"], keys, store_keys, ["parquet"] * 2) is None
    table = lazy_input(b, annotation, ["k"], keys, store_keys, ["parquet"] * 2)
    assert len(rows_of(table)) == 20 and len(copies(b)) == 2


def test_a_steps_input_no_bigger_than_a_footer_read_is_fetched_whole(tmp_path):
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    write_result(a, "node/small.parquet", wide(0, rows=10), "parquet")
    write_result(a, "node/big.parquet", wide(1), "parquet")
    assert ranged_tables.in_place(b, "node/small.parquet") is None  # the caller fetches it
    assert ranged_tables.in_place(b, "node/big.parquet").count_rows() == ROWS
    assert not copies(b)
