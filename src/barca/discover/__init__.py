"""Discovery: pipeline source files in, frozen `Definition`s out, without importing user code.

Entry points: `find_files` (which files are pipeline files), `discover` (parse, resolve and
hash the nodes of given files) and `load_definitions` (both, for the CLI). Everything is read
with `ast`; a pipeline's own code never runs here, so discovery is safe and fast on every
command. Submodules: files (the walk), bindings (which names are barca's), names (what code
binds and reads), modules (reading files once, import lookup), literals (values read without
running the file), arguments and options (decorator arguments: references, settings), parse
(decorators and signature checks), resolve (references to node ids), hashing and cone (the
definition hash and its helper code), definitions (assembling it all).
"""

from __future__ import annotations

TYPE_CHECKING = False  # pathlib and typing are not imported for it
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Sequence

    from barca.discover.model import Definition

__all__ = ["Definition", "DimensionSpec", "InputSpec", "SCHEME_VERSION", "discover",
           "find_files", "load_definitions"]

# each public name's module, imported when the name is first used: a fully cached `barca get`
# imports `discover.lookup` alone (engine.cached_get), not the whole of discovery
_HOME = {"Definition": "model", "DimensionSpec": "model", "InputSpec": "model",
         "SCHEME_VERSION": "hashing", "discover": "definitions", "find_files": "files"}


def __getattr__(name: str) -> object:
    import importlib

    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'barca.discover' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"barca.discover.{module}"), name)
    globals()[name] = value
    return value


def load_definitions(root: Path, paths: Sequence[str], cwd: Path | None = None,
                     cache_file: Path | None = None, write_cache: bool = False
                     ) -> tuple[Definition, ...]:
    """The definitions of the pipeline files `paths` name (every pipeline file if none),
    reused from `cache_file` when none of the files they came from changed."""
    from barca.discover.cache import discover_cached
    from barca.discover.files import find_files

    return discover_cached(root, find_files(root, paths, cwd), cache_file, write_cache)
