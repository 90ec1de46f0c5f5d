"""Artifact locations: one directory per node and key, one file per run hash.

A partition key may be any string. Its directory name keeps `[A-Za-z0-9._-]` and writes every
other byte as `%XX`, so two keys never share a directory and none escapes `.barca/artifacts/`;
a name longer than the filesystem allows is cut and suffixed with a digest of the whole key.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

EXTENSIONS = {"json": "json", "parquet": "parquet", "pickle": "pkl", "csv": "csv"}
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")
_MAX_NAME = 200
_PAIR_SPLIT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")


def escape(text: str) -> str:
    """`r/1 é` -> `r%2F1%20%C3%A9`; injective, and never `.` or `..` on its own."""
    out = "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in text.encode("utf-8"))
    return out


def key_suffix(key: str) -> str:
    """`region=emea,day=2026-01-01` -> `_day_2026-01-01_region_emea` style suffix (sorted dims)."""
    if not key:
        return ""
    parts = []
    for pair in _PAIR_SPLIT.split(key):
        dim, _, value = pair.partition("=")
        parts.append(f"_{escape(dim)}_{escape(value)}")
    return "".join(parts)


def node_dir_name(file: str, name: str, key: str) -> str:
    base = f"{file}--{name}{key_suffix(key)}"
    leaf = base.rsplit("/", 1)[-1]
    if len(leaf.encode()) <= _MAX_NAME:
        return base
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
    head = base[: len(base) - len(leaf)]
    return head + leaf[: _MAX_NAME - 18] + "~" + digest


def artifact_relpath(file: str, name: str, key: str, run_hash: str, fmt: str) -> str:
    """Path relative to the artifacts directory."""
    return f"{node_dir_name(file, name, key)}/{run_hash}.{EXTENSIONS[fmt]}"


def artifact_path(artifacts_dir: Path, file: str, name: str, key: str, run_hash: str,
                  fmt: str) -> Path:
    return artifacts_dir / artifact_relpath(file, name, key, run_hash, fmt)
