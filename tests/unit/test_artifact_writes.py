"""Writing one artifact file (store.local_files.write_bytes) on the real file system: a new
file appears under its name only complete and leaves no temporary file; an existing one is
replaced whole; a directory squatting on the name is moved aside; a file system without
unnamed files (O_TMPFILE) gets the temporary name and the rename."""

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
