"""Workers compile project modules from their source, never from `__pycache__`.

Python trusts a cached `.pyc` whose recorded mtime and size match the source, so an edit that
keeps both (a same-size change restored by `touch -d`, rsync -t, a build tool) would run old
code under the new run hash. The run hash covers the source text, so the worker must run
exactly that text: modules under the project root (outside virtual environments) are compiled
from source on import. Installed packages keep their bytecode.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import sys
from typing import Any


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str) -> Any:
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


def is_project_file(root: str, path: str) -> bool:
    """A file of the project's own code: under the root, outside any environment's packages."""
    real = os.path.realpath(path)
    return real.startswith(_real_dir(root)) and "site-packages" not in real \
        and not any(real.startswith(_real_dir(p))
                    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))


@functools.lru_cache(maxsize=None)
def _real_dir(path: str) -> str:
    return os.path.join(os.path.realpath(path), "")


class _ProjectSourceFinder:
    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py") or not is_project_file(self.root, origin):
            return None
        spec.loader = _SourceOnlyLoader(spec.name, origin)
        return spec


def install(root: str) -> None:
    """Put the finder first on sys.meta_path (once)."""
    if not any(isinstance(f, _ProjectSourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _ProjectSourceFinder(root))
