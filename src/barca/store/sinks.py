"""Writing a step's result to its sinks (`@sink`): extra copies outside `.barca/`.

Where: a sink path is local (relative to the project root, or `file://...`) or an fsspec URL
(`s3://bucket/x.parquet`, any scheme fsspec knows; fsspec is imported only then). A key of a
partitioned asset writes its own copy: `out.parquet` becomes `out_region_emea.parquet`, and a
dataset sink (a path ending in `/`) gets one directory per key, `out/region=emea/data.parquet`,
the layout DuckDB, Spark and pyarrow read as a hive-partitioned dataset.

Format: `serializer=`, else the path's extension, else the format of the step's artifact.
When it is the artifact's format, the artifact's bytes are copied; otherwise the value is
written again in that format (a table only for parquet and csv).

A sink that fails does not fail its step: `write_sinks` returns the messages, the run goes on.
Local writes are atomic and safe in a directory other users write to (store.sink_files: a new
temporary file of a random name, then a rename); a symlink at the path of the writing user or
root keeps pointing where it did and its target is written, one of another user is refused; a
directory at a file sink's path is an error and is left as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Any, Callable, Sequence

from barca.store.artifacts import SerializeError, encode_json, table_kind, write_value
from barca.store.paths import EXTENSIONS, key_dir, key_stem
from barca.store.sink_files import place, resolve

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BY_EXTENSION = {".json": "json", ".pkl": "pickle", ".pickle": "pickle", ".parquet": "parquet",
                 ".csv": "csv"}
DATASET_FILE = "data"  # a dataset sink's file in each key's directory: data.<ext>

Sink = tuple[str, "str | None"]  # (destination, serializer)


def scheme(path: str) -> str | None:
    """`s3` for `s3://b/x`, None for a local path (and for `file://`, which is local)."""
    found = _SCHEME.match(path)
    if found is None or found.group(1).lower() == "file":
        return None
    return found.group(1).lower()


def missing_backend(path: str) -> str | None:
    """Why a sink path cannot be written from here (fsspec or its backend is not installed),
    None when it can. Imports fsspec only for a URL."""
    protocol = scheme(path)
    if protocol is None:
        return None
    try:
        import fsspec
    except ImportError:
        return f"sink '{path}' is an fsspec URL, and fsspec is not installed"
    try:
        fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError) as exc:
        return f"sink '{path}': fsspec cannot write '{protocol}://' here: {exc}"
    return None


def destination(path: str, pairs: Sequence[tuple[str, str]]) -> str:
    """Where one key writes: the path itself for an unpartitioned asset, else the key's own
    file (`out_region_emea.parquet`) or, for a dataset sink, its own directory."""
    if path.endswith("/"):
        keys = "".join(f"{key_dir(dim, value)}/" for dim, value in pairs)
        return f"{path}{keys}"
    if not pairs:
        return path
    head, slash, name = path.rpartition("/")
    stem, ext = os.path.splitext(name)
    return f"{head}{slash}{stem}_{key_stem(pairs)}{ext}"


def sink_format(dest: str, serializer: str | None, artifact_format: str) -> str:
    if serializer is not None:
        return serializer
    if not dest.endswith("/"):
        found = _BY_EXTENSION.get(os.path.splitext(dest)[1].lower())
        if found is not None:
            return found
    return "json" if artifact_format == "keyed-json" else artifact_format


def write_sinks(root: str, sinks: Sequence[Sink], artifact: str, artifact_format: str,
                value: Callable[[], Any]) -> tuple[str, ...]:
    """Write each sink of one key; the message of each that failed (`<path>: <Error>: ...`).
    `artifact` is the key's artifact file; `value()` gives the value when it must be
    written again in another format."""
    failed = []
    for dest, serializer in sinks:
        try:
            _write(root, dest, serializer, artifact, artifact_format, value)
        except Exception as exc:  # noqa: BLE001 - a sink never fails its step
            failed.append(f"{dest}: {type(exc).__name__}: {exc}")
    return tuple(failed)


def _write(root: str, dest: str, serializer: str | None, artifact: str, artifact_format: str,
           value: Callable[[], Any]) -> None:
    fmt = sink_format(dest, serializer, artifact_format)
    if dest.endswith("/"):
        dest = f"{dest}{DATASET_FILE}.{EXTENSIONS[fmt]}"
    if scheme(dest) is not None:
        _write_remote(dest, fmt, artifact, artifact_format, value)
        return
    local = resolve(os.path.join(root, os.path.expanduser(_local_path(dest))))
    if os.path.isdir(local):
        raise IsADirectoryError(f"a directory is in the way at {local}; the sink leaves it "
                                "as it is")
    if fmt == artifact_format:
        place(artifact, local)
        return
    with tempfile.TemporaryDirectory(prefix="barca-sink-") as scratch:  # private to this user
        written = os.path.join(scratch, f"out.{EXTENSIONS[fmt]}")
        _write_value(value(), written, fmt)
        place(written, local)


def _local_path(dest: str) -> str:
    """`file:///abs/x` -> `/abs/x`, `file://rel/x` -> `rel/x`; any other path as it is."""
    if dest[:7].lower() != "file://":
        return dest
    rest = dest[7:]
    return rest[len("localhost"):] if rest.startswith("localhost/") else rest


def _write_value(value: Any, local: str, fmt: str) -> None:
    kind = type(value).__name__
    if fmt in ("parquet", "csv") and table_kind(value) is None:
        raise SerializeError(f"a {fmt} sink needs a table (pandas, polars, Arrow or DuckDB), "
                             f"and the result is a {kind}; use a .json or .pkl path, or "
                             "serializer=")
    if fmt == "json" and (table_kind(value) is not None or encode_json(value) is None):
        raise SerializeError(f"a json sink needs a value JSON gives back as it is (dicts with "
                             f"str keys, lists, str, finite numbers, bool, None), and the "
                             f"result is a {kind}; use a .parquet, .csv or .pkl path")
    write_value(value, local, fmt)


def _write_remote(url: str, fmt: str, artifact: str, artifact_format: str,
                  value: Callable[[], Any]) -> None:
    """Write locally first (the same bytes a local sink would get), then upload."""
    import fsspec

    with tempfile.TemporaryDirectory(prefix="barca-sink-") as scratch:
        local = os.path.join(scratch, f"out.{EXTENSIONS[fmt]}")
        if fmt == artifact_format:
            local = artifact
        else:
            _write_value(value(), local, fmt)
        with open(local, "rb") as src, fsspec.open(url, "wb") as dst:
            shutil.copyfileobj(src, dst)

