"""Turning upstream references as written (`raw`, `m.raw`, `asset_ref("p.py:raw")`) into ids.

Resolution order, most specific first: a node defined in the same file; for an imported name,
the node in the file the import points at (relative import -> the file's package; absolute ->
the file's directory, then the root; re-exports through the target module's own imports are
followed); otherwise the one node in the whole discovered set with that function name or
`name=`. Several candidates, or none, is a UsageError listing what was found. Imported
modules are read through the shared `ModuleCache`, never imported.
"""

from __future__ import annotations

import posixpath
from typing import Sequence

from barca.discover.arguments import Ref
from barca.discover.modules import ModRef, ModuleCache
from barca.discover.names import ImportBinding
from barca.discover.parse import RawNode, parse_module

_NONE_FOUND_FIX = ("Run `barca list` to see the nodes; if the node lives in a file you did not "
                   "name, pass that file too")


class NodeIndex:
    """Every discovered node, findable by (file, function name), (file, name=) and name."""

    def __init__(self, nodes: Sequence[RawNode]) -> None:
        self.functions: dict[tuple[str, str], str] = {}
        self.names: dict[tuple[str, str], str] = {}
        self.by_name: dict[str, set[str]] = {}
        for node in nodes:
            self.functions[(node.file, node.function)] = node.node_id
            self.names[(node.file, node.name)] = node.node_id
            for key in {node.function, node.name}:
                self.by_name.setdefault(key, set()).add(node.node_id)

    def in_file(self, file: str, name: str) -> str | None:
        return self.functions.get((file, name)) or self.names.get((file, name))


class Resolver:
    """Resolves the references of nodes against the index, reading imports as needed."""

    def __init__(self, modules: ModuleCache, index: NodeIndex) -> None:
        self.modules = modules
        self.index = index

    def resolve(self, node: RawNode, ref: Ref, what: str) -> str:
        """The node id `ref` names, for the error text `what` (e.g. "input 'raw'")."""
        if ref.kind == "id":
            return self._by_path(node, ref, what)
        head, *rest = ref.text.split(".")
        if not rest:
            found = self.index.in_file(node.file, head)
            if found is not None:
                return found
        module = self.modules.load(node.file)
        fallback = ref.written_name
        for binding in reversed(module.index.imports.get(head, [])):
            found, fallback = self._through_import(node, binding, tuple(rest), ref)
            if found is not None:
                return found
        return self._unique(node, ref, fallback, what)

    def _through_import(self, node: RawNode, binding: ImportBinding, tail: tuple[str, ...],
                        ref: Ref, importer: str | None = None,
                        depth: int = 0) -> tuple[str | None, str]:
        """(node id or None, the name to look up project-wide when it is None): None when the
        import leads outside the project, to a module itself, or to a re-export we cannot pin.
        """
        importer = importer or node.file
        fallback = binding.attr if binding.attr and not tail else ref.written_name
        module = self.modules.find(binding, importer, self.modules.search_dirs(node.file))
        if module is None or depth > 20:
            return None, fallback
        if binding.attr is not None:
            sub = self.modules.submodule(module, binding.attr)
            if sub is None:
                if tail:
                    return None, fallback
                return self._node_in(node, module, binding, binding.attr, ref, depth), fallback
            module = sub
        while len(tail) > 1:
            sub = self.modules.submodule(module, tail[0])
            if sub is None:
                return None, fallback
            module, tail = sub, tail[1:]
        if len(tail) != 1:
            return None, fallback
        return self._node_in(node, module, binding, tail[0], ref, depth), fallback

    def _node_in(self, node: RawNode, module: ModRef, binding: ImportBinding, name: str,
                 ref: Ref, depth: int) -> str | None:
        """The node `name` of an imported project module, following its re-exports."""
        if module.file is not None:
            found = self.index.in_file(module.file, name)
            if found is not None:
                return found
            info = self.modules.load(module.file, importer=node.file, step=node.node_id)
            for reexport in info.index.imports.get(name, []):
                found, _ = self._through_import(node, reexport, (), ref, module.file, depth + 1)
                if found is not None:
                    return found
            if name in info.index.imports or info.index.stars:
                return None
        shown = module.file or (module.package_dir or "") + "/"
        raise node.site.error(
            f"'{name}' is imported from {binding.written} ({shown}), but no "
            f"@asset/@task/@sensor named '{name}' is defined there",
            self._import_fix(module, name), ref.line)

    def _import_fix(self, module: ModRef, name: str) -> str:
        if module.file is not None:
            info = self.modules.load(module.file)
            if any(n.function == name or n.name == name for n in parse_module(info)):
                return (f"{module.file} defines it but was not among the files read: pass "
                        f"{module.file} too, or run barca without file arguments")
        return "Import the node from the module that defines it. " + _NONE_FOUND_FIX

    def _unique(self, node: RawNode, ref: Ref, name: str, what: str) -> str:
        candidates = sorted(self.index.by_name.get(name, ()))
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            raise node.site.error(
                f"{what} of {node.node_id} is ambiguous: '{name}' could be "
                f"{', '.join(candidates)}",
                f"Import it from the module that defines it, or write "
                f"asset_ref(\"{candidates[0]}\")", ref.line)
        raise node.site.error(f"{what} of {node.node_id} names no @asset/@sensor/@task",
                              _NONE_FOUND_FIX, ref.line)

    def _by_path(self, node: RawNode, ref: Ref, what: str) -> str:
        path, name = ref.text.rsplit(":", 1)
        folder = node.file.rsplit("/", 1)[0] if "/" in node.file else ""
        for candidate in (path, posixpath.join(folder, path)):
            normal = posixpath.normpath(candidate)
            if normal.startswith("../") or normal == "..":
                continue
            found = self.index.in_file(normal, name)
            if found is not None:
                return found
        raise node.site.error(f"{what} of {node.node_id} names no @asset/@sensor/@task",
                              _NONE_FOUND_FIX, ref.line)
