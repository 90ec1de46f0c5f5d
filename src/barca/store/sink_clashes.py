"""Two sinks that can write the same file, found when the pipeline loads.

A key of a partitioned asset writes its sink under a name made from the key
(`out.json` -> `out_k_<key>.json`, `out/` -> `out/k=<key>/data.<ext>`, store.sinks.destination),
and the keys are often not known before the asset runs. So each sink is read as the pattern of
every name it can write: the literal parts of the name, and for each key value the characters
store.paths.escape can give it. Two patterns that match one common name are a load error
naming both assets: whichever wrote last would win, key by key, silently. `out.json` under
dimension `k` and `out.json` under `k_x` meet at `out_k_x_y.json` (keys `x_y` and `y`).

Paths are compared as written, relative ones normalized (`./a/../b.json` is `b.json`); an
absolute path is not matched against a relative one, nor a symlink against its target, nor a
name cut for length (`~<digest>`) against another.
"""

from __future__ import annotations

import os
import string
from typing import Iterable, Sequence

from barca.discover.model import Definition
from barca.errors import UsageError

_SAFE = frozenset(string.ascii_letters + string.digits + ".-_%")  # what escape() writes
_SAFE_NO_UNDERSCORE = _SAFE - {"_"}  # several dimensions escape `_` in their values
_EXTENSION = frozenset(string.ascii_lowercase)  # a dataset sink's data.<ext>, unknown here


def refuse_clashes(definitions: Iterable[Definition]) -> None:
    """A UsageError (exit 2) naming the first two sinks that can write one file."""
    clash = find_clash(definitions)
    if clash is not None:
        raise UsageError(f"Parse error: {clash}",
                         "give each sink a path of its own, one that no key of the other "
                         "asset turns into the same file name")


def find_clash(definitions: Iterable[Definition]) -> str | None:
    """The message for the first two sinks that can write one file, None when none can."""
    sinks = [(d, s.path, _pattern(d, s.path)) for d in definitions if d.kind == "asset"
             for s in d.sinks]
    for i, (d1, path1, p1) in enumerate(sinks):
        for d2, path2, p2 in sinks[i + 1:]:
            if not _ends_agree(p1, p2):
                continue
            common = _meet(p1, p2)
            if common is None:
                continue
            both = f"{d1.node_id} (line {d1.line}) and {d2.node_id} (line {d2.line})"
            if p1 == p2:
                return f"{both} both write @sink({path1!r})"
            return (f"{both} can both write the sink file {common}, through @sink({path1!r}) "
                    f"and @sink({path2!r}) (a partitioned asset's sink names each key's file "
                    "after the key)")
    return None


def _pattern(d: Definition, path: str) -> list:
    """Every name the sink can write: a list of characters (str) and runs of key characters
    (the frozenset of those they are made of)."""
    path = _normalized(path)
    dims = sorted(dim.name for dim in d.dimensions)
    if path.endswith("/"):
        items: list = list(path)
        for dim in dims:
            items += [*f"{dim}=", _SAFE, "/"]
        return items + [*"data.", _EXTENSION]
    if not dims:
        return list(path)
    head, slash, name = path.rpartition("/")
    stem, ext = os.path.splitext(name)
    values = _SAFE if len(dims) == 1 else _SAFE_NO_UNDERSCORE
    items = list(f"{head}{slash}{stem}")
    for dim in dims:
        items += [*f"_{dim}_", values]
    return items + list(ext)


def _normalized(path: str) -> str:
    """A local path in one spelling: `file://` dropped, `~` expanded, `.` and `..` folded."""
    if "://" in path and not path[:7].lower() == "file://":
        return path
    local = os.path.expanduser(path[7:] if path[:7].lower() == "file://" else path)
    folded = os.path.normpath(local)
    return folded + "/" if path.endswith("/") else folded


def _ends_agree(a: Sequence, b: Sequence) -> bool:
    """A quick refusal: the literal starts (and ends) of two patterns that meet agree."""
    for x, y in zip(a, b):
        if not isinstance(x, str) or not isinstance(y, str):
            break
        if x != y:
            return False
    for x, y in zip(reversed(a), reversed(b)):
        if not isinstance(x, str) or not isinstance(y, str):
            break
        if x != y:
            return False
    return True


def _meet(a: Sequence, b: Sequence) -> str | None:
    """A name both patterns match, or None: a search over pairs of positions in the two."""
    parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {(0, 0): None}
    todo = [(0, 0)]
    while todo:
        i, j = state = todo.pop()
        if i == len(a) and j == len(b):
            name: list[str] = []
            while parent[state] is not None:
                state, char = parent[state]
                name.append(char)
            return "".join(reversed(name))
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        steps = []
        if isinstance(x, frozenset):
            steps.append(((i + 1, j), ""))  # a run of key characters ends
        if isinstance(y, frozenset):
            steps.append(((i, j + 1), ""))
        if isinstance(x, str) and isinstance(y, str) and x == y:
            steps.append(((i + 1, j + 1), x))
        elif isinstance(x, str) and isinstance(y, frozenset) and x in y:
            steps.append(((i + 1, j), x))
        elif isinstance(y, str) and isinstance(x, frozenset) and y in x:
            steps.append(((i, j + 1), y))
        elif isinstance(x, frozenset) and isinstance(y, frozenset) and x & y:
            # both runs take one character and end: the example then names no empty key
            steps.append(((i + 1, j + 1), "a" if "a" in x & y else min(x & y)))
        for nxt, char in steps:
            if nxt not in parent:
                parent[nxt] = (state, char)
                todo.append(nxt)
    return None
