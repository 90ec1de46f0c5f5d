"""How much disk the results of an environment may take before a run trims them (`store.gc.trim`):
`BARCA_CACHE_MAX_SIZE`, else `[cache] max_size` in barca.toml, else the default, 10% of the
filesystem that holds `.barca/` (as the published barca 0.33). "off" turns trimming off.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from barca.config import CONFIG_FILE, LIMIT_FORMS, SizeLimit, parse_limit
from barca.errors import UsageError
from barca.project import Project

ENV_VAR = "BARCA_CACHE_MAX_SIZE"
DEFAULT = SizeLimit(percent=10.0)
DEFAULT_SOURCE = "default"


@dataclass(frozen=True, slots=True)
class CacheLimit:
    bytes: int | None  # None: off
    source: str  # ENV_VAR, "[cache] max_size" or DEFAULT_SOURCE
    written: str  # as set: "10%", "250KB", "off"

    @property
    def default(self) -> bool:
        return self.source == DEFAULT_SOURCE

    def describe(self) -> str:
        """`[cache] max_size`, `BARCA_CACHE_MAX_SIZE 5% of the filesystem` or `the default
        max_size, 10% of the filesystem`: where the limit comes from, for the lines that
        report a trim (which give its size)."""
        if self.default:
            return "the default max_size, 10% of the filesystem"
        if self.written.endswith("%"):
            return f"{self.source} {self.written} of the filesystem"
        return self.source


def cache_limit(project: Project) -> CacheLimit:
    """The limit in bytes for `project`'s environment and where it comes from; a bad
    BARCA_CACHE_MAX_SIZE is exit 2 naming it (barca.toml is checked when it is read)."""
    text = os.environ.get(ENV_VAR)
    if text:
        limit = parse_limit(text)
        if limit is None:
            raise UsageError(f"{ENV_VAR}={text!r} is not a cache size",
                             f"set it to {LIMIT_FORMS}, or unset it to use {CONFIG_FILE}'s "
                             "[cache] max_size (default 10%)")
        source, written = ENV_VAR, text.strip()
    elif project.settings.cache_max_size is not None:
        limit, source = project.settings.cache_max_size, "[cache] max_size"
        written = _written(limit)
    else:
        limit, source, written = DEFAULT, DEFAULT_SOURCE, "10%"
    if limit.off:
        return CacheLimit(None, source, "off")
    if limit.bytes is not None:
        return CacheLimit(limit.bytes, source, written)
    return CacheLimit(int(filesystem(project)[0] * limit.percent / 100), source, written)


def filesystem(project: Project) -> tuple[int, int]:
    """(total, used) bytes of the filesystem that holds (or will hold) the project's state."""
    path: Path = project.state_dir
    while not path.exists() and path != path.parent:
        path = path.parent
    usage = shutil.disk_usage(path)
    return usage.total, usage.used


def _written(limit: SizeLimit) -> str:
    if limit.off:
        return "off"
    return f"{limit.percent:g}%" if limit.percent is not None else str(limit.bytes)
