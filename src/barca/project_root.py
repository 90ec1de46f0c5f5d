"""Where a project starts: kept apart from `project` so the `barca` launcher can find it
without importing dataclasses, pathlib and the rest (it runs before every `get` and `run`)."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing and pathlib are not imported for it
if TYPE_CHECKING:
    from pathlib import Path


def root_of(start: str) -> str:
    """The nearest directory at or above `start` holding `barca.toml`, else `start` itself;
    resolved (symlinks followed)."""
    start = candidate = os.path.realpath(start)
    while not os.path.isfile(os.path.join(candidate, "barca.toml")):
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return start
        candidate = parent
    return candidate


def find_root(start: Path) -> Path:
    """`root_of`, as a Path."""
    from pathlib import Path

    return Path(root_of(start))
