"""The definition hash: what about a node's source can change its result, and how it is hashed.

A definition hash is blake2b (16 bytes, hex) over the canonical encoding of the tagged tuple
`("definition", SCHEME_VERSION, parts)`, where `parts` is a tuple of (label, digest) sorted by
label, so it depends on nothing but the parts (not dict order, file order or keyword order).
The parts, kept on the Definition so that a stale reason can name what changed:

    code                              the function from `def` to its end, as its syntax tree
                                      (normal_form.py: comments and layout do not count)
    kind                              asset / sensor / task
    decorator argument inputs         {param: upstream id | collect(id)}, sorted by param
    decorator argument serializer     the serializer name
    decorator argument partitions     the shape: dimension names, kinds, partitions_from ids
    decorator sink                    each @sink's path and serializer, in written order (a
                                      cached step writes no sink: a new one must rerun it)
    decorator <source>                each non-barca decorator, with its position
    helper <file>:<name>              a project definition the function reaches (cone.py)
    helper <file>                     a whole project module used as a value

Never hashed: name, freshness, retries, retry_backoff, timeout_seconds, description, tags, env
(its values enter the run hash), batch, cutoff, weight, deterministic, and partition key
values.

Scheme 1 hashed the code and helper parts as text, comments and layout included. Its
definition hash is still worked out (`LEGACY_SCHEME`, `legacy_code_part`) so that results
recorded under it are recognised once after an upgrade instead of recomputed
(planner/upgrade.py).
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any, Sequence

from barca.discover.normal_form import tree_digest

SCHEME_VERSION = 2
LEGACY_SCHEME = 1  # code as text: see planner/upgrade.py


def encode(value: Any) -> bytes:
    """A canonical, unambiguous byte encoding of nested tuples of str, int, bool and None.

    >>> encode(("a", 1, None))
    b't3:s1:ai1;n'
    """
    out: list[bytes] = []
    _encode(value, out)
    return b"".join(out)


def _encode(value: Any, out: list[bytes]) -> None:
    if isinstance(value, str):
        data = value.encode("utf-8")
        out.append(b"s%d:" % len(data))
        out.append(data)
    elif value is None:
        out.append(b"n")
    elif isinstance(value, bool):
        out.append(b"b1" if value else b"b0")
    elif isinstance(value, int):
        out.append(b"i%d;" % value)
    elif isinstance(value, (tuple, list)):
        out.append(b"t%d:" % len(value))
        for item in value:
            if type(item) is str:  # the common case, inlined: hashes are tuples of strings
                data = item.encode("utf-8")
                out.append(b"s%d:" % len(data))
                out.append(data)
            else:
                _encode(item, out)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} canonically")


def digest(value: Any) -> str:
    """blake2b-128 hex digest of the canonical encoding of `value`."""
    return hashlib.blake2b(encode(value), digest_size=16).hexdigest()


def definition_hash(parts: Sequence[tuple[str, str]], scheme: int = SCHEME_VERSION) -> str:
    """Combine (label, digest) parts; their order does not matter.

    Equal to `digest(("definition", scheme, tuple(sorted(parts))))`, written out
    flat because it runs once per node on every command:

    >>> p = [("kind", "ab"), ("code", "cd")]
    >>> definition_hash(p) == digest(("definition", SCHEME_VERSION, tuple(sorted(p))))
    True
    """
    ordered = sorted(parts)
    chunks = [b"t3:s10:definition", b"i%d;" % scheme, b"t%d:" % len(ordered)]
    for label, part_digest in ordered:
        label_bytes, digest_bytes = label.encode("utf-8"), part_digest.encode("utf-8")
        chunks += (b"t2:s%d:" % len(label_bytes), label_bytes,
                   b"s%d:" % len(digest_bytes), digest_bytes)
    return hashlib.blake2b(b"".join(chunks), digest_size=16).hexdigest()


def code_part(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, str]:
    """The function's syntax tree without its decorators (they are parts of their own)."""
    return "code", tree_digest("code", [fn], decorators=False)


def legacy_code_part(source: str) -> tuple[str, str]:
    """Scheme 1's code part: the function's text from `def` to its end, as written."""
    return "code", digest(("code", source))


def kind_part(kind: str) -> tuple[str, str]:
    return "kind", digest(("kind", kind))


def inputs_part(entries: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """`entries`: (param, upstream id or `collect(id)`)."""
    label = "decorator argument inputs"
    return label, digest((label, tuple(sorted(entries))))


def serializer_part(serializer: str) -> tuple[str, str]:
    label = "decorator argument serializer"
    return label, digest((label, serializer))


def partitions_part(shape: Sequence[tuple[str, str, str | None]]) -> tuple[str, str]:
    """`shape`: (dimension name, kind, partitions_from source id or None)."""
    label = "decorator argument partitions"
    return label, digest((label, tuple(sorted(shape, key=lambda d: (d[0], d[1], d[2] or "")))))


def sinks_part(sinks: Sequence[tuple[str, str | None]]) -> tuple[str, str]:
    """`sinks`: (path, serializer or None) of each @sink, top to bottom."""
    label = "decorator sink"
    return label, digest((label, tuple(sinks)))


def decorator_parts(decorators: Sequence[ast.expr]) -> list[tuple[str, str]]:
    """One part per foreign decorator; its position counts (decorator order matters)."""
    out = []
    for position, decorator in enumerate(decorators):
        label = f"decorator {ast.unparse(decorator)}"
        out.append((label, digest((label, position))))
    return out
