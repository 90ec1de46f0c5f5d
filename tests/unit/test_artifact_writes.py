"""Writing one artifact file (store.local_files.write_bytes) on the real file system: a new
file appears under its name only complete and leaves no temporary file; an existing one is
replaced whole; a directory squatting on the name is moved aside; a file system without
unnamed files (O_TMPFILE) gets the temporary name and the rename; a large result replaced by a
commit keeps a hidden second name until the store frees it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from barca.store import local_files
from barca.store.local_files import write_bytes


def test_a_new_file_is_written_whole_with_nothing_left_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "node" / "k_a.0123.json"  # its directory does not exist yet
    write_bytes(b'{"a": 1}', target)
    assert target.read_bytes() == b'{"a": 1}'
    assert os.listdir(target.parent) == ["k_a.0123.json"]
    assert target.stat().st_mode & 0o777 == 0o644 & ~_umask()


def test_an_existing_file_is_replaced_by_the_new_bytes(tmp_path: Path) -> None:
    target = tmp_path / "k_a.0123.json"
    write_bytes(b"old, and longer than the new bytes", target)
    write_bytes(b"new", target)
    assert target.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["k_a.0123.json"]


def test_a_directory_on_the_name_is_moved_aside(tmp_path: Path) -> None:
    target = tmp_path / "k_a.0123.json"
    (target / "inside").mkdir(parents=True)
    write_bytes(b"1", target)
    assert target.read_bytes() == b"1"
    assert sorted(os.listdir(tmp_path)) == ["k_a.0123.json", "k_a.0123.json.moved-aside"]


def test_without_unnamed_files_the_temporary_name_is_renamed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_files, "_UNNAMED", [False])
    target = tmp_path / "sub" / "k_a.0123.json"
    write_bytes(b"1", target)
    write_bytes(b"2", target)
    assert target.read_bytes() == b"2"
    assert os.listdir(target.parent) == ["k_a.0123.json"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_large_result_replaced_keeps_a_hidden_name_until_the_worker_lets_it_go(
        tmp_path: Path) -> None:
    """A key source's file of megabytes, rewritten every tick: the rename over it does not free
    its blocks (a second name keeps them) until free_replaced, after the outcome is sent."""
    from barca.store.local_store import LocalStore

    store = LocalStore(tmp_path, str(tmp_path))
    old, new = b"o" * (1 << 20), b"n" * (1 << 20)
    for data in (old, new):
        staged = store.staging("node/v.json")
        Path(staged).write_bytes(data)
        store.commit(staged, "node/v.json")
    node = tmp_path / "node"
    assert (node / "v.json").read_bytes() == new
    aside = [p for p in node.iterdir() if p.name != "v.json"]
    assert [p.name for p in aside] == [f".v.json.replaced.{os.getpid()}.tmp"]  # gc's leftover
    assert aside[0].read_bytes() == old  # should this process end now
    store.free_replaced()
    assert os.listdir(node) == ["v.json"]


def test_a_small_result_replaced_is_freed_at_once(tmp_path: Path) -> None:
    from barca.store.local_store import LocalStore

    store = LocalStore(tmp_path, str(tmp_path))
    for data in (b"x" * (local_files.SET_ASIDE_BYTES - 1), b"y"):
        staged = store.staging("v.json")
        Path(staged).write_bytes(data)
        store.commit(staged, "v.json")
    assert os.listdir(tmp_path) == ["v.json"]
    assert (tmp_path / "v.json").read_bytes() == b"y"
