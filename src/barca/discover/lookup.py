"""The two questions discovery asks of the disk, kept to os and the C blake2b: the digest of
a file's bytes, and which project file an import name points at. A fully cached `barca get`
asks them again, before anything heavier is imported, to check that discovery would find
what it found last time (engine.cached_get); discovery itself asks them through these."""

from __future__ import annotations

import os

import _blake2  # hashlib's blake2b without hashlib, which loads OpenSSL


def file_digest(raw: bytes) -> str:
    return _blake2.blake2b(raw, digest_size=16).hexdigest()


def find_module(root: str, folder: str, name: str) -> tuple[str | None, str | None] | None:
    """(file, package_dir) of the project module `name` in root-relative `folder`, as a
    worker's import finds it: a regular package (`__init__.py`) before a `.py` module before
    a namespace package (file None); None when there is none."""
    if not name.isidentifier():
        return None
    package = f"{folder}/{name}" if folder else name
    init = f"{package}/__init__.py"
    if os.path.isfile(os.path.join(root, init)):
        return init, package
    if os.path.isfile(os.path.join(root, package + ".py")):
        return package + ".py", None
    if os.path.isdir(os.path.join(root, package)):
        return None, package
    return None
