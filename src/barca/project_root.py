"""Where a project starts: kept apart from `project` so the `barca` launcher can find it
without importing dataclasses and the rest (it runs before every command)."""

from __future__ import annotations

from pathlib import Path


def find_root(start: Path) -> Path:
    """The nearest directory at or above `start` holding `barca.toml`, else `start` itself."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / "barca.toml").is_file():
            return candidate
    return start
