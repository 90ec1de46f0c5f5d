"""Organisational groups: `training = group("Training", members=[rows, model], output=model)`.

A group labels nodes and other groups for `barca list --groups` (and a server's UI); it never
adds a step, an input, a target or a hash part, so adding, renaming or regrouping reruns
nothing. As in the published barca, a group is a top-level assignment to one name, read from
the source like a decorator: a literal name, a literal list or tuple of members (node
references as `inputs=` takes them, or the variable of a group of the same file), an `output`
that is one of the group's members or their descendants, an optional literal description.
Each node or group has at most one parent, and membership has no cycles. Its id is
`group:<file>:<variable>`. Anything else is a usage error before any user code runs, on every
command that reads the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from barca.discover.arguments import Ref, Site, read_ref
from barca.discover.bindings import GROUP, BarcaNames, barca_names
from barca.discover.modules import ModuleInfo
from barca.discover.resolve import Resolver

ACCEPTED = ("members", "output", "description")
FIX = ('Write it as NAME = group("Label", members=[node, other_group], output=node); see '
       "`barca docs assets` (Groups)")


@dataclass(frozen=True, slots=True)
class NodeGroup:
    id: str  # group:<file>:<variable>
    name: str
    description: str
    members: tuple[str, ...]  # node ids and group ids, as written
    output: str  # a node id or group id among the members' descendants


class _Declared(NamedTuple):
    site: Site
    group_id: str
    name: str
    description: str
    members: tuple[Ref, ...]
    output: Ref


class _Holder(NamedTuple):
    """What `Resolver.resolve` reads of the node a reference belongs to."""

    file: str
    site: Site
    node_id: str


def read_groups(modules: Sequence[ModuleInfo], resolver: Resolver) -> tuple[NodeGroup, ...]:
    """Every group declared in `modules`, checked and resolved, in file then source order."""
    declared: list[_Declared] = []
    for module in modules:
        if GROUP in module.source:  # most files declare none: skip reading their bindings
            declared.extend(_declarations(module))
    if not declared:
        return ()
    lines = {d.group_id: d.site.line for d in declared}
    groups = tuple(_resolved(d, lines, resolver) for d in declared)
    _check_hierarchy(groups, {d.group_id: d.site for d in declared})
    return groups


def _declarations(module: ModuleInfo) -> list[_Declared]:
    names = barca_names(module.tree, module.source)
    out: list[_Declared] = []
    functions = {s.name for s in module.tree.body
                 if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for stmt in module.tree.body:
        target, value = _assignment(stmt)
        if not (isinstance(value, ast.Call) and names.which(value.func) == GROUP):
            continue
        if not isinstance(target, ast.Name):
            raise Site(module.file, "group", stmt.lineno).error(
                "invalid group: assign group(...) to one name", FIX, stmt)
        site = Site(module.file, target.id, stmt.lineno)
        if target.id in functions:
            raise site.error(f"invalid group: '{target.id}' is also a function of this file; "
                             "a group cannot take a node's name", "Give the group another "
                             "variable name")
        group_id = f"group:{module.file}:{target.id}"
        if any(d.group_id == group_id for d in out):
            raise site.error(f"invalid group: '{target.id}' is assigned a group twice",
                             "Keep one group(...) per variable")
        out.append(_declared(value, names, site, group_id))
    return out


def _assignment(stmt: ast.stmt) -> tuple[ast.expr | None, ast.expr | None]:
    if isinstance(stmt, ast.Assign):
        return (stmt.targets[0] if len(stmt.targets) == 1 else None), stmt.value
    if isinstance(stmt, ast.AnnAssign):
        return stmt.target, stmt.value
    return None, None


def _declared(call: ast.Call, names: BarcaNames, site: Site, group_id: str) -> _Declared:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        raise site.error("invalid group: starred arguments cannot be read without running "
                         "the file", FIX, call)
    if len(call.args) != 1:
        raise site.error(f"invalid group: group() takes its name as its one positional "
                         f"argument, not `{ast.unparse(call)}`", FIX, call)
    label = call.args[0]
    if not (isinstance(label, ast.Constant) and isinstance(label.value, str)
            and label.value.strip()):
        raise site.error(f"invalid group: its name must be a non-empty string literal, not "
                         f"`{ast.unparse(label)}`", FIX, label)
    keywords = {k.arg: k.value for k in call.keywords}
    for arg in keywords:
        if arg not in ACCEPTED:
            raise site.error(f"invalid group: group() has no argument '{arg}'; accepted: "
                             f"{', '.join(ACCEPTED)}", FIX, call)
    written = keywords.get("members")
    if not isinstance(written, (ast.List, ast.Tuple)) or not written.elts:
        raise site.error("invalid group: members= must be a non-empty literal list or tuple of "
                         "node and group references", FIX, written or call)
    members = tuple(_reference(e, names, site) for e in written.elts)
    if "output" not in keywords:
        raise site.error("invalid group: output= is required (the member that stands for the "
                         "group)", FIX, call)
    output = _reference(keywords["output"], names, site)
    description = keywords.get("description")
    text = ""
    if description is not None and not (isinstance(description, ast.Constant)
                                        and description.value is None):
        if not (isinstance(description, ast.Constant) and isinstance(description.value, str)):
            raise site.error("invalid group: description= must be a string literal", FIX,
                             description)
        text = description.value
    return _Declared(site, group_id, label.value, text, members, output)


def _reference(expr: ast.expr, names: BarcaNames, site: Site) -> Ref:
    if isinstance(expr, ast.Constant):  # read_ref takes "file.py:fn" text; a group does not
        raise site.error(f"invalid group: members and output are references, not strings "
                         f"(`{ast.unparse(expr)}`)", FIX, expr)
    return read_ref(expr, names, site, "a group member")


def _resolved(d: _Declared, lines: dict[str, int], resolver: Resolver) -> NodeGroup:
    holder = _Holder(d.site.file, d.site, d.group_id)

    def resolve(ref: Ref) -> str:
        own = f"group:{d.site.file}:{ref.text}"
        if ref.kind == "name" and own in lines:
            if lines[own] >= d.site.line:  # importing the file would raise NameError
                raise d.site.error(f"invalid group: it names group '{ref.text}', which is "
                                   f"assigned later (line {lines[own]})",
                                   f"Move {ref.text} = group(...) above this one")
            return own
        return resolver.resolve(holder, ref, "a member")  # type: ignore[arg-type]

    members = tuple(resolve(r) for r in d.members)
    if len(set(members)) != len(members):
        twice = next(m for m in members if members.count(m) > 1)
        raise d.site.error(f"invalid group: {twice} is listed twice in members=", FIX)
    return NodeGroup(d.group_id, d.name, d.description, members, resolve(d.output))


def _check_hierarchy(groups: tuple[NodeGroup, ...], sites: dict[str, Site]) -> None:
    """One parent per member, no cycles, each output among the group's descendants."""
    parent: dict[str, str] = {}
    for g in groups:
        for member in g.members:
            other = parent.setdefault(member, g.id)
            if other != g.id:
                raise sites[g.id].error(f"invalid group: {member} belongs to both {other} and "
                                        f"{g.id}; a node or group has at most one parent",
                                        "Remove it from one of them")
    by_id = {g.id: g for g in groups}
    for g in groups:
        if g.output not in _descendants(g.id, by_id, sites, ()):
            raise sites[g.id].error(f"invalid group: output {g.output} is not a member of "
                                    f"{g.id} or of a group inside it",
                                    "Name one of its members (or theirs) as output=")


def _descendants(group_id: str, by_id: dict[str, NodeGroup], sites: dict[str, Site],
                 path: tuple[str, ...]) -> set[str]:
    if group_id in path:
        raise sites[group_id].error(f"invalid group: membership cycle "
                                    f"{' -> '.join((*path, group_id))}",
                                    "A group cannot contain itself, directly or not")
    out: set[str] = set()
    for member in by_id[group_id].members:
        out.add(member)
        if member in by_id:
            out |= _descendants(member, by_id, sites, (*path, group_id))
    return out
