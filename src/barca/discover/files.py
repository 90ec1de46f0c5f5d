"""Which files are pipeline files: the walk, the skip list, and file arguments.

With no file arguments the project root is walked; a directory argument walks that
directory. A walked `.py` file is kept only if some line starts with `from barca` or
`import barca`, and tests, virtualenvs, build output and hidden directories are skipped. A
file named explicitly is always kept, whatever it contains. Every spelling of a file
(`./p.py`, an absolute path, `../x/p.py` from a subdirectory) becomes the same root-relative
posix path, which is what node ids are made of. This module reads bytes only; it never
parses or imports anything.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from barca.errors import UsageError

SKIP_DIRS = frozenset({"__pycache__", "venv", "node_modules", "site-packages", "build", "dist",
                       "tests", "test"})
SKIP_FILES = frozenset({"conftest.py", "setup.py"})
_IMPORTS_BARCA = re.compile(rb"^(?:from|import)[ \t]+barca\b", re.MULTILINE)
_NAME_A_FILE = ("Name the pipeline file explicitly (barca get pipeline.py), or add "
                "`from barca import asset` to it")


def find_files(root: Path, paths: Sequence[str], cwd: Path | None = None) -> list[str]:
    """Root-relative posix paths of the pipeline files `paths` name (all of root if none).

    Relative paths are taken from `cwd` (default: the current directory), the way the user
    typed them. Order: as given, each directory's files sorted; no duplicates.
    """
    root_abs = os.path.abspath(root)
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if not paths:
        return _walk(root_abs, root_abs, str(root))
    out: dict[str, None] = {}
    for typed in paths:
        full = os.path.normpath(os.path.join(base, os.path.expanduser(typed)))
        if os.path.isdir(full):
            out.update(dict.fromkeys(_walk(root_abs, _inside(root_abs, full, typed), typed)))
        elif os.path.isfile(full):
            if not full.endswith(".py"):
                raise UsageError(f"not a Python file: {typed}",
                                 "Pass a .py pipeline file or a directory")
            out[_relative(root_abs, _inside(root_abs, full, typed))] = None
        else:
            raise UsageError(f"file not found: {typed}",
                             "Check the path; file arguments are relative to the directory "
                             "you run barca from")
    return list(out)


def _inside(root_abs: str, full: str, typed: str) -> str:
    """`full` itself if it lies under the root (also through symlinks), else a UsageError."""
    for candidate, anchor in ((full, root_abs), (os.path.realpath(full),
                                                 os.path.realpath(root_abs))):
        if candidate == anchor or candidate.startswith(anchor.rstrip(os.sep) + os.sep):
            return os.path.join(root_abs, os.path.relpath(candidate, anchor))
    raise UsageError(f"{typed} is outside the project root {root_abs}",
                     "Run barca from inside the project (the directory with barca.toml), or "
                     "move the file under it")


def _relative(root_abs: str, full: str) -> str:
    rel = os.path.relpath(full, root_abs)
    return "" if rel == "." else rel.replace(os.sep, "/")


def _walk(root_abs: str, top: str, shown: str) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not (d.startswith(".") or d in SKIP_DIRS))
        for name in sorted(files):
            if not name.endswith(".py") or _skipped_file(name):
                continue
            path = os.path.join(folder, name)
            if _imports_barca(path):
                found.append(_relative(root_abs, path))
    if not found:
        raise UsageError(f"no pipeline files found under {shown}", _NAME_A_FILE)
    return found


def _skipped_file(name: str) -> bool:
    return name in SKIP_FILES or name.startswith("test_") or name.endswith("_test.py")


def _imports_barca(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return _IMPORTS_BARCA.search(handle.read()) is not None
    except OSError:
        return False


def is_path_arg(text: str) -> bool:
    """A positional names a file or directory when it looks like one; otherwise it is a target."""
    if text.endswith((".py", "/")) or text in (".", ".."):
        return True
    return "/" in text and Path(text).is_dir()
