"""A command the warm pool forked takes the pool's identity as its own while its environment is
the one it was given (engine.local.warm_pool.inherit_identity): the client found the pool by
computing it a moment before. Any change to the environment, or another root, computes it."""

from __future__ import annotations

from barca.engine.local import warm_pool


def test_the_inherited_identity_holds_only_for_its_root_and_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(warm_pool, "_INHERITED", {})
    computed = warm_pool.identity(tmp_path)
    assert warm_pool.identity(tmp_path) == computed  # the same inputs, the same hash
    warm_pool.inherit_identity(str(tmp_path), "the-pools-key")
    assert warm_pool.identity(tmp_path) == "the-pools-key"
    other = tmp_path / "other"
    other.mkdir()
    assert warm_pool.identity(other) == warm_pool.identity(other) != "the-pools-key"
    monkeypatch.setenv("SOME_LIBRARY_SETTING", "1")  # read by a library at import, say
    changed = warm_pool.identity(tmp_path)
    assert changed not in ("the-pools-key", computed)
