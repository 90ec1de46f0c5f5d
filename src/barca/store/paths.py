"""Artifact keys: one directory per node, one file per key and run hash.

A partition key may be any string. Its part of a file name keeps `[A-Za-z0-9._-]` and writes
every other byte as `%XX` (and `_` too when several dimensions are joined by `_`), so two keys
never share a name and none escapes `.barca/artifacts/`. A name longer than a filesystem allows
is cut and suffixed with a digest of the whole.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import Sequence

EXTENSIONS = {"json": "json", "keyed-json": "json", "parquet": "parquet", "pickle": "pkl",
              "csv": "csv"}
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")
_SAFE_NO_UNDERSCORE = _SAFE - {ord("_")}
_PLAIN = re.compile(r"[A-Za-z0-9._-]+")  # text made only of _SAFE characters
_PLAIN_NO_UNDERSCORE = re.compile(r"[A-Za-z0-9.-]+")
_MAX_LEAF_BYTES = 200

Pairs = Sequence[tuple[str, str]]


def escape(text: str, underscore: bool = True) -> str:
    """`r/1 é` -> `r%2F1%20%C3%A9`: injective, ASCII, and never `.` or `..` on its own."""
    if (_PLAIN if underscore else _PLAIN_NO_UNDERSCORE).fullmatch(text) and \
            text not in (".", ".."):
        return text  # the common case, checked in C
    safe = _SAFE if underscore else _SAFE_NO_UNDERSCORE
    out = "".join(chr(b) if b in safe else f"%{b:02X}" for b in text.encode("utf-8"))
    return "%2E" * len(out) if out in (".", "..") else out


@functools.lru_cache(maxsize=1024)
def node_dir_name(file: str, name: str) -> str:
    """`pipeline.py--scored` (under the pipeline file's own directories, if any), kept under
    the filesystem's name length. The name is an identifier (discovery checks it); anything
    that could leave the directory is refused here too."""
    if "/" in name or "\0" in name or name in (".", ".."):
        raise ValueError(f"node name {name!r} cannot be part of a path")
    head, _, base = f"{file}--{name}".rpartition("/")
    if len(base.encode()) > _MAX_LEAF_BYTES:
        digest = hashlib.blake2b(base.encode(), digest_size=8).hexdigest()
        base = base.encode()[:_MAX_LEAF_BYTES - 17].decode("utf-8", "ignore") + "~" + digest
    return f"{head}/{base}" if head else base


def key_stem(pairs: Pairs) -> str:
    """`retailer_r03`: the start of a key's file names, one per key; a very long key is cut
    and suffixed with a digest of the whole key."""
    single = len(pairs) == 1  # several dimensions escape `_` in their values
    stem = "_".join(f"{dim}_{escape(value, underscore=single)}" for dim, value in pairs)
    return _fit(stem, pairs)


def key_dir(dim: str, value: str) -> str:
    """`region=emea`: a key's directory in a dataset sink (the hive layout); a very long key
    is cut and suffixed with a digest of the whole key, as in `key_stem`."""
    return _fit(f"{dim}={escape(value)}", [(dim, value)])


def _fit(name: str, pairs: Pairs) -> str:
    """`name` kept under the filesystem's name length: cut, and told apart from every other
    cut name by a digest of the key it stands for."""
    if len(name) <= _MAX_LEAF_BYTES:
        return name
    digest = hashlib.blake2b(repr(list(pairs)).encode(), digest_size=8).hexdigest()
    return name[:_MAX_LEAF_BYTES - 17] + "~" + digest


def artifact_stem(file: str, name: str, pairs: Pairs, run_hash: str) -> str:
    """A result's store key, but for its extension: `<node dir>/<key>.<run hash>` for a key of
    a partitioned node, `<node dir>/<run hash>` otherwise. All the keys of a node share its
    directory: creating one per key cost more than writing the key's file."""
    key = f"{key_stem(pairs)}." if pairs else ""
    return f"{node_dir_name(file, name)}/{key}{run_hash}"


def artifact_key(file: str, name: str, pairs: Pairs, run_hash: str, fmt: str) -> str:
    """A result's store key (store.artifact_store), as text: step specs carry thousands."""
    return f"{artifact_stem(file, name, pairs, run_hash)}.{EXTENSIONS[fmt]}"


def artifact_file(artifacts_dir: Path | str, file: str, name: str, pairs: Pairs, run_hash: str,
                  fmt: str) -> str:
    """The result's file in a local store at `artifacts_dir`."""
    return f"{artifacts_dir}/{artifact_key(file, name, pairs, run_hash, fmt)}"

