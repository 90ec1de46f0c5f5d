"""The helper cone of one definition: the project code its result can depend on.

Starting from the names a node function reads, follow every module-level function, class,
constant and import they resolve to, transitively and to any depth, into project modules
only (a module the `ModuleCache` cannot find under the root is external and ends the
walk). Each definition reached becomes one hash part, `helper <file>:<name>`, whose digest
covers that definition's source; a module used as a value (not as `m.attr`), or a name bound
in a way we cannot pin to one statement, makes the whole file one part, `helper <file>`.
Unused definitions never enter, so editing them reruns nothing. Each (module, name) is
visited once per walk, so import cycles terminate.
"""

from __future__ import annotations

import ast

from barca.discover.hashing import digest
from barca.discover.modules import ModuleCache, ModuleInfo
from barca.discover.names import ImportBinding, Uses, uses_of


class SharedScans:
    """What every walk of one discovery can reuse: per-statement uses, per-helper digests."""

    def __init__(self) -> None:
        self.digests: dict[str, str] = {}
        self._uses: dict[int, Uses] = {}

    def uses(self, stmt: ast.stmt) -> Uses:
        found = self._uses.get(id(stmt))
        if found is None:
            found = self._uses[id(stmt)] = uses_of([stmt])
        return found


class Cone:
    """One walk; `walk()` returns {label: digest} for every helper reached."""

    def __init__(self, modules: ModuleCache, shared: SharedScans, dirs: tuple[str, ...],
                 step: str, own_label: str) -> None:
        self.modules = modules
        self.dirs = dirs
        self.step = step
        self.parts: dict[str, str] = {}
        self._shared = shared
        self._own_label = own_label
        self._seen: set[tuple[object, ...]] = set()
        self._queue: list[tuple[ModuleInfo, Uses]] = []

    def walk(self, module: ModuleInfo, uses: Uses) -> dict[str, str]:
        self._queue.append((module, uses))
        while self._queue:
            module, uses = self._queue.pop()
            local: dict[str, list[ImportBinding]] = {}
            for name, binding in uses.imports:
                local.setdefault(name, []).append(binding)
            for name in sorted(uses.names):
                self._name(module, name, (), local)
            for chain in sorted(uses.chains):
                self._name(module, chain[0], chain[1:], local)
        return self.parts

    def _name(self, module: ModuleInfo, name: str, tail: tuple[str, ...],
              local: dict[str, list[ImportBinding]]) -> None:
        if name in local:
            for binding in local[name]:
                self._import(module, binding, tail)
            return
        key = (module.file, name, tail)
        if key in self._seen:
            return
        self._seen.add(key)
        index = module.index
        if name in index.conservative:
            self._whole(module)
            return
        if name in index.defs:
            self._definition(module, name)
        for binding in index.imports.get(name, ()):
            self._import(module, binding, tail)
        if name not in index.defs and name not in index.imports:
            for star in index.stars:
                target = self.modules.find(star, module.file, self.dirs)
                if target is not None and target.file is not None:
                    self._name(self._load(target.file, module), name, tail, {})

    def _definition(self, module: ModuleInfo, name: str) -> None:
        label = f"helper {module.file}:{name}"
        if label in self.parts or label == self._own_label:
            return
        stmts = module.index.defs[name]
        found = self._shared.digests.get(label)
        if found is None:
            found = digest((label, tuple(module.statement_source(s) for s in stmts)))
            self._shared.digests[label] = found
        self.parts[label] = found
        for stmt in stmts:
            self._queue.append((module, self._shared.uses(stmt)))

    def _import(self, module: ModuleInfo, binding: ImportBinding,
                tail: tuple[str, ...]) -> None:
        key = (module.file, binding, tail)
        if key in self._seen:
            return
        self._seen.add(key)
        target = self.modules.find(binding, module.file, self.dirs)
        if target is None:
            return
        if binding.attr is not None:
            sub = self.modules.submodule(target, binding.attr)
            if sub is None:
                if target.file is not None:
                    self._name(self._load(target.file, module), binding.attr, tail, {})
                return
            target = sub
        while tail:
            sub = self.modules.submodule(target, tail[0])
            if sub is None:
                break
            target, tail = sub, tail[1:]
        if target.file is None:
            return
        loaded = self._load(target.file, module)
        if tail:
            self._name(loaded, tail[0], tail[1:], {})
        else:
            self._whole(loaded)

    def _whole(self, module: ModuleInfo) -> None:
        """The module is used as a value: its whole text counts, and what it imports."""
        label = f"helper {module.file}"
        if label in self.parts:
            return
        found = self._shared.digests.get(label)
        if found is None:
            found = self._shared.digests[label] = digest((label, module.source))
        self.parts[label] = found
        for bindings in module.index.imports.values():
            for binding in bindings:
                self._import(module, binding, ())

    def _load(self, file: str, importer: ModuleInfo) -> ModuleInfo:
        return self.modules.load(file, importer=importer.file, step=self.step)
