"""Why a step's value could not be stored, in words that name its type and the fix.

pickle's own errors name an object ("cannot pickle 'generator' object") but not where it sits
in the value or what to return instead, and the traceback behind them is barca's write call,
not the user's code. These messages name the value's type, the part pickle refused (found
again by pickling the parts one by one, only once a write has failed) and the fix: a return
type, or a `serializer=`.
"""

from __future__ import annotations

import io
import pickle
import types
from typing import Any

_LIBRARIES = frozenset({"pandas", "polars", "pyarrow", "duckdb", "numpy"})
_DEPTH = 20  # parts searched for the one pickle refuses; deeper ones are named by their parent
_ANY = ('return JSON data (dict, list, str, number, bool, None), a table (stored as parquet), '
        'or an object pickle can write')


def cannot_pickle(value: Any, error: BaseException) -> str:
    """A pickle write failed with `error`: what could not be stored, and what to return."""
    if isinstance(error, RecursionError):
        return (f"a {_type(value)} could not be stored: it is nested too deeply for pickle; "
                "flatten it, or return a table (stored as parquet)")
    part, where = _refused_part(value, "", _DEPTH)
    inside = f" (the {_type(part)} at {where})" if where else ""
    return (f"a {_type(value)} could not be stored{inside}: pickle refused it "
            f"({type(error).__name__}: {error}); {_fix(part)}")


def not_json(value: Any) -> str:
    return (f'serializer="json" cannot store a {_type(value)}: JSON gives back only dicts with '
            "str keys, lists, str, finite numbers, bool and None; return those, or drop "
            'serializer="json" to store it as a pickle')


def not_written(value: Any, fmt: str, error: BaseException) -> str:
    return (f"a {_type(value)} could not be written as {fmt} ({type(error).__name__}: "
            f"{error}); give each column values of one type, or use serializer=\"pickle\"")


def _refused_part(value: Any, where: str, depth: int) -> tuple[Any, str]:
    """The innermost part of a container that pickle refuses, with its path (`['rows'][1]`)."""
    if depth == 0:
        return value, where
    if isinstance(value, dict):
        parts = [(f"[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        parts = [(f"[{i}]", v) for i, v in enumerate(value)]
    else:
        return value, where
    for step, part in parts:
        try:
            pickle.dumps(part, protocol=5)
        except Exception:  # noqa: BLE001 - any refusal is the one to name
            return _refused_part(part, where + step, depth - 1)
    return value, where


def _fix(part: Any) -> str:
    if isinstance(part, io.IOBase):
        return "return the file's contents (f.read()) or its path instead"
    if hasattr(part, "__next__") and hasattr(part, "__iter__"):  # a generator, an iterator
        return "return a list of its items instead (list(...)), which is stored as JSON"
    if isinstance(part, types.CoroutineType):
        return "a coroutine is never run by barca: await it inside the step, or use def"
    if isinstance(part, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        return ("return the data the function computes instead; a function is stored only "
                "when it is defined at the top level of a module")
    return _ANY


def _type(value: Any) -> str:
    """`generator`, `TextIOWrapper`, `Handle`; a table library's types with its name
    (`pandas DataFrame`), since several libraries have a DataFrame."""
    kind = type(value)
    library = kind.__module__.partition(".")[0]
    return f"{library} {kind.__qualname__}" if library in _LIBRARIES else kind.__qualname__
