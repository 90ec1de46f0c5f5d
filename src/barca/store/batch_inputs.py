"""A batch call's input read key for key, handed to the step as one lazy table.

A batch call covers many keys, often thousands, each with an artifact of its own. Opening them
one by one would cost a Python object per key, so `lazy_table` hands the step one lazy table
over all the files (DuckDB, polars or pyarrow scans them), with the key's dimension values added
as columns; nothing is read until the step queries it. `lazy_table` reads local files (a store
gives each key's, store.artifact_store `local_path`); `lazy_input` reads the parquet results of
a remote store in place instead, by byte ranges, each page checked against its checksum
(store.ranged_tables), and fetches whole only what cannot be read so. Heavy libraries are
imported only when used.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, Sequence

from barca.store.artifact_store import ArtifactStore

_FILE = "__barca_file"  # the column naming the artifact a row came from


class BatchInputError(Exception):
    """A batch input's artifacts cannot be read as one lazy table (they are not tables)."""


def lazy_input(store: ArtifactStore, annotation: str, dims: Sequence[str],
               key_values: Sequence[tuple[str, ...]], keys: Sequence[str],
               formats: Sequence[str]) -> Any:
    """`lazy_table` over the results of `keys` in `store`: read in place where they can be
    (`in_place`), else from local files, each fetched whole and checked against its digest."""
    table = in_place(store, annotation, dims, key_values, keys, formats)
    if table is not None:
        return table
    paths = [Path(store.local_path(key)) for key in keys]
    return lazy_table(annotation, dims, key_values, paths, formats)


def in_place(store: ArtifactStore, annotation: str, dims: Sequence[str],
             key_values: Sequence[tuple[str, ...]], keys: Sequence[str],
             formats: Sequence[str]) -> Any | None:
    """`lazy_table` over parquet results of which some are read in place (ranged_tables
    `fragment`: a remote store's, bigger than a footer read, written with page checksums) and
    the rest from local files (fetched whole): one pyarrow dataset of every key's file, its
    dimensions filled by partition expressions, as a DuckDB relation or a polars LazyFrame
    over it where the annotation asks. None when no key is read so, or when the call is not
    one that reads so exactly as `lazy_table` would: a key that is not parquet, or, for DuckDB
    and polars, files of different schemas (DuckDB unifies them by name, polars matches
    their columns by name or refuses them); the caller then fetches them whole."""
    kind = _lazy_kind(annotation)
    check_lengths(dims, key_values, {"keys": keys, "formats": formats})
    remote = [store.remote_file(key) is not None for key in keys]
    if not any(remote) or any(fmt != "parquet" for fmt in formats):
        return None
    from barca.store.ranged_tables import fragment, fragments

    # the first file's schema says which dimensions the files lack, as `lazy_table` has it;
    # guessed as all of them, so that its footer is read once when it is so
    guess = list(enumerate(dims))
    first = fragment(store, keys[0], _partition(guess, key_values[0])) if remote[0] else None
    first_ranged = first is not None
    if first is None:
        first = _local_fragment(store, keys[0], _partition(guess, key_values[0]))
    schema = first.physical_schema
    added = [(j, d) for j, d in guess if d not in schema.names]
    exprs = [_partition(added, key) for key in key_values]
    start = 1 if added == guess else 0  # the first fragment is the one wanted already
    todo = [i for i in range(start, len(keys)) if remote[i]]
    read = dict(zip(todo, fragments(store, [keys[i] for i in todo], [exprs[i] for i in todo])))
    ranged = bool(start and first_ranged) or any(p is not None for p in read.values())
    parts = [first] if start else []
    for i in range(start, len(keys)):
        part = read.get(i)
        parts.append(part if part is not None else _local_fragment(store, keys[i], exprs[i]))
    if not ranged:
        return None  # every file is here after all: `lazy_table` reads them
    if kind != "arrow" and any(not p.physical_schema.equals(schema) for p in parts):
        return None
    return _over(kind, annotation, parts, schema, [d for _, d in added])


def _partition(added: Sequence[tuple[int, str]], key: Sequence[str]) -> Any:
    """`dim == value` for each dimension the files lack (None: no such dimension)."""
    import pyarrow.dataset as ds

    expr = None
    for j, d in added:
        term = ds.field(d) == key[j]
        expr = term if expr is None else expr & term
    return expr


def _local_fragment(store: ArtifactStore, key: str, partition: Any) -> Any:
    """The key's result as a fragment of its local file (fetched whole first when it is not
    here, and checked against its digest)."""
    import pyarrow.fs as pafs

    from barca.store.ranged_tables import checked_format

    return checked_format().make_fragment(os.path.abspath(store.local_path(key)),
                                          filesystem=pafs.LocalFileSystem(),
                                          partition_expression=partition)


def _over(kind: str, annotation: str, parts: Sequence[Any], schema: Any,
          added: Sequence[str]) -> Any:
    """One dataset of the fragments, with the dimension columns the files lack (strings), as
    the library the annotation names reads it."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from barca.store.ranged_tables import checked_format, lazy_over

    for d in added:
        schema = schema.append(pa.field(d, pa.string()))
    dataset = ds.FileSystemDataset(list(parts), schema, checked_format(), parts[0].filesystem)
    return dataset if kind == "arrow" else lazy_over(dataset, annotation)


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
    check_lengths(dims, key_values, {"paths": paths, "formats": formats})
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
    """The library an annotation names, by its last dotted part, as store.artifacts reads tables."""
    leaf = (annotation or "").replace(" ", "").rsplit(".", 1)[-1]
    kind = {"DuckDBPyRelation": "duckdb", "LazyFrame": "polars", "Dataset": "arrow"}.get(leaf)
    if kind is None:
        raise ValueError(f"{annotation!r} is not a lazy table annotation; expected one of "
                         + ", ".join(_LIBRARY.values()))
    return kind


def check_lengths(dims: Sequence[str], key_values: Sequence[tuple[str, ...]],
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
            f"the artifact of {key_label(dims, key)} is {what}; a lazy table input needs {needs}."
            " Annotate the parameter as dict[str, T] to receive key -> value instead")


def _json_records(path: Path) -> bool:
    """Whether a JSON artifact is a list of records, from its first bytes: `[` then `{` or `]`."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"["):
        return False
    rest = head[1:].lstrip(b" \t\r\n")
    return rest[:1] in (b"{", b"]") or not rest  # only blanks so far: let the reader decide


def key_label(dims: Sequence[str], key: Sequence[Any]) -> str:
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
        selected.append(f"CAST(unnest($barca_dim{i}_{tag}) AS VARCHAR) AS {quote(dim)}")
    mapping = con.sql("SELECT " + ", ".join(selected), params=mapping_params)
    added = [d for d in dims if d not in read.columns]
    joined = read.set_alias("barca_f").join(mapping.set_alias("barca_m"), _FILE)
    return joined.project(", ".join([f"barca_f.* EXCLUDE ({_FILE})"]
                                    + [f"barca_m.{quote(d)}" for d in added]))


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


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
