"""Positional arguments: which one is the target, which are files."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from barca.discover.files import is_path_arg
from barca.errors import UsageError


def announce_root() -> None:
    """Say so on stderr when the project root is not the directory the user is in."""
    from barca.printable import note
    from barca.project import find_root

    cwd = Path.cwd().resolve()
    root = find_root(cwd)
    if root != cwd:
        note(f"barca: project root: {root}")


def split_positionals(args: Sequence[str], takes_target: bool) -> tuple[str | None, list[str]]:
    announce_root()
    args = list(args)
    target = None
    if takes_target and args and not is_path_arg(args[0]):
        target = args.pop(0)
    names = [a for a in args if not is_path_arg(a) and not Path(a).exists()]
    if names and takes_target and target is None and args and is_path_arg(args[0]):
        _wrong_order(args, names)
    if names:
        raise UsageError(f"'{names[0]}' is not a .py file or a directory",
                         "pass one target (a, or a,b for several) followed by files")
    return target, args


def _wrong_order(args: list[str], names: list[str]) -> None:
    """`barca get pipeline.py scored`: the target typed after the files. One such name is
    surely the target: answer with the command as it should be; several, state the rule."""
    import click

    ctx = click.get_current_context(silent=True)
    command = f"barca {ctx.info_name}" if ctx is not None and ctx.info_name else "barca get"
    if len(names) > 1:
        raise UsageError(f"{', '.join(repr(n) for n in names)} come after the files and are "
                         "not files", f"the target goes first, then the files: {command} "
                         "TARGET[,TARGET] FILES (several targets are one comma list)")
    files = " ".join(a for a in args if a != names[0])
    raise UsageError(f"'{names[0]}' comes after the files, but the target goes first",
                     f"{command} {names[0]} {files}")


