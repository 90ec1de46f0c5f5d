"""A pack of small results (store.packs.PackWriter) is kept until it is written: a write that
fails raises InfraError naming the store at the flush, loses no pack, and the next flush
writes it. On the real local store, made unwritable the way root cannot bypass either: a file
where a node's results directory goes. A remote store (a real `file://` one) holding its
uploads for a pool worker's upload thread writes packs and files of their own here first."""

from __future__ import annotations

import hashlib
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


def test_a_remote_store_holding_its_uploads_writes_local_copies_and_uploads_when_asked(
        tmp_path: Path) -> None:
    """A pool worker's remote store (RemoteStore.hold_uploads): a pack and a result stored as a
    file of its own are written here at once, and reach the store only when the held uploads
    are made (engine.local.uploads makes them on its thread), each named by its digest."""
    from barca.store.remote_config import Remote
    from barca.store.remote_store import RemoteStore

    (tmp_path / "project").mkdir()
    store = RemoteStore(str(tmp_path / "project"), ".barca/artifacts",
                        Remote(f"file://{tmp_path / 'shared'}", "file"), "default")
    store.hold_uploads()
    writer = PackWriter()
    small = writer.add(store, "node", b"small")
    writer.flush()
    store.put("node/big.pickle", b"big" * 30_000)
    staged = store.staging("node/table.parquet")
    Path(staged).write_bytes(b"a table")
    store.commit(staged, "node/table.parquet")
    assert store.get(small) == b"small"  # read from the local copy
    assert store.listed_objects("node") == {}
    uploads = store.held_uploads()
    assert len(uploads) == 3 and store.held_uploads() == []
    for upload in uploads:
        upload()
    objects = store.listed_objects("node")
    assert objects[packs.file_of(small).rpartition("/")[2]][0] == \
        hashlib.sha256(b"small").hexdigest()
    assert objects["big.pickle"][0] == hashlib.sha256(b"big" * 30_000).hexdigest()
    assert objects["table.parquet"][0] == hashlib.sha256(b"a table").hexdigest()
