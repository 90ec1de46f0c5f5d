"""Tables in and out of a batch call: many keys' artifacts read as one lazy table, and one
returned table written back as one parquet artifact per key.

A batch call covers many keys, often thousands, each with an artifact file of its own. Opening
them one by one would cost a Python object per key, so `lazy_table` hands the step one lazy table
over all the files (DuckDB, polars or pyarrow scans them), with the key's dimension values added
as columns; nothing is read until the step queries it.

`split_table` goes the other way. Caching stays per key, so each key's rows need a file of their
own whose bytes do not depend on the order the step produced them in: every key's rows are sorted
by every column. DuckDB, polars and Arrow results stream through DuckDB (sort, then
`COPY ... PARTITION_BY`), so the result is never held whole in Python; a pandas frame already is
in memory and is split there.

Heavy libraries are imported only when used, as in artifacts.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Sequence

from barca.store.artifacts import _digest_file, _replace, _temporary_name, table_kind

_FILE = "__barca_file"  # the column naming the artifact a row came from
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


class BatchInputError(Exception):
    """A batch input's artifacts cannot be read as one lazy table (they are not tables)."""


class BatchResultError(Exception):
    """A batch call's table result cannot be split into its keys; the whole call fails."""


# --- lazy table input ------------------------------------------------------------------------

_READS = {"duckdb": ("parquet", "csv", "json"), "polars": ("parquet", "csv", "json"),
          "arrow": ("parquet", "csv")}
_LIBRARY = {"duckdb": "duckdb.DuckDBPyRelation", "polars": "polars.LazyFrame",
            "arrow": "pyarrow.dataset.Dataset"}


def lazy_table(annotation: str, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
               paths: Sequence[Path], formats: Sequence[str]) -> Any:
    """One lazy table over the artifacts of a batch call's keys, of the library the parameter's
    annotation names, with each dimension as a string column holding the row's key value (an
    artifact's own column of that name is kept as it is). Only what the library needs for the
    schema is read here; an artifact that is not a table is a BatchInputError naming the fix."""
    kind = _lazy_kind(annotation)
    _check_lengths(dims, key_values, {"paths": paths, "formats": formats})
    _check_tabular(kind, dims, key_values, paths, formats)
    files = [str(p) for p in paths]
    if kind == "duckdb":
        import duckdb

        con = duckdb.default_connection() if callable(getattr(duckdb, "default_connection", None)) \
            else duckdb.default_connection
        return _duckdb_table(con, dims, key_values, files, formats)
    if kind == "polars":
        return _polars_table(dims, key_values, files, formats)
    return _arrow_dataset(dims, key_values, files, formats)


def _lazy_kind(annotation: str) -> str:
    """The library an annotation names, by its last dotted part as artifacts._read_table does."""
    leaf = (annotation or "").replace(" ", "").rsplit(".", 1)[-1]
    kind = {"DuckDBPyRelation": "duckdb", "LazyFrame": "polars", "Dataset": "arrow"}.get(leaf)
    if kind is None:
        raise ValueError(f"{annotation!r} is not a lazy table annotation; expected one of "
                         + ", ".join(_LIBRARY.values()))
    return kind


def _check_lengths(dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                   per_key: dict[str, Sequence[Any]]) -> None:
    """A call has keys, and one of each per-key argument for every key (the engine's promise)."""
    if not key_values:
        raise ValueError("a batch call needs at least one key")
    for name, items in per_key.items():
        if len(items) != len(key_values):
            raise ValueError(f"{len(key_values)} keys but {len(items)} {name}")
    for key in key_values:
        if len(key) != len(dims):
            raise ValueError(f"key {key!r} does not have one value for each of {list(dims)}")


def _check_tabular(kind: str, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                   paths: Sequence[Path], formats: Sequence[str]) -> None:
    """Refuse, before building anything, a key whose artifact is not a table the library reads,
    rather than fail inside the step at its first query. Nothing is converted."""
    for key, path, fmt in zip(key_values, paths, formats):
        if fmt not in _READS[kind]:
            what = f"{fmt}, which {_LIBRARY[kind]} does not read (parquet or CSV only)" \
                if fmt == "json" else f"{fmt}, not a table"
        elif fmt == "json" and not _json_records(path):
            what = "JSON that is not a list of records"
        else:
            continue
        needs = "parquet or CSV" if kind == "arrow" else "parquet, CSV or a JSON list of records"
        raise BatchInputError(
            f"the artifact of {_key_text(dims, key)} is {what}; a lazy table input needs {needs}."
            " Annotate the parameter as dict[str, T] to receive key -> value instead")


def _json_records(path: Path) -> bool:
    """Whether a JSON artifact is a list of records, from its first bytes: `[` then `{` or `]`."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"["):
        return False
    rest = head[1:].lstrip(b" \t\r\n")
    return rest[:1] in (b"{", b"]") or not rest  # only blanks so far: let the reader decide


def _key_text(dims: Sequence[str], key: Sequence[Any]) -> str:
    return ", ".join(f"{d}={v}" for d, v in zip(dims, key))


def _by_format(files: Sequence[str], formats: Sequence[str]) -> dict[str, list[str]]:
    """Each format's distinct files, in call order: a file shared by two keys is read once and
    joined to both keys."""
    out: dict[str, dict[str, None]] = {}
    for f, fmt in zip(files, formats):
        out.setdefault(fmt, {})[f] = None
    return {fmt: list(fs) for fmt, fs in out.items()}


def _duckdb_table(con: Any, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                  files: Sequence[str], formats: Sequence[str]) -> Any:
    """read_parquet/read_csv/read_json over every file (the list is a query parameter, not SQL
    text), joined on the file name to a mapping of file -> key built from parameters too, so the
    query stays short at 200,000 files. Columns are matched by name over every file's schema
    (`union_by_name`): with the first file's schema alone DuckDB would cast a later file's
    column to its type (1.5 read as 2) where polars and pyarrow raise, and a wrong value is
    worse than the cost: every footer is read at construction, about 1 s at 10,000 one-row
    files (11 s and 1.6 GB at 100,000, against 0.2 s)."""
    tag = secrets.token_hex(4)  # two lazy tables joined in one query need distinct parameters
    params: dict[str, Any] = {}
    reads = []
    for fmt, fmt_files in _by_format(files, formats).items():
        name = f"barca_files_{fmt}_{tag}"
        params[name] = fmt_files
        reader = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}[fmt]
        extra = ", format='array'" if fmt == "json" else ""
        reads.append(f"SELECT * FROM {reader}(${name}, filename='{_FILE}', "
                     f"union_by_name=true{extra})")
    read = con.sql(" UNION ALL BY NAME ".join(reads), params=params)
    mapping_params = {f"barca_map_{tag}": list(files)}
    selected = [f"unnest($barca_map_{tag}) AS {_FILE}"]
    for i, dim in enumerate(dims):
        mapping_params[f"barca_dim{i}_{tag}"] = [key[i] for key in key_values]
        selected.append(f"CAST(unnest($barca_dim{i}_{tag}) AS VARCHAR) AS {_quote(dim)}")
    mapping = con.sql("SELECT " + ", ".join(selected), params=mapping_params)
    added = [d for d in dims if d not in read.columns]
    joined = read.set_alias("barca_f").join(mapping.set_alias("barca_m"), _FILE)
    return joined.project(", ".join([f"barca_f.* EXCLUDE ({_FILE})"]
                                    + [f"barca_m.{_quote(d)}" for d in added]))


def _polars_table(dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                  files: Sequence[str], formats: Sequence[str]) -> Any:
    """scan_parquet/scan_csv over every file with `include_file_paths`, joined to a mapping
    LazyFrame of file -> key. Polars has no lazy reader for a JSON array, so JSON files are read
    through a DuckDB relation handed over as a LazyFrame (`.pl(lazy=True)`)."""
    import polars as pl

    frames = []
    for fmt, fmt_files in _by_format(files, formats).items():
        if fmt == "parquet":
            frames.append(pl.scan_parquet(fmt_files, include_file_paths=_FILE, glob=False))
        elif fmt == "csv":
            frames.append(pl.scan_csv(fmt_files, include_file_paths=_FILE, glob=False))
        else:
            import duckdb

            rel = duckdb.connect().sql(
                f"SELECT * FROM read_json($files, format='array', filename='{_FILE}')",
                params={"files": fmt_files})
            frames.append(rel.pl(lazy=True))
    read = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    present = set(read.collect_schema().names())
    added = [d for d in dims if d not in present]
    mapping = pl.LazyFrame({_FILE: list(files),
                            **{d: [key[dims.index(d)] for key in key_values] for d in added}},
                           schema={_FILE: pl.String, **{d: pl.String for d in added}})
    return read.join(mapping, on=_FILE, how="inner").drop(_FILE)


def _arrow_dataset(dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                   files: Sequence[str], formats: Sequence[str]) -> Any:
    """FileSystemDataset.from_paths with one partition expression per file (`retailer == 'r1'`):
    pyarrow fills the dimension columns from them and prunes files by them on a filter. The
    schema is the first file's, as `ds.dataset` takes it."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    parts = []
    for fmt in dict.fromkeys(formats):
        chosen = [i for i, f in enumerate(formats) if f == fmt]
        file_format = ds.ParquetFileFormat() if fmt == "parquet" else ds.CsvFileFormat()
        fmt_files = [os.path.abspath(files[i]) for i in chosen]
        schema = ds.dataset(fmt_files[0], format=file_format).schema
        added = [(j, d) for j, d in enumerate(dims) if d not in schema.names]
        for _, d in added:
            schema = schema.append(pa.field(d, pa.string()))
        partitions = None
        if added:
            partitions = []
            for i in chosen:
                expr = None
                for j, d in added:
                    term = ds.field(d) == key_values[i][j]
                    expr = term if expr is None else expr & term
                partitions.append(expr)
        parts.append(ds.FileSystemDataset.from_paths(
            fmt_files, schema=schema, format=file_format, filesystem=pafs.LocalFileSystem(),
            partitions=partitions))
    return parts[0] if len(parts) == 1 else ds.dataset(parts)


# --- splitting a table result ----------------------------------------------------------------

def split_table(value: Any, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                targets: Sequence[Path]) -> list[tuple[int, str]]:
    """Write a batch call's table as one parquet file per key, each key's rows sorted by every
    column so the same rows in any order give the same bytes. Rows match keys by the text of
    their dimension values (1 is the key "1"); a key with no rows gets an empty file with the
    table's schema. Returns (size in bytes, blake2b-16 hex digest) per key, aligned with
    `targets`. A missing dimension column, a row of another key, or a key in two forms (1 and
    "1" in one column) is a BatchResultError, and then no target is written."""
    _check_lengths(dims, key_values, {"targets": targets})
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
        return _split_pandas(value, dims, key_values, targets)
    return _split_with_duckdb(value, kind, dims, key_values, targets)


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
        f"batch returned a row for {_key_text(dims, key)}, which is not one of this call's keys; "
        "return only rows of the keys the call received (the partition parameter's list)")


def _split_pandas(df: Any, dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
                  targets: Sequence[Path]) -> list[tuple[int, str]]:
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
    order = _sort_indices(table, codes)
    table, codes = table.take(order), codes[order.to_numpy()]
    bounds = np.searchsorted(codes, np.arange(len(key_values) + 1))
    out = []
    for i, target in enumerate(targets):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        out.append(_write_atomically(target, lambda tmp, t=part: pq.write_table(t, tmp)))
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
            shown = repr(text[0]) if len(dims) == 1 else _key_text(dims, text)
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


def _write_atomically(target: Path, write: Any) -> tuple[int, str]:
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    tmp = _temporary_name(target)
    try:
        write(tmp)
        result = _digest_file(tmp)
        _replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return result


def _split_with_duckdb(value: Any, kind: str, dims: Sequence[str],
                       key_values: Sequence[tuple[str, ...]],
                       targets: Sequence[Path]) -> list[tuple[int, str]]:
    """Two passes through DuckDB in a scratch directory next to the targets:

    1. the table, joined to the call's keys (from a small parquet file, so that the join works
       in any connection), is written unsorted into buckets of consecutive key indexes with
       `COPY ... PARTITION_BY (bucket)`: it streams, on the table's connection and threads,
       without the memory of a sort of the whole table.
    2. each bucket is sorted by key index then every column and written with `COPY ...
       PARTITION_BY (key index)` on a connection of one thread: DuckDB 2.0.1 with several threads
       writes a partition's rows in the order its threads deliver them (it broke the sort in 60
       of 10,000 keys), while one thread keeps it.

    Partitioning by the key's index, not its text, keeps arbitrary key strings out of directory
    names. Each key's file is then renamed onto its target."""
    import duckdb

    parent = _scratch_parent(targets)
    work = Path(tempfile.mkdtemp(prefix=".batch-split-", dir=parent))
    try:
        keys_file, schema, buckets = work / "keys.parquet", work / "schema.parquet", \
            work / "buckets"
        _write_keys(keys_file, dims, key_values)
        per_bucket = _keys_per_bucket(len(targets))
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
                    f"SELECT {', '.join(f'CAST({_quote(d)} AS VARCHAR)' for d in dims)} FROM "
                    f"read_parquet({_literal(unknown / '*.parquet')}, hive_partitioning = false) "
                    "LIMIT 1").fetchone()
                raise _unknown_key(dims, row)
            empty = work / "empty.parquet"  # as the keys' files: read from parquet, written back
            con.execute(f"COPY (SELECT * EXCLUDE ({_KEY}) FROM read_parquet({_literal(schema)})) "
                        f"TO {_literal(empty)} (FORMAT parquet)")
        return _write_buckets(buckets, per_bucket, work, empty, targets)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _keys_per_bucket(keys: int) -> int:
    """Buckets hold whole ranges of _KEYS_PER_COPY keys, and there are at most _MAX_BUCKETS of
    them (pass 1's memory grows with its partitions)."""
    ranges = -(-keys // _KEYS_PER_COPY)
    return _KEYS_PER_COPY * max(1, -(-ranges // _MAX_BUCKETS))


def _scratch_parent(targets: Sequence[Path]) -> str:
    """The deepest directory holding every target: on their filesystem, so renames are cheap."""
    parent = os.path.commonpath([os.path.dirname(os.path.abspath(t)) for t in targets])
    os.makedirs(parent, exist_ok=True)
    return parent


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
    match = " AND ".join(f"CAST(v.{_quote(d)} AS VARCHAR) = k.{_DIM}{j}"
                         for j, d in enumerate(dims))
    return (f"SELECT k.{_KEY}, v.* FROM {view} AS v "
            f"LEFT JOIN read_parquet({_literal(keys_file)}) AS k ON {match}")


def _write_buckets(buckets: Path, per_bucket: int, work: Path, empty: Path,
                   targets: Sequence[Path]) -> list[tuple[int, str]]:
    """Pass 2: each range of key indexes is read from its bucket, sorted and written with
    PARTITION_BY, and its keys' files are moved onto their targets. Two workers share the
    ranges, each with a connection of its own (opening one costs about 35 ms), so that one
    range's renames and digests overlap another's writing. The direction of the sort is spelled
    out so that a connection's default_order or default_null_order cannot change the bytes."""
    import duckdb

    results: list[tuple[int, str]] = [(0, "")] * len(targets)
    for parent in {os.path.dirname(t) for t in targets}:
        os.makedirs(parent or ".", exist_ok=True)
    starts = range(0, len(targets), _KEYS_PER_COPY)
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
            # a range larger than memory spills here, next to the targets, and goes with them
            con.execute(f"SET temp_directory = {_literal(work / 'spill')}")
            for lo in ranges:
                hi = min(lo + _KEYS_PER_COPY, len(targets))
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
                    results[i] = _place(files, empty, targets[i], work)
        finally:
            con.close()

    if workers <= 1:
        work_through(starts)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(work_through, [starts[w::workers] for w in range(workers)]))
    return results


def _place(files: list[str], empty: Path, target: Path, work: Path) -> tuple[int, str]:
    """Move one key's file onto its target (whose directory exists) and digest it. A key DuckDB
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
    result = _digest_file(str(source))
    try:
        _replace(str(source), target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        _write_atomically(target, lambda tmp: shutil.copyfile(source, tmp))  # another filesystem
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


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: object) -> str:
    return "'" + str(text).replace("'", "''") + "'"
