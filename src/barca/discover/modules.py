"""Project source files, each read and parsed once per discovery, and import lookup.

`ModuleCache` owns every file read during one `discover()` call: pipeline files and the
project helper modules they import (read as text, never imported). It also answers "which
project file does this import name?" the way a worker's import would: the pipeline file's own
directory first, then the project root (only the root for a pipeline file inside packages);
a regular package (`__init__.py`) or a `.py` module wins over a namespace package. A module
that is not found under the root (stdlib, installed packages, barca itself) is external and
never followed.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import NamedTuple

from barca.discover.lookup import file_digest, find_module
from barca.discover.names import (COMPOUND_STATEMENTS as _COMPOUND, ImportBinding, bound_names,
                                  header_names, import_bindings, nested_statements)
from barca.errors import UsageError

EXTERNAL_TOP_LEVEL = frozenset({"barca", "__future__"})


class ModRef(NamedTuple):
    """A project module found on disk.

    file: root-relative path of its source (`pkg/mod.py`, `pkg/__init__.py`), None for a
    namespace package; package_dir: the directory holding its submodules, None for a plain
    module.
    """

    file: str | None
    package_dir: str | None


class ModuleIndex:
    """The module-level names of one file, sorted by how they can be hashed.

    defs: names bound by a top-level def, class or simple `NAME = ...` statement;
    imports: names bound by top-level imports; stars: `from x import *` bindings;
    conservative: names bound in a way we cannot pin to one statement (inside module-level
    if/try/for/while/with/match, tuple unpacking, augmented assignment), so a use of one of
    them hashes the whole module.
    """

    __slots__ = ("defs", "imports", "stars", "conservative")

    def __init__(self, tree: ast.Module) -> None:
        self.defs: dict[str, list[ast.stmt]] = {}
        self.imports: dict[str, list[ImportBinding]] = {}
        self.stars: list[ImportBinding] = []
        self.conservative: set[str] = set()
        for stmt in tree.body:
            self._add(stmt)

    def _add(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs.setdefault(stmt.name, []).append(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for name, binding in import_bindings(stmt):
                if name == "*":
                    self.stars.append(binding)
                else:
                    self.imports.setdefault(name, []).append(binding)
        elif _simple_targets(stmt):
            for name in _simple_targets(stmt):
                self.defs.setdefault(name, []).append(stmt)
        elif isinstance(stmt, _COMPOUND):
            self._add_nested(stmt)
        elif not (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
            self.conservative |= bound_names([stmt])

    def _add_nested(self, stmt: ast.stmt) -> None:
        """A module-level if/try/for/...: its imports are followed like any import (each
        branch's module counts); any other name it binds can only be hashed conservatively."""
        self.conservative |= header_names(stmt)
        for nested in nested_statements(stmt):
            if isinstance(nested, (ast.Import, ast.ImportFrom)):
                self._add(nested)
            elif isinstance(nested, _COMPOUND):
                self._add_nested(nested)
            else:
                self.conservative |= bound_names([nested])


def _simple_targets(stmt: ast.stmt) -> list[str]:
    """Names of `A = ...`, `A = B = ...` and `A: T = ...`; empty for any other shape."""
    if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
        return [t.id for t in stmt.targets]  # type: ignore[attr-defined]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        return [stmt.target.id]
    return []


class ModuleInfo:
    """One source file: its text, lines, AST and (lazily) its module-level index."""

    __slots__ = ("file", "source", "lines", "tree", "_index")

    def __init__(self, file: str, source: str, tree: ast.Module) -> None:
        self.file = file
        self.source = source
        self.lines = source.split("\n")
        self.tree = tree
        self._index: ModuleIndex | None = None

    @property
    def index(self) -> ModuleIndex:
        if self._index is None:
            self._index = ModuleIndex(self.tree)
        return self._index

    def segment(self, first: int, last: int) -> str:
        """Lines first..last (1-based, inclusive) exactly as written."""
        return "\n".join(self.lines[first - 1:last])

    def statement_source(self, stmt: ast.stmt) -> str:
        """A statement's text including its decorators."""
        decorators = getattr(stmt, "decorator_list", None) or []
        first = min([stmt.lineno, *(d.lineno for d in decorators)])
        return self.segment(first, stmt.end_lineno or stmt.lineno)


def _parent(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


class ModuleCache:
    """Reads each project file at most once and finds the files imports point at."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._root_str = str(self.root)
        self._modules: dict[str, ModuleInfo] = {}
        self._children: dict[tuple[str, str], ModRef | None] = {}
        self.digests: dict[str, str] = {}  # every file read -> digest of its bytes

    def load(self, file: str, *, importer: str | None = None,
             step: str | None = None) -> ModuleInfo:
        """Parse `file` (root-relative) once; a syntax error is a UsageError naming it."""
        found = self._modules.get(file)
        if found is None:
            source = self._read(file, importer)
            found = ModuleInfo(file, source, _parse(file, source, importer, step))
            self._modules[file] = found
        return found

    def _read(self, file: str, importer: str | None) -> str:
        try:
            raw = Path(self._root_str, file).read_bytes()
            self.digests[file] = file_digest(raw)
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}",
                             "Check that the file exists and is readable") from None
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            by = f" (imported by {importer})" if importer else ""
            raise UsageError(f"Parse error: {file} is not UTF-8 text{by}",
                             f"Save {file} as UTF-8") from None
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def search_dirs(self, pipeline_file: str) -> tuple[str, ...]:
        """Where a worker finds absolute imports for this pipeline file: its own directory,
        then the root; only the root for a file inside a chain of regular packages from the
        root down, which is imported by its dotted name (engine/worker/import_paths.py)."""
        folder = _parent(pipeline_file)
        if not folder or self._in_packages(folder):
            return ("",)
        return (folder, "")

    def _in_packages(self, folder: str) -> bool:
        parent = ""
        for part in folder.split("/"):
            found = self._child(parent, part)
            if found is None or found.package_dir is None or found.file is None:
                return False
            parent = found.package_dir
        return True

    def find(self, binding: ImportBinding, importer: str,
             dirs: tuple[str, ...]) -> ModRef | None:
        """The project module an import names, or None when it is external."""
        parts = [p for p in binding.module.split(".") if p]
        if binding.level:
            folder = _parent(importer)
            for _ in range(binding.level - 1):
                if not folder:
                    return None
                folder = _parent(folder)
            init = _join(folder, "__init__.py")
            found: ModRef | None = ModRef(init if self._isfile(init) else None, folder)
        else:
            if not parts or parts[0] in EXTERNAL_TOP_LEVEL:
                return None
            found = self._top_level(parts[0], dirs)
            parts = parts[1:]
        for part in parts:
            if found is None:
                return None
            found = self.submodule(found, part)
        return found

    def _top_level(self, name: str, dirs: tuple[str, ...]) -> ModRef | None:
        namespace: ModRef | None = None
        for folder in dirs:
            found = self._child(folder, name)
            if found is not None and found.file is not None:
                return found
            namespace = namespace or found
        return namespace

    def submodule(self, module: ModRef, name: str) -> ModRef | None:
        """`module.name` when it is a submodule file or package on disk."""
        if module.package_dir is None:
            return None
        return self._child(module.package_dir, name)

    def lookups(self) -> dict[tuple[str, str], ModRef | None]:
        """Every (folder, name) an import was looked up under, with what was found."""
        return dict(self._children)

    def _child(self, folder: str, name: str) -> ModRef | None:
        key = (folder, name)
        if key not in self._children:
            self._children[key] = self._lookup(folder, name)
        return self._children[key]

    def _lookup(self, folder: str, name: str) -> ModRef | None:
        found = find_module(self._root_str, folder, name)
        return None if found is None else ModRef(*found)

    def _isfile(self, rel: str) -> bool:
        return os.path.isfile(os.path.join(self._root_str, rel))


def _parse(file: str, source: str, importer: str | None, step: str | None) -> ast.Module:
    """The file's AST, once Python would also compile it: some errors (a repeated keyword
    argument, `return` outside a function) are found only by the compiler, and a file that
    parses but does not compile would fail every step that imports it."""
    try:
        tree = ast.parse(source, filename=file)
        compile(tree, file, "exec", dont_inherit=True)
        return tree
    except SyntaxError as exc:
        raise _syntax_error(file, exc, source, importer, step) from None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        raise UsageError(f"Parse error: cannot parse {file}: {exc}",
                         f"Fix {file} so that Python can parse it") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"Parse error: cannot parse {file}: an expression is nested too "
                         "deeply for Python's parser",
                         f"Split the deepest expression of {file} into smaller ones") from None


def _syntax_error(file: str, exc: SyntaxError, source: str, importer: str | None,
                  step: str | None) -> UsageError:
    line, column = exc.lineno or 0, exc.offset or 0
    message = f"Parse error: syntax error in {file}: line {line}, column {column}: {exc.msg}"
    if importer:
        message += f" (imported by {importer}"
        message += f", so step '{step}' cannot run)" if step else ")"
    lines = source.split("\n")
    excerpt = ""
    if 0 < line <= len(lines):
        text = lines[line - 1]
        excerpt = f":\n    {text}\n    {' ' * max(column - 1, 0)}^"
    return UsageError(message, f"Fix line {line} of {file}{excerpt}")
