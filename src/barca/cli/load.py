"""Positional arguments: which one is the target, which are files."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from barca.errors import UsageError


def announce_root() -> None:
    """Say so on stderr when the project root is not the directory the user is in."""
    from barca.cli.output import note
    from barca.project import find_root

    cwd = Path.cwd().resolve()
    root = find_root(cwd)
    if root != cwd:
        note(f"barca: project root: {root}")


def is_path_arg(text: str) -> bool:
    """A positional names a file or directory when it looks like one; otherwise it is a target."""
    if text.endswith((".py", "/")) or text in (".", ".."):
        return True
    return "/" in text and Path(text).is_dir()


def split_positionals(args: Sequence[str], takes_target: bool) -> tuple[str | None, list[str]]:
    announce_root()
    args = list(args)
    target = None
    if takes_target and args and not is_path_arg(args[0]):
        target = args.pop(0)
    for extra in args:
        if not is_path_arg(extra) and not Path(extra).exists():
            raise UsageError(f"'{extra}' is not a .py file or a directory",
                             "pass one target (a, or a,b for several) followed by files")
    return target, args


