"""Writing a step's value to its artifact file and reading it back for a consumer.

The format follows the value: tables (pandas, polars, Arrow, DuckDB) become parquet, values
that plain JSON can hold become JSON, anything else a pickle. A key source's {key: value} dict
is `keyed-json`: one JSON object {"keys": [...], "values": [...]} in key order, written from
the packed chunks the step has already made, so a tick never encodes the whole dict again. A
reader picks the Python type from the consumer's annotation. Heavy libraries are imported only
when a value or an annotation needs them; a value's type is recognised through `sys.modules`,
never by importing.
Files appear under their name only complete (written unnamed and linked, or under a
temporary name and renamed), so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

import orjson

from barca.fd_writes import write_all
from barca.store import unstorable

_JSON_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | \
    orjson.OPT_PASSTHROUGH_SUBCLASS
_SORTED_JSON_OPTS = _JSON_OPTS | orjson.OPT_SORT_KEYS
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


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


def write_value(value: Any, path: Path | str, fmt: str) -> tuple[int, str]:
    """Write atomically; returns (size in bytes, blake2b digest of the bytes). A value the
    format cannot hold is a SerializeError naming its type and the fix."""
    if fmt in ("json", "pickle"):
        data = encode_json(value) if fmt == "json" else _pickled(value)
        if data is None:
            raise SerializeError(unstorable.not_json(value))
        write_bytes(data, path)
        return len(data), hashlib.blake2b(data, digest_size=16).hexdigest()
    writer = {"parquet": _write_parquet, "csv": _write_csv}.get(fmt)
    if writer is None:
        raise SerializeError(f"unknown format {fmt!r}")
    with _atomic(path) as tmp:
        try:
            writer(value, Path(tmp))
        except (OSError, SerializeError):
            raise
        except Exception as exc:  # the table library refused a column
            raise SerializeError(unstorable.not_written(value, fmt, exc)) from None
        return _digest_file(tmp)


def _pickled(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=5)
    except Exception as exc:  # pickle's refusals are TypeError, AttributeError, PicklingError...
        raise SerializeError(unstorable.cannot_pickle(value, exc)) from None


def write_bytes(data: bytes, path: Path | str) -> None:
    """Write bytes atomically. Plain calls on text paths, and the directory made only when
    missing: a batch call writes thousands of small results, and any more per file shows.

    A new file is written unnamed (O_TMPFILE) and given its name when complete (linkat): one
    directory entry, where a temporary name renamed into place makes two (on ext4, 40-65 us a
    file against 60-95 us), and a killed writer leaves nothing behind. Replacing a file, or a
    file system without O_TMPFILE, takes the temporary name and the rename."""
    path = os.fspath(path)
    if _UNNAMED[0] and _write_unnamed(data, path):
        return
    tmp = _temporary_name(path)
    try:
        fd = os.open(tmp, _NEW_FILE, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, _NEW_FILE, 0o644)
    try:
        try:
            write_all(fd, (data,))
        finally:
            os.close(fd)
        _replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


_UNNAMED = [hasattr(os, "O_TMPFILE")]  # cleared once the file system refuses
_UNNAMED_FILE = getattr(os, "O_TMPFILE", 0) | os.O_WRONLY | os.O_CLOEXEC


def _write_unnamed(data: bytes, path: str) -> bool:
    """Write `path` as a new file named only once complete; False when it exists already or
    unnamed files cannot be made here (the caller then renames a temporary file)."""
    folder = os.path.dirname(path) or "."
    try:
        try:
            fd = os.open(folder, _UNNAMED_FILE, 0o644)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(folder, _UNNAMED_FILE, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
        _UNNAMED[0] = False  # no O_TMPFILE on this file system
        return False
    try:
        write_all(fd, (data,))
        # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd names the open file. A dir fd makes
        # os.link call linkat, which honours follow_symlinks; the path being absolute, which
        # fd does not matter
        os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd, follow_symlinks=True)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP):
            raise
        _UNNAMED[0] = False  # no /proc, or it cannot link: rename temporary files instead
        return False
    finally:
        os.close(fd)
    return True


class KeyedJsonWriter:
    """Writes a keyed-json file from packed chunks (each the JSON array of a run of keys or
    values) in two threads while the caller works on: the keys part as soon as the keys are
    packed, the values part once the values are. Each thread writes with `writev`
    (barca.fd_writes), which lets go of the GIL, so the bytes are written in parallel and never
    copied. The file
    appears under its name only complete."""

    def __init__(self, path: Path, key_chunks: Sequence[bytes]) -> None:
        self._path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._tmp = _temporary_name(path)
        self._fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._error: list[BaseException] = []
        self._size = 0
        self._thread = self._start([b'{"keys":[', *_items(key_chunks), b'],"values":['])

    def finish(self, value_chunks: Sequence[bytes]) -> None:
        """Start writing the values part, which ends the file."""
        self._thread.join()
        self._thread = self._start([*_items(value_chunks), b"]}"])

    def close(self) -> int:
        """Wait for the file to be in place; returns its size in bytes."""
        self._thread.join()
        self._end(keep=not self._error)
        if self._error:
            raise self._error[0]
        return self._size

    def abort(self) -> None:
        """Stop, leaving no file behind (an earlier file under the name stays as it was)."""
        self._thread.join()
        self._end(keep=False)

    def _start(self, parts: list[bytes | memoryview]) -> threading.Thread:
        self._size += sum(map(len, parts))
        thread = threading.Thread(target=self._write, args=(parts,), daemon=True)
        thread.start()
        return thread

    def _write(self, parts: list[bytes | memoryview]) -> None:
        try:
            if not self._error:
                write_all(self._fd, parts)
        except BaseException as exc:  # noqa: BLE001 - raised again by close()
            self._error.append(exc)

    def _end(self, keep: bool) -> None:
        os.close(self._fd)
        if keep:
            _replace(self._tmp, self._path)
        else:
            os.unlink(self._tmp)


def _items(chunks: Sequence[bytes]) -> list[bytes | memoryview]:
    """The chunks' items as the inside of one JSON array: each chunk without its brackets."""
    parts: list[bytes | memoryview] = []
    for i, chunk in enumerate(chunks):
        if i:
            parts.append(b",")
        parts.append(memoryview(chunk)[1:-1])
    return parts


@contextlib.contextmanager
def _atomic(path: Path) -> Iterator[str]:
    """A temporary name next to `path`, renamed onto it when the block ends without error."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _temporary_name(path)
    try:
        yield tmp
        _replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _temporary_name(path: Path | str) -> str:
    head, _, name = os.fspath(path).rpartition("/")
    return f"{head}/.{name}.{os.getpid()}.tmp" if head else f".{name}.{os.getpid()}.tmp"


def _replace(tmp: str, path: Path | str) -> None:
    """Rename into place; a directory squatting on the artifact's name is moved aside first."""
    try:
        os.replace(tmp, path)
    except IsADirectoryError:
        _move_aside(Path(path))
        os.replace(tmp, path)


def _digest_file(path: str) -> tuple[int, str]:
    h = hashlib.blake2b(digest_size=16)
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _move_aside(path: Path) -> None:
    """A directory where an artifact belongs: remove it if empty, else rename it, never delete."""
    try:
        path.rmdir()
        return
    except OSError:
        pass
    n = 1
    target = path.with_name(path.name + ".moved-aside")
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.moved-aside-{n}")
    path.rename(target)
    logging.getLogger("barca").warning("moved directory %s aside to %s", path, target.name)


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


def read_bytes(path: Path | str) -> bytes:
    """A file's bytes through plain `os` calls: a batch call or `get --json` reads one small
    result per key, and `open()`'s file object costs twice the read (~35 us against ~12 us
    a small file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_value(path: Path, fmt: str, annotation: str | None = None) -> Any:
    """Load an artifact as the consumer's annotation asks (tables only; JSON and pickle as is)."""
    if fmt == "json":
        return orjson.loads(read_bytes(path))
    if fmt == "keyed-json":
        columns = orjson.loads(read_bytes(path))
        return dict(zip(columns["keys"], columns["values"]))
    if fmt == "pickle":
        with open(path, "rb") as fh:
            return pickle.load(fh)
    if fmt == "parquet":
        return _read_table(path, annotation, "parquet")
    if fmt == "csv":
        return _read_table(path, annotation, "csv")
    raise SerializeError(f"unknown format {fmt!r}")


def _read_table(path: Path, annotation: str | None, fmt: str) -> Any:
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
