"""Reusing the last discovery when no file it depended on changed.

Parsing and hashing a pipeline costs about half a millisecond per node; a fully cached
`barca get` should not pay it again. A cache entry keeps the definitions together with what
they were derived from: the digest of every file discovery read and the answer to every
"is there a module here" question its imports asked. The entry is used only when all of these
are the same now, so an edited helper, a new module that shadows an import, or a deleted file
each make discovery run again. Any problem reading the cache means discovering afresh.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Mapping, Sequence

from barca.discover.definitions import discover
from barca.discover.hashing import SCHEME_VERSION
from barca.discover.model import Definition
from barca.discover.lookup import file_digest, find_module
from barca.discover.modules import ModuleCache

_FORMAT = 1


def discover_cached(root: Path, files: Sequence[str], cache_file: Path | None,
                    write: bool) -> tuple[Definition, ...]:
    """`discover(root, files)`, answered from `cache_file` when it still holds."""
    key = (_FORMAT, SCHEME_VERSION, _code_stamp(), tuple(sorted(set(files))))
    if cache_file is not None:
        cached = _load(cache_file, key, root)
        if cached is not None:
            return cached
    modules = ModuleCache(root)
    definitions = discover(root, files, modules)
    if write and cache_file is not None:
        _store(cache_file, (key, modules.digests, modules.lookups(), definitions))
    return definitions


def _code_stamp() -> tuple:
    """Discovery's own source files (name, size, mtime): a changed barca discovers afresh."""
    folder = Path(__file__).parent
    out = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            stat = entry.stat()
            out.append((entry.name, stat.st_size, stat.st_mtime_ns))
    return tuple(out)


def _load(cache_file: Path, key: tuple, root: Path) -> tuple[Definition, ...] | None:
    try:
        with open(cache_file, "rb") as fh:
            stored_key, digests, lookups, definitions = pickle.load(fh)
    except Exception:  # noqa: BLE001 - a missing or unreadable cache only costs a discovery
        return None
    if stored_key != key:
        return None
    for file, digest in digests.items():
        try:
            if file_digest(Path(root, file).read_bytes()) != digest:
                return None
        except OSError:
            return None
    for (folder, name), found in lookups.items():
        if find_module(str(root), folder, name) != found:
            return None
    return definitions


def _store(cache_file: Path, entry: tuple) -> None:
    tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}.tmp")
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            pickle.dump(entry, fh, protocol=5)
        os.replace(tmp, cache_file)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def sources_of(cache_file: Path, definitions: Mapping[str, Definition]
               ) -> tuple[dict[str, str], dict[tuple[str, str], tuple | None]] | None:
    """What the cached discovery holding exactly `definitions` (by node id) was derived
    from: the digest of every file it read, and what each import lookup found (plain tuples);
    None when the cache holds other definitions (rewritten by another command since) or cannot
    be read. Checking these again (`lookup`) tells whether discovery would find the same
    definitions now."""
    try:
        with open(cache_file, "rb") as fh:
            _, digests, lookups, stored = pickle.load(fh)
    except Exception:  # noqa: BLE001 - no cache: nothing to check against
        return None
    if {d.node_id: d for d in stored} != dict(definitions):
        return None
    return dict(digests), {where: None if found is None else tuple(found)
                           for where, found in lookups.items()}
