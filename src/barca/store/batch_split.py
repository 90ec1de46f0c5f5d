"""A batch call's table result written back as one parquet artifact per key.

Caching stays per key, so each key's rows need a result of their own whose bytes do not depend
on the order the step produced them in: every key's rows are sorted by every column. DuckDB,
polars and Arrow results stream through DuckDB (sort, then `COPY ... PARTITION_BY`), so the
result is never held whole in Python; a pandas frame already is in memory and is split there.
The files are written in a local work directory of the store and committed key by key
(store.artifact_store). Heavy libraries are imported only when used, as in store.artifacts.
"""

from __future__ import annotations

import os
import secrets
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from barca.store.artifact_store import ArtifactStore, staged
from barca.store.artifacts import table_kind
from barca.store.batch_inputs import check_lengths, key_label, quote
from barca.store.local_files import digest_file
from barca.store.ranged_tables import write_checked

_KEY = "__barca_key"  # the index of a row's key among the call's keys
_DIM = "__barca_dim"  # a key's dimension value in the keys file (_DIM0, _DIM1, ...)
_BUCKET = "__barca_bucket"  # a range of key indexes, split first (-1: rows of no key)

# Keys per partitioned COPY. DuckDB's time per partition grows with the number of partitions
# one COPY writes, and it keeps a buffer for each (at 10,000 keys in one COPY: 0.5 GB; 2,500
# keys a COPY took 1.6 times as long as 256 on tmpfs); small ranges pay in statements (10,000
# keys of a 1,000,000-row table on two connections: 4.0-4.3 s in ranges of 32, 2.6-2.9 s of 128
# or 256).
_KEYS_PER_COPY = 256
_MAX_BUCKETS = 100
# Rows a thread holds for a partition before writing them out (DuckDB's default: 524,288). Pass
# 1 of a 1,000,000-row split into 40 buckets took 66 MB over the process at the default and
# 25 MB at 2,048, in the same time.
_FLUSH, _FLUSH_ROWS = "partitioned_write_flush_threshold", 2048


class BatchResultError(Exception):
    """A batch call's table result cannot be split into its keys; the whole call fails."""


def split_table(value: Any, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                store: ArtifactStore, keys: Sequence[str]) -> list[tuple[int, str]]:
    """Write a batch call's table as one parquet file per key, each key's rows sorted by every
    column so the same rows in any order give the same bytes. Rows match keys by the text of
    their dimension values (1 is the key "1"); a key with no rows gets an empty file with the
    table's schema. Returns (size in bytes, blake2b-16 hex digest) per key, aligned with
    `keys` (the store keys the results go to). A missing dimension column, a row of another
    key, or a key in two forms (1 and "1" in one column) is a BatchResultError, and then no
    key is written."""
    check_lengths(dims, key_values, {"keys": keys})
    kind = table_kind(value)
    if kind is None:
        raise BatchResultError(
            f"batch returned a {type(value).__name__}, which is neither a table nor a dict of "
            "key to value; return a pandas, polars or Arrow table or a DuckDB relation with "
            f"{_columns_text(dims)} as columns, or a dict")
    columns = _column_names(value, kind)
    for dim in dims:
        if dim not in columns:
            where = " (it is in the index: call .reset_index() before returning)" \
                if kind == "pandas" and dim in (value.index.names or ()) else ""
            raise BatchResultError(
                f"batch returned a table without the column {dim!r}{where}; add {dim!r} as a "
                "column holding each row's key so that barca can split the rows by key")
    if kind == "pandas":
        return _split_pandas(value, dims, key_values, store, keys)
    return _split_with_duckdb(value, kind, dims, key_values, store, keys)


def _columns_text(dims: Sequence[str]) -> str:
    return " and ".join(repr(d) for d in dims)


def _column_names(value: Any, kind: str) -> list[str]:
    if kind == "polars_lazy":
        return list(value.collect_schema().names())
    if kind == "arrow":
        return list(value.schema.names)
    return [str(c) for c in value.columns]


def _unknown_key(dims: Sequence[str], key: Sequence[Any]) -> BatchResultError:
    return BatchResultError(
        f"batch returned a row for {key_label(dims, key)}, which is not one of this call's keys; "
        "return only rows of the keys the call received (the partition parameter's list)")


def _split_pandas(df: Any, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                  store: ArtifactStore, keys: Sequence[str]) -> list[tuple[int, str]]:
    """The frame is already in memory, so it is split there: rows are grouped by the text of
    their dimension values, the frame becomes one Arrow table (one schema for every key, so an
    empty key keeps the columns' types), sorted once by key then every column, and each key's
    slice is written with pyarrow."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    index = {tuple(key): i for i, key in enumerate(key_values)}
    texts = [df[d].astype(str).where(df[d].notna(), None) for d in dims]
    codes = np.empty(len(df), dtype=np.int64)
    groups = df.groupby(texts, sort=False, dropna=False).indices
    _check_one_form(df, dims, len(groups))
    for group, positions in groups.items():
        key = group if isinstance(group, tuple) else (group,)
        key = tuple(None if v is None or v != v else v for v in key)  # NaN stands for None
        if key not in index:
            raise _unknown_key(dims, key)
        codes[positions] = index[key]
    table = pa.Table.from_pandas(df, preserve_index=False)
    # a store read by range gets page checksums (store.ranged_tables), a local one as before
    write = write_checked if store.reads_in_place else pq.write_table
    order = _sort_indices(table, codes)
    table, codes = table.take(order), codes[order.to_numpy()]
    bounds = np.searchsorted(codes, np.arange(len(key_values) + 1))
    out = []
    for i, key in enumerate(keys):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        out.append(_write_staged(store, key, lambda tmp, t=part: write(t, tmp)))
    return out


def _check_one_form(df: Any, dims: Sequence[str], text_groups: int) -> None:
    """Refuse a key written in two forms (1 and "1" in one object column): they are one key,
    and which rows were meant for it is not barca's to guess. Typed columns cannot mix forms,
    so only columns of Python objects or categories are looked at."""
    mixed = [d for d in dims if df[d].dtype == object or df[d].dtype.name == "category"]
    if not mixed:
        return
    raw = df.groupby([df[d] for d in dims], sort=False, dropna=False, observed=True).indices
    if len(raw) <= text_groups:
        return
    seen: dict[tuple, Any] = {}
    for group in raw:
        values = group if isinstance(group, tuple) else (group,)
        text = tuple(None if v is None or v != v else str(v) for v in values)
        if text in seen:
            shown = repr(text[0]) if len(dims) == 1 else key_label(dims, text)
            forms = [repr(v[0]) if len(dims) == 1 else repr(v) for v in (seen[text], values)]
            raise BatchResultError(
                f"key {shown} appears twice in the batch result (as {forms[0]} and "
                f"{forms[1]}); give each key's rows one form of it")
        seen[text] = values


def _sort_indices(table: Any, codes: Any) -> Any:
    """Row order by key index, then every column ascending with nulls last (as DuckDB's
    `ORDER BY ALL ASC NULLS LAST`). A column Arrow cannot sort (lists, structs, Python objects)
    is compared by the repr of its values instead, which is still the same for equal rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [pa.array(codes), *table.columns]
    names = [f"c{i}" for i in range(len(columns))]
    keys = [(name, "ascending") for name in names]  # nulls go last, Arrow's default
    try:
        return pc.sort_indices(pa.table(columns, names=names), sort_keys=keys)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        plain = [_sortable(c) for c in columns]
        return pc.sort_indices(pa.table(plain, names=names), sort_keys=keys)


def _sortable(column: Any) -> Any:
    """The column, or what stands for it in the sort: a dictionary's values, else the repr of
    each value when Arrow cannot sort its type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        return pc.cast(column, column.type.value_type)
    try:
        pc.sort_indices(pa.table([column.slice(0, 1)], names=["c"]), sort_keys=[("c", "ascending")])
        return column
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return pa.array([repr(v) for v in column.to_pylist()], pa.string())


def _write_staged(store: ArtifactStore, key: str, write: Callable[[str], Any]
                  ) -> tuple[int, str]:
    with staged(store, key) as tmp:
        write(tmp)
        return digest_file(tmp)


def _split_with_duckdb(value: Any, kind: str, dims: Sequence[str],
                       key_values: Sequence[tuple[str, ...]],
                       store: ArtifactStore, keys: Sequence[str]) -> list[tuple[int, str]]:
    """Two passes through DuckDB in a work directory of the store (a local store's is next to
    the keys' files, so that committing one is a rename):

    1. the table, joined to the call's keys (from a small parquet file, so that the join works
       in any connection), is written unsorted into buckets of consecutive key indexes with
       `COPY ... PARTITION_BY (bucket)`: it streams, on the table's connection and threads,
       without the memory of a sort of the whole table.
    2. each bucket is sorted by key index then every column and written with `COPY ...
       PARTITION_BY (key index)` on a connection of one thread: DuckDB 2.0.1 with several threads
       writes a partition's rows in the order its threads deliver them (it broke the sort in 60
       of 10,000 keys), while one thread keeps it.

    Partitioning by the key's index, not its text, keeps arbitrary key strings out of directory
    names. Each key's file is then committed as its key's result."""
    import duckdb

    work = Path(store.work_dir(keys))
    try:
        keys_file, schema, buckets = work / "keys.parquet", work / "schema.parquet", \
            work / "buckets"
        _write_keys(keys_file, dims, key_values)
        per_bucket = _keys_per_bucket(len(keys))
        view = f"barca_batch_{secrets.token_hex(6)}"
        keyed = _keyed_select(view, dims, keys_file)
        statements = [  # the schema first: a LIMIT 0 reads no row, even of a one-pass stream
            f"COPY ({keyed} LIMIT 0) TO {_literal(schema)} (FORMAT parquet)",
            f"COPY (SELECT COALESCE({_KEY} // {per_bucket}, -1) AS {_BUCKET}, * FROM ({keyed})) "
            f"TO {_literal(buckets)} (FORMAT parquet, PARTITION_BY ({_BUCKET}))"]
        if kind == "duckdb":
            # A relation cannot move to another connection: the COPY runs on its own one,
            # whose setting is put back after.
            before = value.query(view, f"SELECT current_setting('{_FLUSH}')").fetchall()[0][0]
            try:
                for sql in [f"SET {_FLUSH} = {_FLUSH_ROWS}", *statements]:
                    value.query(view, sql)
            finally:
                value.query(view, f"SET {_FLUSH} = {int(before)}")
        else:
            with duckdb.connect() as con:
                con.register(view, _arrow_stream(value) if kind == "polars_lazy" else value)
                for sql in [f"SET temp_directory = {_literal(work / 'spill')}",
                            f"SET {_FLUSH} = {_FLUSH_ROWS}", *statements]:
                    con.execute(sql)
        with duckdb.connect() as con:
            unknown = buckets / f"{_BUCKET}=-1"
            if unknown.is_dir():  # rows whose dimension values are no key of the call
                row = con.execute(
                    f"SELECT {', '.join(f'CAST({quote(d)} AS VARCHAR)' for d in dims)} FROM "
                    f"read_parquet({_literal(unknown / '*.parquet')}, hive_partitioning = false) "
                    "LIMIT 1").fetchone()
                raise _unknown_key(dims, row)
            empty = work / "empty.parquet"  # as the keys' files: read from parquet, written back
            con.execute(f"COPY (SELECT * EXCLUDE ({_KEY}) FROM read_parquet({_literal(schema)})) "
                        f"TO {_literal(empty)} (FORMAT parquet)")
        return _write_buckets(buckets, per_bucket, work, empty, store, keys)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _keys_per_bucket(keys: int) -> int:
    """Buckets hold whole ranges of _KEYS_PER_COPY keys, and there are at most _MAX_BUCKETS of
    them (pass 1's memory grows with its partitions)."""
    ranges = -(-keys // _KEYS_PER_COPY)
    return _KEYS_PER_COPY * max(1, -(-ranges // _MAX_BUCKETS))


def _write_keys(path: Path, dims: Sequence[str], key_values: Sequence[tuple[str, ...]]) -> None:
    """The call's keys with their index, as parquet, written by DuckDB from list parameters
    (pyarrow's import alone took 0.9 s in a worker that had not loaded it)."""
    import duckdb

    columns = [f"unnest(?::BIGINT[]) AS {_KEY}",
               *(f"unnest(?::VARCHAR[]) AS {_DIM}{j}" for j in range(len(dims)))]
    with duckdb.connect() as con:  # unnests side by side give their lists' items in step
        con.execute(f"COPY (SELECT {', '.join(columns)}) TO {_literal(path)} (FORMAT parquet)",
                    [list(range(len(key_values))),
                     *([key[j] for key in key_values] for j in range(len(dims)))])


def _keyed_select(view: str, dims: Sequence[str], keys_file: Path) -> str:
    """Every row with its key's index (NULL for a row of no key of the call)."""
    match = " AND ".join(f"CAST(v.{quote(d)} AS VARCHAR) = k.{_DIM}{j}"
                         for j, d in enumerate(dims))
    return (f"SELECT k.{_KEY}, v.* FROM {view} AS v "
            f"LEFT JOIN read_parquet({_literal(keys_file)}) AS k ON {match}")


def _write_buckets(buckets: Path, per_bucket: int, work: Path, empty: Path,
                   store: ArtifactStore, keys: Sequence[str]) -> list[tuple[int, str]]:
    """Pass 2: each range of key indexes is read from its bucket, sorted and written with
    PARTITION_BY, and its keys' files are committed. Two workers share the
    ranges, each with a connection of its own (opening one costs about 35 ms), so that one
    range's renames and digests overlap another's writing. The direction of the sort is spelled
    out so that a connection's default_order or default_null_order cannot change the bytes."""
    import duckdb

    results: list[tuple[int, str]] = [(0, "")] * len(keys)
    starts = range(0, len(keys), _KEYS_PER_COPY)
    workers = min(len(starts), os.cpu_count() or 1, 4)

    def work_through(ranges: Sequence[int]) -> None:
        con = duckdb.connect()
        try:
            con.execute("SET threads=1")  # one thread keeps the sort's order
            # DuckDB 2.0.1's asynchronous writes (async_threads, 8 by default) cost more than
            # they save on files this small: 10,000 keys' COPY took 3.0-3.9 s without them
            # against 5.3-6.8 s with them, half the CPU time
            try:
                con.execute("SET async_threads = 0")
            except duckdb.CatalogException:  # a DuckDB before 2.0 writes synchronously anyway
                pass
            # a range larger than memory spills here, in the work directory, and goes with it
            con.execute(f"SET temp_directory = {_literal(work / 'spill')}")
            for lo in ranges:
                hi = min(lo + _KEYS_PER_COPY, len(keys))
                bucket = buckets / f"{_BUCKET}={lo // per_bucket}"
                out = work / f"range-{lo}"
                if bucket.is_dir():
                    con.execute(
                        f"COPY (SELECT * FROM read_parquet({_literal(bucket / '*.parquet')}, "
                        f"hive_partitioning = false) WHERE {_KEY} >= {lo} AND {_KEY} < {hi} "
                        f"ORDER BY ALL ASC NULLS LAST) "
                        f"TO {_literal(out)} (FORMAT parquet, PARTITION_BY ({_KEY}))")
                for i in range(lo, hi):
                    key_dir = os.path.join(out, f"{_KEY}={i}")
                    files = sorted(os.path.join(key_dir, f) for f in os.listdir(key_dir)) \
                        if os.path.isdir(key_dir) else []
                    results[i] = _place(files, empty, store, keys[i], work)
        finally:
            con.close()

    if workers <= 1:
        work_through(starts)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(work_through, [starts[w::workers] for w in range(workers)]))
    return results


def _place(files: list[str], empty: Path, store: ArtifactStore, key: str,
           work: Path) -> tuple[int, str]:
    """Digest one key's file and commit it as the key's result. A key DuckDB
    wrote as several files is read back and rewritten sorted (one extra pass over that key); a
    key without rows gets the empty file with the table's schema."""
    if not files:
        source = work / f"empty-{secrets.token_hex(6)}.parquet"
        shutil.copyfile(empty, source)
    elif len(files) > 1:
        import duckdb

        source = work / f"merged-{secrets.token_hex(6)}.parquet"
        with duckdb.connect() as con:
            con.execute(f"COPY (SELECT * FROM read_parquet([{', '.join(map(_literal, files))}]) "
                        f"ORDER BY ALL ASC NULLS LAST) TO {_literal(source)} (FORMAT parquet)")
    else:
        source = Path(files[0])
    result = digest_file(str(source))
    store.commit(str(source), key)
    return result


def _arrow_stream(lazy: Any) -> Any:
    """A LazyFrame as an Arrow stream of its batches (polars' streaming engine), so that DuckDB
    scans it without the frame being collected whole."""
    import polars as pl
    import pyarrow as pa

    schema = pl.DataFrame(schema=lazy.collect_schema()).to_arrow().schema

    def batches() -> Iterator[Any]:
        for frame in lazy.collect_batches():
            table = frame.to_arrow()
            if table.schema != schema:
                table = table.cast(schema)
            yield from table.to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _literal(text: object) -> str:
    return "'" + str(text).replace("'", "''") + "'"
