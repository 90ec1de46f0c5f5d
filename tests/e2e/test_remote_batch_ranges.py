"""A batch call's lazy table input (a DuckDB relation, a polars LazyFrame, a pyarrow dataset over
the call's keys) of parquet results in a remote store is read in place, by byte ranges: a call
on another machine that sums one column of each key's wide table requests the footers and that
column's pages, copies nothing here, and gets the same values as a local run; a damaged page
is detected by its checksum, and the objects are then fetched whole, so the damaged one is
named by its digest (never a wrong value). What cannot be read by range (a result no bigger
than a footer read) is still fetched whole. Over a real S3 endpoint on loopback (moto's server
mode, which records each request with its headers)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import Moto, barca, json_objects, range_bytes, require_moto, write

require_moto()

ROWS = 20_000  # a key's table: about 700 KB, column c most of it, a a few KB
KEYS = ["r1", "r2", "r3"]
UPSTREAM = f"""
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
from barca import asset, partitions, partitions_from

@asset(partitions={{"k": partitions({KEYS!r})}})
def wide(k: str) -> pa.Table:
    return pa.table({{"a": [i % 10 for i in range({ROWS})], "b": [i * 0.5 for i in range({ROWS})],
                      "c": [f"a longer text in row {{i:08d}} of {{k}}" for i in range({ROWS})]}})

@asset(partitions={{"k": partitions({KEYS!r})}})
def small(k: str) -> pa.Table:
    return pa.table({{"a": [1, 2, int(k[1:])]}})
"""
READERS = {
    "duckdb": """
@asset(partitions={"k": partitions_from(wide)}, batch="all")
def total(k: list[str], wide: duckdb.DuckDBPyRelation) -> dict:
    return dict(wide.aggregate("k, sum(a)", "k").fetchall())
""",
    "polars": """
@asset(partitions={"k": partitions_from(wide)}, batch="all")
def total(k: list[str], wide: pl.LazyFrame) -> dict:
    return dict(wide.group_by("k").agg(pl.col("a").sum()).collect().rows())
""",
    "arrow": """
@asset(partitions={"k": partitions_from(wide)}, batch="all")
def total(k: list[str], wide: ds.Dataset) -> dict:
    sums = wide.to_table(columns=["k", "a"]).group_by("k").aggregate([("a", "sum")])
    return dict(zip(sums.column("k").to_pylist(), sums.column("a_sum").to_pylist()))
""",
    # a relation returned as the call's table result: its pages are read as it is split
    "returned": """
@asset(partitions={"k": partitions_from(wide)}, batch="all")
def total(k: list[str], wide: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    return wide.aggregate("k, sum(a) AS a", "k")
""",
}
SMALL_READER = """
@asset(partitions={"k": partitions_from(small)}, batch="all")
def small_total(k: list[str], small: duckdb.DuckDBPyRelation) -> dict:
    return dict(small.aggregate("k, sum(a)", "k").fetchall())
"""
EXPECTED = {f"k={k}": ROWS // 10 * 45 for k in KEYS}


def _gets(moto: Moto, prefix: str) -> dict[str, list[str | None]]:
    """Object -> the Range header (None: the whole object) of each GET of an object under
    `prefix` since the last call (moto.taken)."""
    text = moto.recording.read_text() if moto.recording.exists() else ""
    moto.taken()
    out: dict[str, list[str | None]] = {}
    for record in json_objects(text):  # two requests recorded at once may share a line
        path = unquote(urlparse(record["url"]).path).lstrip("/")
        if record["method"] == "GET" and path.startswith(prefix) and "," in path:
            headers = {k.lower(): v for k, v in record["headers"].items()}
            out.setdefault(path, []).append(headers.get("range"))
    return out


@pytest.fixture(scope="module")
def upstream(moto: Moto, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A bucket where machine a computed every key of `wide` and `small`, once for the module:
    each test works on a copy of it."""
    bucket = moto.bucket()
    a = write(tmp_path_factory.mktemp("a"), {"pipeline.py": UPSTREAM, "barca.toml": ""})
    for node in ("wide", "small"):
        assert barca(a, "get", node, "pipeline.py", env={
            **moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}"}).expect(0).json[
            "steps_executed"] == len(KEYS)
    return bucket


def _machines(tmp_path: Path, moto: Moto, reader: str, upstream: str
              ) -> tuple[Path, dict, str]:
    """A new bucket holding what machine a computed (a copy of `upstream`'s objects), and
    machine b on it (the pipeline with its readers, its own directory and database), returned
    with its environment and the prefix of wide's objects."""
    bucket = moto.bucket()
    for obj in moto.fs.find(upstream):
        moto.fs.copy(obj, bucket + obj[len(upstream):])
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}"}
    b = write(tmp_path / "b", {"pipeline.py": UPSTREAM + READERS[reader] + SMALL_READER,
                               "barca.toml": ""})
    moto.taken()
    return b, env, f"{bucket}/default/artifacts/pipeline.py--wide/"


def _values(root: Path, got: dict) -> dict:
    """{key: total}, from a dict result's values or the one-row table of each key."""
    import pyarrow.parquet as pq

    return {key: pq.read_table(root / value["_barca_artifact"]["path"]).column("a")[0].as_py()
            if isinstance(value, dict) else value for key, value in got["final_output"].items()}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_batch_calls_lazy_input_reads_one_column_of_each_remote_result_by_byte_ranges(
        tmp_path: Path, moto: Moto, upstream: str, reader: str) -> None:
    b, env, prefix = _machines(tmp_path, moto, reader, upstream)
    sizes = {obj: moto.fs.size(obj) for obj in moto.fs.find(prefix)}
    moto.taken()
    got = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert got["steps_executed"] == len(KEYS)  # one call of three keys; wide came from the store
    assert _values(b, got) == EXPECTED

    gets = _gets(moto, prefix)
    assert sorted(gets) == sorted(sizes), gets  # every key's object was read
    for obj, ranges in gets.items():
        read = range_bytes(ranges, sizes[obj])
        print(f"\n{obj.rpartition('/')[2][:24]}: {len(ranges)} GETs of {sizes[obj]:,} bytes, "
              f"{read:,} read")
        assert None not in ranges, (obj, ranges)  # every GET a range
        assert read < sizes[obj] / 2, (obj, read, sizes[obj])  # a's pages and the footer
    copies = b / ".barca" / "artifacts" / "pipeline.py--wide"
    assert not copies.exists() or not any(copies.iterdir())  # read in place, not copied

    # a result no bigger than a footer read is fetched whole, as a ranged read would move it
    # whole, then again page by page
    small = barca(b, "get", "small_total", "pipeline.py", env=env).expect(0).json
    assert small["final_output"] == {f"k={k}": 3 + int(k[1:]) for k in KEYS}
    small_gets = _gets(moto, prefix.replace("--wide/", "--small/"))
    assert len(small_gets) == len(KEYS) and all(
        r == [None] for r in small_gets.values()), small_gets


@pytest.mark.parametrize("reader", ["duckdb", "returned"])
def test_a_damaged_page_of_a_batch_input_is_named_by_digest_never_a_wrong_value(
        tmp_path: Path, moto: Moto, upstream: str, reader: str) -> None:
    import pyarrow.parquet as pq

    b, env, prefix = _machines(tmp_path, moto, reader, upstream)
    damaged = sorted(moto.fs.find(prefix))[1]
    data = bytearray(moto.fs.cat_file(damaged))
    with moto.fs.open(damaged, "rb") as fh:
        chunk = pq.ParquetFile(fh).metadata.row_group(0).column(0)  # column a
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else \
            chunk.data_page_offset
    data[start + chunk.total_compressed_size // 2] ^= 0xFF
    moto.fs.pipe_file(damaged, bytes(data))  # the same name, one byte of column a changed
    moto.taken()

    bad = barca(b, "get", "total", "pipeline.py", env=env)
    assert bad.code != 0, bad.json
    # the page failed its checksum, so the objects were fetched whole: the digest names it
    assert "does not match its digest" in bad.envelope["error"], bad.envelope
    reads = _gets(moto, prefix)[damaged]
    assert reads[0] is not None and reads.count(None) == 2, reads  # ranges, then whole twice
