"""Artifact locations: one directory per node and key, one file per run hash.

A partition key may be any string. Its directory name keeps `[A-Za-z0-9._-]` and writes every
other byte as `%XX` (and `_` too when several dimensions are joined by `_`), so two keys never
share a directory and none escapes `.barca/artifacts/`. A name longer than a filesystem allows
is cut and suffixed with a digest of the whole key.
"""

from __future__ import annotations

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


def key_suffix(pairs: Pairs) -> str:
    """[("region", "emea")] -> `_region_emea`; several dimensions escape `_` in their values."""
    single = len(pairs) == 1
    return "".join(f"_{dim}_{escape(value, underscore=single)}" for dim, value in pairs)


def node_dir_name(file: str, name: str, pairs: Pairs) -> str:
    """`pipeline.py--scored_retailer_r03`, kept under the filesystem's name length. The name
    is an identifier (discovery checks it); anything that could leave the directory is
    refused here too, as keys are escaped."""
    if "/" in name or "\0" in name or name in (".", ".."):
        raise ValueError(f"node name {name!r} cannot be part of a path")
    head, _, base = f"{file}--{name}".rpartition("/")
    suffix = key_suffix(pairs)
    leaf = base + suffix
    if len(leaf.encode()) > _MAX_LEAF_BYTES:
        digest = hashlib.blake2b(repr(list(pairs)).encode(), digest_size=8).hexdigest()
        base_bytes = base.encode()[:_MAX_LEAF_BYTES // 2].decode("utf-8", "ignore")
        room = _MAX_LEAF_BYTES - len(base_bytes.encode()) - len(digest) - 1
        leaf = base_bytes + suffix[:max(0, room)] + "~" + digest  # suffix is ASCII
    return f"{head}/{leaf}" if head else leaf


def artifact_path(artifacts_dir: Path, file: str, name: str, pairs: Pairs, run_hash: str,
                  fmt: str) -> Path:
    # one Path built from text: joining with `/` twice costs more than the rest of the lookup
    return Path(f"{artifacts_dir}/{node_dir_name(file, name, pairs)}/"
                f"{run_hash}.{EXTENSIONS[fmt]}")
