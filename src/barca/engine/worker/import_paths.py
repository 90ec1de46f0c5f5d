"""Each pipeline directory's own view of the project's modules, in one process that imports
pipeline files from several directories (a worker, or the coordinator evaluating
`partitions(EXPR)`).

A pipeline file outside a package is imported with its own directory first on `sys.path`, then
the project root, so `from helpers import value` in a/pa.py is a/helpers.py, as in a fresh
process for that file. A process that then imports b/pb.py must not hand it a's `helpers` from
`sys.modules`, nor find a's files on its path: that served a/helpers.py's value as b/pb.py's
and cached it, or failed, depending on which worker had run what before. So before a pipeline
file is imported or one of its steps runs, `enter` puts only the file's directory and the root
on the path, and sets aside the project modules that file could not import from there: those
found through another pipeline file's directory, and the root's modules its own directory
shadows. Set aside, not dropped: the next step from that directory finds them again, imported
once, and steps of a single directory (the usual project) never move anything.

Discovery refuses the layouts it can see where this matters (discover/import_identity.py); this
keeps a process right for imports no parser sees (`importlib.import_module(name)`) and for
pipeline files named alike (a/p.py and b/p.py are both module `p`).
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


class ImportPaths:
    """`sys.path` and `sys.modules` as a fresh process importing one pipeline file has them."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.current: str | None = None
        self.inserted: str | None = None  # the directory we put first on sys.path
        self.dirs = {os.path.abspath(root)}  # directories modules came through that we vary
        self.aside: dict[tuple[str, str], ModuleType] = {}  # (came through, name) -> module
        self.owners: dict[str, tuple[Any, str | None]] = {}  # name -> (module, came through)
        self.entries: dict[str, tuple[Any, str | None]] = {}  # name -> (module, _path_entry)
        self.shadows: dict[tuple[str, str], bool] = {}
        self.names: dict[str, tuple[str, str]] = {}  # pipeline file -> import_name()

    def enter(self, file: str) -> str:
        """Ready the process to import `file` (root-relative) or run its steps; returns the
        name it is imported as."""
        found = self.names.get(file)
        if found is None:
            found = self.names[file] = import_name(self.root, file)
        name, directory = found
        if directory != self.current or (self.inserted and self.inserted not in sys.path):
            self._set_path(directory)
            self._set_modules(os.path.abspath(directory))
            self.current = directory
        return name

    def forget(self) -> None:
        """The caller removed the project's modules and path entries: start again."""
        self.current = self.inserted = None
        for cache in (self.aside, self.owners, self.entries, self.shadows, self.names):
            cache.clear()

    def _set_path(self, directory: str) -> None:
        if self.inserted is not None and self.inserted in sys.path:
            sys.path.remove(self.inserted)
        self.inserted = None
        if directory != self.root and directory not in sys.path:
            sys.path.insert(0, directory)
            self.inserted = directory
            self.dirs.add(os.path.abspath(directory))
        if self.root not in sys.path:
            sys.path.insert(1 if self.inserted else 0, self.root)

    def _set_modules(self, directory: str) -> None:
        for name, module in list(sys.modules.items()):
            came = self._came_through(name, module)
            if came is not None and not self._visible(came, name, directory):
                self.aside[(came, name)] = sys.modules.pop(name)
        for came, name in list(self.aside):
            if name not in sys.modules and self._visible(came, name, directory):
                sys.modules[name] = self.aside.pop((came, name))

    def _visible(self, came: str, name: str, directory: str) -> bool:
        """Would a fresh process importing from `directory` find this module by this name?"""
        if came == directory:
            return True
        return came == os.path.abspath(self.root) and not self._shadowed(directory, name)

    def _shadowed(self, directory: str, name: str) -> bool:
        """`directory` holds a module or regular package of `name`'s top-level name, found
        before the root's (a namespace portion there does not win over the root's module)."""
        top = name.partition(".")[0]
        key = (directory, top)
        if key not in self.shadows:
            spec = importlib.machinery.PathFinder.find_spec(top, [directory])
            self.shadows[key] = spec is not None and spec.origin is not None
        return self.shadows[key]

    def _came_through(self, name: str, module: Any) -> str | None:
        """The path entry a project module was found through, when it is one we vary (the
        root or a pipeline file's directory); None for anything else."""
        known = self.owners.get(name)
        if known is not None and known[0] is module:
            return known[1]
        entry = self.entries.get(name)
        came = entry[1] if entry is not None and entry[0] is module else _path_entry(name, module)
        if came is not None and (came not in self.dirs or name.partition(".")[0] == "barca"):
            came = None
        self.owners[name] = (module, came)
        return came


def _path_entry(name: str, module: Any) -> str | None:
    """The directory that, on sys.path, makes `name` the file the module was loaded from."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or name == "__main__":
        return None
    path = os.path.abspath(file)
    parts = name.split(".")
    base = os.path.basename(path)
    if base.startswith("__init__."):
        folder = os.path.dirname(path)
    elif base.partition(".")[0] == parts[-1]:
        folder, parts = os.path.dirname(path), parts[:-1]
    else:
        return None
    for part in reversed(parts):
        if os.path.basename(folder) != part:
            return None
        folder = os.path.dirname(folder)
    return folder


def import_name(root: str, file: str) -> tuple[str, str]:
    """(module name, directory first on sys.path) a pipeline file is imported with: inside a
    chain of regular packages from the root down, its dotted name from the root; otherwise its
    stem, from its own directory."""
    parts = Path(file).with_suffix("").parts
    folders = parts[:-1]
    if folders and all(part.isidentifier() for part in folders) and all(
            os.path.isfile(os.path.join(root, *folders[:i + 1], "__init__.py"))
            for i in range(len(folders))):
        return ".".join(parts), root
    return parts[-1], str(Path(root, file).parent)


def remember_entries(root: str) -> None:
    """Work out where every module loaded now was found, for `root`'s view: the warm pool
    calls it before it forks workers, which then look at only the modules imported since
    (the 700-odd modules of barca and the pipeline's libraries took a forked worker 10 ms of
    CPU before its first step, and copied the page of each module object it looked at)."""
    paths = for_root(root)
    for name, module in list(sys.modules.items()):
        paths.entries[name] = (module, _path_entry(name, module))


@functools.lru_cache(maxsize=None)
def for_root(root: str) -> ImportPaths:
    """One per project root and process: sys.modules is the process's."""
    return ImportPaths(Path(root))
