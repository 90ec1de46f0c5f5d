"""discover.unused: which input parameters a function's body never mentions."""

from __future__ import annotations

import ast
import textwrap

import pytest

from barca.discover.unused import unused_params


def _unused(source: str, params: tuple[str, ...] = ("raw",)) -> tuple[str, ...]:
    fn = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return unused_params(fn, params)


@pytest.mark.parametrize("body", [
    "return raw",
    "return [x for x in raw]",
    "def inner():\n        return raw\n    return inner()",
    "return f'{raw!r}'",
    "return 'select * from raw'",
    "return con.execute(f'select * from {table}')",  # built SQL may name it
    "return locals()",
    "return sys._getframe().f_locals",
    "'''Stub.'''\n    ...",
    "raise NotImplementedError",
])
def test_used_or_not_judged(body: str) -> None:
    assert _unused(f"def f(raw, table='t'):\n    {body}\n") == ()


@pytest.mark.parametrize("body", [
    "return 1",
    "del raw\n    return 1",
    "'''raw is documented, not used'''\n    return 1",
    "return 'rawness'",
    "return json.loads('[1]')",
    "return duckdb.sql('select 1')",  # a literal query: it names no input
    "return math.sqrt(len(other))",
])
def test_unused(body: str) -> None:
    assert _unused(f"def f(raw, other=()):\n    {body}\n") == ("raw",)


def test_underscore_params_and_kwargs_are_never_reported() -> None:
    assert _unused("def f(_raw):\n    return 1\n", ("_raw",)) == ()
    assert _unused("def f(raw, **rest):\n    return 1\n") == ()


def test_a_non_literal_query_on_an_unrelated_module_still_counts() -> None:
    assert _unused("def f(raw, q):\n    return pyarrow.table(q)\n") == ("raw",)
    assert _unused("def f(raw, q):\n    return sqlite3.connect(':memory:').execute(q)\n") \
        == ()  # a connection's execute: q may name raw
    assert _unused("def f(raw, q):\n    return conn.sql(q)\n") == ()
