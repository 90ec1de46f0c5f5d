"""Batch tables: lazy table inputs over many keys' artifacts (store.batch_inputs), and a table
result split per key (store.batch_split) into a local artifact store.

Real files in tmp_path throughout; the libraries are the real ones.
"""

from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from barca.store import batch_split
from barca.store.batch_inputs import BatchInputError, lazy_table
from barca.store.batch_split import BatchResultError
from barca.store.local_files import digest_file
from barca.store.local_store import LocalStore

def split_table(value, dims, key_values, targets: list[Path]):
    """store.batch_split.split_table into a local store two levels above the files, so that
    `targets` (`<store>/<node>/<file>`) are its keys."""
    base = Path(os.path.commonpath([t.parent.parent for t in targets])) if targets else Path("/")
    keys = [t.relative_to(base).as_posix() for t in targets]
    return batch_split.split_table(value, dims, key_values, LocalStore(base, str(base)), keys)


ANNOTATIONS = ["duckdb.DuckDBPyRelation", "polars.LazyFrame", "pyarrow.dataset.Dataset"]


def rows_of(table) -> list[dict]:
    """Any lazy table's rows as sorted dicts, so the three libraries compare alike."""
    if isinstance(table, duckdb.DuckDBPyRelation):
        data = table.to_arrow_table().to_pylist()
    elif isinstance(table, pl.LazyFrame):
        data = table.collect().to_dicts()
    else:
        data = table.to_table().to_pylist()
    return sorted(data, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def columns_of(table) -> list[str]:
    if isinstance(table, duckdb.DuckDBPyRelation):
        return table.columns
    if isinstance(table, pl.LazyFrame):
        return table.collect_schema().names()
    return table.schema.names


def write(path: Path, fmt: str, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(records), path)
    elif fmt == "csv":
        pd.DataFrame(records).to_csv(path, index=False)
    elif fmt == "json":
        path.write_text(json.dumps(records))
    elif fmt == "pickle":
        path.write_bytes(pickle.dumps(records))
    return path


def artifacts(tmp_path: Path, fmt: str, per_key: dict[str, list[dict]]) -> list[Path]:
    return [write(tmp_path / f"node_retailer_{k}" / f"abc.{fmt}", fmt, rows)
            for k, rows in per_key.items()]


# --- lazy_table ------------------------------------------------------------------------------

@pytest.mark.parametrize("annotation", ANNOTATIONS + ["pl.LazyFrame", "ds.Dataset"])
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_one_lazy_table_over_every_keys_artifact_with_the_dimension_as_a_column(
        tmp_path, annotation, fmt):
    per_key = {"r1": [{"amount": 1}, {"amount": 2}], "r2": [{"amount": 3}], "r3": [{"amount": 4}]}
    paths = artifacts(tmp_path, fmt, per_key)
    table = lazy_table(annotation, ["retailer"], [(k,) for k in per_key], paths, [fmt] * 3)
    assert rows_of(table) == [{"amount": 1, "retailer": "r1"}, {"amount": 2, "retailer": "r1"},
                              {"amount": 3, "retailer": "r2"}, {"amount": 4, "retailer": "r3"}]


@pytest.mark.parametrize("annotation", ["duckdb.DuckDBPyRelation", "polars.LazyFrame"])
def test_json_lists_of_records_read_for_duckdb_and_polars(tmp_path, annotation):
    paths = artifacts(tmp_path, "json", {"r1": [{"a": 1, "b": "x"}], "r2": [{"a": 2, "b": None}],
                                         "r3": []})
    table = lazy_table(annotation, ["retailer"], [("r1",), ("r2",), ("r3",)], paths, ["json"] * 3)
    assert rows_of(table) == [{"a": 1, "b": "x", "retailer": "r1"},
                              {"a": 2, "b": None, "retailer": "r2"}]


@pytest.mark.parametrize("annotation", ["duckdb.DuckDBPyRelation", "polars.LazyFrame"])
def test_keys_of_different_formats_in_one_call(tmp_path, annotation):
    paths = [write(tmp_path / "a.parquet", "parquet", [{"a": 1}]),
             write(tmp_path / "b.csv", "csv", [{"a": 2}]),
             write(tmp_path / "c.json", "json", [{"a": 3}])]
    table = lazy_table(annotation, ["k"], [("1",), ("2",), ("3",)], paths,
                       ["parquet", "csv", "json"])
    assert rows_of(table) == [{"a": 1, "k": "1"}, {"a": 2, "k": "2"}, {"a": 3, "k": "3"}]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_an_artifacts_own_dimension_column_is_kept_as_it_is_not_duplicated(tmp_path, annotation):
    # the artifact holds retailer as an integer; the key text would be a string
    paths = [write(tmp_path / f"{k}.parquet", "parquet", [{"retailer": k, "v": k * 10}])
             for k in (1, 2)]
    table = lazy_table(annotation, ["retailer"], [("1",), ("2",)], paths, ["parquet"] * 2)
    assert columns_of(table) == ["retailer", "v"]
    assert rows_of(table) == [{"retailer": 1, "v": 10}, {"retailer": 2, "v": 20}]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_several_dimensions_each_become_a_column(tmp_path, annotation):
    keys = [("2024-01-01", "emea"), ("2024-01-01", "apac"), ("2024-01-02", "emea")]
    paths = [write(tmp_path / f"{i}.parquet", "parquet", [{"n": i}]) for i in range(3)]
    table = lazy_table(annotation, ["day", "region"], keys, paths, ["parquet"] * 3)
    assert rows_of(table) == [{"n": 0, "day": "2024-01-01", "region": "emea"},
                              {"n": 1, "day": "2024-01-01", "region": "apac"},
                              {"n": 2, "day": "2024-01-02", "region": "emea"}]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_nothing_is_read_until_the_table_is_queried(tmp_path, annotation):
    """Rows written after construction (same schema) are what a query sees."""
    paths = artifacts(tmp_path, "parquet", {"r1": [{"a": 1}], "r2": [{"a": 2}]})
    table = lazy_table(annotation, ["retailer"], [("r1",), ("r2",)], paths, ["parquet"] * 2)
    write(paths[1], "parquet", [{"a": 20}, {"a": 21}])
    assert rows_of(table) == [{"a": 1, "retailer": "r1"}, {"a": 20, "retailer": "r2"},
                              {"a": 21, "retailer": "r2"}]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_two_keys_sharing_one_artifact_each_get_its_rows(tmp_path, annotation):
    path = write(tmp_path / "shared.parquet", "parquet", [{"a": 1}])
    table = lazy_table(annotation, ["k"], [("x",), ("y",)], [path, path], ["parquet"] * 2)
    assert rows_of(table) == [{"a": 1, "k": "x"}, {"a": 1, "k": "y"}]


def test_duckdb_lazy_tables_filter_and_join_with_each_other(tmp_path):
    orders = lazy_table("duckdb.DuckDBPyRelation", ["retailer"], [("r1",), ("r2",)],
                        artifacts(tmp_path / "o", "parquet", {"r1": [{"amount": 5}],
                                                              "r2": [{"amount": 7}]}),
                        ["parquet"] * 2)
    names = lazy_table("duckdb.DuckDBPyRelation", ["retailer"], [("r1",), ("r2",)],
                       artifacts(tmp_path / "n", "parquet", {"r1": [{"name": "one"}],
                                                             "r2": [{"name": "two"}]}),
                       ["parquet"] * 2)
    joined = orders.join(names, "retailer").filter("amount > 6")
    assert joined.fetchall() == [(7, "r2", "two")]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
def test_files_match_columns_by_name_not_position(tmp_path, annotation):
    """A later file may order the same columns differently."""
    paths = [write(tmp_path / "a.parquet", "parquet", [{"x": 1, "y": "a"}]),
             write(tmp_path / "b.parquet", "parquet", [{"y": "b", "x": 2}])]
    table = lazy_table(annotation, ["k"], [("a",), ("b",)], paths, ["parquet"] * 2)
    assert rows_of(table) == [{"x": 1, "y": "a", "k": "a"}, {"x": 2, "y": "b", "k": "b"}]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_a_duckdb_table_never_casts_a_later_files_column_to_the_first_files_type(tmp_path,
                                                                                  fmt):
    """1.5 in the second file stays 1.5 although the first file's column holds integers."""
    paths = [write(tmp_path / f"a.{fmt}", fmt, [{"x": 1}]),
             write(tmp_path / f"b.{fmt}", fmt, [{"x": 1.5}])]
    table = lazy_table("duckdb.DuckDBPyRelation", ["k"], [("a",), ("b",)], paths, [fmt] * 2)
    assert sorted(table.fetchall(), key=lambda row: row[1]) == [(1, "a"), (1.5, "b")]


def test_the_pyarrow_dataset_prunes_files_by_the_dimension(tmp_path):
    paths = artifacts(tmp_path, "parquet", {"r1": [{"a": 1}], "r2": [{"a": 2}]})
    dataset = lazy_table("pyarrow.dataset.Dataset", ["retailer"], [("r1",), ("r2",)], paths,
                         ["parquet"] * 2)
    assert len(list(dataset.get_fragments(filter=ds.field("retailer") == "r2"))) == 1
    assert dataset.to_table(filter=ds.field("retailer") == "r2").to_pylist() == \
        [{"a": 2, "retailer": "r2"}]


@pytest.mark.parametrize("annotation", ANNOTATIONS)
@pytest.mark.parametrize("fmt, contents, named", [
    ("pickle", None, "pickle"),
    ("keyed-json", b'{"keys": ["a"], "values": [1]}', "keyed-json"),
    ("json", b'{"a": 1}', "JSON that is not a list of records"),
    ("json", b"[1, 2, 3]", "JSON that is not a list of records"),
])
def test_an_artifact_that_is_not_a_table_names_its_key_format_and_the_fix(
        tmp_path, annotation, fmt, contents, named):
    good = write(tmp_path / "good.parquet", "parquet", [{"a": 1}])
    bad = tmp_path / "bad"
    bad.write_bytes(contents if contents is not None else pickle.dumps({"a": 1}))
    with pytest.raises(BatchInputError) as info:
        lazy_table(annotation, ["retailer"], [("r1",), ("r7",)], [good, bad], ["parquet", fmt])
    message = str(info.value)
    assert "retailer=r7" in message and "dict[str, T]" in message
    if annotation.endswith("Dataset") and fmt == "json":
        named = "json"  # refused by its format before its bytes are looked at
    assert named in message


def test_json_is_refused_for_a_pyarrow_dataset(tmp_path):
    paths = artifacts(tmp_path, "json", {"r1": [{"a": 1}]})
    with pytest.raises(BatchInputError, match="pyarrow.dataset.Dataset does not read"):
        lazy_table("ds.Dataset", ["retailer"], [("r1",)], paths, ["json"])


def test_zero_keys_or_an_unknown_annotation_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="at least one key"):
        lazy_table("duckdb.DuckDBPyRelation", ["retailer"], [], [], [])
    path = write(tmp_path / "a.parquet", "parquet", [{"a": 1}])
    with pytest.raises(ValueError, match="not a lazy table annotation"):
        lazy_table("pd.DataFrame", ["retailer"], [("r1",)], [path], ["parquet"])


# --- split_table -----------------------------------------------------------------------------

def as_kind(table: pa.Table, kind: str):
    """The same rows as each table type a batch step may return."""
    if kind == "arrow":
        return table
    if kind == "pandas":
        return table.to_pandas()
    if kind == "polars":
        return pl.from_arrow(table)
    if kind == "polars_lazy":
        return pl.from_arrow(table).lazy()
    if kind == "duckdb":
        return duckdb.default_connection().from_arrow(table)
    if kind == "duckdb_other":  # a relation bound to a connection of the user's own
        con = duckdb.connect()
        con.register("user_rows", table)
        con.execute("CREATE TABLE result AS SELECT * FROM user_rows")
        con.unregister("user_rows")
        return con.table("result")
    raise AssertionError(kind)


KINDS = ["arrow", "pandas", "polars", "polars_lazy", "duckdb", "duckdb_other"]

SALES = pa.table({"retailer": ["r2", "r1", "r2", "r1", "r2"],
                  "amount": [3, 1, 2, 5, 2],
                  "note": ["c", "a", None, "b", "b"]})


def targets_for(tmp_path: Path, n: int) -> list[Path]:
    return [tmp_path / "artifacts" / "node" / f"retailer_{i}.hash.parquet" for i in range(n)]


@pytest.mark.parametrize("kind", KINDS)
def test_each_key_gets_its_rows_sorted_by_every_column_with_the_dimension_kept(tmp_path, kind):
    targets = targets_for(tmp_path, 3)
    out = split_table(as_kind(SALES, kind), ["retailer"], [("r1",), ("r2",), ("r3",)], targets)
    assert [pq.read_table(t).to_pylist() for t in targets[:2]] == [
        [{"retailer": "r1", "amount": 1, "note": "a"},
         {"retailer": "r1", "amount": 5, "note": "b"}],
        [{"retailer": "r2", "amount": 2, "note": "b"},
         {"retailer": "r2", "amount": 2, "note": None},
         {"retailer": "r2", "amount": 3, "note": "c"}],
    ]
    assert out == [digest_file(str(t)) for t in targets]
    assert [size for size, _ in out] == [t.stat().st_size for t in targets]


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_without_rows_gets_an_empty_file_with_the_tables_schema(tmp_path, kind):
    targets = targets_for(tmp_path, 3)
    split_table(as_kind(SALES, kind), ["retailer"], [("r1",), ("r2",), ("r3",)], targets)
    empty = pq.read_table(targets[2])
    assert empty.num_rows == 0
    assert empty.schema.names == ["retailer", "amount", "note"]
    assert empty.schema.types == pq.read_table(targets[0]).schema.types


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_rows_in_another_order_give_the_same_bytes(tmp_path, kind):
    n = 2000
    rng = random.Random(7)
    table = pa.table({"retailer": [f"r{rng.randrange(20)}" for _ in range(n)],
                      "x": [rng.randrange(50) for _ in range(n)],
                      "y": [rng.choice([None, 0.5, 1.5, -2.0]) for _ in range(n)],
                      "s": [rng.choice(["a", "b", None, "é"]) for _ in range(n)]})
    order = list(range(n))
    rng.shuffle(order)
    keys = [(f"r{i}",) for i in range(21)]
    first = split_table(as_kind(table, kind), ["retailer"], keys, targets_for(tmp_path / "a", 21))
    second = split_table(as_kind(table.take(order), kind), ["retailer"], keys,
                         targets_for(tmp_path / "b", 21))
    assert first == second
    for path in targets_for(tmp_path / "a", 21):
        rows = pq.read_table(path).to_pylist()
        assert rows == sorted(rows, key=lambda r: (r["x"], r["y"] is None, r["y"] or 0,
                                                   r["s"] is None, r["s"] or ""))


@pytest.mark.parametrize("kind", KINDS)
def test_rows_match_keys_by_the_text_of_their_values(tmp_path, kind):
    table = pa.table({"store": [1, 2, 1], "v": [10, 20, 11]})
    targets = targets_for(tmp_path, 2)
    split_table(as_kind(table, kind), ["store"], [("1",), ("2",)], targets)
    assert pq.read_table(targets[0]).to_pylist() == [{"store": 1, "v": 10}, {"store": 1, "v": 11}]
    assert pq.read_table(targets[1]).to_pylist() == [{"store": 2, "v": 20}]


@pytest.mark.parametrize("kind", KINDS)
def test_several_dimensions_and_keys_of_any_text(tmp_path, kind):
    keys = [("a/b", "x=y"), ("a/b", "it's"), ("é ü", "x=y")]
    table = pa.table({"d1": [k[0] for k in keys] * 2, "d2": [k[1] for k in keys] * 2,
                      "n": [1, 2, 3, 4, 5, 6]})
    targets = targets_for(tmp_path, 3)
    split_table(as_kind(table, kind), ["d1", "d2"], keys, targets)
    assert [pq.read_table(t)["n"].to_pylist() for t in targets] == [[1, 4], [2, 5], [3, 6]]


@pytest.mark.parametrize("kind", KINDS)
def test_a_row_of_another_key_fails_the_whole_call_and_writes_nothing(tmp_path, kind):
    table = pa.table({"retailer": ["r1", "r99", "r2"], "v": [1, 2, 3]})
    targets = targets_for(tmp_path, 2)
    with pytest.raises(BatchResultError, match="retailer=r99, which is not one of this call"):
        split_table(as_kind(table, kind), ["retailer"], [("r1",), ("r2",)], targets)
    assert not any(t.exists() for t in targets)
    scratch = tmp_path / "artifacts" / "node"
    assert not scratch.exists() or os.listdir(scratch) == []  # no scratch directory left either


@pytest.mark.parametrize("kind", KINDS)
def test_a_row_with_a_null_key_is_a_row_of_no_key(tmp_path, kind):
    table = pa.table({"retailer": ["r1", None], "v": [1, 2]})
    with pytest.raises(BatchResultError, match="retailer=None"):
        split_table(as_kind(table, kind), ["retailer"], [("r1",)], targets_for(tmp_path, 1))


@pytest.mark.parametrize("kind", KINDS)
def test_a_table_without_the_dimension_column_names_it_and_the_fix(tmp_path, kind):
    with pytest.raises(BatchResultError, match="without the column 'region'.*add 'region'"):
        split_table(as_kind(SALES, kind), ["region"], [("emea",)], targets_for(tmp_path, 1))


def test_a_pandas_dimension_left_in_the_index_says_reset_index(tmp_path):
    frame = SALES.to_pandas().set_index("retailer")
    with pytest.raises(BatchResultError, match=r"reset_index\(\)"):
        split_table(frame, ["retailer"], [("r1",)], targets_for(tmp_path, 1))


def test_a_value_that_is_not_a_table_is_refused(tmp_path):
    with pytest.raises(BatchResultError, match="list, which is neither a table"):
        split_table([1, 2], ["retailer"], [("r1",)], targets_for(tmp_path, 1))


def test_zero_keys_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="at least one key"):
        split_table(SALES, ["retailer"], [], [])


def test_existing_targets_are_replaced_and_no_scratch_is_left(tmp_path):
    targets = targets_for(tmp_path, 2)
    targets[0].parent.mkdir(parents=True)
    targets[0].write_bytes(b"old")
    split_table(SALES, ["retailer"], [("r1",), ("r2",)], targets)
    assert pq.read_table(targets[0]).num_rows == 2
    assert sorted(os.listdir(tmp_path / "artifacts")) == ["node"]
    assert sorted(os.listdir(targets[0].parent)) == ["retailer_0.hash.parquet",
                                                     "retailer_1.hash.parquet"]


def test_the_users_default_connection_is_left_as_it_was(tmp_path):
    con = duckdb.default_connection()
    con.execute("SET partitioned_write_flush_threshold = 100000")  # the user's own setting
    before = con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall()
    split_table(SALES, ["retailer"], [("r1",), ("r2",)], targets_for(tmp_path / "a", 2))
    split_table(con.from_arrow(SALES), ["retailer"], [("r1",), ("r2",)],
                targets_for(tmp_path / "b", 2))
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall() \
        == before
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
    flush = "SELECT current_setting('partitioned_write_flush_threshold')"
    assert con.execute(flush).fetchall() == [(100000,)]
    con.execute("RESET partitioned_write_flush_threshold")


@pytest.mark.parametrize("kind", ["arrow", "duckdb_other", "pandas"])
def test_many_keys_over_several_row_groups_and_copy_ranges_stay_sorted(tmp_path, kind):
    """More keys than one partitioned COPY takes and more rows than one row group: every key
    still gets exactly its rows, in order, and a permuted input the same bytes."""
    n, n_keys = 300_000, 700
    rng = random.Random(3)
    table = pa.table({"k": [rng.randrange(n_keys) for _ in range(n)],
                      "a": [rng.random() for _ in range(n)]})
    keys = [(str(i),) for i in range(n_keys + 5)]  # five keys without rows
    first = split_table(as_kind(table, kind), ["k"], keys, targets_for(tmp_path / "a", len(keys)))
    order = list(range(n))
    rng.shuffle(order)
    second = split_table(as_kind(table.take(order), kind), ["k"], keys,
                         targets_for(tmp_path / "b", len(keys)))
    assert first == second
    counts: dict[int, int] = {}
    for k in table["k"].to_pylist():
        counts[k] = counts.get(k, 0) + 1
    for i, path in enumerate(targets_for(tmp_path / "a", len(keys))):
        part = pq.read_table(path)
        assert part.num_rows == counts.get(i, 0)
        assert set(part["k"].to_pylist()) <= {i}
        a = part["a"].to_pylist()
        assert a == sorted(a)


@pytest.mark.parametrize("kind", ["arrow", "duckdb_other"])
def test_a_bucket_of_several_copy_ranges_gives_each_key_its_rows(tmp_path, kind, monkeypatch):
    """Past _MAX_BUCKETS buckets, one bucket holds several ranges of keys (here 2 buckets of
    512 keys for 705 keys, 3 ranges): each range still reads only its keys' rows."""
    monkeypatch.setattr(batch_split, "_MAX_BUCKETS", 2)
    rng = random.Random(5)
    table = pa.table({"k": [rng.randrange(700) for _ in range(20_000)],
                      "a": [rng.random() for _ in range(20_000)]})
    keys = [(str(i),) for i in range(705)]
    split_table(as_kind(table, kind), ["k"], keys, targets_for(tmp_path, len(keys)))
    by_key: dict[int, list[float]] = {}
    for k, a in zip(table["k"].to_pylist(), table["a"].to_pylist()):
        by_key.setdefault(k, []).append(a)
    for i, path in enumerate(targets_for(tmp_path, len(keys))):
        assert pq.read_table(path)["a"].to_pylist() == sorted(by_key.get(i, []))


@pytest.mark.parametrize("kind", KINDS)
def test_columns_of_other_types_sort_and_give_the_same_bytes_in_any_order(tmp_path, kind):
    """Lists, structs, categories, decimals and timestamps: DuckDB sorts them all; for pandas,
    Arrow sorts what it can and the rest by repr."""
    import datetime
    import decimal

    n = 60
    rng = random.Random(5)
    table = pa.table({
        "k": [f"r{i % 3}" for i in range(n)],
        "tags": pa.array([[rng.randrange(3)] for _ in range(n)], pa.list_(pa.int64())),
        "point": pa.array([{"x": rng.randrange(3)} for _ in range(n)]),
        "cat": pa.array([rng.choice("ab") for _ in range(n)]).dictionary_encode(),
        "price": pa.array([decimal.Decimal(rng.randrange(3)) for _ in range(n)],
                          pa.decimal128(5, 2)),
        "at": [datetime.datetime(2024, 1, 1 + rng.randrange(3)) for _ in range(n)],
        "f": [rng.choice([float("nan"), None, 1.0, -1.0]) for _ in range(n)],
    })
    order = list(range(n))
    rng.shuffle(order)
    keys = [("r0",), ("r1",), ("r2",)]
    first = split_table(as_kind(table, kind), ["k"], keys, targets_for(tmp_path / "a", 3))
    second = split_table(as_kind(table.take(order), kind), ["k"], keys,
                         targets_for(tmp_path / "b", 3))
    assert first == second
    assert sum(pq.read_table(t).num_rows for t in targets_for(tmp_path / "a", 3)) == n


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_table_gives_every_key_an_empty_file_with_its_schema(tmp_path, kind):
    targets = targets_for(tmp_path, 2)
    split_table(as_kind(SALES.slice(0, 0), kind), ["retailer"], [("r1",), ("r2",)], targets)
    for path in targets:
        table = pq.read_table(path)
        assert table.num_rows == 0 and table.schema.names == ["retailer", "amount", "note"]
    assert targets[0].read_bytes() == targets[1].read_bytes()


def test_a_lazy_frame_is_streamed_from_its_plan(tmp_path):
    source = write(tmp_path / "in.parquet", "parquet", SALES.to_pylist())
    lazy = pl.scan_parquet(source).filter(pl.col("amount") > 1).with_columns(
        doubled=pl.col("amount") * 2)
    targets = targets_for(tmp_path, 2)
    split_table(lazy, ["retailer"], [("r1",), ("r2",)], targets)
    assert pq.read_table(targets[0]).to_pylist() == [
        {"retailer": "r1", "amount": 5, "note": "b", "doubled": 10}]
    assert [r["doubled"] for r in pq.read_table(targets[1]).to_pylist()] == [4, 4, 6]


def test_a_relation_over_a_query_of_its_own_connection(tmp_path):
    con = duckdb.connect()
    rel = con.sql("SELECT 'r' || (i % 3) AS retailer, i AS v FROM range(10) t(i) WHERE i > 2")
    targets = targets_for(tmp_path, 3)
    split_table(rel, ["retailer"], [("r0",), ("r1",), ("r2",)], targets)
    assert [pq.read_table(t)["v"].to_pylist() for t in targets] == [[3, 6, 9], [4, 7], [5, 8]]


@pytest.mark.parametrize("annotation", ["duckdb.DuckDBPyRelation", "polars.LazyFrame"])
def test_a_json_list_may_start_with_blanks(tmp_path, annotation):
    path = tmp_path / "a.json"
    path.write_bytes(b'\xef\xbb\xbf \n [\n  {"a": 1}\n]\n')
    table = lazy_table(annotation, ["k"], [("x",)], [path], ["json"])
    assert rows_of(table) == [{"a": 1, "k": "x"}]
