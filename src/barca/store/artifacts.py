"""Writing a step's value to its artifact file and reading it back for a consumer.

The format follows the value: tables (pandas, polars, Arrow, DuckDB) become parquet, values
that plain JSON can hold become JSON, anything else a pickle. A key source's {key: value} dict
is `keyed-json`: one JSON object {"keys": [...], "values": [...]} in key order, written from
the packed chunks the step has already made, so a tick never encodes the whole dict again. A
reader picks the Python type from the consumer's annotation. Heavy libraries are imported only
when a value or an annotation needs them; a value's type is recognised through `sys.modules`,
never by importing.

Results go to an artifact store (store.artifact_store) by key: `write_result` and
`read_result` (a lazy table input of a remote store's parquet result read in place, by byte
ranges: store.ranged_tables). `write_value` and `read_value` do the same on a local file outside any store (a
sink's copy, the command line reading a local result). Either way a result appears only
complete, so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
from pathlib import Path
from typing import Any, Callable

import orjson

from barca.store import unstorable
from barca.store.artifact_store import ArtifactStore, staged
from barca.store.local_files import atomic, digest_file, read_bytes, write_bytes
from barca.store.packs import PACKED_MAX, PackWriter

_JSON_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | \
    orjson.OPT_PASSTHROUGH_SUBCLASS
_SORTED_JSON_OPTS = _JSON_OPTS | orjson.OPT_SORT_KEYS


class SerializeError(Exception):
    """A value cannot be written in the requested format."""


def table_kind(value: Any) -> str | None:
    """'pandas' | 'polars' | 'polars_lazy' | 'arrow' | 'duckdb' for a table value, else None."""
    mods = sys.modules
    if "pandas" in mods and isinstance(value, mods["pandas"].DataFrame):
        return "pandas"
    if "polars" in mods:
        pl = mods["polars"]
        if isinstance(value, pl.DataFrame):
            return "polars"
        if isinstance(value, pl.LazyFrame):
            return "polars_lazy"
    if "pyarrow" in mods and isinstance(value, mods["pyarrow"].Table):
        return "arrow"
    if "duckdb" in mods and isinstance(value, mods["duckdb"].DuckDBPyRelation):
        return "duckdb"
    return None


def encode_json(value: Any, sort_keys: bool = False) -> bytes | None:
    """JSON bytes when JSON gives the value back as it is, else None (it becomes a pickle).

    Non-str dict keys and NaN or infinite floats would come back changed, so they do not count.
    With `sort_keys`, objects' keys are sorted at every level (columns.pack_chunks' bytes).
    """
    try:
        data = orjson.dumps(value, option=_SORTED_JSON_OPTS if sort_keys else _JSON_OPTS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if b"null" in data and _has_non_finite(value):  # orjson writes NaN and inf as null
        return None
    return data


def _has_non_finite(value: Any) -> bool:
    if value.__class__ is float:
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_non_finite(v) for v in value)
    return False


def choose_format(value: Any, serializer: str | None) -> str:
    if serializer in ("json", "pickle", "parquet", "csv"):
        if serializer in ("parquet", "csv") and table_kind(value) is None:
            return "pickle"
        return serializer
    if table_kind(value) is not None:
        return "parquet"
    return "json" if encode_json(value) is not None else "pickle"


def write_result(store: ArtifactStore, key: str, value: Any, fmt: str) -> tuple[int, str]:
    """Write a result whole under `key`; returns (size in bytes, blake2b digest of the bytes).
    A value the format cannot hold is a SerializeError naming its type and the fix."""
    if fmt in ("json", "pickle"):
        data = _encoded(value, fmt)
        store.put(key, data)
        return len(data), hashlib.blake2b(data, digest_size=16).hexdigest()
    writer = _table_writer(fmt, checked=store.reads_in_place)
    with staged(store, key) as tmp:
        return _write_table(writer, value, fmt, tmp)


def write_packable(store: ArtifactStore, key: str, value: Any, fmt: str,
                   packs: PackWriter | None) -> tuple[str, int, str]:
    """`write_result`, but a small JSON or pickle result goes into one of `packs` (a
    partitioned node's key: store.packs) when given: (the result's store key, size, digest)."""
    if packs is None or fmt not in ("json", "pickle"):
        return (key, *write_result(store, key, value, fmt))
    data = _encoded(value, fmt)
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if len(data) > PACKED_MAX:
        store.put(key, data)
        return key, len(data), digest
    return packs.add(store, key.rpartition("/")[0], data), len(data), digest


def write_value(value: Any, path: Path | str, fmt: str) -> tuple[int, str]:
    """`write_result` to a local file outside any store (a sink's copy), atomically."""
    if fmt in ("json", "pickle"):
        data = _encoded(value, fmt)
        write_bytes(data, path)
        return len(data), hashlib.blake2b(data, digest_size=16).hexdigest()
    writer = _table_writer(fmt)
    with atomic(path) as tmp:
        return _write_table(writer, value, fmt, tmp)


def _encoded(value: Any, fmt: str) -> bytes:
    data = encode_json(value) if fmt == "json" else _pickled(value)
    if data is None:
        raise SerializeError(unstorable.not_json(value))
    return data


def _table_writer(fmt: str, checked: bool = False) -> Callable[[Any, Path], None]:
    """The writer of a format; `checked`: parquet for a store that reads it by range, with
    page checksums where the value's library writes them (store.ranged_tables)."""
    if fmt == "parquet" and checked:
        return _write_checked_parquet
    writer = {"parquet": _write_parquet, "csv": _write_csv}.get(fmt)
    if writer is None:
        raise SerializeError(f"unknown format {fmt!r}")
    return writer


def _write_table(writer: Callable[[Any, Path], None], value: Any, fmt: str,
                 tmp: str) -> tuple[int, str]:
    try:
        writer(value, Path(tmp))
    except (OSError, SerializeError):
        raise
    except Exception as exc:  # the table library refused a column
        raise SerializeError(unstorable.not_written(value, fmt, exc)) from None
    return digest_file(tmp)


def _pickled(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=5)
    except Exception as exc:  # pickle's refusals are TypeError, AttributeError, PicklingError...
        raise SerializeError(unstorable.cannot_pickle(value, exc)) from None


def _write_parquet(value: Any, path: Path) -> None:
    kind = table_kind(value)
    if kind == "pandas":
        value.to_parquet(path, index=False)
    elif kind == "polars":
        value.write_parquet(path)
    elif kind == "polars_lazy":
        value.collect().write_parquet(path)
    elif kind == "arrow":
        import pyarrow.parquet as pq

        pq.write_table(value, path)
    elif kind == "duckdb":
        value.write_parquet(str(path))
    else:
        raise SerializeError(f"value of type {type(value).__name__} is not a table")


def _write_checked_parquet(value: Any, path: Path) -> None:
    """A pyarrow or pandas table as parquet with CRC-32 page checksums and the footer entry
    saying so, which lets a reader check each page it reads by range (store.ranged_tables).
    Only results of a remote store: a local store's bytes stay as they were, so no output
    digest changes there. Other libraries set no checksums: written as always, and a reader
    fetches them whole. A DataFrame with `attrs` too (pandas keeps them its own way)."""
    kind = table_kind(value)
    if kind not in ("arrow", "pandas") or (kind == "pandas" and value.attrs):
        return _write_parquet(value, path)
    import pyarrow as pa

    from barca.store.ranged_tables import write_checked

    write_checked(value if kind == "arrow" else pa.Table.from_pandas(value, preserve_index=False),
                  path)


def _write_csv(value: Any, path: Path) -> None:
    kind = table_kind(value)
    if kind == "pandas":
        value.to_csv(path, index=False)
    elif kind in ("polars", "polars_lazy"):
        (value.collect() if kind == "polars_lazy" else value).write_csv(path)
    elif kind == "arrow":
        import pyarrow.csv as pcsv

        pcsv.write_csv(value, path)
    elif kind == "duckdb":
        value.write_csv(str(path))
    else:
        raise SerializeError(f"value of type {type(value).__name__} is not a table")


def read_result(store: ArtifactStore, key: str, fmt: str, annotation: str | None = None) -> Any:
    """Load a stored result as the consumer's annotation asks (tables only; JSON and pickle
    as they are). Tables are read from a local file (`local_path`): the libraries take one."""
    if fmt == "json":
        return orjson.loads(store.get(key))
    if fmt == "keyed-json":
        columns = orjson.loads(store.get(key))
        return dict(zip(columns["keys"], columns["values"]))
    if fmt == "pickle":
        with store.open(key) as fh:
            return pickle.load(fh)
    if fmt in ("parquet", "csv"):
        if fmt == "parquet" and reads_lazily(annotation):
            from barca.store.ranged_tables import in_place, lazy_over

            dataset = in_place(store, key)
            if dataset is not None:
                return lazy_over(dataset, annotation or "")
        return _read_table(store.local_path(key), annotation, fmt)
    raise SerializeError(f"unknown format {fmt!r}")


def reads_lazily(annotation: str | None) -> bool:
    """A DuckDB relation or a polars LazyFrame: read as queried, so by range where it can be."""
    return (annotation or "").replace(" ", "").rsplit(".", 1)[-1] in ("DuckDBPyRelation",
                                                                       "LazyFrame")


def read_value(path: Path | str, fmt: str, annotation: str | None = None) -> Any:
    """`read_result` from a local file (one the command line found, or a sink's)."""
    if fmt == "json":
        return orjson.loads(read_bytes(path))
    if fmt == "keyed-json":
        columns = orjson.loads(read_bytes(path))
        return dict(zip(columns["keys"], columns["values"]))
    if fmt == "pickle":
        with open(path, "rb") as fh:
            return pickle.load(fh)
    if fmt in ("parquet", "csv"):
        return _read_table(path, annotation, fmt)
    raise SerializeError(f"unknown format {fmt!r}")


def _read_table(path: Path | str, annotation: str | None, fmt: str) -> Any:
    text = (annotation or "").replace(" ", "")
    leaf = text.rsplit(".", 1)[-1]
    if leaf == "DuckDBPyRelation":
        import duckdb

        con = duckdb.default_connection() if callable(getattr(duckdb, "default_connection", None)) \
            else duckdb.default_connection
        reader = con.read_parquet if fmt == "parquet" else con.read_csv
        return reader(str(path))
    if leaf == "LazyFrame":
        import polars as pl

        return pl.scan_parquet(path) if fmt == "parquet" else pl.scan_csv(path)
    if text.startswith(("pl.", "polars.")) and leaf == "DataFrame":
        import polars as pl

        return pl.read_parquet(path) if fmt == "parquet" else pl.read_csv(path)
    if leaf == "Table" and text.startswith(("pa.", "pyarrow.")):
        if fmt == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path)
        import pyarrow.parquet as pq

        return pq.read_table(path)
    import pandas as pd

    return pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)
