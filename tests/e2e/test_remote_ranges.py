"""A lazy table input of a parquet result in a remote store is read in place, by byte ranges:
a step that selects one column of a wide table on another machine requests that column's pages
(and the footer), not the whole object, and each page it reads is checked against its
checksum, so a damaged object is an error, never a wrong value. Over a real S3 endpoint on
loopback (moto's server mode, which records each request with its headers)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import Moto, barca, json_objects, range_bytes, require_moto, write

require_moto()

ROWS = 100_000
PIPELINE = f"""
import duckdb
import polars as pl
import pyarrow as pa
from barca import asset

@asset
def wide() -> pa.Table:
    return pa.table({{"a": list(range({ROWS})), "b": [i * 0.5 for i in range({ROWS})],
                      "c": [f"a longer text in row {{i:08d}}" for i in range({ROWS})]}})

@asset(inputs={{"wide": wide}})
def total(wide: duckdb.DuckDBPyRelation) -> int:
    return int(wide.aggregate("sum(a)").fetchall()[0][0])

@asset(inputs={{"wide": wide}})
def total_pl(wide: pl.LazyFrame) -> int:
    return int(wide.select(pl.col("a").sum()).collect().item())

@asset(inputs={{"wide": wide}})
def rows(wide: pa.Table) -> int:
    return wide.num_rows
"""
EXPECTED = ROWS * (ROWS - 1) // 2


def _reads(moto: Moto, obj: str) -> list[str | None]:
    """The Range header (None: the whole object) of each GET of the object `obj` since the
    last call (moto.taken)."""
    text = moto.recording.read_text() if moto.recording.exists() else ""
    moto.taken()
    out = []
    for record in json_objects(text):  # two requests recorded at once may share a line
        if record["method"] == "GET" and unquote(urlparse(record["url"]).path) == f"/{obj}":
            headers = {k.lower(): v for k, v in record["headers"].items()}
            out.append(headers.get("range"))
    return out


def _machines(tmp_path: Path, moto: Moto) -> tuple[Path, Path, dict, str]:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}"}
    a = write(tmp_path / "a", {"pipeline.py": PIPELINE, "barca.toml": ""})
    b = write(tmp_path / "b", {"pipeline.py": PIPELINE, "barca.toml": ""})
    assert barca(a, "get", "wide", "pipeline.py", env=env).expect(0).json["steps_executed"] == 1
    [obj] = moto.fs.find(f"{bucket}/default/artifacts/pipeline.py--wide")
    moto.taken()
    return a, b, env, obj


@pytest.mark.parametrize("reader", ["total", "total_pl"])
def test_a_lazy_input_reads_one_column_of_a_remote_result_by_byte_ranges(
        tmp_path: Path, moto: Moto, reader: str) -> None:
    _, b, env, obj = _machines(tmp_path, moto)
    size = moto.fs.size(obj)
    moto.taken()
    got = barca(b, "get", reader, "pipeline.py", env=env).expect(0).json
    assert got["steps_executed"] == 1  # wide came from the store
    local = barca(write(tmp_path / "local", {"pipeline.py": PIPELINE, "barca.toml": ""}),
                  "get", reader, "pipeline.py").expect(0).json
    assert got["final_output"] == local["final_output"] == EXPECTED
    ranges = _reads(moto, obj)
    read = range_bytes(ranges, size)
    print(f"\n{reader}: {len(ranges)} GETs of the {size:,}-byte object, {read:,} bytes read")
    assert ranges and None not in ranges, ranges  # every GET a range
    assert read < size / 2, (read, size)  # column a's pages and the footer, not b's nor c's
    copies = b / ".barca" / "artifacts" / "pipeline.py--wide"
    assert not copies.exists() or not any(copies.iterdir())  # read in place, not copied

    # an eager input (a pa.Table) still fetches the whole object, checked by its digest
    assert barca(b, "get", "rows", "pipeline.py", env=env).expect(0).json[
        "final_output"] == ROWS
    assert _reads(moto, obj) == [None]
    assert any(copies.iterdir())


def test_a_damaged_page_read_by_range_is_named_by_digest_never_a_wrong_value(
        tmp_path: Path, moto: Moto) -> None:
    import pyarrow.parquet as pq

    _, b, env, obj = _machines(tmp_path, moto)
    data = bytearray(moto.fs.cat_file(obj))
    with moto.fs.open(obj, "rb") as fh:
        chunk = pq.ParquetFile(fh).metadata.row_group(0).column(0)  # column a
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else \
            chunk.data_page_offset
        middle = start + chunk.total_compressed_size // 2
    data[middle] ^= 0xFF
    moto.fs.pipe_file(obj, bytes(data))  # the same name, one byte of column a's data changed
    moto.taken()
    bad = barca(b, "get", "total", "pipeline.py", env=env)
    assert bad.code != 0, bad.json
    # the page failed its checksum, so the object was fetched whole: its digest names it
    assert "does not match its digest" in bad.envelope["error"], bad.envelope
    reads = _reads(moto, obj)
    assert reads[0] is not None and reads.count(None) == 2, reads  # ranges, then whole twice
