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
changes nothing); an f-string's adjacent literal parts are joined and empty ones left out
(3.12.1 adds an empty one to some format specs). Each token is tagged and length-prefixed: two different trees never give the
same bytes.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from typing import Iterable

_DOC_OWNERS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SKIPPED = frozenset({"type_comment", "type_ignores", "kind"})
_CLOSE = b")"


def tree_digest(label: str, nodes: Iterable[ast.AST], decorators: bool = True) -> str:
    """blake2b-128 hex digest of `label` and the normal form of each node, in order.
    `decorators=False` leaves out the decorators of the nodes themselves (a node function's
    barca decorator is hashed part by part elsewhere; nested decorators always count)."""
    out = [_text(label)]
    for node in nodes:
        out.append(b"|")
        _write(out, node, skip_top_decorators=not decorators)
    return hashlib.blake2b(b"".join(out), digest_size=16).hexdigest()


def normal_bytes(node: ast.AST) -> bytes:
    """The normal form of one node, as bytes (for tests and for looking at a difference).

    >>> normal_bytes(ast.parse("(1,)")) == normal_bytes(ast.parse("1 ,  # one"))
    True
    """
    out: list[bytes] = []
    _write(out, node, skip_top_decorators=False)
    return b"".join(out)


def _write(out: list[bytes], root: ast.AST, skip_top_decorators: bool) -> None:
    """Append the normal form of `root` to `out`, walking with a stack of nodes, lists and
    tokens already encoded (bytes: a constant is encoded when it is pushed)."""
    append = out.append
    stack: list[object] = [root]
    push, pop = stack.append, stack.pop
    while stack:
        item = pop()
        if type(item) is bytes:
            append(item)
        elif isinstance(item, list):
            append(b"[%d;" % len(item))
            for value in reversed(item):
                push(value if isinstance(value, (ast.AST, list)) else _constant(value))
        else:
            header, fields = _shape(type(item))
            append(header)
            push(_CLOSE)
            skip = skip_top_decorators and item is root
            for name, token in fields:
                value = getattr(item, name, None)
                if value is None or value == [] or skip and name == "decorator_list":
                    continue
                if name == "values" and type(item) is ast.JoinedStr:
                    value = _joined_literals(value)
                elif name == "body" and isinstance(item, _DOC_OWNERS):
                    value = _clean_docstring(value)
                push(value if isinstance(value, (ast.AST, list)) else _constant(value))
                push(token)


_SHAPES: dict[type, tuple[bytes, tuple[tuple[str, bytes], ...]]] = {}


def _shape(cls: type) -> tuple[bytes, tuple[tuple[str, bytes], ...]]:
    """A node class's opening token and its counted fields with their tokens, last first
    (they are pushed on a stack)."""
    found = _SHAPES.get(cls)
    if found is None:
        fields = tuple((name, _text(name, b".")) for name in reversed(cls._fields)
                       if name not in _SKIPPED)
        found = _SHAPES[cls] = (_text(cls.__name__, b"("), fields)
    return found


def _joined_literals(values: list[ast.expr]) -> list[ast.expr]:
    """An f-string's parts with adjacent literal text joined into one string, and empty
    literal text left out (3.12.1 ends `f"{a:{b}}"`'s format spec with one)."""
    out: list[object] = []
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if out and isinstance(out[-1], str):
                out[-1] += value.value
            else:
                out.append(value.value)
        else:
            out.append(value)
    return [ast.Constant(v) if isinstance(v, str) else v for v in out if v != ""]


def _clean_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return body
    lines = inspect.cleandoc(first.value.value).split("\n")
    text = "\n".join(line.rstrip() for line in lines)
    return [ast.Expr(ast.Constant(text)), *body[1:]]


def _text(text: str, tag: bytes = b"s") -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return b"%s%d:%s" % (tag, len(data), data)


def _constant(value: object) -> bytes:
    """A literal value, tagged by its type: 1, 1.0, True and "1" differ."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bytes):
        return b"y%d:%s" % (len(value), value)
    if value is None:
        return b"n"
    if isinstance(value, bool):
        return b"b1" if value else b"b0"
    if isinstance(value, int):
        return b"i%x;" % value  # hex: no digit limit (a 5,000-digit 0x... literal parses)
    if isinstance(value, (float, complex)):
        return _text(repr(value), b"f" if isinstance(value, float) else b"j")
    if value is Ellipsis:
        return b"e"
    # the parser makes no other constants; refuse rather than hash ambiguously
    raise TypeError(f"no normal form for {type(value).__name__}")
