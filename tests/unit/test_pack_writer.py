"""A pack of small results (store.packs.PackWriter) is kept until it is written: a write that
fails raises InfraError naming the store at the flush, loses no pack, and the next flush
writes it. On the real local store, made unwritable the way root cannot bypass either: a file
where a node's results directory goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from barca.errors import InfraError
from barca.store import packs
from barca.store.local_store import LocalStore
from barca.store.packs import PackWriter


def _store(tmp_path: Path) -> LocalStore:
    (tmp_path / "artifacts").mkdir(parents=True)
    return LocalStore(tmp_path / "artifacts", "artifacts")


def test_a_pack_whose_write_fails_is_kept_and_written_by_the_next_flush(tmp_path: Path) -> None:
    store, writer = _store(tmp_path), PackWriter()
    first = writer.add(store, "node", b"first")
    blocker = tmp_path / "artifacts" / "node"
    blocker.write_text("a file where the node's directory goes")
    with pytest.raises(InfraError, match="failed to write the results pack .*/node/.*"
                       "NotADirectoryError"):
        writer.flush()
    second = writer.add(store, "node", b"second")  # still the pack being filled
    blocker.unlink()
    writer.flush()
    assert (store.get(first), store.get(second)) == (b"first", b"second")


def test_a_full_pack_that_cannot_be_written_fails_the_flush_not_the_add(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packs, "PACK_MAX", 10)  # a pack is full at 10 bytes
    store, writer = _store(tmp_path), PackWriter()
    blocker = tmp_path / "artifacts" / "node"
    blocker.write_text("a file where the node's directory goes")
    full = writer.add(store, "node", b"0123456789")  # written at once, and failing: kept
    after = writer.add(store, "node", b"next")
    with pytest.raises(InfraError):
        writer.flush()
    blocker.unlink()
    writer.flush()
    assert (store.get(full), store.get(after)) == (b"0123456789", b"next")


def test_packs_of_a_store_written_later_are_handed_over_once_the_others_are_written(
        tmp_path: Path) -> None:
    """`flush(later=...)`: a remote store's packs are returned for the worker's upload thread
    (engine.local.uploads); they stay kept while a pack written here fails."""
    here, there = _store(tmp_path / "here"), _store(tmp_path / "there")
    writer = PackWriter()
    mine, theirs = writer.add(here, "node", b"mine"), writer.add(there, "node", b"theirs")
    blocker = tmp_path / "here" / "artifacts" / "node"
    blocker.write_text("a file where the node's directory goes")
    with pytest.raises(InfraError):
        writer.flush(later=lambda store: store is there)
    blocker.unlink()
    uploads = writer.flush(later=lambda store: store is there)
    assert here.get(mine) == b"mine" and len(uploads) == 1
    assert not (tmp_path / "there" / "artifacts" / "node").exists()  # not written yet
    uploads[0]()
    assert there.get(theirs) == b"theirs"
    assert writer.flush() == []
