"""A parquet result in a remote store read in place, by byte ranges, as a lazy table.

A step that takes a result as a DuckDB relation or a polars LazyFrame and selects a few of its
columns needs only those columns' pages: fetching the whole object first (to check it against
the SHA-256 in its name) moves every byte. So such an input is a pyarrow dataset over the
object itself, read through the store's own fsspec file system (its endpoint, credentials and
options); DuckDB (`from_arrow`) and polars (`scan_pyarrow_dataset`) push their projections and
filters into it, so only the footer and the chosen columns' pages are requested. A batch
call's lazy input (store.batch_inputs) is one dataset of such fragments, one per key, whose
footers are read a few at a time (`fragments`).

A ranged read cannot be checked against the whole object's digest, so it is only done on an
object whose pages carry checksums: barca writes its pyarrow and pandas results to a remote
store with CRC-32 page checksums and a footer entry saying so (`MARK`, store.artifacts), and
the dataset verifies each page it reads (`page_checksum_verification`): a damaged page is an
error, never a wrong value, and the step or batch call that met it is run once more on the
objects fetched whole (`damaged_page`; engine.worker.step_runner and call_runner), which names
a damaged object by its digest, or reads one damaged on its way here intact. Anything else (a
result written by polars or DuckDB, whose writers set no checksums, a footer that cannot be
read, no mark) is None here: the caller fetches it whole and checks its digest, as before. So
is an object no bigger than pyarrow's footer read (`FOOTER_READ`): that one request would move
it whole, and the pages would then be requested again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from barca.store.artifact_store import ArtifactStore

MARK = b"barca.page_checksums"  # footer key-value entry of a result written with checksums
MARK_VALUE = b"crc32"
FOOTER_READ = 64 << 10  # what pyarrow reads of a file's end to find its footer, in one request
FOOTER_THREADS = 16  # footers of a batch call's keys read at once


def write_checked(table: Any, path: str | Path) -> None:
    """A pyarrow table as parquet with CRC-32 page checksums and `MARK` in its footer's
    key-value entries (which pyarrow, pandas and polars do not show as schema metadata)."""
    import pyarrow.parquet as pq

    with pq.ParquetWriter(path, table.schema, write_page_checksum=True) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({MARK: MARK_VALUE})


def in_place(store: ArtifactStore, key: str) -> Any | None:
    """A pyarrow dataset over the key's parquet object read by range with every page checked,
    or None when it is to be fetched whole (see the module docstring)."""
    found = fragment(store, key)
    if found is None:
        return None
    import pyarrow.dataset as ds

    return ds.FileSystemDataset([found], found.physical_schema, checked_format(),
                                found.filesystem)


def fragment(store: ArtifactStore, key: str, partition: Any = None) -> Any | None:
    """The key's parquet object as a pyarrow fragment read by range, its footer read (once: a
    scan reuses it) and its pages checked as they are read, with `partition` (an expression
    giving columns the file lacks) or None: fetched whole, for the reasons of the module
    docstring, or as an object no bigger than `FOOTER_READ`, which a ranged read would move
    whole with its footer, then again page by page."""
    found = store.remote_file(key)
    if found is None:
        return None
    fs, path, size = found
    if size is not None and size <= FOOTER_READ:
        return None
    import pyarrow.fs as pafs

    try:
        part = checked_format().make_fragment(path, filesystem=pafs.PyFileSystem(_ranges(fs)),
                                              partition_expression=partition, file_size=size)
        footer = part.metadata.metadata  # the file's key-value entries
    except Exception:  # noqa: BLE001 (an unreadable footer: the whole fetch names the damage)
        return None
    return part if (footer or {}).get(MARK) == MARK_VALUE else None


def fragments(store: ArtifactStore, keys: Sequence[str], partitions: Sequence[Any]
              ) -> list[Any | None]:
    """`fragment` of each key with its partition, their footers read on a few threads at once:
    a batch call's keys each have one, and each is a request that mostly waits."""
    if len(keys) < 2:
        return [fragment(store, key, part) for key, part in zip(keys, partitions)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(FOOTER_THREADS, len(keys))) as pool:
        return list(pool.map(lambda kp: fragment(store, *kp), zip(keys, partitions)))


def checked_format() -> Any:
    """Parquet read with each page checked against its checksum (a page without one, as a
    local copy written by polars, is read as it is)."""
    import pyarrow.dataset as ds

    return ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(
        page_checksum_verification=True))


def _ranges(fs: Any) -> Any:
    """`fs` for pyarrow, its files opened with no read-ahead: each read pyarrow makes (the
    footer, a column chunk) is one ranged request of those bytes, where fsspec's default
    cache reads blocks of megabytes past them (the whole object, for most results)."""
    import pyarrow.fs as pafs

    class Ranges(pafs.FSSpecHandler):
        def open_input_file(self, path: str) -> Any:
            from pyarrow import PythonFile

            return PythonFile(self.fs.open(path, mode="rb", cache_type="none"), mode="r")

    return Ranges(fs)


def damaged_page(exc: BaseException) -> bool:
    """Whether an error (DuckDB's or polars', which wrap pyarrow's) is a page that failed its
    checksum."""
    seen: BaseException | None = exc
    while seen is not None:
        if "CRC checksum verification failed" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def lazy_over(dataset: Any, annotation: str) -> Any:
    """The dataset as the lazy table the annotation names (DuckDBPyRelation or LazyFrame)."""
    if annotation.replace(" ", "").rsplit(".", 1)[-1] == "LazyFrame":
        import polars as pl

        return pl.scan_pyarrow_dataset(dataset)
    import duckdb

    con = duckdb.default_connection() if callable(getattr(duckdb, "default_connection", None)) \
        else duckdb.default_connection
    return con.from_arrow(dataset)
