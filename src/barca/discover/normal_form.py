"""Code as it behaves, not as it is laid out: the bytes a code or helper hash part covers.

A formatter (`ruff format`, `black`) or a comment edit changes a file's text but not the
program, so hashing text would rerun every key of every node it touched. We hash the syntax
tree instead, which Python builds without comments, blank lines, line breaks, spacing,
redundant parentheses, trailing commas, quote style or number spelling (`'x'` and `"x"`,
`(1,)` and `1,`, `0XFF` and `255` are one tree). Everything that can change what runs is in
it: names, operators, literal values, default values, annotations, decorators and their
arguments, f-strings, docstrings.

Three things the tree holds are left out or evened out, because a formatter changes them and
a program cannot tell: positions (line and column), `# type:` comments and a string's `u`
prefix; and a docstring is taken as `inspect.cleandoc` reads it with each line's trailing
whitespace dropped (a formatter re-indents a docstring when it re-indents its function;
Python 3.13 itself strips that indentation from `__doc__`). A docstring's words and the
spacing between them still count.

The encoding is our own rather than `ast.dump`, for two reasons: `ast.dump`'s text changes
between Python versions (3.12 adds empty `type_params`, 3.13 leaves out empty fields), and a
hash must not change with the interpreter; and it is walked with a stack, not recursion, so a
long chain of `a + b + ...` that Python parses cannot exhaust the recursion limit. Fields that
are None or empty are left out (so a field a newer Python adds, empty for existing code,
changes nothing); an f-string's adjacent literal parts are joined (3.12 splits them
differently). Each token is tagged and length-prefixed: two different trees never give the
same bytes.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from typing import Iterable

_DOC_OWNERS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SKIPPED = frozenset({"type_comment", "type_ignores", "kind"})


def tree_digest(label: str, nodes: Iterable[ast.AST], decorators: bool = True) -> str:
    """blake2b-128 hex digest of `label` and the normal form of each node, in order.
    `decorators=False` leaves out the decorators of the nodes themselves (a node function's
    barca decorator is hashed part by part elsewhere; nested decorators always count)."""
    h = hashlib.blake2b(digest_size=16)
    _text(h, label)
    for node in nodes:
        h.update(b"|")
        _write(h, node, skip_top_decorators=not decorators)
    return h.hexdigest()


def normal_bytes(node: ast.AST) -> bytes:
    """The normal form of one node, as bytes (for tests and for looking at a difference).

    >>> normal_bytes(ast.parse("(1,)")) == normal_bytes(ast.parse("1 ,  # one"))
    True
    """
    out = _Collect()
    _write(out, node, skip_top_decorators=False)
    return b"".join(out.chunks)


class _Collect:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def update(self, data: bytes) -> None:
        self.chunks.append(data)


def _write(h, root: ast.AST, skip_top_decorators: bool) -> None:
    """Stream the normal form of `root` into `h` (anything with `update(bytes)`)."""
    stack: list[object] = [root]
    while stack:
        item = stack.pop()
        if item is _CLOSE:  # queued behind a node's fields
            h.update(b")")
        elif isinstance(item, ast.AST):
            fields = _fields(item, skip_decorators=skip_top_decorators and item is root)
            _text(h, type(item).__name__, b"(")
            stack.append(_CLOSE)
            for name, value in reversed(fields):
                stack.append(value)
                stack.append(_Field(name))
        elif isinstance(item, _Field):
            _text(h, item.name, b".")
        elif isinstance(item, list):
            h.update(b"[%d;" % len(item))
            stack.extend(reversed(item))
        else:
            _constant(h, item)


class _Field:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


_CLOSE = _Field(")")  # the end of a node (a constant can be bytes, so no bytes marker)


def _fields(node: ast.AST, skip_decorators: bool) -> list[tuple[str, object]]:
    out = []
    for name in node._fields:
        if name in _SKIPPED or skip_decorators and name == "decorator_list":
            continue
        value = getattr(node, name, None)
        if value is None or isinstance(value, list) and not value:
            continue
        if name == "values" and isinstance(node, ast.JoinedStr):
            value = _joined_literals(value)
        elif name == "body" and isinstance(node, _DOC_OWNERS):
            value = _clean_docstring(value)
        out.append((name, value))
    return out


def _joined_literals(values: list[ast.expr]) -> list[object]:
    """An f-string's parts with adjacent literal text joined into one string."""
    out: list[object] = []
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if out and isinstance(out[-1], str):
                out[-1] += value.value
            else:
                out.append(value.value)
        else:
            out.append(value)
    return [ast.Constant(v) if isinstance(v, str) else v for v in out]


def _clean_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return body
    lines = inspect.cleandoc(first.value.value).split("\n")
    text = "\n".join(line.rstrip() for line in lines)
    return [ast.Expr(ast.Constant(text)), *body[1:]]


def _text(h, text: str, tag: bytes = b"s") -> None:
    data = text.encode("utf-8", "surrogatepass")
    h.update(b"%s%d:" % (tag, len(data)))
    h.update(data)


def _constant(h, value: object) -> None:
    """A literal value, tagged by its type: 1, 1.0, True and "1" differ."""
    if isinstance(value, str):
        _text(h, value)
    elif isinstance(value, bytes):
        h.update(b"y%d:" % len(value))
        h.update(value)
    elif value is None:
        h.update(b"n")
    elif isinstance(value, bool):
        h.update(b"b1" if value else b"b0")
    elif isinstance(value, int):
        h.update(b"i%x;" % value)  # hex: no digit limit (a 5,000-digit 0x... literal parses)
    elif isinstance(value, (float, complex)):
        _text(h, repr(value), b"f" if isinstance(value, float) else b"j")
    elif value is Ellipsis:
        h.update(b"e")
    else:  # the parser makes no other constants; refuse rather than hash ambiguously
        raise TypeError(f"no normal form for {type(value).__name__}")
