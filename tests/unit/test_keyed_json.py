"""keyed-json files, written from packed chunks in threads: what a reader gets back is the dict
and its order, whatever the number of chunks (more than one writev call takes), and an aborted
or failed write leaves the earlier file as it was."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from barca.engine.key_source_columns import stored_columns
from barca.packed_columns import pack_chunks
from barca.store.artifacts import read_value
from barca.store.keyed_json_writer import KeyedJsonWriter
from barca.store.local_store import LocalStore


def _writer(path: Path, key_chunks, order_chunks=None) -> KeyedJsonWriter:
    """A writer of `path`, as the key `<dir>/<name>` of a local store at its grandparent."""
    base = path.parent.parent
    return KeyedJsonWriter(LocalStore(base, str(base)), path.relative_to(base).as_posix(),
                           key_chunks, order_chunks)



def _chunks(items: list, size: int) -> tuple[bytes, ...]:
    return tuple(orjson.dumps(items[i:i + size]) for i in range(0, len(items), size))


@pytest.mark.parametrize("count, size", [(0, 1), (1, 1), (5, 2), (3000, 2)])
def test_the_file_reads_back_as_the_dict_in_key_order(tmp_path: Path, count: int,
                                                      size: int) -> None:
    keys = [f"k{i:05d}" for i in range(count)]
    values = [{"n": i, "s": "x" * (i % 7)} if i % 3 else i for i in range(count)]
    path = tmp_path / "a" / "v.json"
    writer = _writer(path, _chunks(keys, size))  # 3000 keys by 2: 3,000 buffers
    writer.finish(_chunks(values, size))
    size_written = writer.close()
    assert size_written == path.stat().st_size
    assert orjson.loads(path.read_bytes()) == {"keys": keys, "values": values}
    got = read_value(path, "keyed-json")
    assert list(got.items()) == list(zip(keys, values))


def test_pack_chunks_output_is_what_the_writer_takes(tmp_path: Path) -> None:
    keys, values = ["a", "b", "c"], [[1, 2], {"z": 1, "a": [None]}, "t"]
    writer = _writer(tmp_path / "v.json", pack_chunks(keys))
    writer.finish(pack_chunks(values))
    writer.close()
    assert read_value(tmp_path / "v.json", "keyed-json") == dict(zip(keys, values))


def test_the_order_comes_before_the_values_and_reads_back(tmp_path: Path) -> None:
    keys, values, order = ["a", "b", "c", "d"], [1, 2, 3, 4], [2, 0, 3, 1]
    path = tmp_path / "a" / "v.json"
    writer = _writer(path, _chunks(keys, 3), _chunks(order, 3))
    writer.finish(_chunks(values, 1))
    writer.close()
    data = path.read_bytes()
    assert data.index(b'"order"') < data.index(b'"values"')
    assert orjson.loads(data) == {"keys": keys, "order": order, "values": values}
    assert stored_columns(LocalStore(tmp_path, str(tmp_path)), "a/v.json", "keyed-json") == (
        keys, values, order)


def test_an_aborted_write_keeps_the_earlier_file(tmp_path: Path) -> None:
    path = tmp_path / "v.json"
    path.write_bytes(b'{"keys":["old"],"values":[1]}')
    writer = _writer(path, pack_chunks(["new"]))
    writer.abort()
    assert read_value(path, "keyed-json") == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]  # no temporary file left


def test_a_failed_write_raises_on_close_and_keeps_the_earlier_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v.json"
    path.write_bytes(b'{"keys":["old"],"values":[1]}')

    def disk_full(fd: int, buffers: list) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.writev", disk_full)
    writer = _writer(path, pack_chunks(["new"]))
    writer.finish(pack_chunks([2]))
    with pytest.raises(OSError, match="No space"):
        writer.close()
    assert read_value(path, "keyed-json") == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]
