"""The helper cone of a definition: the project code its result can depend on.

Starting from the names a node function reads, follow every module-level function, class,
constant and import they resolve to, transitively and to any depth, into project modules
only (a module the `ModuleCache` cannot find under the root is external and ends the walk).
Each definition reached becomes one hash part, `helper <file>:<name>`, whose digest covers
that definition's syntax tree (normal_form.py: comments and layout do not count); a module used as a value (not as `m.attr`), or a name bound in a
way we cannot pin to one statement, makes the whole file one part, `helper <file>`, and
its imports are followed. Unused definitions never enter, so editing them reruns nothing.

`ConeGraph` is shared by every definition of one discovery: each helper's digest and the
helpers it reaches directly are worked out once, so a project of many nodes sharing many
helpers costs one resolution per helper plus a cheap walk per node. Cycles terminate
because each label is visited once per walk.
"""

from __future__ import annotations

import ast

from barca.discover.env_reads import env_reads
from barca.discover.hashing import digest
from barca.discover.normal_form import tree_digest
from barca.discover.modules import ModuleCache, ModuleInfo
from barca.discover.names import ImportBinding, Uses, uses_of


class ConeGraph:
    """Helper labels, their digests and their direct edges, for one discovery."""

    def __init__(self, modules: ModuleCache) -> None:
        self.modules = modules
        self.digests: dict[str, str] = {}
        self.legacy: dict[str, str] = {}  # scheme 1's digest (the text) of each helper label
        self._what: dict[str, tuple[ModuleInfo, str | None]] = {}
        self._edges: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
        self._uses: dict[int, Uses] = {}
        self._env: dict[str, frozenset[str]] = {}

    def parts(self, module: ModuleInfo, uses: Uses, dirs: tuple[str, ...], step: str,
              own_label: str) -> dict[str, str]:
        """{label: digest} of every helper `uses` (read in `module`) reaches."""
        reach = _Reach(self, dirs, step)
        reach.uses(module, uses)
        stack = sorted(reach.labels, reverse=True)
        out: dict[str, str] = {}
        while stack:
            label = stack.pop()
            if label not in out and label != own_label:
                out[label] = self.digests[label]
                stack.extend(self._out(label, dirs, step))
        return out

    def env_reads(self, label: str) -> frozenset[str]:
        """The environment variables the code of a helper label reads (env_reads.py); none
        for an `import` label, which is a name, not code."""
        found = self._env.get(label)
        if found is None:
            what = self._what.get(label)
            trees = [] if what is None else \
                [what[0].tree] if what[1] is None else what[0].index.defs[what[1]]
            found = self._env[label] = env_reads(trees)
        return found

    def definition_label(self, module: ModuleInfo, name: str) -> str:
        label = f"helper {module.file}:{name}"
        if label not in self.digests:
            stmts = module.index.defs[name]
            self.digests[label] = tree_digest(label, stmts)
            self.legacy[label] = digest((label, tuple(module.statement_source(s)
                                                      for s in stmts)))
            self._what[label] = (module, name)
        return label

    def module_label(self, module: ModuleInfo) -> str:
        label = f"helper {module.file}"
        if label not in self.digests:
            self.digests[label] = tree_digest(label, [module.tree])
            self.legacy[label] = digest((label, module.source))
            self._what[label] = (module, None)
        return label

    def import_label(self, path: str, file: str) -> str:
        label = f"import {path} = {file}"
        self.digests.setdefault(label, digest((label,)))
        return label

    def _out(self, label: str, dirs: tuple[str, ...], step: str) -> tuple[str, ...]:
        if label.startswith("import "):
            return ()  # a name, not code: it leads nowhere
        key = (dirs, label)
        found = self._edges.get(key)
        if found is None:
            module, name = self._what[label]
            reach = _Reach(self, dirs, step)
            if name is None:  # a whole module: what it imports
                for bindings in module.index.imports.values():
                    for binding in bindings:
                        reach.import_(module, binding, ())
            else:
                for stmt in module.index.defs[name]:
                    reach.uses(module, self._uses_of(stmt))
            found = self._edges[key] = tuple(sorted(reach.labels, reverse=True))
        return found

    def _uses_of(self, stmt: ast.stmt) -> Uses:
        found = self._uses.get(id(stmt))
        if found is None:
            found = self._uses[id(stmt)] = uses_of([stmt])
        return found


class _Reach:
    """One resolution pass: the helper labels some uses reach directly (through imports)."""

    def __init__(self, graph: ConeGraph, dirs: tuple[str, ...], step: str) -> None:
        self.graph = graph
        self.modules = graph.modules
        self.dirs = dirs
        self.step = step
        self.labels: set[str] = set()
        self._seen: set[tuple[object, ...]] = set()

    def uses(self, module: ModuleInfo, uses: Uses) -> None:
        local: dict[str, list[ImportBinding]] = {}
        for name, binding in uses.imports:
            local.setdefault(name, []).append(binding)
        for name in sorted(uses.names):
            self._name(module, name, (), local)
        for chain in sorted(uses.chains):
            self._name(module, chain[0], chain[1:], local)

    def _name(self, module: ModuleInfo, name: str, tail: tuple[str, ...],
              local: dict[str, list[ImportBinding]]) -> None:
        if name in local:
            for binding in local[name]:
                self.import_(module, binding, tail)
            return
        key = (module.file, name, tail)
        if key in self._seen:
            return
        self._seen.add(key)
        index = module.index
        if name in index.conservative:
            self.labels.add(self.graph.module_label(module))
            return
        if name in index.defs:
            self.labels.add(self.graph.definition_label(module, name))
        for binding in index.imports.get(name, ()):
            self.import_(module, binding, tail)
        if name not in index.defs and name not in index.imports:
            for star in index.stars:
                target = self.modules.find(star, module.file, self.dirs)
                if target is not None and target.file is not None:
                    self._name(self._load(target.file, module), name, tail, {})

    def import_(self, module: ModuleInfo, binding: ImportBinding,
                tail: tuple[str, ...]) -> None:
        """Follow one import binding, read as `name.tail...`, to what it names."""
        key = (module.file, binding, tail)
        if key in self._seen:
            return
        self._seen.add(key)
        target = self.modules.find(binding, module.file, self.dirs)
        if target is None:
            return
        path = binding.written
        self._named(path, target)
        if binding.attr is not None:
            sub = self.modules.submodule(target, binding.attr)
            if sub is None:
                if target.file is not None:
                    self._name(self._load(target.file, module), binding.attr, tail, {})
                return
            target, path = sub, f"{path}.{binding.attr}"
            self._named(path, target)
        while tail:
            sub = self.modules.submodule(target, tail[0])
            if sub is None:
                break
            target, path, tail = sub, f"{path}.{tail[0]}", tail[1:]
            self._named(path, target)
        if target.file is None:
            return
        loaded = self._load(target.file, module)
        if tail:
            self._name(loaded, tail[0], tail[1:], {})
        else:
            self.labels.add(self.graph.module_label(loaded))

    def _named(self, path: str, target) -> None:
        """A module of a subdirectory enters the hash with the name it was imported by:
        `helpers` and `b.helpers` may be one file to discovery and two modules to a worker,
        so a result recorded under one spelling is not served to the other."""
        if target.file is not None and "/" in target.file:
            self.labels.add(self.graph.import_label(path, target.file))

    def _load(self, file: str, importer: ModuleInfo) -> ModuleInfo:
        return self.modules.load(file, importer=importer.file, step=self.step)
